//! The `mock` southbound driver: a built-in simulated fabric, implementing
//! [`fabric_southbound::SouthboundDriver`].
//!
//! A [`MockFabric`] holds the physical cabling of a fabric (from a topology file, a generator
//! string or a [`Fabric`] built in code) and the state a real fabric would hold:
//!
//! * per switch, the real LFT bytes (grown block by block as blocks are written, unwritten
//!   entries read as 255), behind one lock per switch so parallel uploads to different switches
//!   never contend;
//! * the LIDs and LMC installed by [`SouthboundDriver::configure_lids`];
//! * the physical state of every link, switch and end port (changed by the fault drills, which
//!   report every change on the event streams).
//!
//! On top of that it forwards packets hop by hop through the installed LFTs
//! ([`MockFabric::trace`]) and checks all pairs of end ports ([`MockFabric::verify_all_pairs`])
//! from its own state only, so tests of the daemon see what a real fabric would do with the
//! tables it uploaded.
//!
//! # Fault injection, latency and retries
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

mod trace;

pub use fabric_southbound::{Hop, ReachReport, TraceError, REACH_REPORT_MAX_LISTED};

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use async_trait::async_trait;
use fabric_routing::{Lfts, LidPlan, BLOCK_SIZE, NO_ROUTE};
use fabric_topology::gen::{self, Degrade};
use fabric_topology::ibnet;
use fabric_topology::{fmt_guid, EndPortId, Fabric, FabricEvent, Guid, Lid, LinkState, PortNum, Remote, SwitchId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use fabric_southbound::{DriverCaps, DriverError, LftBlockWrite, PacketSimulator, SouthboundDriver, WriteReport};
use trace::{live_components, walk, LidTable, StateView};

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
    /// Whether powering a switch back on loses its LFT and LID, as a real switch reboot does.
    pub reset_on_power_cycle: bool,
    /// Switches (GUIDs) that refuse every LFT block write with [`DriverError::Unreachable`]
    /// while staying up in the topology (a management path that is down, an agent that is
    /// gone): the partial-upload drill.
    pub unreachable_switches: Vec<Guid>,
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
        }
    }
}

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
}

