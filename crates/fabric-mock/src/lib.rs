//! The `mock` southbound driver: a built-in simulated fabric, implementing
//! [`fabric_southbound::SouthboundDriver`].
//!
//! A [`MockFabric`] holds the physical cabling of a fabric (from a topology file, a generator
//! string or a [`Fabric`] built in code) and the state a real fabric would hold:
//!
//! * per switch, the real LFT bytes (grown block by block as blocks are written, unwritten
//!   entries read as 255), behind one lock per switch so parallel uploads to different switches
//!   never contend;
//! * per switch, its multicast forwarding table (port masks per MLID and position, up to
//!   [`MockConfig::mcast_fdb_cap`] MLIDs) and the P_Key table of each external port; per end
//!   port its P_Key table ([`MockConfig::partition_cap`] entries; never written = `0xFFFF` in
//!   entry 0), see the `tables` module;
//! * the LIDs and LMC installed by [`SouthboundDriver::configure_lids`];
//! * the physical state of every link, switch and end port (changed by the fault drills, which
//!   report every change on the event streams).
//!
//! On top of that it forwards packets hop by hop through the installed LFTs
//! ([`MockFabric::trace`]) and checks all pairs of end ports ([`MockFabric::verify_all_pairs`])
//! from its own state only, so tests of the daemon see what a real fabric would do with the
//! tables it uploaded. It floods multicast packets through the installed MFTs
//! ([`MockFabric::flood_multicast`]), and a unicast trace between two end ports whose P_Key
//! tables share no partition fails ([`TraceError::NoSharedPartition`]).
//!
//! # Fault injection, latency and retries
//!
//! MFT and P_Key block writes go the same way as LFT block writes below (same latency waves,
//! error draws, retries and reachability; a P_Key write to an end port draws from the switch
//! the end port hangs on and fails with [`DriverError::Unreachable`] naming the port GUID when
//! the end port is down).
//!
//! * **Errors.** Each LFT block write attempt fails with probability [`MockConfig::error_rate`].
//!   The draws come from one seeded generator per switch, so a given sequence of writes to a
//!   switch always fails the same way for a given [`MockConfig::seed`]. The *driver* retries a
//!   failed block up to [`MockConfig::max_retries`] times (re-queued behind the rest of the
//!   batch) and counts the retries in [`WriteReport::retries`]; after that the batch fails with
//!   [`DriverError::Transient`]. Reads, LID configuration and drills do not fail at random.
//! * **Latency.** [`MockConfig::op_latency`] is the time one management operation takes. A batch
//!   of block writes is performed in waves of at most [`MockConfig::max_parallel`] block writes
//!   in flight, each wave costing one `op_latency` (so `n` blocks take `⌈n / max_parallel⌉`
//!   latencies, retries included); every other operation costs one `op_latency`. A zero latency
//!   never sleeps.
//! * **Reachability.** A switch that is powered off is unreachable: writes and reads to it fail
//!   with [`DriverError::Unreachable`] at once (not retried). Management traffic is not routed
//!   through the simulated links: a live switch is always reachable, unless it is listed in
//!   [`MockConfig::unreachable_switches`]: then its LFT block writes fail with
//!   [`DriverError::Unreachable`] while it stays up (a lost management path).
//!
//! # Observing block writes
//!
//! [`MockFabric::set_write_observer`] installs a callback invoked after every LFT block write
//! that took effect, while that switch's table is still locked: the observer sees the writes of
//! one switch in the order they took effect. A packet-level simulation uses it to mirror the
//! tables and to move its packets between two block writes (see the flow simulation of the
//! five-phase update in `crates/fabricd/tests/update_flow_sim.rs`).
//!
//! **Architecture invariant:** the mock judges the daemon's work only from its own simulated
//! state (installed LFT bytes, LIDs, physical link state), never from the daemon's data
//! structures.
//!
//! # Layout
//!
//! This file holds the configuration, the counters and the state ([`MockFabric`], its
//! constructors and accessors); `driver` the [`SouthboundDriver`](fabric_southbound::SouthboundDriver)
//! implementation (sweeps, LIDs, block writes with injected errors, drills); `tables` the MFT
//! and P_Key tables; `counters` the port counters (drills raise them, link losses count in
//! `link_downed`, reads honour latency and reachability); `mcast` the multicast flood and the partition check; `reach` the
//! packet-level checks (traces, all-pairs reachability, the
//! [`PacketSimulator`](fabric_southbound::PacketSimulator) implementation); `trace` the hop-by-hop
//! walk they share.
//!
//! [`SouthboundDriver::configure_lids`]: fabric_southbound::SouthboundDriver::configure_lids
//! [`WriteReport::retries`]: fabric_southbound::WriteReport::retries

