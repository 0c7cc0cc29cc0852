//! [`UmadDriver`]: the [`SouthboundDriver`] over the kernel user-MAD interface. This module is
//! the trait implementation, thin: each operation delegates to the subsystem that owns it.
//!
//! | module | holds |
//! | --- | --- |
//! | `state` | the switch and CA records, the [`Fabric`] built from them, directed routes, PortInfo bookkeeping (pure: no I/O, no lock) |
//! | `inner` | `Inner` (transport, state, locks, flags) and the SMP submit/check helpers |
//! | `sweep` | discovery, the light sweep and its background tasks, port enable/disable |
//! | `lids` | LID assignment, port activation, LIDs in force |
//! | `sl2vl` | SL-to-VL (escape VL) programming |
//! | `data_vl` | data VL plans: OperationalVLs at bring-up, capacity, the plan in force |
//! | `sm` | SM election: SMInfo identity, standby while another master answers, takeover |
//! | `upload` | LFT block writes and reads |
//! | `counters` | port counters: PerfMgt PortCounters / PortCountersExtended reads on the transport's PerfMgt lane |
//! | `sa_snapshot` | the Subnet Administration snapshot built from `state` (pure builder), published to the attached [`fabric_sa::SaService`]; the service serving only while master |
//!
//! * **Sweep** ([`SouthboundDriver::discover`]): breadth-first directed-route discovery, one
//!   level at a time with every SMP of a level in flight together (the transport bounds the
//!   window): NodeInfo of each neighbour, then NodeDescription, SwitchInfo and PortInfo of every
//!   port of each new switch (NodeDescription and PortInfo of the arrival port of each new CA).
//! * **LIDs** ([`SouthboundDriver::configure_lids`]): PortInfo Sets (switch port 0: LID,
//!   MasterSMLID; CA ports: base LID, LMC, MasterSMLID), SwitchInfo.LinearFDBTop and port
//!   activation: every INIT port ARMED first, then ACTIVE.
//! * **SL-to-VL** (escape VL: SL 1 → [`ESCAPE_VL`]), off the critical path: the first
//!   generation after start is a direct upload that needs no escape VL, so `configure_lids`
//!   writes no table. [`SouthboundDriver::escape_vl_ready`] starts a pass for what is still
//!   missing and waits for it; the daemon asks for it in the background after the first
//!   commit, and the update protocol again before it moves traffic to the escape LIDs. Pass
//!   SMPs go at background priority (they share the window but leave it to LID, port and LFT
//!   work, see [`crate::transport`]). A pass writes
//!   only tables not written yet: with OptimizedSLtoVLMappingProgramming one Set per switch
//!   (modifier 0x30000, every input to every output port), else one per (input, output) pair of
//!   linked ports (input port 0 only on an enhanced port 0), and one per CA port; ports that do
//!   not advertise IsSLMappingSupported are skipped (as OpenSM does). New and relinked ports,
//!   switches that come back (maybe rebooted) and CAs that come back get theirs in the next pass,
//!   which the light sweep starts when it reports them.
//! * **Data VLs** ([`SouthboundDriver::program_data_vls`], see `data_vl`): every port is
//!   brought up with OperationalVLs = the smaller VLCap of its link's two ends (OpenSM's rule;
//!   OperationalVLs is never changed on an ARMED or ACTIVE port, that needs a link re-training);
//!   a plan needing more VLs than a live port operates is refused naming the port; else it is
//!   put in force (the SL-to-VL programmer above then writes its table instead of the
//!   escape-only one, to every port and to ports that appear later) and waited for.
//!   [`SouthboundDriver::data_vl_capacity`] is the fewest VLs over the live ports.
//! * **LFTs** ([`SouthboundDriver::write_lft_blocks`]): one directed-route Set per block, skipping
//!   blocks equal to what the switch is known to hold, bounded by LinearFDBCap.
//! * **MFTs and P_Key tables** ([`SouthboundDriver::write_mft_blocks`],
//!   [`SouthboundDriver::write_pkey_blocks`]): the same upload, bounded by MulticastFDBCap,
//!   PartitionCap and PartitionEnforcementCap; partition enforcement bits on the switch ports
//!   given tables; MulticastFDBTop where switches advertise it.
//! * **M_Key** ([`UmadConfig::m_key`]): every SMP carries the key, and every PortInfo Set
//!   (LID configuration of switch port 0 and every CA port, activation) writes the key,
//!   protect bits and lease period; ports that refuse are reported naming GUID and port.
//! * **Changes**: trap 128 and a light sweep (SwitchInfo.PortStateChange, then PortInfo of the
//!   flagged switch's ports) feed [`FabricEvent`]s; relinked ports are armed and activated again.
//! * **SA snapshot** ([`SouthboundDriver::attach_sa`]): the attached service gets a new
//!   snapshot after discovery, LID configuration and every light sweep or port change that
//!   gave events (published before the events go out), and the LFT blocks of every acknowledged
//!   write; it answers only while this manager is master with its LIDs configured.
//!
//! # Lock order
//!
//! Every lock of the driver (fields of `inner::Inner`), what it serialises and the order they
//! are taken in. Only `sweep_lock` is ever held across an `.await`.
//!
//! 1. `sweep_lock` (`tokio::sync::Mutex<()>`, async, held across `.await`s): serialises the
//!    operations that read port states, change directed routes or activate ports: discovery
//!    ([`SouthboundDriver::discover`]), [`SouthboundDriver::configure_lids`], the light sweep
//!    (periodic, trap 128 or [`UmadDriver::light_sweep`]) and
//!    [`SouthboundDriver::set_port_state`]. So a light sweep never reads ports halfway through
//!    a LID configuration or another sweep, and two sweeps never both activate ports or
//!    recompute routes. It is taken first, before any other lock. LFT writes and reads, the
//!    SL-to-VL passes and the SM election do not take it: they read routes from a snapshot of
//!    the state and only record results (LFT cache, tables written).
//! 2. `sa_publish` (`std::sync::Mutex<u64>`, the last SA snapshot version): serialises the
//!    SA snapshot's producers (a publish, an acknowledged LFT write), so that a snapshot built
//!    from an older state never replaces a newer one. Taken before `state`, which it holds only
//!    to clone the records or record LFT blocks; the snapshot is built with `state` released.
//!    Never across an `.await`; the transport never takes it (it reads the service's arc-swap).
//! 3. `state` (`std::sync::Mutex<State>`): the records. Taken for short synchronous sections
//!    (snapshot what to send, record what came back, pure computations of `state`); never held
//!    across an `.await` and never while another std lock below is taken (sections take one
//!    lock at a time; `sa_publish` above is the only lock held while taking it).
//! 4. `sl2vl` (`std::sync::Mutex<Sl2VlProgress>`): progress of the SL-to-VL programming,
//!    between the programmer, [`SouthboundDriver::escape_vl_ready`] (waiters, woken by the
//!    `sl2vl_finished` notify, which they register before checking under the lock) and
//!    [`SouthboundDriver::escape_vl_status`]. Short sections, never across an `.await`, never
//!    nested with `state`.
//! 5. `subscribers` (`std::sync::Mutex<Vec<Sender>>`): event subscribers, taken only to add
//!    one or to send (unbounded channels: sending never waits).
//! 6. `traps` (`std::sync::Mutex<Option<Receiver>>`): held once, to take the trap channel when
//!    the background tasks start.
//! 7. `perf_caps` (`std::sync::Mutex<HashMap<Guid, u16>>`): the PerfMgt CapabilityMask of each
//!    counter agent, taken by [`SouthboundDriver::read_port_counters`] only to copy, insert or
//!    remove (never nested with another lock, never across an `.await`).
//!
//! The rest is lock-free: `sa` (a `OnceLock`, set once by `attach_sa`), `standby` and
//! `sweeper_started` (atomic flags), `sweeps` (a
//! counter), the transport's [`SmIdentity`](crate::transport::SmIdentity) and counters
//! (atomics shared with the transport thread), which owns the descriptor and every SMP in
//! flight by itself (requests reach it over a channel).