/// Operation counters of a [`MockFabric`] (monotonic since creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MockCounters {
    /// LFT blocks successfully written.
    pub blocks_written: u64,
    /// LFT block write attempts (successful + failed).
    pub write_attempts: u64,
    /// Injected transient write failures.
    pub write_failures: u64,
    /// LFT blocks read.
    pub blocks_read: u64,
    /// `write_lft_blocks` calls.
    pub write_batches: u64,
    /// Successful `configure_lids` calls.
    pub lid_configs: u64,
    /// `discover` calls.
    pub sweeps: u64,
    /// Physical state changes (drills).
    pub state_changes: u64,
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
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// One LFT block write that took effect (see [`MockFabric::set_write_observer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockWritten<'a> {
    /// Dense id of the switch (as in [`SouthboundDriver::discover`]).
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
    /// Error-injection draws for this switch.
    rng: ChaCha8Rng,
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
                })
            })
            .collect();
        let lids = LidTable::unassigned(fabric.num_switches(), fabric.num_end_ports());
        MockFabric {
            topo: fabric.with_generation(0),
            port_offset,
            port_up,
            switch_up,
            end_port_up,
            cells,
            lids: RwLock::new(Arc::new(lids)),
            subscribers: Mutex::new(Vec::new()),
            drill: Mutex::new(()),
            config: RwLock::new(config),
            counters: Counters::default(),
            warnings: Vec::new(),
            observer: RwLock::new(None),
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

    /// The physical cabling (with the initial state; see [`SouthboundDriver::discover`] for the
    /// current one).
    pub fn cabling(&self) -> &Fabric {
        &self.topo
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
    /// of [`SouthboundDriver::discover`]), covering the longest installed row.
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
        if self.end_port_up[ep.idx()].swap(up, Ordering::SeqCst) != up {
            bump(&self.counters.state_changes, 1);
            self.emit(if up {
                FabricEvent::EndPortUp(port_guid)
            } else {
                FabricEvent::EndPortDown(port_guid)
            });
        }
        Ok(())
    }

    /// Follows a packet from end port `src_port_guid` to `dlid` through the installed LFTs over
    /// live links. Returns the switches crossed, ending at the switch that delivers the packet to
    /// the end port owning `dlid` (any of its `2^LMC` LIDs) or consumes it (a switch's own LID).
    pub fn trace(&self, src_port_guid: Guid, dlid: Lid) -> Result<Vec<Hop>, TraceError> {
        let ep = self
            .topo
            .end_port_by_guid(src_port_guid)
            .ok_or(TraceError::UnknownSource(src_port_guid))?;
        let view = LiveView(self);
        let Some((sw, port)) = self.topo.end_port(ep).attach else {
            return Err(TraceError::SourceDown(src_port_guid));
        };
        if !(view.end_port_up(ep) && view.switch_up(sw) && view.port_up(sw, port)) {
            return Err(TraceError::SourceDown(src_port_guid));
        }
        let lids = self.lid_table();
        let mut hops = Vec::new();
        walk(&self.topo, &view, &lids, sw, port, dlid, |h| hops.push(h))?;
        Ok(hops)
    }

    /// Follows a packet sent by switch `switch` itself (port 0) to `dlid`, as a management
    /// packet from that switch would go (cf. `ibtracert`).
    pub fn trace_from_switch(&self, switch: Guid, dlid: Lid) -> Result<Vec<Hop>, TraceError> {
        let sw = self
            .topo
            .switch_by_guid(switch)
            .ok_or(TraceError::UnknownSwitch(switch))?;
        let view = LiveView(self);
        if !view.switch_up(sw) {
            return Err(TraceError::SwitchDown(switch));
        }
        let lids = self.lid_table();
        let mut hops = Vec::new();
        walk(&self.topo, &view, &lids, sw, 0, dlid, |h| hops.push(h))?;
        Ok(hops)
    }

    /// Traces every ordered pair of distinct live end ports that are physically connected over
    /// live links, to the destination's base LID (or escape LID when `use_escape`), using only
    /// the simulated fabric's own LFTs, LIDs and link states.
    ///
    /// CPU-bound and synchronous: call it from a blocking context (`spawn_blocking`), not from
    /// an async task. It runs on the rayon pool, one task per ingress switch: the LFTs route by
    /// destination only, so all sources on one switch share one walk per destination. Every
    /// switch's LFT lock is held for reading during the check, so the result is that of one
    /// consistent set of tables (concurrent uploads wait).
    pub fn verify_all_pairs(&self, use_escape: bool) -> ReachReport {
        self.check_reach(Dests::EndPorts { use_escape })
    }

    /// Traces, from every live end port, the LID of every live switch physically connected to
    /// it (switch LIDs are destinations too: LID-routed management packets and tools such as
    /// `ibtracert` must reach every switch). Same method and report as
    /// [`MockFabric::verify_all_pairs`], with switch node GUIDs as destinations.
    pub fn verify_switch_lids(&self) -> ReachReport {
        self.check_reach(Dests::Switches)
    }

    fn check_reach(&self, dests: Dests) -> ReachReport {
        let guards: Vec<_> = self.cells.iter().map(read).collect();
        let view = FrozenView {
            lft: &guards,
            port_offset: &self.port_offset,
            port_up: self.port_up.iter().map(|a| a.load(Ordering::SeqCst)).collect(),
            switch_up: self.switch_up.iter().map(|a| a.load(Ordering::SeqCst)).collect(),
            end_port_up: self.end_port_up.iter().map(|a| a.load(Ordering::SeqCst)).collect(),
        };
        let lids = self.lid_table();
        let topo = &self.topo;

        // Live end ports, grouped by ingress switch.
        let mut by_switch: Vec<Vec<EndPortId>> = vec![Vec::new(); topo.num_switches()];
        let mut live: Vec<(EndPortId, SwitchId)> = Vec::new();
        for ep in topo.end_port_ids() {
            if let Some((sw, port)) = topo.end_port(ep).attach {
                if view.end_port_up(ep) && view.switch_up(sw) && view.port_up(sw, port) {
                    by_switch[sw.idx()].push(ep);
                    live.push((ep, sw));
                }
            }
        }
        let targets: Vec<Target> = match dests {
            Dests::EndPorts { use_escape } => live
                .iter()
                .map(|&(ep, sw)| {
                    let guid = topo.end_port(ep).port_guid;
                    Target {
                        guid,
                        switch: sw,
                        end_port: Some(ep),
                        dlid: lids.dlid(ep, use_escape, guid),
                    }
                })
                .collect(),
            Dests::Switches => topo
                .switch_ids()
                .filter(|&sw| view.switch_up(sw))
                .map(|sw| {
                    let guid = topo.switch(sw).guid;
                    let dlid = match lids.switch_lid[sw.idx()] {
                        0 => Err(TraceError::NoSwitchLid(guid)),
                        lid => Ok(lid),
                    };
                    Target {
                        guid,
                        switch: sw,
                        end_port: None,
                        dlid,
                    }
                })
                .collect(),
        };
        let comp = live_components(topo, &view);
        let ingress: Vec<SwitchId> = topo.switch_ids().filter(|s| !by_switch[s.idx()].is_empty()).collect();

        #[derive(Default)]
        struct Part {
            checked: usize,
            bad: usize,
            disconnected: usize,
            /// (source, index in `targets`, why).
            listed: Vec<(EndPortId, usize, TraceError)>,
        }
        let parts: Vec<Part> = ingress
            .par_iter()
            .map(|&sw| {
                let srcs = &by_switch[sw.idx()];
                let mut part = Part::default();
                for (
                    ti,
                    Target {
                        switch: dsw,
                        end_port: dep,
                        dlid,
                        ..
                    },
                ) in targets.iter().enumerate()
                {
                    // An end port is not its own destination.
                    let n = srcs.len() - usize::from(dep.is_some() && *dsw == sw);
                    if n == 0 {
                        continue;
                    }
                    if comp[sw.idx()] != comp[dsw.idx()] {
                        part.disconnected += n;
                        continue;
                    }
                    part.checked += n;
                    let res = dlid
                        .clone()
                        .and_then(|dlid| walk(topo, &view, &lids, sw, 0, dlid, |_| {}));
                    if let Err(e) = res {
                        part.bad += n;
                        for &src in srcs.iter().filter(|&&s| Some(s) != *dep) {
                            if part.listed.len() == REACH_REPORT_MAX_LISTED {
                                break;
                            }
                            part.listed.push((src, ti, e.clone()));
                        }
                    }
                }
                part
            })
            .collect();

        let mut report = ReachReport::default();
        let mut listed = Vec::new();
        for p in parts {
            report.pairs_checked += p.checked;
            report.unreachable_count += p.bad;
            report.disconnected += p.disconnected;
            listed.extend(p.listed);
        }
        listed.sort_by_key(|(s, t, _)| (*s, *t));
        listed.truncate(REACH_REPORT_MAX_LISTED);
        report.unreachable = listed
            .into_iter()
            .map(|(s, t, e)| (topo.end_port(s).port_guid, targets[t].guid, e.to_string()))
            .collect();
        report
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

    /// The physical state as a list of events to apply to the cabling snapshot.
    fn state_events(&self) -> Vec<FabricEvent> {
        let mut evs = Vec::new();
        for (i, s) in self.topo.switches().iter().enumerate() {
            let sid = SwitchId(i as u32);
            let up = self.switch_up[i].load(Ordering::SeqCst);
            if up != s.up {
                evs.push(if up {
                    FabricEvent::SwitchUp(s.guid)
                } else {
                    FabricEvent::SwitchDown(s.guid)
                });
            }
            for (pn, p) in s.external_ports() {
                if p.remote == Remote::None {
                    continue;
                }
                let up = self.port_up[self.port_idx(sid, pn)].load(Ordering::SeqCst);
                let this_end = p.state == LinkState::Up;
                let other_end = match p.remote {
                    Remote::Switch { sw, port } => self.topo.switch(sw).ports[port as usize].state == LinkState::Up,
                    _ => this_end,
                };
                // A link event sets both recorded ends; emit one wherever they differ from `up`.
                let (switch, port) = (s.guid, pn);
                if up && !(this_end && other_end) {
                    evs.push(FabricEvent::LinkUp { switch, port });
                } else if !up && (this_end || other_end) {
                    evs.push(FabricEvent::LinkDown { switch, port });
                }
            }
        }
        for (i, e) in self.topo.end_ports().iter().enumerate() {
            let up = self.end_port_up[i].load(Ordering::SeqCst);
            if up != e.up {
                evs.push(if up {
                    FabricEvent::EndPortUp(e.port_guid)
                } else {
                    FabricEvent::EndPortDown(e.port_guid)
                });
            }
        }
        evs
    }

    /// One attempt at writing one block: `Ok(true)` written, `Ok(false)` injected failure.
    fn write_block_once(&self, sw: SwitchId, w: &LftBlockWrite, cfg: &MockConfig) -> Result<bool, DriverError> {
        let error_rate = cfg.error_rate;
        if !self.switch_up[sw.idx()].load(Ordering::SeqCst) || cfg.unreachable_switches.contains(&w.switch) {
            return Err(DriverError::Unreachable { guid: w.switch });
        }
        bump(&self.counters.write_attempts, 1);
        let mut cell = write(&self.cells[sw.idx()]);
        if error_rate > 0.0 && cell.rng.gen::<f64>() < error_rate {
            bump(&self.counters.write_failures, 1);
            return Ok(false);
        }
        let start = w.block as usize * BLOCK_SIZE;
        if cell.lft.len() < start + BLOCK_SIZE {
            cell.lft.resize(start + BLOCK_SIZE, NO_ROUTE);
        }
        cell.lft[start..start + BLOCK_SIZE].copy_from_slice(&w.entries);
        let seq = self.counters.blocks_written.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(observe) = read(&self.observer).as_ref() {
            observe(&BlockWritten {
                switch: sw,
                guid: w.switch,
                block: w.block,
                entries: &w.entries,
                seq,
            });
        }
        Ok(true)
    }
}

/// What [`MockFabric::check_reach`] traces to.
#[derive(Clone, Copy)]
enum Dests {
    /// Every live end port's base (or escape) LID.
    EndPorts { use_escape: bool },
    /// Every live switch's LID.
    Switches,
}

/// One destination of [`MockFabric::check_reach`].
struct Target {
    /// End port GUID or switch node GUID.
    guid: Guid,
    /// The switch the end port hangs on, or the switch itself.
    switch: SwitchId,
    end_port: Option<EndPortId>,
    /// The LID traced to, or why there is none.
    dlid: Result<Lid, TraceError>,
}

/// Reads the live state, one switch lock at a time (for single traces).
struct LiveView<'a>(&'a MockFabric);