mod counters;
mod driver;
mod mcast;
mod reach;
mod tables;
mod trace;
mod vls;

pub use counters::PortErrorRate;
pub use fabric_southbound::{Hop, ReachReport, TraceError, REACH_REPORT_MAX_LISTED};
pub use vls::MAX_DATA_VL;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use fabric_routing::{Lfts, BLOCK_SIZE, NO_ROUTE};
use fabric_southbound::{DriverError, MFT_BLOCK_SIZE, PKEY_BLOCK_SIZE};
use fabric_topology::gen::{self, Degrade};
use fabric_topology::ibnet;
use fabric_topology::{Fabric, FabricEvent, Guid, Lid, LinkState, PortNum, Remote, SwitchId};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc::UnboundedSender;

use trace::LidTable;

/// Highest InfiniBand unicast LID.
pub const IB_MAX_UNICAST_LID: Lid = 0xBFFF;

/// Behaviour of the simulated fabric.
#[derive(Clone, Debug, PartialEq)]
pub struct MockConfig {
    /// Time one management operation takes (one wave of block writes, one read, one sweep).
    /// Zero: no sleep at all.
    pub op_latency: Duration,
    /// Probability in `[0, 1]` that one LFT block write attempt fails transiently.
    pub error_rate: f64,
    /// Seed of the error draws (one generator per switch derived from it and the switch GUID).
    pub seed: u64,
    /// Block writes in flight at once within one batch (at least 1).
    pub max_parallel: usize,
    /// Retries of one failed block write before the batch fails.
    pub max_retries: u32,
    /// Highest unicast address of the simulated fabric (InfiniBand: `0xBFFF`).
    pub max_lid: Lid,
    /// Escape VL reported in the capabilities.
    pub escape_vl: Option<u8>,
    /// Whether powering a switch back on loses its LFT and LID (and its ports' counters go back
    /// to 0), as a real switch reboot does.
    pub reset_on_power_cycle: bool,
    /// Switches (GUIDs) that refuse every LFT block write with [`DriverError::Unreachable`]
    /// while staying up in the topology (a management path that is down, an agent that is
    /// gone): the partial-upload drill.
    pub unreachable_switches: Vec<Guid>,
    /// MulticastFDBCap of every simulated switch: the MLIDs its multicast forwarding table
    /// holds, from [`MLID_BASE`](fabric_southbound::MLID_BASE) (`0xC000`). MFT blocks at or beyond
    /// `⌈cap / 32⌉` are refused. Default 1024 MLIDs (32 blocks); at most 16384 (`0xC000..=0xFFFF`).
    pub mcast_fdb_cap: u32,
    /// PartitionCap of every simulated port (CA ports and switch external ports alike): the
    /// entries of its P_Key table. P_Key blocks at or beyond `⌈cap / 32⌉` are refused.
    /// Default 128 entries (4 blocks).
    pub partition_cap: u16,
    /// Background port errors: ports that gain errors by themselves (a bad cable for the
    /// port-health monitor to find without a drill); see [`PortErrorRate`]. Default: none.
    pub port_error_rates: Vec<PortErrorRate>,
    /// VLCap of every simulated port, in data VLs (1..=15; InfiniBand's VLCap codes give 1, 2,
    /// 4, 8 or 15): a data VL plan needing more is refused
    /// ([`SouthboundDriver::program_data_vls`](fabric_southbound::SouthboundDriver::program_data_vls),
    /// the `vls` module). Default [`DEFAULT_DATA_VLS`] (8, VL0-7, as BXI-class and most
    /// InfiniBand switches).
    pub data_vls: u8,
    /// Switches (GUID, data VLs) whose ports have another VLCap than [`MockConfig::data_vls`].
    pub data_vls_of: Vec<(Guid, u8)>,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            op_latency: Duration::ZERO,
            error_rate: 0.0,
            seed: 0,
            max_parallel: 64,
            max_retries: 3,
            max_lid: IB_MAX_UNICAST_LID,
            escape_vl: Some(1),
            reset_on_power_cycle: false,
            unreachable_switches: Vec::new(),
            mcast_fdb_cap: DEFAULT_MCAST_FDB_CAP,
            partition_cap: DEFAULT_PARTITION_CAP,
            port_error_rates: Vec::new(),
            data_vls: DEFAULT_DATA_VLS,
            data_vls_of: Vec::new(),
        }
    }
}