mod counters;
mod data_vl;
#[cfg(test)]
mod data_vl_tests;
mod inner;
mod lids;
mod sa_snapshot;
mod sl2vl;
mod sm;
mod state;
mod sweep;
mod tables;
mod upload;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fabric_routing::{LidPlan, BLOCK_SIZE};
use fabric_southbound::{
    CounterPort, CountersReading, DataVlPlan, DriverCaps, DriverError, DriverStats, EscapeVlStatus, LftBlockWrite,
    MftBlockWrite, PkeyBlockWrite, PkeyPort, SouthboundDriver, WriteReport, MFT_BLOCK_SIZE, PKEY_BLOCK_SIZE,
};
use fabric_topology::{Fabric, FabricEvent, Guid, Lid, PortNum};
use tokio::sync::{mpsc, oneshot};

use crate::config::UmadConfig;
use crate::mad::{Route, Smp};
use crate::transport::{self, OpenError, Transport, TransportParams, UmadDevice};
use inner::{lock, tp_err, Inner};
pub use sl2vl::{ESCAPE_SL, ESCAPE_VL};

/// Counters reported by the driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UmadStats {
    /// SMPs written (including re-sends).
    pub smps_sent: u64,
    /// Re-sends after lost or bounced SMPs.
    pub retries: u64,
    /// SMPs given up after all attempts.
    pub failures: u64,
    /// Traps received.
    pub traps: u64,
    /// SMInfo (and other) requests addressed to the manager's port that it answered (LID
    /// routed and directed route).
    pub sm_requests: u64,
    /// Of those, SubnSet(SMInfo) from another subnet manager (answered, never obeyed).
    pub sm_set_requests: u64,
    /// Subnet Administration requests answered (by the attached SA service, or "not
    /// supported" while none is attached).
    pub sa_requests: u64,
    /// SA requests dropped while the SA service is not serving (standby manager).
    pub sa_dropped_standby: u64,
    /// GetTable/GetMulti answered ERR_NO_RESOURCES (too many RMPP transfers in flight).
    pub sa_busy: u64,
    /// RMPP transfers started, completed (last segment acknowledged), aborted.
    pub rmpp_started: u64,
    /// See `rmpp_started`.
    pub rmpp_completed: u64,
    /// See `rmpp_started`.
    pub rmpp_aborted: u64,
    /// RMPP segments resent after an ACK timeout.
    pub rmpp_segments_resent: u64,
    /// Reports sent to InformInfo subscribers (first attempts).
    pub reports_sent: u64,
    /// Reports acknowledged by a ReportResp.
    pub reports_acknowledged: u64,
    /// PerfMgt MADs written (port counter reads, re-sends included; not in `smps_sent`).
    pub perf_sent: u64,
    /// Re-sends of PerfMgt MADs.
    pub perf_retries: u64,
    /// PerfMgt MADs given up after all attempts.
    pub perf_failures: u64,
}