impl StateView for LiveView<'_> {
    fn lft(&self, sw: SwitchId, lid: Lid) -> u8 {
        read(&self.0.cells[sw.idx()])
            .lft
            .get(lid as usize)
            .copied()
            .unwrap_or(NO_ROUTE)
    }
    fn port_up(&self, sw: SwitchId, port: PortNum) -> bool {
        self.0.port_up[self.0.port_idx(sw, port)].load(Ordering::SeqCst)
    }
    fn switch_up(&self, sw: SwitchId) -> bool {
        self.0.switch_up[sw.idx()].load(Ordering::SeqCst)
    }
    fn end_port_up(&self, ep: EndPortId) -> bool {
        self.0.end_port_up[ep.idx()].load(Ordering::SeqCst)
    }
}

/// A frozen view: every LFT read-locked, states copied (for all-pairs checks).
struct FrozenView<'a, 'g> {
    lft: &'a [RwLockReadGuard<'g, SwitchCell>],
    port_offset: &'a [usize],
    port_up: Vec<bool>,
    switch_up: Vec<bool>,
    end_port_up: Vec<bool>,
}

impl StateView for FrozenView<'_, '_> {
    #[inline]
    fn lft(&self, sw: SwitchId, lid: Lid) -> u8 {
        self.lft[sw.idx()].lft.get(lid as usize).copied().unwrap_or(NO_ROUTE)
    }
    #[inline]
    fn port_up(&self, sw: SwitchId, port: PortNum) -> bool {
        self.port_up[self.port_offset[sw.idx()] + port as usize]
    }
    #[inline]
    fn switch_up(&self, sw: SwitchId) -> bool {
        self.switch_up[sw.idx()]
    }
    #[inline]
    fn end_port_up(&self, ep: EndPortId) -> bool {
        self.end_port_up[ep.idx()]
    }
}