/// Default [`MockConfig::data_vls`]: 8 data VLs (VL0-7).
pub const DEFAULT_DATA_VLS: u8 = 8;

/// Default [`MockConfig::mcast_fdb_cap`]: 1024 MLIDs (32 MFT blocks).
pub const DEFAULT_MCAST_FDB_CAP: u32 = 1024;
/// Default [`MockConfig::partition_cap`]: 128 P_Key entries (4 blocks) per port.
pub const DEFAULT_PARTITION_CAP: u16 = 128;
/// Number of multicast LIDs InfiniBand has (`0xC000..=0xFFFF`).
pub const IB_MLID_COUNT: u32 = 0x4000;

impl MockConfig {
    /// Checks the ranges of every field, reporting all problems at once.
    pub fn validate(&self) -> Result<(), DriverError> {
        let mut problems = Vec::new();
        if !(0.0..=1.0).contains(&self.error_rate) {
            problems.push(format!("error_rate {} is not in [0, 1]", self.error_rate));
        }
        if self.max_parallel == 0 {
            problems.push("max_parallel must be at least 1".to_string());
        }
        if self.max_lid == 0 {
            problems.push("max_lid must be at least 1".to_string());
        }
        if self.mcast_fdb_cap > IB_MLID_COUNT {
            problems.push(format!(
                "mcast_fdb_cap {} is above the {IB_MLID_COUNT} multicast LIDs of InfiniBand",
                self.mcast_fdb_cap
            ));
        }
        if self.partition_cap == 0 {
            problems.push("partition_cap must be at least 1".to_string());
        }
        let max_vls = MAX_DATA_VL + 1;
        for (what, n) in std::iter::once(("data_vls".to_string(), self.data_vls)).chain(
            self.data_vls_of
                .iter()
                .map(|(g, n)| (format!("data_vls_of {}", fabric_topology::fmt_guid(*g)), *n)),
        ) {
            if !(1..=max_vls).contains(&n) {
                problems.push(format!("{what}: {n} data VLs is not in 1..={max_vls}"));
            }
        }
        for r in &self.port_error_rates {
            if !(r.per_second.is_finite() && r.per_second >= 0.0) {
                problems.push(format!(
                    "port_error_rates: {} {} rate {} is not a finite rate >= 0",
                    r.port,
                    r.counter.name(),
                    r.per_second
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(DriverError::Config(problems.join("; ")))
        }
    }
    /// LFT blocks a switch accepts: enough to cover LIDs `0..=max_lid`.
    pub fn max_lft_blocks(&self) -> u32 {
        let blocks = (u64::from(self.max_lid) + 1).div_ceil(BLOCK_SIZE as u64);
        u32::try_from(blocks).unwrap_or(u32::MAX)
    }
    /// MFT blocks a switch accepts: enough to cover [`MockConfig::mcast_fdb_cap`] MLIDs.
    pub fn max_mft_blocks(&self) -> u32 {
        self.mcast_fdb_cap.div_ceil(MFT_BLOCK_SIZE as u32)
    }
    /// P_Key blocks a port accepts: enough to cover [`MockConfig::partition_cap`] entries.
    pub fn max_pkey_blocks(&self) -> u16 {
        self.partition_cap.div_ceil(PKEY_BLOCK_SIZE as u16)
    }
}

/// Operation counters of a [`MockFabric`] (monotonic since creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MockCounters {
    /// LFT blocks successfully written.
    pub blocks_written: u64,
    /// Block write attempts (successful + failed; LFT, MFT and P_Key blocks).
    pub write_attempts: u64,
    /// Injected transient write failures (LFT, MFT and P_Key blocks).
    pub write_failures: u64,
    /// Blocks read (LFT, MFT and P_Key blocks).
    pub blocks_read: u64,
    /// `write_lft_blocks` calls.
    pub write_batches: u64,
    /// Successful `configure_lids` calls.
    pub lid_configs: u64,
    /// `discover` calls.
    pub sweeps: u64,
    /// Physical state changes (drills).
    pub state_changes: u64,
    /// MFT blocks (one block, one position) successfully written.
    pub mft_blocks_written: u64,
    /// P_Key blocks successfully written (end ports and switch ports).
    pub pkey_blocks_written: u64,
}

#[derive(Default)]
struct Counters {
    blocks_written: AtomicU64,
    write_attempts: AtomicU64,
    write_failures: AtomicU64,
    blocks_read: AtomicU64,
    write_batches: AtomicU64,
    lid_configs: AtomicU64,
    sweeps: AtomicU64,
    state_changes: AtomicU64,
    mft_blocks_written: AtomicU64,
    pkey_blocks_written: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// One LFT block write that took effect (see [`MockFabric::set_write_observer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockWritten<'a> {
    /// Dense id of the switch (as in [`SouthboundDriver::discover`](fabric_southbound::SouthboundDriver::discover)).
    pub switch: SwitchId,
    /// Node GUID of the switch.
    pub guid: Guid,
    /// LFT block number (LIDs `64 * block ..`).
    pub block: u32,
    /// The entries now installed.
    pub entries: &'a [u8; BLOCK_SIZE],
    /// Number of this write among all block writes of this fabric (1, 2, ...).
    pub seq: u64,
}

/// Callback of [`MockFabric::set_write_observer`].
pub type WriteObserver = Arc<dyn Fn(&BlockWritten<'_>) + Send + Sync>;

/// The state of one switch guarded by its own lock.
struct SwitchCell {
    /// LFT bytes indexed by LID; length a multiple of [`BLOCK_SIZE`].
    lft: Vec<u8>,
    /// Error-injection draws for this switch (and the P_Key writes of its end ports).
    rng: ChaCha8Rng,
    /// Multicast forwarding table: port masks indexed by `(mlid - 0xC000) · positions +
    /// position`, `positions = nports / 16 + 1`; grown block by block, unwritten masks read 0.
    mft: Vec<u16>,
    /// P_Key table of each port (index = port number; port 0 unused); empty = never written
    /// (the default table: 0xFFFF in entry 0).
    pkeys: Vec<Vec<u16>>,
}

fn switch_rng(seed: u64, guid: Guid) -> ChaCha8Rng {
    // splitmix64 of the GUID so that neighbouring GUIDs get unrelated streams.
    let mut z = guid.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ChaCha8Rng::seed_from_u64(seed ^ z)
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}
fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
fn lock<T>(l: &Mutex<T>) -> MutexGuard<'_, T> {
    l.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The built-in simulated fabric (driver name `mock`). See the [crate documentation](crate).
pub struct MockFabric {
    /// Physical cabling; its state flags are only the initial state.
    topo: Fabric,
    /// Index of port 0 of each switch in `port_up`.
    port_offset: Vec<usize>,
    /// Physical link state per switch port (both ends of a switch-to-switch cable agree).
    port_up: Vec<AtomicBool>,
    switch_up: Vec<AtomicBool>,
    end_port_up: Vec<AtomicBool>,
    cells: Vec<RwLock<SwitchCell>>,
    /// P_Key table of each end port (by dense id); empty = never written (default table).
    ep_pkeys: Vec<RwLock<Vec<u16>>>,
    lids: RwLock<Arc<LidTable>>,
    subscribers: Mutex<Vec<UnboundedSender<FabricEvent>>>,
    /// Serialises physical state changes so events are emitted in the order of the changes.
    drill: Mutex<()>,
    config: RwLock<MockConfig>,
    counters: Counters,
    /// Warnings of the topology reader.
    warnings: Vec<String>,
    /// Called after every block write that took effect.
    observer: RwLock<Option<WriteObserver>>,
    /// Port counters of every switch port and end port (see the `counters` module).
    port_counters: Mutex<counters::CounterStore>,
    /// The data VL plan in force and each port's SL-to-VL table (see the `vls` module).
    vl_tables: Mutex<vls::VlTables>,
}

impl std::fmt::Debug for MockFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockFabric")
            .field("switches", &self.topo.num_switches())
            .field("end_ports", &self.topo.num_end_ports())
            .field("config", &*read(&self.config))
            .finish_non_exhaustive()
    }
}

impl MockFabric {
    /// A simulated fabric with the cabling and initial link/switch/end-port state of `fabric`,
    /// empty LFTs, no LIDs and the default [`MockConfig`].
    pub fn new(fabric: Fabric) -> Self {
        let config = MockConfig::default();
        let mut port_offset = Vec::with_capacity(fabric.num_switches());
        let mut port_up = Vec::new();
        for s in fabric.switches() {
            port_offset.push(port_up.len());
            for p in &s.ports {
                let mut up = p.state == LinkState::Up;
                if let Remote::Switch { sw, port } = p.remote {
                    // A cable has one state: down if either recorded end is down.
                    let other = &fabric.switch(sw).ports[port as usize];
                    up &= other.state == LinkState::Up;
                }
                port_up.push(AtomicBool::new(up));
            }
        }
        let switch_up = fabric.switches().iter().map(|s| AtomicBool::new(s.up)).collect();
        let end_port_up = fabric.end_ports().iter().map(|e| AtomicBool::new(e.up)).collect();
        let cells = fabric
            .switches()
            .iter()
            .map(|s| {
                RwLock::new(SwitchCell {
                    lft: Vec::new(),
                    rng: switch_rng(config.seed, s.guid),
                    mft: Vec::new(),
                    pkeys: vec![Vec::new(); s.nports as usize + 1],
                })
            })
            .collect();
        let ep_pkeys = fabric.end_ports().iter().map(|_| RwLock::new(Vec::new())).collect();
        let lids = LidTable::unassigned(fabric.num_switches(), fabric.num_end_ports());
        let port_counters = Mutex::new(counters::new_store(port_up.len(), fabric.num_end_ports()));
        let vl_tables = Mutex::new(vls::VlTables::new(port_up.len(), fabric.num_end_ports()));
        MockFabric {
            topo: fabric.with_generation(0),
            port_offset,
            port_up,
            switch_up,
            end_port_up,
            cells,
            ep_pkeys,
            lids: RwLock::new(Arc::new(lids)),
            subscribers: Mutex::new(Vec::new()),
            drill: Mutex::new(()),
            config: RwLock::new(config),
            counters: Counters::default(),
            warnings: Vec::new(),
            observer: RwLock::new(None),
            port_counters,
            vl_tables,
        }
    }