/// The `umad` southbound driver. Construct with [`UmadDriver::open`].
pub struct UmadDriver {
    inner: Arc<Inner>,
}

/// When [`UmadDriver::open_waiting`] first says that the device is not open yet.
pub const OPEN_WAIT_FIRST: Duration = Duration::from_secs(1);
/// How often [`UmadDriver::open_waiting`] says it again.
pub const OPEN_WAIT_EVERY: Duration = Duration::from_secs(5);

/// What a device that does not open is waiting for: the simulator when the process runs under
/// the ibsim preload shim (named by its socket and node), otherwise the HCA.
fn open_blocked_hint() -> String {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("LD_PRELOAD").contains("umad2sim") {
        let sock = var("IBSIM_SOCKNAME");
        let host = var("SIM_HOST");
        format!(
            "the umad device is not open yet: the ibsim simulator (IBSIM_SOCKNAME={}, SIM_HOST={}) is not \
             running; the umad2sim shim retries every 2 s and discovery starts once it answers (SIGTERM stops fabricd)",
            if sock.is_empty() { "<default>" } else { &sock },
            if host.is_empty() { "<first node>" } else { &host },
        )
    } else {
        "the umad device is not open yet: open() is blocked in the kernel (is the HCA driver loaded and the device \
         responding?); still waiting (SIGTERM stops fabricd)"
            .to_string()
    }
}