/// The Trace and VerifyReachability RPCs of the daemon, answered from the simulated state.
impl PacketSimulator for MockFabric {
    fn trace(&self, src_port_guid: Guid, dlid: Lid) -> Result<Vec<Hop>, TraceError> {
        MockFabric::trace(self, src_port_guid, dlid)
    }
    fn verify_all_pairs(&self, use_escape: bool) -> ReachReport {
        MockFabric::verify_all_pairs(self, use_escape)
    }
}

#[async_trait]
impl SouthboundDriver for MockFabric {
    fn caps(&self) -> DriverCaps {
        let cfg = read(&self.config);
        DriverCaps {
            name: "mock",
            max_lid: cfg.max_lid,
            max_lft_blocks: Some(cfg.max_lft_blocks()),
            escape_vl: cfg.escape_vl,
        }
    }

    async fn discover(&self) -> Result<Fabric, DriverError> {
        self.sleep_op().await;
        bump(&self.counters.sweeps, 1);
        let evs = {
            let _g = lock(&self.drill);
            self.state_events()
        };
        if evs.is_empty() {
            return Ok(self.topo.clone());
        }
        self.topo
            .apply(&evs)
            .map(|f| f.with_generation(0))
            .map_err(|e| DriverError::Protocol {
                guid: None,
                message: format!("simulated sweep: {e}"),
            })
    }