    /// Installs (`Some`) or removes (`None`) the observer of block writes. It is called after
    /// every LFT block write that took effect (not for failed attempts), on the writing thread,
    /// while the switch's table is still write-locked: the writes of one switch reach it in the
    /// order they took effect, and until it returns no other write to that switch happens. It
    /// must be quick and must not call back into this fabric's LFT of the same switch
    /// ([`MockFabric::installed_lft_table`], traces): that would deadlock.
    pub fn set_write_observer(&self, observer: Option<WriteObserver>) {
        *write(&self.observer) = observer;
    }

    /// A simulated fabric cabled as described by ibnetdiscover / ibsim topology text
    /// ([`fabric_topology::ibnet::parse`]); `name` labels errors and warnings (e.g. the file name).
    /// The oddities the reader tolerated are kept in [`MockFabric::topology_warnings`].
    pub fn from_topology_text(text: &str, name: &str) -> Result<Self, DriverError> {
        let parsed = ibnet::parse(text, name).map_err(|e| DriverError::Topology {
            source_name: name.to_string(),
            message: format!("line {}: {}", e.line, e.reason),
        })?;
        let mut m = Self::new(parsed.fabric);
        m.warnings = parsed.warnings;
        Ok(m)
    }

    /// A simulated fabric read from an ibnetdiscover / ibsim topology file (see
    /// [`MockFabric::from_topology_text`]).
    pub fn from_topology_file(path: &Path) -> Result<Self, DriverError> {
        let text = fabric_topology::textfile::read_text_file(path, fabric_topology::textfile::LARGE_TEXT_LIMIT)
            .map_err(|e| DriverError::Topology {
                source_name: path.display().to_string(),
                message: match &e {
                    fabric_topology::textfile::TextFileError::Io { source, .. } => {
                        format!("cannot read file: {source}")
                    }
                    e if e.line() > 0 => format!("line {}: {}", e.line(), e.reason()),
                    e => e.reason(),
                },
            })?;
        Self::from_topology_text(&text, &path.display().to_string())
    }