impl UmadDriver {
    /// Opens the device of `cfg`, registers the SM agents (classes 0x81 and 0x01) and starts the
    /// transport thread. Errors say when the device is missing or not accessible.
    pub fn open(cfg: UmadConfig) -> Result<Self, DriverError> {
        Self::open_with_m_key(cfg, None)
    }

    /// [`UmadDriver::open`] with the M_Key in force on the fabric: `Some(key)` replaces
    /// [`UmadConfig::m_key`] (protect bits and lease stay the configured ones). The daemon
    /// passes the key it persisted in its state directory, so that after a restart or a
    /// takeover (a standby becoming master) the driver manages the ports with the key the
    /// previous master set on them, whatever the config file says now. `Some(0)` means "no
    /// key in force" and turns M_Key protection off.
    pub fn open_with_m_key(mut cfg: UmadConfig, m_key_in_force: Option<u64>) -> Result<Self, DriverError> {
        if let Some(k) = m_key_in_force {
            cfg.m_key = k;
            if k == 0 {
                cfg.m_key_protect = 0;
            }
        }
        cfg.validate().map_err(DriverError::Config)?;
        let dev = UmadDevice::open(&cfg.device).map_err(|e| match e {
            OpenError::Os(_, io) => DriverError::Io(io),
            other => DriverError::Config(other.to_string()),
        })?;
        let (ttx, trx) = mpsc::unbounded_channel();
        let tp = Transport::start(
            dev,
            TransportParams {
                timeout: cfg.timeout(),
                retries: cfg.retries,
                window: cfg.window,
                perf_window: cfg.perf_window,
            },
            ttx,
        );
        sm::init_identity(&tp, &cfg);
        Ok(UmadDriver {
            inner: Arc::new(Inner::new(cfg, tp, trx)),
        })
    }

    /// [`UmadDriver::open`] on a thread of its own, saying in the log (warning, after
    /// [`OPEN_WAIT_FIRST`] and then every [`OPEN_WAIT_EVERY`]) what it waits for while the
    /// device does not open.
    ///
    /// Opening can block indefinitely: under the ibsim preload shim (umad2sim), `open()` of the
    /// device retries connecting to the simulator every 2 s until it runs, and it comes back
    /// once the simulator starts. The future can be dropped meanwhile (the daemon stops on
    /// SIGTERM): the thread is then left blocked inside `open()` and ends with the process.
    pub async fn open_waiting(cfg: UmadConfig) -> Result<Self, DriverError> {
        Self::open_waiting_with_m_key(cfg, None).await
    }