    fn subscribe_events(&self) -> UnboundedReceiver<FabricEvent> {
        let (tx, rx) = unbounded_channel();
        lock(&self.subscribers).push(tx);
        rx
    }

    async fn configure_lids(&self, fabric: &Fabric, plan: &LidPlan) -> Result<(), DriverError> {
        self.sleep_op().await;
        let max = read(&self.config).max_lid;
        if plan.switch_lid.len() != fabric.num_switches() || plan.end_port_base.len() != fabric.num_end_ports() {
            return Err(DriverError::InvalidLidPlan(format!(
                "plan covers {} switches and {} end ports, fabric has {} and {}",
                plan.switch_lid.len(),
                plan.end_port_base.len(),
                fabric.num_switches(),
                fabric.num_end_ports()
            )));
        }
        if plan.lmc > 7 {
            return Err(DriverError::InvalidLidPlan(format!("LMC {} is above 7", plan.lmc)));
        }
        let span: Lid = 1 << plan.lmc;
        let mut table = LidTable::unassigned(self.topo.num_switches(), self.topo.num_end_ports());
        table.lmc = plan.lmc;
        let mut owner: HashMap<Lid, Guid> = HashMap::new();
        let mut claim = |lid: Lid, guid: Guid| -> Result<(), DriverError> {
            if lid > max {
                return Err(DriverError::InvalidLidPlan(format!(
                    "LID {lid} of {} is above the highest unicast LID {max}",
                    fmt_guid(guid)
                )));
            }
            match owner.insert(lid, guid) {
                Some(first) => Err(DriverError::LidConflict {
                    lid,
                    first,
                    second: guid,
                }),
                None => Ok(()),
            }
        };
        for (s, &lid) in fabric.switches().iter().zip(&plan.switch_lid) {
            let sw = self.switch_id(s.guid)?;
            if lid != 0 {
                claim(lid, s.guid)?;
                table.switch_lid[sw.idx()] = lid;
            }
        }
        for (e, &base) in fabric.end_ports().iter().zip(&plan.end_port_base) {
            let ep = self
                .topo
                .end_port_by_guid(e.port_guid)
                .ok_or(DriverError::UnknownEndPort(e.port_guid))?;
            if base == 0 {
                continue;
            }
            if base % span != 0 {
                return Err(DriverError::InvalidLidPlan(format!(
                    "base LID {base} of {} is not aligned to 2^LMC = {span}",
                    fmt_guid(e.port_guid)
                )));
            }
            for lid in base..base.saturating_add(span) {
                claim(lid, e.port_guid)?;
            }
            table.end_port_base[ep.idx()] = base;
        }
        *write(&self.lids) = Arc::new(table);
        bump(&self.counters.lid_configs, 1);
        Ok(())
    }