    /// A simulated fabric from a generator notation string such as `PGFT(2;4,4;1,2;1,1)` or
    /// `KARY(4,3)` ([`fabric_topology::gen::generate_str`]), optionally degraded (switches and
    /// cables removed, deterministically for the degradation seed).
    pub fn from_generator(spec: &str, degrade: Option<&Degrade>) -> Result<Self, DriverError> {
        let fabric = gen::generate_str(spec, degrade).map_err(|e| DriverError::Topology {
            source_name: "generator".to_string(),
            message: e.to_string(),
        })?;
        Ok(Self::new(fabric))
    }

    /// What the topology reader tolerated when this fabric was read from text (each message
    /// prefixed with `file:line:`); empty for other sources.
    pub fn topology_warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Replaces the configuration (builder style).
    pub fn with_config(self, config: MockConfig) -> Result<Self, DriverError> {
        self.set_config(config)?;
        Ok(self)
    }

    /// Replaces the configuration at run time (e.g. to start injecting errors in a drill). A new
    /// seed restarts every switch's error draws.
    pub fn set_config(&self, config: MockConfig) -> Result<(), DriverError> {
        config.validate()?;
        let mut cur = write(&self.config);
        if cur.seed != config.seed || cur.port_error_rates != config.port_error_rates {
            self.set_background_errors(&config.port_error_rates, config.seed)?;
        }
        if cur.seed != config.seed {
            for (cell, s) in self.cells.iter().zip(self.topo.switches()) {
                write(cell).rng = switch_rng(config.seed, s.guid);
            }
        }
        *cur = config;
        Ok(())
    }