    /// [`UmadDriver::open_waiting`] with the M_Key in force (see [`UmadDriver::open_with_m_key`]).
    pub async fn open_waiting_with_m_key(cfg: UmadConfig, m_key_in_force: Option<u64>) -> Result<Self, DriverError> {
        let device = cfg.device.clone();
        let (tx, mut rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("fabric-umad-open".into())
            .spawn(move || {
                let _ = tx.send(Self::open_with_m_key(cfg, m_key_in_force));
            })
            .map_err(DriverError::Io)?;
        let t0 = tokio::time::Instant::now();
        let mut next = OPEN_WAIT_FIRST;
        loop {
            match tokio::time::timeout_at(t0 + next, &mut rx).await {
                Ok(Ok(r)) => return r,
                Ok(Err(_)) => {
                    return Err(DriverError::Config(format!(
                        "the thread opening {} ended without a result",
                        device.display()
                    )))
                }
                Err(_) => {
                    tracing::warn!(
                        device = %device.display(),
                        waited_s = t0.elapsed().as_secs(),
                        "{}",
                        open_blocked_hint()
                    );
                    next += OPEN_WAIT_EVERY;
                }
            }
        }
    }

    /// The M_Key every SMP carries and LID configuration writes into every managed port (0:
    /// none), for the daemon to persist in its state directory. Never log it.
    pub fn m_key(&self) -> u64 {
        self.inner.cfg.m_key
    }

    /// Counters of the transport (SMPs, retries, failures, traps, SA answers, RMPP, Reports).
    pub fn stats(&self) -> UmadStats {
        let s = self.inner.tp.stats();
        UmadStats {
            smps_sent: s.sent.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
            failures: s.failures.load(Ordering::Relaxed),
            traps: s.traps.load(Ordering::Relaxed),
            sm_requests: s.sm_requests.load(Ordering::Relaxed),
            sm_set_requests: s.sm_set_requests.load(Ordering::Relaxed),
            sa_requests: s.sa_requests.load(Ordering::Relaxed),
            sa_dropped_standby: s.sa_dropped_standby.load(Ordering::Relaxed),
            sa_busy: s.sa_busy.load(Ordering::Relaxed),
            rmpp_started: s.rmpp_started.load(Ordering::Relaxed),
            rmpp_completed: s.rmpp_completed.load(Ordering::Relaxed),
            rmpp_aborted: s.rmpp_aborted.load(Ordering::Relaxed),
            rmpp_segments_resent: s.rmpp_segments_resent.load(Ordering::Relaxed),
            reports_sent: s.reports_sent.load(Ordering::Relaxed),
            reports_acknowledged: s.reports_acknowledged.load(Ordering::Relaxed),
            perf_sent: s.perf_sent.load(Ordering::Relaxed),
            perf_retries: s.perf_retries.load(Ordering::Relaxed),
            perf_failures: s.perf_failures.load(Ordering::Relaxed),
        }
    }

    /// Sends one SMP (built with [`Smp::request`]) and returns the reply, for tools and
    /// byte-image capture.
    pub async fn raw_call(&self, route: Route, smp: Smp) -> Result<Smp, DriverError> {
        let r = transport::wait(self.inner.tp.submit(route, smp))
            .await
            .map_err(|e| tp_err(0, "SMP", e))?;
        Ok(r.smp)
    }

    /// Directed route to a known switch (for tools).
    pub fn switch_route(&self, guid: Guid) -> Option<Vec<u8>> {
        let st = lock(&self.inner.state);
        st.sw_by_guid.get(&guid).map(|&i| st.switches[i].path.clone())
    }

    /// LID of the manager's own port (after [`SouthboundDriver::configure_lids`]).
    pub fn sm_lid(&self) -> u16 {
        lock(&self.inner.state).sm_lid
    }

    /// Runs one light sweep now (the periodic one runs in the background after the first
    /// discovery); returns the events it emitted.
    pub async fn light_sweep(&self) -> Vec<FabricEvent> {
        sweep::light_sweep(&self.inner).await
    }
}

#[async_trait]
impl SouthboundDriver for UmadDriver {
    fn caps(&self) -> DriverCaps {
        DriverCaps {
            name: "umad",
            max_lid: fabric_routing::IB_MAX_UNICAST_LID,
            max_lft_blocks: upload::max_lft_blocks(&lock(&self.inner.state)),
            escape_vl: Some(ESCAPE_VL),
        }
    }