    async fn write_lft_blocks(&self, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
        let cfg = self.config();
        let max_blocks = cfg.max_lft_blocks();
        bump(&self.counters.write_batches, 1);
        // Reject bad addresses before writing anything.
        let mut ids = Vec::with_capacity(blocks.len());
        for w in blocks {
            ids.push(self.switch_id(w.switch)?);
            if w.block >= max_blocks {
                return Err(DriverError::BlockOutOfRange {
                    guid: w.switch,
                    block: w.block,
                    max_blocks,
                });
            }
        }
        let mut queue: VecDeque<(usize, u32)> = (0..blocks.len()).map(|i| (i, 0)).collect();
        let mut report = WriteReport::default();
        while !queue.is_empty() {
            if !cfg.op_latency.is_zero() {
                tokio::time::sleep(cfg.op_latency).await;
            }
            for _ in 0..cfg.max_parallel.min(queue.len()) {
                let Some((i, failures)) = queue.pop_front() else { break };
                if self.write_block_once(ids[i], &blocks[i], &cfg)? {
                    report.blocks_written += 1;
                } else if failures >= cfg.max_retries {
                    return Err(DriverError::Transient {
                        guid: blocks[i].switch,
                        op: "LFT block write",
                        attempts: failures + 1,
                    });
                } else {
                    report.retries += 1;
                    queue.push_back((i, failures + 1));
                }
            }
        }
        Ok(report)
    }

    async fn read_lft_block(&self, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
        self.sleep_op().await;
        let sw = self.switch_id(switch)?;
        let max_blocks = read(&self.config).max_lft_blocks();
        if block >= max_blocks {
            return Err(DriverError::BlockOutOfRange {
                guid: switch,
                block,
                max_blocks,
            });
        }
        if !self.switch_up[sw.idx()].load(Ordering::SeqCst) {
            return Err(DriverError::Unreachable { guid: switch });
        }
        let mut out = [NO_ROUTE; BLOCK_SIZE];
        let cell = read(&self.cells[sw.idx()]);
        let start = block as usize * BLOCK_SIZE;
        if let Some(src) = cell.lft.get(start..start + BLOCK_SIZE) {
            out.copy_from_slice(src);
        }
        bump(&self.counters.blocks_read, 1);
        Ok(out)
    }

    async fn set_port_state(&self, switch: Guid, port: PortNum, up: bool) -> Result<(), DriverError> {
        self.sleep_op().await;
        let sw = self.switch_id(switch)?;
        let s = self.topo.switch(sw);
        if port == 0 || port > s.nports {
            return Err(DriverError::InvalidPort {
                guid: switch,
                port,
                reason: "no such external port",
            });
        }
        let remote = s.ports[port as usize].remote;
        if remote == Remote::None {
            return Err(DriverError::InvalidPort {
                guid: switch,
                port,
                reason: "not cabled",
            });
        }
        let _g = lock(&self.drill);
        if self.port_up[self.port_idx(sw, port)].swap(up, Ordering::SeqCst) == up {
            return Ok(());
        }
        if let Remote::Switch { sw: r, port: rp } = remote {
            self.port_up[self.port_idx(r, rp)].store(up, Ordering::SeqCst);
        }
        bump(&self.counters.state_changes, 1);
        self.emit(if up {
            FabricEvent::LinkUp { switch, port }
        } else {
            FabricEvent::LinkDown { switch, port }
        });
        Ok(())
    }

    async fn set_switch_state(&self, switch: Guid, up: bool) -> Result<(), DriverError> {
        self.sleep_op().await;
        let sw = self.switch_id(switch)?;
        let reset = read(&self.config).reset_on_power_cycle;
        let _g = lock(&self.drill);
        if self.switch_up[sw.idx()].load(Ordering::SeqCst) == up {
            return Ok(());
        }
        if up && reset {
            write(&self.cells[sw.idx()]).lft.clear();
            let mut lids = write(&self.lids);
            let mut t = (**lids).clone();
            t.switch_lid[sw.idx()] = 0;
            *lids = Arc::new(t);
        }
        self.switch_up[sw.idx()].store(up, Ordering::SeqCst);
        bump(&self.counters.state_changes, 1);
        self.emit(if up {
            FabricEvent::SwitchUp(switch)
        } else {
            FabricEvent::SwitchDown(switch)
        });
        Ok(())
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