    /// The current configuration.
    pub fn config(&self) -> MockConfig {
        read(&self.config).clone()
    }

    /// The physical cabling (with the initial state; see
    /// [`SouthboundDriver::discover`](fabric_southbound::SouthboundDriver::discover) for the
    /// current one).
    pub fn cabling(&self) -> &Fabric {
        &self.topo
    }

    /// Whether switch `sw` (a dense id of [`MockFabric::cabling`]) is powered now.
    pub fn switch_is_up(&self, sw: SwitchId) -> bool {
        self.switch_up[sw.idx()].load(Ordering::SeqCst)
    }

    /// Whether port `port` of switch `sw` is live now, as in the fabric model of
    /// [`discover`](fabric_southbound::SouthboundDriver::discover) (a cable to another switch:
    /// both switches powered and the cable up; to an end port: the switch and the end port
    /// powered and the cable up; no cable, a cable back to the same switch or no such port:
    /// not live), from the current state alone: a few loads, no model built (the agent
    /// simulator keeps its agents' port views with it, issue #17).
    pub fn port_live(&self, sw: SwitchId, port: PortNum) -> bool {
        let Some(p) = self.topo.switch(sw).ports.get(port as usize) else {
            return false;
        };
        let cable_up = |s: SwitchId, pn: PortNum| self.port_up[self.port_idx(s, pn)].load(Ordering::SeqCst);
        match p.remote {
            Remote::None => false,
            Remote::Switch { sw: r, port: rp } => {
                r != sw && self.switch_is_up(sw) && self.switch_is_up(r) && cable_up(sw, port) && cable_up(r, rp)
            }
            Remote::EndPort(ep) => {
                self.end_port_up[ep.idx()].load(Ordering::SeqCst) && self.switch_is_up(sw) && cable_up(sw, port)
            }
        }
    }

    /// Snapshot of the operation counters.
    pub fn counters(&self) -> MockCounters {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MockCounters {
            blocks_written: g(&c.blocks_written),
            write_attempts: g(&c.write_attempts),
            write_failures: g(&c.write_failures),
            blocks_read: g(&c.blocks_read),
            write_batches: g(&c.write_batches),
            lid_configs: g(&c.lid_configs),
            sweeps: g(&c.sweeps),
            state_changes: g(&c.state_changes),
            mft_blocks_written: g(&c.mft_blocks_written),
            pkey_blocks_written: g(&c.pkey_blocks_written),
        }
    }