    async fn discover(&self) -> Result<Fabric, DriverError> {
        let f = sweep::discover(&self.inner).await?;
        sweep::ensure_tasks(&self.inner);
        Ok(f)
    }

    fn subscribe_events(&self) -> mpsc::UnboundedReceiver<FabricEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.inner.subscribers).push(tx);
        sweep::ensure_tasks(&self.inner);
        rx
    }

    async fn configure_lids(&self, fabric: &Fabric, lids: &LidPlan) -> Result<(), DriverError> {
        lids::configure_lids(&self.inner, fabric, lids).await?;
        sweep::ensure_tasks(&self.inner);
        Ok(())
    }

    async fn write_lft_blocks(&self, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
        upload::write_lft_blocks(&self.inner, blocks).await
    }

    async fn read_lft_block(&self, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
        upload::read_lft_block(&self.inner, switch, block).await
    }

    async fn write_mft_blocks(&self, blocks: &[MftBlockWrite]) -> Result<WriteReport, DriverError> {
        tables::write_mft_blocks(&self.inner, blocks).await
    }

    async fn read_mft_block(
        &self,
        switch: Guid,
        block: u32,
        position: u8,
    ) -> Result<[u16; MFT_BLOCK_SIZE], DriverError> {
        tables::read_mft_block(&self.inner, switch, block, position).await
    }

    async fn write_pkey_blocks(&self, blocks: &[PkeyBlockWrite]) -> Result<WriteReport, DriverError> {
        tables::write_pkey_blocks(&self.inner, blocks).await
    }

    async fn read_pkey_block(&self, port: PkeyPort, block: u16) -> Result<[u16; PKEY_BLOCK_SIZE], DriverError> {
        tables::read_pkey_block(&self.inner, port, block).await
    }

    async fn set_port_state(&self, switch: Guid, port: PortNum, up: bool) -> Result<(), DriverError> {
        sweep::set_port_state(&self.inner, switch, port, up).await
    }

    async fn set_switch_state(&self, _switch: Guid, _up: bool) -> Result<(), DriverError> {
        Err(DriverError::Unsupported(
            "set_switch_state: a real switch cannot be powered off over MADs",
        ))
    }

    async fn escape_vl_ready(&self) -> Result<(), DriverError> {
        sweep::ensure_tasks(&self.inner);
        sl2vl::escape_vl_ready(&self.inner).await
    }

    fn escape_vl_status(&self) -> EscapeVlStatus {
        sl2vl::escape_vl_status(&self.inner)
    }

    async fn program_data_vls(&self, plan: &DataVlPlan) -> Result<(), DriverError> {
        sweep::ensure_tasks(&self.inner);
        data_vl::program_data_vls(&self.inner, plan).await
    }

    fn data_vl_capacity(&self) -> Option<u8> {
        data_vl::capacity(&lock(&self.inner.state))
    }

    fn driver_stats(&self) -> DriverStats {
        let s = self.stats();
        DriverStats {
            smps_sent: s.smps_sent,
            retries: s.retries,
            failures: s.failures,
        }
    }

    async fn standby_while_master(&self, on_standby: &(dyn Fn(String) + Send + Sync)) -> Result<bool, DriverError> {
        sm::standby_while_master(&self.inner, on_standby).await
    }

    fn lids_in_force(&self) -> Vec<(Guid, Lid, Lid)> {
        lids::lids_in_force(&lock(&self.inner.state))
    }

    fn sm_port_guid(&self) -> Option<Guid> {
        Some(lock(&self.inner.state).local_guid()).filter(|&g| g != 0)
    }

    fn attach_sa(&self, sa: Arc<fabric_sa::SaService>) -> bool {
        sa_snapshot::attach(&self.inner, sa)
    }

    async fn read_port_counters(&self, ports: &[CounterPort]) -> Result<Vec<CountersReading>, DriverError> {
        Ok(counters::read_port_counters(&self.inner, ports).await)
    }
}