    /// The LFT bytes installed on every switch, by switch GUID (length a multiple of 64; empty
    /// when nothing was written).
    pub fn installed_lfts(&self) -> HashMap<Guid, Vec<u8>> {
        self.topo
            .switches()
            .iter()
            .zip(&self.cells)
            .map(|(s, c)| (s.guid, read(c).lft.clone()))
            .collect()
    }

    /// The installed LFTs as one [`Lfts`] table indexed by the mock's dense switch ids (those
    /// of [`SouthboundDriver::discover`](fabric_southbound::SouthboundDriver::discover)), covering the longest installed row.
    pub fn installed_lft_table(&self) -> Lfts {
        let rows: Vec<_> = self.cells.iter().map(read).collect();
        let len = rows.iter().map(|c| c.lft.len()).max().unwrap_or(0);
        let mut t = Lfts::new(rows.len(), len.saturating_sub(1) as Lid);
        for (i, c) in rows.iter().enumerate() {
            t.row_mut(SwitchId(i as u32))[..c.lft.len()].copy_from_slice(&c.lft);
        }
        t
    }

    /// The installed LFT entry of a switch for a LID (255 when not written).
    pub fn lft_entry(&self, switch: Guid, lid: Lid) -> Result<PortNum, DriverError> {
        let sw = self.switch_id(switch)?;
        Ok(read(&self.cells[sw.idx()])
            .lft
            .get(lid as usize)
            .copied()
            .unwrap_or(NO_ROUTE))
    }

    /// The installed LID of a switch (0 = none).
    pub fn switch_lid(&self, switch: Guid) -> Result<Lid, DriverError> {
        let sw = self.switch_id(switch)?;
        Ok(read(&self.lids).switch_lid[sw.idx()])
    }

    /// The installed base LID of an end port (0 = none) and the LMC.
    pub fn end_port_lid(&self, port_guid: Guid) -> Result<(Lid, u8), DriverError> {
        let ep = self
            .topo
            .end_port_by_guid(port_guid)
            .ok_or(DriverError::UnknownEndPort(port_guid))?;
        let lids = read(&self.lids);
        Ok((lids.end_port_base[ep.idx()], lids.lmc))
    }

    /// Powers an end node's port off or on (fault drill); emits `EndPortDown`/`EndPortUp` when
    /// the state changes.
    pub async fn set_end_port_state(&self, port_guid: Guid, up: bool) -> Result<(), DriverError> {
        self.sleep_op().await;
        let ep = self
            .topo
            .end_port_by_guid(port_guid)
            .ok_or(DriverError::UnknownEndPort(port_guid))?;
        let _g = lock(&self.drill);
        if !up && self.end_port_up[ep.idx()].load(Ordering::SeqCst) {
            self.count_end_port_loss(ep);
        }
        if self.end_port_up[ep.idx()].swap(up, Ordering::SeqCst) != up {
            if up {
                self.vl_end_port_up(ep);
            }
            bump(&self.counters.state_changes, 1);
            self.emit(if up {
                FabricEvent::EndPortUp(port_guid)
            } else {
                FabricEvent::EndPortDown(port_guid)
            });
        }
        Ok(())
    }

    fn lid_table(&self) -> Arc<LidTable> {
        read(&self.lids).clone()
    }

    fn switch_id(&self, guid: Guid) -> Result<SwitchId, DriverError> {
        self.topo.switch_by_guid(guid).ok_or(DriverError::UnknownSwitch(guid))
    }

    fn port_idx(&self, sw: SwitchId, port: PortNum) -> usize {
        self.port_offset[sw.idx()] + port as usize
    }

    async fn sleep_op(&self) {
        let latency = read(&self.config).op_latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
    }

    fn emit(&self, ev: FabricEvent) {
        lock(&self.subscribers).retain(|tx| tx.send(ev.clone()).is_ok());
    }
}

#[cfg(test)]
mod counters_tests;
#[cfg(test)]
mod mcast_proptests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tables_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod vls_tests;
