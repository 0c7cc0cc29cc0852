//! [`UmadDriver`]: the [`SouthboundDriver`] over the kernel user-MAD interface.
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
//! * **LFTs** ([`SouthboundDriver::write_lft_blocks`]): one directed-route Set per block, skipping
//!   blocks equal to what the switch is known to hold, bounded by LinearFDBCap.
//! * **Changes**: trap 128 and a light sweep (SwitchInfo.PortStateChange, then PortInfo of the
//!   flagged switch's ports) feed [`FabricEvent`]s; relinked ports are armed and activated again.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use fabric_routing::{LidPlan, BLOCK_SIZE};
use fabric_southbound::{
    DriverCaps, DriverError, DriverStats, EscapeVlStatus, LftBlockWrite, SouthboundDriver, WriteReport,
};
use fabric_topology::{Fabric, FabricBuilder, FabricEvent, Guid, Lid, LinkState, NodeType, PortNum};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::config::UmadConfig;
use crate::mad::*;
use crate::transport::{self, OpenError, Reply, Transport, TransportError, TransportParams, UmadDevice};

/// The switch port a node was reached from during the sweep (`None` for the local node).
type ReachedFrom = Option<(Guid, u8)>;

/// The virtual lane escape-LID traffic (SL 1) is mapped to.
pub const ESCAPE_VL: u8 = 1;
/// Service level of escape-LID traffic.
pub const ESCAPE_SL: u8 = 1;
/// A switch reported down because it stopped answering is asked again every this many light
/// sweeps (each attempt on a dead switch costs a whole SMP timeout).
const SILENT_PROBE_EVERY: u64 = 8;
/// PortInfo.CapabilityMask bit IsSM.
const CAP_IS_SM: u32 = 1 << 1;

/// A port carries traffic: logical state INIT or beyond, and the physical link up (a port whose
/// PortPhysicalState is Disabled or Polling is down whatever its logical state says; the
/// simulator leaves the logical state alone when the physical state is set).
fn live(i: &PortInfo) -> bool {
    i.state().link_up() && matches!(i.phys_state(), 0 | PHYS_LINK_UP)
}

/// What is behind a switch port, as last seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    Switch { guid: Guid, port: u8 },
    Ca { port_guid: Guid },
}

#[derive(Clone, Debug)]
struct PortRec {
    info: Option<PortInfo>,
    peer: Option<Peer>,
}

/// SL-to-VL tables written to a switch: per input port, a bitset of output ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Sl2VlDone {
    /// Indexed by input port.
    pairs: Vec<[u64; 4]>,
    /// The optimized all-pairs Set was written.
    all: bool,
}

impl Sl2VlDone {
    fn contains(&self, inp: u8, out: u8) -> bool {
        self.all
            || self
                .pairs
                .get(inp as usize)
                .is_some_and(|b| b[(out / 64) as usize] & (1u64 << (out % 64)) != 0)
    }
    fn insert(&mut self, inp: u8, out: u8) {
        if self.pairs.len() <= inp as usize {
            self.pairs.resize(inp as usize + 1, [0; 4]);
        }
        self.pairs[inp as usize][(out / 64) as usize] |= 1u64 << (out % 64);
    }
}

#[derive(Clone, Debug)]
struct SwitchRec {
    guid: Guid,
    desc: String,
    nports: u8,
    path: Vec<u8>,
    lid: u16,
    info: SwitchInfo,
    ports: Vec<PortRec>,
    lft: HashMap<u32, [u8; BLOCK_SIZE]>,
    /// Reachable over live links and answering.
    up: bool,
    /// Has a directed route over live links (answering or not).
    reached: bool,
    /// Answers SMPs. A switch that stops answering on a route avoiding the other silent switches
    /// is reported down and no longer used as a hop of directed routes until it answers again.
    responsive: bool,
    /// SL-to-VL tables written (cleared when the switch comes back: it may have rebooted).
    sl2vl: Sl2VlDone,
}

impl SwitchRec {
    fn max_blocks(&self) -> u32 {
        u32::from(self.info.linear_fdb_cap()).div_ceil(BLOCK_SIZE as u32)
    }
}

#[derive(Clone, Debug)]
struct CaRec {
    port_guid: Guid,
    node_guid: Guid,
    desc: String,
    port_num: u8,
    nports: u8,
    path: Vec<u8>,
    info: PortInfo,
    attach: Option<(Guid, u8)>,
    up: bool,
    /// Its SL-to-VL table is written (cleared when the port comes back).
    sl2vl: bool,
}

#[derive(Default, Debug)]
struct State {
    switches: Vec<SwitchRec>,
    sw_by_guid: HashMap<Guid, usize>,
    cas: Vec<CaRec>,
    ca_by_guid: HashMap<Guid, usize>,
    /// The manager's own node: a CA port GUID or a switch GUID.
    local: Option<Peer>,
    sm_lid: u16,
    lid_to_switch: HashMap<u16, Guid>,
}

/// Progress of the SL-to-VL (escape VL) programming.
#[derive(Clone, Debug, Default)]
struct Sl2VlProgress {
    /// Passes requested; a request is answered by the first pass that starts after it.
    requested: u64,
    /// Number of the last finished pass (it answers every request up to it).
    completed: u64,
    /// Tables the running pass writes, or those the last pass failed to write.
    pending: u64,
    /// Tables the last pass failed to write, and the first failure (GUID and ports).
    failed: u64,
    first_failure: Option<(Guid, String)>,
    /// When a pass last finished with every table written (Unix ms).
    ready_at_unix_ms: u64,
    /// SLtoVLMappingTable Sets written since start.
    written: u64,
}

/// One SLtoVLMappingTable Set of a pass.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sl2VlSet {
    /// Switch GUID, or CA port GUID.
    guid: Guid,
    is_switch: bool,
    path: Vec<u8>,
    /// Input and output port (switches; `None` for the optimized all-pairs Set and for CAs).
    ports: Option<(u8, u8)>,
    modifier: u32,
}

impl Sl2VlSet {
    fn describe(&self) -> String {
        let who = if self.is_switch { "switch" } else { "CA port" };
        let g = fabric_topology::fmt_guid(self.guid);
        match self.ports {
            Some((i, o)) => format!("SLtoVLMappingTable Set on {who} {g} input port {i} output port {o}"),
            None if self.is_switch => format!("SLtoVLMappingTable Set (all ports) on {who} {g}"),
            None => format!("SLtoVLMappingTable Set on {who} {g}"),
        }
    }
}

/// The SL-to-VL Sets still missing: every up switch advertising IsSLMappingSupported on port 0
/// (one all-pairs Set with OptimizedSLtoVLMappingProgramming, else each (input, output) pair of
/// live ports, input port 0 only on an enhanced port 0) and every up CA port advertising it.
fn sl2vl_targets(st: &State) -> Vec<Sl2VlSet> {
    let mut out = Vec::new();
    for s in st.switches.iter().filter(|s| s.up) {
        let Some(p0) = s.ports.first().and_then(|p| p.info.as_ref()) else {
            continue;
        };
        if p0.capability_mask() & CAP_SL_MAPPING == 0 {
            continue;
        }
        if s.info.optimized_sl2vl() {
            if !s.sl2vl.all {
                out.push(Sl2VlSet {
                    guid: s.guid,
                    is_switch: true,
                    path: s.path.clone(),
                    ports: None,
                    modifier: SlToVl::all_ports_modifier(),
                });
            }
            continue;
        }
        let linked: Vec<u8> = (1..=s.nports)
            .filter(|p| s.ports.get(*p as usize).and_then(|r| r.info.as_ref()).is_some_and(live))
            .collect();
        let port0 = s.info.enhanced_port0().then_some(0u8);
        for inp in port0.into_iter().chain(linked.iter().copied()) {
            for &o in &linked {
                if inp != o && !s.sl2vl.contains(inp, o) {
                    out.push(Sl2VlSet {
                        guid: s.guid,
                        is_switch: true,
                        path: s.path.clone(),
                        ports: Some((inp, o)),
                        modifier: SlToVl::switch_modifier(inp, o),
                    });
                }
            }
        }
    }
    for c in st.cas.iter().filter(|c| c.up && !c.sl2vl) {
        if c.info.capability_mask() & CAP_SL_MAPPING == 0 {
            continue;
        }
        out.push(Sl2VlSet {
            guid: c.port_guid,
            is_switch: false,
            path: c.path.clone(),
            ports: None,
            modifier: 0,
        });
    }
    out
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

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
    /// Subnet Administration requests answered "not supported" (`fabric_umad::sa`).
    pub sa_requests: u64,
}

struct Inner {
    cfg: UmadConfig,
    tp: Transport,
    state: Mutex<State>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<FabricEvent>>>,
    traps: Mutex<Option<mpsc::UnboundedReceiver<Smp>>>,
    wake: Arc<Notify>,
    sweeper_started: std::sync::atomic::AtomicBool,
    sweep_lock: tokio::sync::Mutex<()>,
    /// Light sweeps run (paces the probes of silent switches).
    sweeps: std::sync::atomic::AtomicU64,
    /// SL-to-VL programming: progress, the programmer's wake-up, and the waiters' wake-up.
    sl2vl: Mutex<Sl2VlProgress>,
    sl2vl_kick: Arc<Notify>,
    sl2vl_finished: Notify,
    /// Another subnet manager is master: no sweep, nothing is written.
    standby: AtomicBool,
}

impl Inner {
    /// Asks for an SL-to-VL pass that starts from now; returns its number.
    fn request_sl2vl(&self) -> u64 {
        let n = {
            let mut p = lock(&self.sl2vl);
            p.requested += 1;
            p.requested
        };
        self.sl2vl_kick.notify_one();
        n
    }

    /// After physical events: switches and CAs that came back get their tables again (they may
    /// have rebooted), and a pass writes what new or relinked ports lack. Nothing before the
    /// first pass was asked for (the daemon asks for it after its first commit).
    fn sl2vl_after_events(&self, events: &[FabricEvent]) {
        let wanted = events.iter().any(|e| {
            matches!(
                e,
                FabricEvent::LinkUp { .. } | FabricEvent::SwitchUp(_) | FabricEvent::EndPortUp(_)
            )
        });
        if !wanted || lock(&self.sl2vl).requested == 0 {
            return;
        }
        sl2vl_forget(&mut lock(&self.state), events);
        self.request_sl2vl();
    }
}

/// Forgets the SL-to-VL tables of the switches and CA ports that came back in `events` (they
/// may have rebooted with default tables). Relinked ports need no forgetting: pairs of ports
/// that were never linked were never written.
fn sl2vl_forget(st: &mut State, events: &[FabricEvent]) {
    for e in events {
        match e {
            FabricEvent::SwitchUp(g) => {
                if let Some(&i) = st.sw_by_guid.get(g) {
                    st.switches[i].sl2vl = Sl2VlDone::default();
                }
            }
            FabricEvent::EndPortUp(g) => {
                if let Some(&i) = st.ca_by_guid.get(g) {
                    st.cas[i].sl2vl = false;
                }
            }
            _ => {}
        }
    }
}

/// The background SL-to-VL programmer: runs a pass whenever one is requested.
async fn sl2vl_programmer(weak: Weak<Inner>, kick: Arc<Notify>) {
    loop {
        let due = {
            let Some(inner) = weak.upgrade() else { return };
            let p = lock(&inner.sl2vl);
            (p.completed < p.requested).then_some(p.requested)
        };
        match due {
            Some(n) => {
                let Some(inner) = weak.upgrade() else { return };
                sl2vl_pass(&inner, n).await;
            }
            None => {
                // A kick while not waiting leaves a permit: nothing is lost.
                tokio::select! {
                    () = kick.notified() => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

/// One pass: every missing table, at background priority, all in flight together (the
/// transport bounds the window). Records what was written and the failures, then wakes waiters.
async fn sl2vl_pass(inner: &Inner, n: u64) {
    let started = std::time::Instant::now();
    let targets = sl2vl_targets(&lock(&inner.state));
    lock(&inner.sl2vl).pending = targets.len() as u64;
    let table = SlToVl::escape(ESCAPE_VL).encode();
    let mut pend = Vec::with_capacity(targets.len());
    let mut failures: Vec<(Guid, String)> = Vec::new();
    for t in &targets {
        let route = dr(&t.path);
        match Smp::request(&route, METHOD_SET, ATTR_SL2VL, t.modifier, &table) {
            Ok(smp) => pend.push((t, inner.tp.submit_background(route, smp))),
            Err(e) => failures.push((t.guid, format!("{}: {e}", t.describe()))),
        }
    }
    let mut written = Vec::with_capacity(pend.len());
    for (t, rx) in pend {
        match transport::wait(rx).await {
            Ok(r) if r.smp.status() == 0 => written.push(t),
            Ok(r) => failures.push((t.guid, format!("{}: MAD status {:#06x}", t.describe(), r.smp.status()))),
            Err(e) => failures.push((t.guid, format!("{}: {e}", t.describe()))),
        }
    }
    {
        let mut st = lock(&inner.state);
        for t in &written {
            if t.is_switch {
                if let Some(&i) = st.sw_by_guid.get(&t.guid) {
                    match t.ports {
                        Some((a, b)) => st.switches[i].sl2vl.insert(a, b),
                        None => st.switches[i].sl2vl.all = true,
                    }
                }
            } else if let Some(&i) = st.ca_by_guid.get(&t.guid) {
                st.cas[i].sl2vl = true;
            }
        }
    }
    let failed = failures.len() as u64;
    if failed > 0 {
        tracing::warn!(
            failed,
            written = written.len(),
            first = %failures[0].1,
            "SL-to-VL programming left tables unwritten (the escape VL is not ready)"
        );
    } else if !written.is_empty() {
        tracing::info!(
            tables = written.len(),
            ms = started.elapsed().as_millis() as u64,
            "SL-to-VL tables programmed (escape VL ready)"
        );
    }
    {
        let mut p = lock(&inner.sl2vl);
        p.completed = p.completed.max(n);
        p.failed = failed;
        p.pending = failed;
        p.first_failure = failures.into_iter().next();
        p.written += written.len() as u64;
        if failed == 0 && (!written.is_empty() || p.ready_at_unix_ms == 0) {
            p.ready_at_unix_ms = unix_ms();
        }
    }
    inner.sl2vl_finished.notify_waiters();
}

/// The `umad` southbound driver. Construct with [`UmadDriver::open`].
pub struct UmadDriver {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn tp_err(guid: Guid, op: &'static str, e: TransportError) -> DriverError {
    match e {
        TransportError::Timeout { attempts } => DriverError::Transient { guid, op, attempts },
        TransportError::Closed => DriverError::Protocol {
            guid: Some(guid),
            message: "umad transport closed".into(),
        },
        TransportError::Mad(m) => DriverError::Protocol {
            guid: Some(guid),
            message: m,
        },
    }
}

fn check_status(guid: Guid, what: &str, r: &Reply) -> Result<(), DriverError> {
    let s = r.smp.status();
    if s != 0 {
        return Err(DriverError::Protocol {
            guid: Some(guid),
            message: format!("{what}: MAD status {s:#06x}"),
        });
    }
    Ok(())
}

fn lid16(guid: Guid, lid: Lid) -> Result<u16, DriverError> {
    u16::try_from(lid).ok().filter(|l| *l <= 0xbfff).ok_or_else(|| {
        DriverError::InvalidLidPlan(format!(
            "LID {lid} of {} is not a unicast LID",
            fabric_topology::fmt_guid(guid)
        ))
    })
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
            },
            ttx,
        );
        let sm = tp.sm_identity();
        sm.priority.store(cfg.sm_priority, Ordering::Relaxed);
        sm.sm_key.store(cfg.sm_key, Ordering::Relaxed);
        sm.state.store(SM_STATE_DISCOVERING, Ordering::Relaxed);
        Ok(UmadDriver {
            inner: Arc::new(Inner {
                cfg,
                tp,
                state: Mutex::new(State::default()),
                subscribers: Mutex::new(Vec::new()),
                traps: Mutex::new(Some(trx)),
                wake: Arc::new(Notify::new()),
                sweeper_started: false.into(),
                sweep_lock: tokio::sync::Mutex::new(()),
                sweeps: 0.into(),
                sl2vl: Mutex::new(Sl2VlProgress::default()),
                sl2vl_kick: Arc::new(Notify::new()),
                sl2vl_finished: Notify::new(),
                standby: AtomicBool::new(false),
            }),
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
        let device = cfg.device.clone();
        let (tx, mut rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("fabric-umad-open".into())
            .spawn(move || {
                let _ = tx.send(Self::open(cfg));
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

    /// Counters of the transport (SMPs, retries, failures, traps).
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
        }
    }

    /// Sends one SMP and returns the reply (for tools and byte-image capture).
    pub async fn raw_call(
        &self,
        route: Route,
        method: u8,
        attr: u16,
        modifier: u32,
        data: &[u8; 64],
    ) -> Result<Smp, DriverError> {
        let r = self
            .inner
            .tp
            .call(route, method, attr, modifier, data)
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
        light_sweep(&self.inner).await
    }

    fn ensure_sweeper(&self) {
        if self.inner.sweeper_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.inner.sweeper_started.store(false, Ordering::SeqCst);
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        if let Some(mut traps) = lock(&self.inner.traps).take() {
            let w = weak.clone();
            rt.spawn(async move {
                while let Some(smp) = traps.recv().await {
                    let Some(inner) = w.upgrade() else { return };
                    if smp.attr_id() == ATTR_NOTICE {
                        let n = Notice::decode(smp.data());
                        if n.generic && n.trap_number == 128 {
                            inner.wake.notify_one();
                        }
                    }
                }
            });
        }
        let interval = self.inner.cfg.sweep_interval();
        rt.spawn(sl2vl_programmer(weak.clone(), self.inner.sl2vl_kick.clone()));
        rt.spawn(sweeper(weak, self.inner.wake.clone(), interval));
    }
}

async fn sweeper(weak: Weak<Inner>, wake: Arc<Notify>, interval: Option<Duration>) {
    loop {
        let notified = wake.notified();
        match interval {
            Some(iv) => {
                tokio::select! {
                    () = tokio::time::sleep(iv) => {}
                    () = notified => {}
                }
            }
            None => {
                // No periodic sweep: only traps (and explicit wake-ups) start one. The timeout
                // only notices the driver going away.
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {
                        if weak.strong_count() == 0 {
                            return;
                        }
                        continue;
                    }
                    () = notified => {}
                }
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        light_sweep(&inner).await;
    }
}

type Pending = oneshot::Receiver<Result<Reply, TransportError>>;

fn submit(
    tp: &Transport,
    route: &Route,
    method: u8,
    attr: u16,
    modifier: u32,
    data: &[u8; 64],
) -> Result<Pending, DriverError> {
    let smp = Smp::request(route, method, attr, modifier, data).map_err(|e| DriverError::Protocol {
        guid: None,
        message: e.to_string(),
    })?;
    Ok(tp.submit(route.clone(), smp))
}

fn dr(path: &[u8]) -> Route {
    Route::Directed(path.to_vec())
}

const ZERO: [u8; 64] = [0u8; 64];

/// Result of discovery before it becomes a [`Fabric`].
struct Discovered {
    state: State,
}

async fn discover_all(inner: &Inner) -> Result<Discovered, DriverError> {
    let tp = &inner.tp;
    let mut st = State::default();
    // Level 0: the manager's own node.
    let r = transport::wait(submit(tp, &dr(&[]), METHOD_GET, ATTR_NODE_INFO, 0, &ZERO)?)
        .await
        .map_err(|e| tp_err(0, "NodeInfo of the local node", e))?;
    check_status(0, "NodeInfo of the local node", &r)?;
    // Frontier entries: (path to the node, the switch port it was reached from, its NodeInfo).
    let mut frontier: Vec<(Vec<u8>, ReachedFrom, NodeInfo)> = vec![(Vec::new(), None, NodeInfo::decode(r.smp.data()))];
    while !frontier.is_empty() {
        // Details of the new nodes of this level.
        let mut new_switches = Vec::new();
        let mut new_cas = Vec::new();
        for (path, from, ni) in frontier.drain(..) {
            match ni.node_type {
                NODE_TYPE_SWITCH => {
                    let peer = Peer::Switch {
                        guid: ni.node_guid,
                        port: ni.local_port,
                    };
                    if st.sw_by_guid.contains_key(&ni.node_guid) {
                        if let Some((g, p)) = from {
                            link(&mut st, g, p, peer);
                        }
                        continue;
                    }
                    let rt = dr(&path);
                    let desc = submit(tp, &rt, METHOD_GET, ATTR_NODE_DESC, 0, &ZERO)?;
                    let si = submit(tp, &rt, METHOD_GET, ATTR_SWITCH_INFO, 0, &ZERO)?;
                    let mut pis = Vec::with_capacity(ni.num_ports as usize + 1);
                    for p in 0..=ni.num_ports {
                        pis.push(submit(tp, &rt, METHOD_GET, ATTR_PORT_INFO, u32::from(p), &ZERO)?);
                    }
                    let idx = st.switches.len();
                    st.sw_by_guid.insert(ni.node_guid, idx);
                    st.switches.push(SwitchRec {
                        guid: ni.node_guid,
                        desc: String::new(),
                        nports: ni.num_ports,
                        path: path.clone(),
                        lid: 0,
                        info: SwitchInfo::decode(&ZERO),
                        ports: vec![PortRec { info: None, peer: None }; ni.num_ports as usize + 1],
                        lft: HashMap::new(),
                        up: true,
                        reached: true,
                        responsive: true,
                        sl2vl: Sl2VlDone::default(),
                    });
                    if st.local.is_none() {
                        st.local = Some(Peer::Switch {
                            guid: ni.node_guid,
                            port: 0,
                        });
                    }
                    if let Some((g, p)) = from {
                        link(&mut st, g, p, peer);
                    }
                    new_switches.push((idx, ni, desc, si, pis));
                }
                NODE_TYPE_CA | NODE_TYPE_ROUTER => {
                    if st.ca_by_guid.contains_key(&ni.port_guid) {
                        continue;
                    }
                    let rt = dr(&path);
                    let desc = submit(tp, &rt, METHOD_GET, ATTR_NODE_DESC, 0, &ZERO)?;
                    let pi = submit(tp, &rt, METHOD_GET, ATTR_PORT_INFO, u32::from(ni.local_port), &ZERO)?;
                    new_cas.push((path, from, ni, desc, pi));
                }
                _ => {}
            }
        }
        let mut next: Vec<(Vec<u8>, ReachedFrom)> = Vec::new();
        for (idx, ni, desc, si, pis) in new_switches {
            let g = ni.node_guid;
            let d = transport::wait(desc).await;
            let s = transport::wait(si).await;
            let sw = &mut st.switches[idx];
            if let Ok(d) = &d {
                sw.desc = decode_node_desc(d.smp.data());
            }
            // A switch that answered NodeInfo but then stops answering is kept, down and
            // not crossed (the light sweep reports it up if it answers again).
            let s = match s {
                Ok(s) if s.smp.status() == 0 => s,
                _ => {
                    sw.up = false;
                    sw.responsive = false;
                    for pi in pis {
                        let _ = transport::wait(pi).await;
                    }
                    continue;
                }
            };
            sw.info = SwitchInfo::decode(s.smp.data());
            for (p, pi) in pis.into_iter().enumerate() {
                // A port whose PortInfo is lost is treated as down.
                let Ok(r) = transport::wait(pi).await else { continue };
                if r.smp.status() != 0 {
                    continue;
                }
                let info = PortInfo::decode(r.smp.data());
                if p == 0 {
                    sw.lid = info.lid();
                } else if live(&info) && p as u8 != ni.local_port {
                    let mut np = sw.path.clone();
                    np.push(p as u8);
                    next.push((np, Some((g, p as u8))));
                }
                sw.ports[p].info = Some(info);
            }
        }
        for (path, from, ni, desc, pi) in new_cas {
            let g = ni.port_guid;
            let d = transport::wait(desc).await;
            let p = transport::wait(pi).await;
            // The manager's own port must answer; another CA that answered NodeInfo but not its
            // PortInfo is kept, down (no LID is written to it).
            let info = match p {
                Ok(p) if p.smp.status() == 0 => Some(PortInfo::decode(p.smp.data())),
                Ok(p) if path.is_empty() => {
                    check_status(g, "PortInfo of the local port", &p)?;
                    None
                }
                Err(e) if path.is_empty() => return Err(tp_err(g, "PortInfo of the local port", e)),
                _ => None,
            };
            let up = info.is_some();
            let info = info.unwrap_or_else(|| PortInfo::decode(&ZERO));
            let desc = match &d {
                Ok(d) if d.smp.status() == 0 => decode_node_desc(d.smp.data()),
                _ => String::new(),
            };
            let idx = st.cas.len();
            st.ca_by_guid.insert(g, idx);
            st.cas.push(CaRec {
                port_guid: g,
                node_guid: ni.node_guid,
                desc,
                port_num: ni.local_port,
                nports: ni.num_ports,
                path: path.clone(),
                info: info.clone(),
                attach: from,
                up,
                sl2vl: false,
            });
            if let Some((sg, sp)) = from {
                link(&mut st, sg, sp, Peer::Ca { port_guid: g });
            }
            if path.is_empty() {
                // The manager's own CA: go on through its port only.
                st.local = Some(Peer::Ca { port_guid: g });
                st.sm_lid = info.lid();
                if live(&info) {
                    next.push((vec![ni.local_port], None));
                }
            }
        }
        // NodeInfo of every neighbour of this level.
        let mut pend = Vec::with_capacity(next.len());
        for (path, from) in next {
            let rx = submit(tp, &dr(&path), METHOD_GET, ATTR_NODE_INFO, 0, &ZERO)?;
            pend.push((path, from, rx));
        }
        for (path, from, rx) in pend {
            // A neighbour that does not answer (dead, or the link just went) is left out.
            let Ok(r) = transport::wait(rx).await else { continue };
            if r.smp.status() != 0 {
                continue;
            }
            let ni = NodeInfo::decode(r.smp.data());
            let from = match from {
                Some(f) => Some(f),
                None => {
                    // Reached from the local CA: record the attachment on the CA side later.
                    if let Some(Peer::Ca { port_guid }) = st.local {
                        if ni.node_type == NODE_TYPE_SWITCH {
                            if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
                                st.cas[ci].attach = Some((ni.node_guid, ni.local_port));
                            }
                        }
                    }
                    None
                }
            };
            frontier.push((path, from, ni));
        }
    }
    // Attachment of the local CA: mark the switch port side.
    if let Some(Peer::Ca { port_guid }) = st.local {
        if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
            if let Some((sg, sp)) = st.cas[ci].attach {
                link(&mut st, sg, sp, Peer::Ca { port_guid });
            }
        }
    }
    Ok(Discovered { state: st })
}

/// Records a cable on both ends (the far end of a switch-to-switch cable is recorded too, so
/// that the port a switch was reached through knows its peer).
fn link(st: &mut State, sw: Guid, port: u8, peer: Peer) {
    if let Some(&i) = st.sw_by_guid.get(&sw) {
        if let Some(p) = st.switches[i].ports.get_mut(port as usize) {
            p.peer = Some(peer);
        }
    }
    if let Peer::Switch { guid, port: rp } = peer {
        if let Some(&j) = st.sw_by_guid.get(&guid) {
            if let Some(p) = st.switches[j].ports.get_mut(rp as usize) {
                p.peer = Some(Peer::Switch { guid: sw, port });
            }
        }
    }
}

fn build_fabric(st: &State) -> Result<Fabric, DriverError> {
    let topo = |e: fabric_topology::TopologyError| DriverError::Topology {
        source_name: "umad discovery".into(),
        message: e.to_string(),
    };
    let mut b = FabricBuilder::new();
    for s in &st.switches {
        let id = b.add_switch(s.guid, s.desc.clone(), s.nports).map_err(topo)?;
        b.switch_mut(id).up = s.up;
    }
    for c in &st.cas {
        let id = b
            .add_end_port(
                c.port_guid,
                c.node_guid,
                c.desc.clone(),
                c.port_num,
                c.nports,
                NodeType::Compute,
            )
            .map_err(topo)?;
        b.end_port_mut(id).up = c.up;
    }
    for s in &st.switches {
        let Some(a) = b.switch_by_guid(s.guid) else { continue };
        for (p, rec) in s.ports.iter().enumerate().skip(1) {
            let here = rec.info.as_ref().is_some_and(live) && s.up;
            match rec.peer {
                Some(Peer::Switch { guid, port }) => {
                    let Some(bb) = b.switch_by_guid(guid) else { continue };
                    // Each link once (from its lower end), self-loops included; live only when
                    // both ends are (the simulator disables one end physically).
                    if (s.guid, p as u8) < (guid, port) {
                        let far_live = st.sw_by_guid.get(&guid).is_some_and(|&j| {
                            let o = &st.switches[j];
                            o.up && o
                                .ports
                                .get(port as usize)
                                .and_then(|r| r.info.as_ref())
                                .is_some_and(live)
                        });
                        b.connect_switches(a, p as u8, bb, port).map_err(topo)?;
                        let state = if here && far_live {
                            LinkState::Up
                        } else {
                            LinkState::Down
                        };
                        b.switch_mut(a).ports[p].state = state;
                        b.switch_mut(bb).ports[port as usize].state = state;
                    }
                }
                Some(Peer::Ca { port_guid }) => {
                    let Some(ep) = b.end_port_by_guid(port_guid) else {
                        continue;
                    };
                    if b.end_port(ep).attach.is_none() {
                        b.connect_end_port(ep, a, p as u8).map_err(topo)?;
                        b.switch_mut(a).ports[p].state = if here { LinkState::Up } else { LinkState::Down };
                    }
                }
                None => {}
            }
            if let Some(i) = &rec.info {
                b.switch_mut(a).ports[p].speed = i.speed_string();
            }
        }
    }
    Ok(b.build())
}

/// The cable at switch `i` port `p` carries traffic: this end is live, and so is the far end
/// when it is a known switch port (the simulator disables one end only).
fn cable_live(st: &State, i: usize, p: usize) -> bool {
    let Some(r) = st.switches[i].ports.get(p) else {
        return false;
    };
    if !r.info.as_ref().is_some_and(live) {
        return false;
    }
    match r.peer {
        Some(Peer::Switch { guid, port }) => st.sw_by_guid.get(&guid).is_none_or(|&j| {
            st.switches[j]
                .ports
                .get(port as usize)
                .and_then(|o| o.info.as_ref())
                .is_none_or(live)
        }),
        _ => true,
    }
}

/// Directed routes to every switch and CA over live links, breadth-first from the local node.
/// Switches that do not answer ([`SwitchRec::responsive`] false) get a route but are not crossed.
/// Sets [`SwitchRec::up`] (reached and answering); returns the switches reached.
fn recompute_paths(st: &mut State) -> HashSet<Guid> {
    let mut seen: HashSet<Guid> = HashSet::new();
    let mut q: VecDeque<(usize, Vec<u8>)> = VecDeque::new();
    match st.local {
        Some(Peer::Switch { guid, .. }) => {
            if let Some(&i) = st.sw_by_guid.get(&guid) {
                q.push_back((i, Vec::new()));
            }
        }
        Some(Peer::Ca { port_guid }) => {
            if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
                let c = &st.cas[ci];
                if let Some((sg, _)) = c.attach {
                    if let Some(&i) = st.sw_by_guid.get(&sg) {
                        q.push_back((i, vec![c.port_num]));
                    }
                }
            }
        }
        None => return seen,
    }
    for s in &mut st.switches {
        s.up = false;
        s.reached = false;
    }
    while let Some((i, path)) = q.pop_front() {
        if !seen.insert(st.switches[i].guid) {
            continue;
        }
        st.switches[i].path = path.clone();
        st.switches[i].reached = true;
        if !st.switches[i].responsive {
            continue;
        }
        st.switches[i].up = true;
        let ports: Vec<(u8, Peer)> = st.switches[i]
            .ports
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(p, _)| cable_live(st, i, *p))
            .filter_map(|(p, r)| r.peer.map(|x| (p as u8, x)))
            .collect();
        for (p, peer) in ports {
            let mut np = path.clone();
            np.push(p);
            match peer {
                Peer::Switch { guid, .. } => {
                    if let Some(&j) = st.sw_by_guid.get(&guid) {
                        if !seen.contains(&guid) {
                            q.push_back((j, np));
                        }
                    }
                }
                Peer::Ca { port_guid } => {
                    if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
                        if !st.cas[ci].path.is_empty() || Some(Peer::Ca { port_guid }) != st.local {
                            st.cas[ci].path = np;
                        }
                    }
                }
            }
        }
    }
    seen
}

/// A directed route to switch `target` over live links that does not cross the cable at
/// `avoid` (switch GUID, port), through answering switches only; `None` when there is none.
/// Used to change a port's physical state without cutting the route of the SMP doing it.
fn path_avoiding(st: &State, target: Guid, avoid: (Guid, u8)) -> Option<Vec<u8>> {
    let far = st.sw_by_guid.get(&avoid.0).and_then(|&i| {
        match st.switches[i].ports.get(avoid.1 as usize).and_then(|r| r.peer) {
            Some(Peer::Switch { guid, port }) => Some((guid, port)),
            _ => None,
        }
    });
    let start = match st.local {
        Some(Peer::Switch { guid, .. }) => (*st.sw_by_guid.get(&guid)?, Vec::new()),
        Some(Peer::Ca { port_guid }) => {
            let c = &st.cas[*st.ca_by_guid.get(&port_guid)?];
            let (sg, _) = c.attach?;
            (*st.sw_by_guid.get(&sg)?, vec![c.port_num])
        }
        None => return None,
    };
    let mut seen: HashSet<Guid> = HashSet::new();
    let mut q: VecDeque<(usize, Vec<u8>)> = VecDeque::from([start]);
    while let Some((i, path)) = q.pop_front() {
        let s = &st.switches[i];
        if !seen.insert(s.guid) {
            continue;
        }
        if s.guid == target {
            return Some(path);
        }
        if !s.responsive {
            continue;
        }
        for (p, r) in s.ports.iter().enumerate().skip(1) {
            let here = (s.guid, p as u8);
            if here == avoid || Some(here) == far || !cable_live(st, i, p) {
                continue;
            }
            if let Some(Peer::Switch { guid, .. }) = r.peer {
                if let Some(&j) = st.sw_by_guid.get(&guid) {
                    if !seen.contains(&guid) {
                        let mut np = path.clone();
                        np.push(p as u8);
                        q.push_back((j, np));
                    }
                }
            }
        }
    }
    None
}

fn emit(inner: &Inner, events: &[FabricEvent]) {
    if events.is_empty() {
        return;
    }
    let mut subs = lock(&inner.subscribers);
    subs.retain(|s| events.iter().all(|e| s.send(e.clone()).is_ok()));
}

/// SwitchInfo of each `(switch, route)`, all in flight together; the switches that answered.
async fn probe_switches(tp: &Transport, targets: &[(Guid, Vec<u8>)]) -> HashMap<Guid, SwitchInfo> {
    let mut pend = Vec::with_capacity(targets.len());
    for (g, path) in targets {
        if let Ok(rx) = submit(tp, &dr(path), METHOD_GET, ATTR_SWITCH_INFO, 0, &ZERO) {
            pend.push((*g, rx));
        }
    }
    let mut out = HashMap::with_capacity(pend.len());
    for (g, rx) in pend {
        if let Ok(r) = transport::wait(rx).await {
            if r.smp.status() == 0 {
                out.insert(g, SwitchInfo::decode(r.smp.data()));
            }
        }
    }
    out
}

/// Records fresh PortInfo reads of switch ports. Ports whose liveness changed give link or
/// end-port events (each cable once: the far end's record is updated with it); live ports in
/// INIT (and the CA behind a CA port that came back) are added to `to_arm`.
fn apply_port_reads(
    st: &mut State,
    results: Vec<(Guid, u8, PortInfo)>,
    events: &mut Vec<FabricEvent>,
    to_arm: &mut Vec<(Route, u32, PortInfo)>,
) {
    for (g, p, info) in results {
        let Some(&i) = st.sw_by_guid.get(&g) else { continue };
        let path = st.switches[i].path.clone();
        let Some(rec) = st.switches[i].ports.get(p as usize) else {
            continue;
        };
        let was = rec.info.as_ref().is_some_and(live);
        let now = live(&info);
        let peer = rec.peer;
        st.switches[i].ports[p as usize].info = Some(info.clone());
        if now && info.state() == PortState::Init {
            let mut a = info.for_set();
            a.set_state(PortState::Armed);
            to_arm.push((dr(&path), u32::from(p), a));
        }
        if was == now {
            continue;
        }
        match peer {
            Some(Peer::Switch { guid, port }) => {
                // Both ends are updated together so that the link is reported once.
                if let Some(&j) = st.sw_by_guid.get(&guid) {
                    if let Some(other) = st.switches[j].ports.get_mut(port as usize) {
                        let other_up = other.info.as_ref().is_some_and(live);
                        if other_up != now {
                            if let Some(oi) = other.info.as_mut() {
                                oi.set_state(if now { PortState::Init } else { PortState::Down });
                                if now {
                                    oi.set_phys_state(PHYS_LINK_UP);
                                }
                            }
                        } else if (guid, port) < (g, p) {
                            // Already reported from the other end.
                            continue;
                        }
                    }
                }
                events.push(if now {
                    FabricEvent::LinkUp { switch: g, port: p }
                } else {
                    FabricEvent::LinkDown { switch: g, port: p }
                });
            }
            Some(Peer::Ca { port_guid }) => {
                if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
                    st.cas[ci].up = now;
                    if now {
                        let mut np = path.clone();
                        np.push(p);
                        let mut a = st.cas[ci].info.for_set();
                        a.set_state(PortState::Armed);
                        to_arm.push((dr(&np), u32::from(st.cas[ci].port_num), a));
                    }
                }
                events.push(if now {
                    FabricEvent::EndPortUp(port_guid)
                } else {
                    FabricEvent::EndPortDown(port_guid)
                });
            }
            None => {}
        }
    }
}

/// One light sweep.
///
/// 1. SwitchInfo of every switch over its current directed route.
/// 2. For the switches that answered with PortStateChange set (or that came back): clear it
///    (write 1), read PortInfo of their ports, emit link and end-port events; routes are
///    recomputed over the live links.
/// 3. Switches that did not answer are asked again over the new routes, which avoid every
///    silent switch; step 2 runs for those that answer, and so on until no new route appears (a
///    switch behind a dead one or behind a failed cable is not reported with it). Those still
///    silent are reported down ([`FabricEvent::SwitchDown`], once) and probed again by every
///    later sweep; one that answers again is reported up.
/// 4. Ports that came back in INIT are armed, then activated.
async fn light_sweep(inner: &Inner) -> Vec<FabricEvent> {
    let _guard = inner.sweep_lock.lock().await;
    if inner.standby.load(Ordering::Relaxed) {
        // The master handles the fabric (its traps, its port states).
        return Vec::new();
    }
    let tp = &inner.tp;
    let n = inner.sweeps.fetch_add(1, Ordering::Relaxed);
    let (targets, was_up) = {
        let st = lock(&inner.state);
        // Switches without a route are not asked (a link coming up brings them back); silent
        // ones only every SILENT_PROBE_EVERY sweeps, as each costs a full timeout per attempt.
        let targets: Vec<(Guid, Vec<u8>)> = st
            .switches
            .iter()
            .filter(|s| s.up || (s.reached && n.is_multiple_of(SILENT_PROBE_EVERY)))
            .map(|s| (s.guid, s.path.clone()))
            .collect();
        let was_up: HashMap<Guid, bool> = st.switches.iter().map(|s| (s.guid, s.up)).collect();
        (targets, was_up)
    };
    let mut fresh = probe_switches(tp, &targets).await;
    let probed: HashSet<Guid> = targets.iter().map(|(g, _)| *g).collect();
    let mut tried: HashMap<Guid, Vec<u8>> = targets.into_iter().filter(|(g, _)| !fresh.contains_key(g)).collect();
    {
        // Silent switches not asked this time are asked only if a new route to them appears.
        let st = lock(&inner.state);
        for s in st
            .switches
            .iter()
            .filter(|s| !s.responsive && !probed.contains(&s.guid))
        {
            tried.insert(s.guid, s.path.clone());
        }
    }
    let mut silent: HashSet<Guid> = tried.keys().copied().collect();
    let mut events = Vec::new();
    let mut came_back = Vec::new();
    let mut to_arm: Vec<(Route, u32, PortInfo)> = Vec::new();
    // Each round either stops or moves at least one switch from silent to answered.
    loop {
        let flagged: Vec<(Guid, Vec<u8>, SwitchInfo, u8)> = {
            let st = lock(&inner.state);
            let mut f: Vec<_> = fresh
                .iter()
                .filter(|(g, si)| si.port_state_change() || !was_up.get(g).copied().unwrap_or(false))
                .filter_map(|(g, si)| {
                    let i = *st.sw_by_guid.get(g)?;
                    Some((*g, st.switches[i].path.clone(), si.clone(), st.switches[i].nports))
                })
                .collect();
            f.sort_unstable_by_key(|x| x.0);
            f
        };
        came_back.extend(
            fresh
                .keys()
                .filter(|g| !was_up.get(g).copied().unwrap_or(true))
                .copied(),
        );
        fresh.clear();
        let mut clears = Vec::with_capacity(flagged.len());
        let mut port_reads = Vec::new();
        for (g, path, si, nports) in &flagged {
            let mut set = si.clone();
            set.set_port_state_change(true);
            if let Ok(rx) = submit(tp, &dr(path), METHOD_SET, ATTR_SWITCH_INFO, 0, &set.raw) {
                clears.push(rx);
            }
            for p in 1..=*nports {
                if let Ok(rx) = submit(tp, &dr(path), METHOD_GET, ATTR_PORT_INFO, u32::from(p), &ZERO) {
                    port_reads.push((*g, p, rx));
                }
            }
        }
        for rx in clears {
            let _ = transport::wait(rx).await;
        }
        let mut results = Vec::with_capacity(port_reads.len());
        for (g, p, rx) in port_reads {
            if let Ok(r) = transport::wait(rx).await {
                if r.smp.status() == 0 {
                    results.push((g, p, PortInfo::decode(r.smp.data())));
                }
            }
        }
        let retry: Vec<(Guid, Vec<u8>)> = {
            let mut st = lock(&inner.state);
            apply_port_reads(&mut st, results, &mut events, &mut to_arm);
            for s in &mut st.switches {
                s.responsive = !silent.contains(&s.guid);
            }
            let reached = recompute_paths(&mut st);
            st.switches
                .iter()
                .filter(|s| silent.contains(&s.guid) && reached.contains(&s.guid))
                .filter(|s| tried.get(&s.guid) != Some(&s.path))
                .map(|s| (s.guid, s.path.clone()))
                .collect()
        };
        if retry.is_empty() {
            break;
        }
        fresh = probe_switches(tp, &retry).await;
        tried.extend(retry);
        if fresh.is_empty() {
            break;
        }
        for g in fresh.keys() {
            silent.remove(g);
        }
    }
    {
        let mut st = lock(&inner.state);
        for s in &mut st.switches {
            s.responsive = !silent.contains(&s.guid);
        }
        recompute_paths(&mut st);
    }
    came_back.sort_unstable();
    let mut all: Vec<FabricEvent> = came_back.into_iter().map(FabricEvent::SwitchUp).collect();
    all.append(&mut events);
    let mut down: Vec<Guid> = silent
        .into_iter()
        .filter(|g| was_up.get(g).copied().unwrap_or(false))
        .collect();
    down.sort_unstable();
    all.extend(down.into_iter().map(FabricEvent::SwitchDown));
    activate(tp, &to_arm).await;
    // SL-to-VL bookkeeping first: once the loop sees the events, the escape VL is not ready.
    inner.sl2vl_after_events(&all);
    emit(inner, &all);
    all
}

/// ARMED on every listed port, then ACTIVE (both ends of a link must be armed before either is
/// activated). Failures are left to the next sweep.
async fn activate(tp: &Transport, ports: &[(Route, u32, PortInfo)]) -> usize {
    let mut retries = 0;
    for target in [PortState::Armed, PortState::Active] {
        let mut pend = Vec::with_capacity(ports.len());
        for (rt, p, info) in ports {
            let mut a = info.clone();
            a.set_state(target);
            if let Ok(rx) = submit(tp, rt, METHOD_SET, ATTR_PORT_INFO, *p, &a.raw) {
                pend.push(rx);
            }
        }
        for rx in pend {
            if let Ok(r) = transport::wait(rx).await {
                retries += r.attempts as usize - 1;
            }
        }
    }
    retries
}

#[async_trait]
impl SouthboundDriver for UmadDriver {
    fn caps(&self) -> DriverCaps {
        let st = lock(&self.inner.state);
        // Switches that never answered SwitchInfo have no known capacity.
        let max_lft_blocks = st
            .switches
            .iter()
            .filter(|s| s.info.linear_fdb_cap() > 0)
            .map(SwitchRec::max_blocks)
            .min();
        DriverCaps {
            name: "umad",
            max_lid: fabric_routing::IB_MAX_UNICAST_LID,
            max_lft_blocks,
            escape_vl: Some(ESCAPE_VL),
        }
    }

    async fn discover(&self) -> Result<Fabric, DriverError> {
        let _guard = self.inner.sweep_lock.lock().await;
        let d = discover_all(&self.inner).await?;
        let mut new = d.state;
        {
            let mut st = lock(&self.inner.state);
            // Keep what the driver knew: LFT caches, and switches that vanished (reported down).
            for s in &mut new.switches {
                if let Some(&i) = st.sw_by_guid.get(&s.guid) {
                    s.lft = std::mem::take(&mut st.switches[i].lft);
                    s.sl2vl = std::mem::take(&mut st.switches[i].sl2vl);
                }
            }
            for c in &mut new.cas {
                if let Some(&i) = st.ca_by_guid.get(&c.port_guid) {
                    c.sl2vl = st.cas[i].sl2vl;
                }
            }
            for old in &st.switches {
                if !new.sw_by_guid.contains_key(&old.guid) {
                    let mut o = old.clone();
                    o.up = false;
                    o.reached = false;
                    o.responsive = false;
                    for p in &mut o.ports {
                        p.peer = None;
                    }
                    new.sw_by_guid.insert(o.guid, new.switches.len());
                    new.switches.push(o);
                }
            }
            if new.sm_lid == 0 {
                new.sm_lid = st.sm_lid;
            }
            new.lid_to_switch = new
                .switches
                .iter()
                .filter(|s| s.lid != 0)
                .map(|s| (s.lid, s.guid))
                .collect();
            *st = new;
        }
        let f = {
            let st = lock(&self.inner.state);
            let guid = match st.local {
                Some(Peer::Ca { port_guid }) => port_guid,
                Some(Peer::Switch { guid, .. }) => guid,
                None => 0,
            };
            self.inner.tp.sm_identity().guid.store(guid, Ordering::Relaxed);
            build_fabric(&st)?
        };
        drop(_guard);
        self.ensure_sweeper();
        Ok(f)
    }

    fn subscribe_events(&self) -> mpsc::UnboundedReceiver<FabricEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.inner.subscribers).push(tx);
        self.ensure_sweeper();
        rx
    }

    async fn configure_lids(&self, fabric: &Fabric, lids: &LidPlan) -> Result<(), DriverError> {
        if lids.switch_lid.len() != fabric.num_switches() || lids.end_port_base.len() != fabric.num_end_ports() {
            return Err(DriverError::InvalidLidPlan(format!(
                "plan covers {} switches and {} end ports, the fabric has {} and {}",
                lids.switch_lid.len(),
                lids.end_port_base.len(),
                fabric.num_switches(),
                fabric.num_end_ports()
            )));
        }
        let _guard = self.inner.sweep_lock.lock().await;
        let tp = &self.inner.tp;
        let top = lids.top();
        // Snapshot what we need, with the LIDs to write.
        struct Target {
            route: Route,
            port: u32,
            info: PortInfo,
        }
        let (sw_targets, ca_targets, sm_lid, sw_infos) = {
            let st = lock(&self.inner.state);
            let mut sm_lid = 0u16;
            let mut ca_targets = Vec::new();
            for id in fabric.end_port_ids() {
                let e = fabric.end_port(id);
                let Some(&ci) = st.ca_by_guid.get(&e.port_guid) else {
                    return Err(DriverError::UnknownEndPort(e.port_guid));
                };
                let c = &st.cas[ci];
                let base = lid16(e.port_guid, lids.base_lid(id))?;
                if Some(Peer::Ca { port_guid: c.port_guid }) == st.local {
                    sm_lid = base;
                }
                ca_targets.push((
                    c.port_guid,
                    dr(&c.path),
                    u32::from(c.port_num),
                    c.info.clone(),
                    base,
                    c.up,
                ));
            }
            let mut sw_targets = Vec::new();
            let mut sw_infos = Vec::new();
            for id in fabric.switch_ids() {
                let s = fabric.switch(id);
                let Some(&i) = st.sw_by_guid.get(&s.guid) else {
                    return Err(DriverError::UnknownSwitch(s.guid));
                };
                let r = &st.switches[i];
                let lid = lid16(s.guid, lids.switch_lid(id))?;
                if Some(Peer::Switch { guid: r.guid, port: 0 }) == st.local {
                    sm_lid = lid;
                }
                if !r.up {
                    continue;
                }
                let Some(p0) = r.ports[0].info.clone() else { continue };
                sw_targets.push((r.guid, dr(&r.path), p0, lid));
                sw_infos.push((
                    r.guid,
                    dr(&r.path),
                    r.info.clone(),
                    r.max_blocks(),
                    r.ports.clone(),
                    r.nports,
                ));
            }
            (sw_targets, ca_targets, sm_lid, sw_infos)
        };
        let lmc = lids.lmc;
        // 1. LIDs: switch port 0 and CA ports.
        let mut pend = Vec::new();
        for (g, rt, p0, lid) in &sw_targets {
            let mut a = p0.for_set();
            a.set_lid(*lid);
            a.set_master_sm_lid(sm_lid);
            a.set_lmc(0);
            pend.push((
                *g,
                "PortInfo (switch LID)",
                submit(tp, rt, METHOD_SET, ATTR_PORT_INFO, 0, &a.raw)?,
            ));
        }
        for (g, rt, port, info, base, up) in &ca_targets {
            if !up {
                continue;
            }
            let mut a = info.for_set();
            a.set_lid(*base);
            a.set_master_sm_lid(sm_lid);
            a.set_lmc(lmc);
            if rt.hops() == 0 {
                a.set_capability_mask(a.capability_mask() | CAP_IS_SM);
            }
            pend.push((
                *g,
                "PortInfo (CA LID)",
                submit(tp, rt, METHOD_SET, ATTR_PORT_INFO, *port, &a.raw)?,
            ));
        }
        // 2. LinearFDBTop.
        let top16 =
            u16::try_from(top).map_err(|_| DriverError::InvalidLidPlan(format!("top LID {top} is above 0xffff")))?;
        for (g, rt, si, _, _, _) in &sw_infos {
            let mut s = si.clone();
            s.set_linear_fdb_top(top16.min(si.linear_fdb_cap().saturating_sub(1)));
            s.set_port_state_change(false);
            pend.push((
                *g,
                "SwitchInfo (LinearFDBTop)",
                submit(tp, rt, METHOD_SET, ATTR_SWITCH_INFO, 0, &s.raw)?,
            ));
        }
        for (g, op, rx) in pend {
            let r = transport::wait(rx).await.map_err(|e| tp_err(g, op, e))?;
            check_status(g, op, &r)?;
        }
        // 3. Port activation: INIT → ARMED on every port, then ACTIVE.
        let mut ports: Vec<Target> = Vec::new();
        for (_, rt, _, _, recs, _) in &sw_infos {
            for (p, rec) in recs.iter().enumerate().skip(1) {
                if let Some(i) = &rec.info {
                    if matches!(i.state(), PortState::Init | PortState::Armed) {
                        let mut a = i.for_set();
                        if i.vl_cap() >= 2 {
                            a.set_operational_vls(2);
                        }
                        ports.push(Target {
                            route: rt.clone(),
                            port: p as u32,
                            info: a,
                        });
                    }
                }
            }
        }
        for (_, rt, port, info, base, up) in &ca_targets {
            if *up && matches!(info.state(), PortState::Init | PortState::Armed) {
                let mut a = info.for_set();
                a.set_lid(*base);
                a.set_master_sm_lid(sm_lid);
                a.set_lmc(lmc);
                if info.vl_cap() >= 2 {
                    a.set_operational_vls(2);
                }
                ports.push(Target {
                    route: rt.clone(),
                    port: *port,
                    info: a,
                });
            }
        }
        let list: Vec<(Route, u32, PortInfo)> = ports.into_iter().map(|t| (t.route, t.port, t.info)).collect();
        activate(tp, &list).await;
        // Our own activation raised PortStateChange on every switch (and trap 128): clear it
        // before the port states are re-read below, so that the light sweep the trap wakes
        // finds nothing to re-read (it would read every port of every switch again, competing
        // with the LFT upload that follows). A change after the clear raises the flag again.
        let mut clears = Vec::with_capacity(sw_infos.len());
        for (_, rt, si, _, _, _) in &sw_infos {
            let mut s = si.clone();
            s.set_linear_fdb_top(top16.min(si.linear_fdb_cap().saturating_sub(1)));
            s.set_port_state_change(true);
            clears.push(submit(tp, rt, METHOD_SET, ATTR_SWITCH_INFO, 0, &s.raw)?);
        }
        for rx in clears {
            // A lost clear only costs a light sweep of that switch.
            let _ = transport::wait(rx).await;
        }
        // 4. Re-read the port states and record the new LIDs.
        {
            let mut st = lock(&self.inner.state);
            st.sm_lid = sm_lid;
            for (g, _, _, lid) in &sw_targets {
                if let Some(&i) = st.sw_by_guid.get(g) {
                    st.switches[i].lid = *lid;
                    if let Some(p0) = st.switches[i].ports[0].info.as_mut() {
                        p0.set_lid(*lid);
                        p0.set_master_sm_lid(sm_lid);
                    }
                    st.switches[i].info.set_linear_fdb_top(top16);
                }
            }
            for (g, _, _, _, base, _) in &ca_targets {
                if let Some(&ci) = st.ca_by_guid.get(g) {
                    st.cas[ci].info.set_lid(*base);
                    st.cas[ci].info.set_lmc(lmc);
                    st.cas[ci].info.set_master_sm_lid(sm_lid);
                }
            }
            st.lid_to_switch = st
                .switches
                .iter()
                .filter(|s| s.lid != 0)
                .map(|s| (s.lid, s.guid))
                .collect();
        }
        self.refresh_port_states().await;
        // LIDs assigned, ports active: the subnet is up with this manager as its master.
        self.inner
            .tp
            .sm_identity()
            .state
            .store(SM_STATE_MASTER, Ordering::Relaxed);
        // SL-to-VL is not programmed here: the first generation after start is a direct upload
        // that needs no escape VL, and the tables (tens of thousands of Sets) would compete with
        // its LFT upload. `escape_vl_ready` programs them (the daemon asks for it after the
        // first commit).
        self.ensure_sweeper();
        Ok(())
    }

    async fn write_lft_blocks(&self, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
        let tp = &self.inner.tp;
        let mut pend = Vec::with_capacity(blocks.len());
        let mut skipped = 0usize;
        {
            let st = lock(&self.inner.state);
            for b in blocks {
                let Some(&i) = st.sw_by_guid.get(&b.switch) else {
                    return Err(DriverError::UnknownSwitch(b.switch));
                };
                let s = &st.switches[i];
                if !s.up {
                    return Err(DriverError::Unreachable { guid: s.guid });
                }
                let max = s.max_blocks();
                if b.block >= max {
                    return Err(DriverError::BlockOutOfRange {
                        guid: s.guid,
                        block: b.block,
                        max_blocks: max,
                    });
                }
                if s.lft.get(&b.block) == Some(&b.entries) {
                    skipped += 1;
                    continue;
                }
                let mut data = [0u8; 64];
                data.copy_from_slice(&b.entries);
                pend.push((b, submit(tp, &dr(&s.path), METHOD_SET, ATTR_LFT, b.block, &data)?));
            }
        }
        let mut report = WriteReport {
            blocks_written: skipped,
            retries: 0,
        };
        let mut first_err = None;
        let mut done = Vec::with_capacity(pend.len());
        for (b, rx) in pend {
            match transport::wait(rx).await {
                Ok(r) => {
                    report.retries += r.attempts as usize - 1;
                    if let Err(e) = check_status(b.switch, "LinearForwardingTable Set", &r) {
                        first_err.get_or_insert(e);
                        continue;
                    }
                    report.blocks_written += 1;
                    done.push(b);
                }
                Err(e) => {
                    first_err.get_or_insert(tp_err(b.switch, "LFT block write", e));
                }
            }
        }
        {
            let mut st = lock(&self.inner.state);
            for b in done {
                if let Some(&i) = st.sw_by_guid.get(&b.switch) {
                    st.switches[i].lft.insert(b.block, b.entries);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    async fn read_lft_block(&self, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
        let (path, max) = {
            let st = lock(&self.inner.state);
            let Some(&i) = st.sw_by_guid.get(&switch) else {
                return Err(DriverError::UnknownSwitch(switch));
            };
            (st.switches[i].path.clone(), st.switches[i].max_blocks())
        };
        if block >= max {
            return Err(DriverError::BlockOutOfRange {
                guid: switch,
                block,
                max_blocks: max,
            });
        }
        let r = self
            .inner
            .tp
            .call(dr(&path), METHOD_GET, ATTR_LFT, block, &ZERO)
            .await
            .map_err(|e| tp_err(switch, "LFT block read", e))?;
        check_status(switch, "LinearForwardingTable Get", &r)?;
        let mut out = [0u8; BLOCK_SIZE];
        out.copy_from_slice(&r.smp.data()[..BLOCK_SIZE]);
        {
            let mut st = lock(&self.inner.state);
            if let Some(&i) = st.sw_by_guid.get(&switch) {
                st.switches[i].lft.insert(block, out);
            }
        }
        Ok(out)
    }

    async fn set_port_state(&self, switch: Guid, port: PortNum, up: bool) -> Result<(), DriverError> {
        let _guard = self.inner.sweep_lock.lock().await;
        let path = {
            let st = lock(&self.inner.state);
            let Some(&i) = st.sw_by_guid.get(&switch) else {
                return Err(DriverError::UnknownSwitch(switch));
            };
            let s = &st.switches[i];
            if port == 0 || port > s.nports {
                return Err(DriverError::InvalidPort {
                    guid: switch,
                    port,
                    reason: "not an external port of this switch",
                });
            }
            if !s.up {
                return Err(DriverError::Unreachable { guid: switch });
            }
            // Not over the cable being changed: the reply would not come back.
            path_avoiding(&st, switch, (switch, port)).ok_or(DriverError::InvalidPort {
                guid: switch,
                port,
                reason: "every route of the manager to this switch crosses this port",
            })?
        };
        let tp = &self.inner.tp;
        let r = tp
            .call(dr(&path), METHOD_GET, ATTR_PORT_INFO, u32::from(port), &ZERO)
            .await
            .map_err(|e| tp_err(switch, "PortInfo Get", e))?;
        check_status(switch, "PortInfo Get", &r)?;
        let mut a = PortInfo::decode(r.smp.data()).for_set();
        a.set_phys_state(if up {
            self.inner.cfg.enable_phys_state
        } else {
            PHYS_DISABLED
        });
        let r = tp
            .call(dr(&path), METHOD_SET, ATTR_PORT_INFO, u32::from(port), &a.raw)
            .await
            .map_err(|e| tp_err(switch, "PortInfo Set (physical state)", e))?;
        check_status(switch, "PortInfo Set (physical state)", &r)?;
        // Read the port back and report the change before returning: a PortInfo Set does not
        // raise the switch's own PortStateChange. A link that must train first (Polling) is
        // reported by the light sweep once it comes up.
        let r = tp
            .call(dr(&path), METHOD_GET, ATTR_PORT_INFO, u32::from(port), &ZERO)
            .await
            .map_err(|e| tp_err(switch, "PortInfo Get", e))?;
        check_status(switch, "PortInfo Get", &r)?;
        let mut events = Vec::new();
        let mut to_arm = Vec::new();
        {
            let mut st = lock(&self.inner.state);
            apply_port_reads(
                &mut st,
                vec![(switch, port, PortInfo::decode(r.smp.data()))],
                &mut events,
                &mut to_arm,
            );
            recompute_paths(&mut st);
        }
        activate(tp, &to_arm).await;
        self.inner.sl2vl_after_events(&events);
        emit(&self.inner, &events);
        Ok(())
    }

    async fn set_switch_state(&self, _switch: Guid, _up: bool) -> Result<(), DriverError> {
        Err(DriverError::Unsupported(
            "set_switch_state: a real switch cannot be powered off over MADs",
        ))
    }

    async fn escape_vl_ready(&self) -> Result<(), DriverError> {
        self.ensure_sweeper();
        let want = self.inner.request_sl2vl();
        loop {
            let notified = self.inner.sl2vl_finished.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let p = lock(&self.inner.sl2vl);
                if p.completed >= want {
                    return match &p.first_failure {
                        None => Ok(()),
                        Some((guid, what)) => Err(DriverError::Protocol {
                            guid: Some(*guid),
                            message: if p.failed > 1 {
                                format!("escape VL not ready: {what} (and {} more table(s))", p.failed - 1)
                            } else {
                                format!("escape VL not ready: {what}")
                            },
                        }),
                    };
                }
            }
            notified.await;
        }
    }

    fn escape_vl_status(&self) -> EscapeVlStatus {
        let p = lock(&self.inner.sl2vl);
        EscapeVlStatus {
            ready: p.completed >= 1 && p.completed >= p.requested && p.failed == 0,
            pending: p.pending,
            error: p.first_failure.as_ref().map(|(_, w)| w.clone()),
            ready_at_unix_ms: p.ready_at_unix_ms,
        }
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
        let Some((master, path)) = self.find_master().await else {
            return Ok(false);
        };
        let sm = self.inner.tp.sm_identity();
        self.inner.standby.store(true, Ordering::Relaxed);
        sm.state.store(SM_STATE_STANDBY, Ordering::Relaxed);
        let cfg = &self.inner.cfg;
        on_standby(format!(
            "standby: subnet manager 0x{:016x} (priority {}) is master; polling its SMInfo every {} ms, taking over after {} unanswered polls",
            master.guid, master.priority, cfg.sm_poll_interval_ms, cfg.sm_poll_retries
        ));
        let mut misses = 0;
        while misses < cfg.sm_poll_retries {
            tokio::time::sleep(Duration::from_millis(cfg.sm_poll_interval_ms)).await;
            match self.sminfo_at(&path).await {
                Some(i) if i.state == SM_STATE_MASTER => misses = 0,
                _ => misses += 1,
            }
        }
        on_standby(format!(
            "master subnet manager 0x{:016x} lost ({} polls unanswered): taking the subnet over",
            master.guid, cfg.sm_poll_retries
        ));
        self.inner.standby.store(false, Ordering::Relaxed);
        sm.state.store(SM_STATE_DISCOVERING, Ordering::Relaxed);
        Ok(true)
    }

    fn lids_in_force(&self) -> Vec<(Guid, Lid, Lid)> {
        let st = lock(&self.inner.state);
        let unicast = |lid: u16| (1..=fabric_routing::IB_MAX_UNICAST_LID).contains(&Lid::from(lid));
        let mut out: Vec<(Guid, Lid, Lid)> = st
            .switches
            .iter()
            .filter(|s| unicast(s.lid))
            .map(|s| (s.guid, Lid::from(s.lid), Lid::from(s.lid)))
            .collect();
        out.extend(st.cas.iter().filter(|c| unicast(c.info.lid())).map(|c| {
            let base = Lid::from(c.info.lid());
            (c.port_guid, base, base + (1 << c.info.lmc().min(7)) - 1)
        }));
        out
    }
}

impl UmadDriver {
    /// SMInfo of the manager at the end of directed route `path` (`None`: no answer).
    async fn sminfo_at(&self, path: &[u8]) -> Option<SmInfo> {
        let rx = submit(&self.inner.tp, &dr(path), METHOD_GET, ATTR_SM_INFO, 0, &ZERO).ok()?;
        let r = transport::wait(rx).await.ok()?;
        (r.smp.status() == 0).then(|| SmInfo::decode(r.smp.data()))
    }

    /// A master subnet manager with precedence over this one among the CA ports the last
    /// discovery found with IsSM (IBA 14.4.1: higher priority, or equal priority and lower
    /// GUID), with the directed route to it.
    async fn find_master(&self) -> Option<(SmInfo, Vec<u8>)> {
        let (candidates, own) = {
            let st = lock(&self.inner.state);
            let own = match st.local {
                Some(Peer::Ca { port_guid }) => port_guid,
                Some(Peer::Switch { guid, .. }) => guid,
                None => 0,
            };
            let c: Vec<Vec<u8>> = st
                .cas
                .iter()
                .filter(|c| c.port_guid != own && c.up && c.info.capability_mask() & CAP_IS_SM != 0)
                .map(|c| c.path.clone())
                .collect();
            (c, own)
        };
        let mine = self.inner.cfg.sm_priority;
        for path in candidates {
            if let Some(i) = self.sminfo_at(&path).await {
                let outranks = i.priority > mine || (i.priority == mine && i.guid < own);
                if i.state == SM_STATE_MASTER && outranks {
                    return Some((i, path));
                }
            }
        }
        None
    }

    /// Re-reads PortInfo of every switch port and CA port (after activation).
    async fn refresh_port_states(&self) {
        let tp = &self.inner.tp;
        let targets: Vec<(Guid, Vec<u8>, u8)> = {
            let st = lock(&self.inner.state);
            st.switches
                .iter()
                .filter(|s| s.up)
                .map(|s| (s.guid, s.path.clone(), s.nports))
                .collect()
        };
        let mut pend = Vec::new();
        for (g, path, n) in &targets {
            for p in 0..=*n {
                if let Ok(rx) = submit(tp, &dr(path), METHOD_GET, ATTR_PORT_INFO, u32::from(p), &ZERO) {
                    pend.push((*g, p, rx));
                }
            }
        }
        let mut got = Vec::with_capacity(pend.len());
        for (g, p, rx) in pend {
            if let Ok(r) = transport::wait(rx).await {
                if r.smp.status() == 0 {
                    got.push((g, p, PortInfo::decode(r.smp.data())));
                }
            }
        }
        let mut st = lock(&self.inner.state);
        for (g, p, info) in got {
            if let Some(&i) = st.sw_by_guid.get(&g) {
                st.switches[i].ports[p as usize].info = Some(info);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PortInfo of a port in `state` with PortPhysicalState `phys`.
    fn pi(state: PortState, phys: u8) -> PortInfo {
        let mut raw = [0u8; SMP_DATA_SIZE];
        raw[32] = state.bits();
        raw[33] = phys << 4;
        PortInfo::decode(&raw)
    }

    const L0: Guid = 0x10;
    const L1: Guid = 0x11;
    const S0: Guid = 0x20;
    const S1: Guid = 0x21;
    const CA: Guid = 0x100;

    /// Two leaves and two spines fully cabled (leaf port 2 + s to spine s, spine port 1 + l to
    /// leaf l), the manager's CA on leaf 0 port 1.
    fn two_by_two() -> State {
        let mut st = State::default();
        for (g, n) in [(L0, 4u8), (L1, 4), (S0, 2), (S1, 2)] {
            st.sw_by_guid.insert(g, st.switches.len());
            st.switches.push(SwitchRec {
                guid: g,
                desc: String::new(),
                nports: n,
                path: Vec::new(),
                lid: 0,
                info: SwitchInfo::decode(&ZERO),
                ports: vec![
                    PortRec {
                        info: Some(pi(PortState::Active, PHYS_LINK_UP)),
                        peer: None
                    };
                    n as usize + 1
                ],
                lft: HashMap::new(),
                up: true,
                reached: true,
                responsive: true,
                sl2vl: Sl2VlDone::default(),
            });
        }
        for (l, lg) in [L0, L1].into_iter().enumerate() {
            for (s, sg) in [S0, S1].into_iter().enumerate() {
                link(
                    &mut st,
                    lg,
                    2 + s as u8,
                    Peer::Switch {
                        guid: sg,
                        port: 1 + l as u8,
                    },
                );
            }
        }
        st.ca_by_guid.insert(CA, 0);
        st.cas.push(CaRec {
            port_guid: CA,
            node_guid: CA - 1,
            desc: String::new(),
            port_num: 1,
            nports: 1,
            path: Vec::new(),
            info: pi(PortState::Active, PHYS_LINK_UP),
            attach: Some((L0, 1)),
            up: true,
            sl2vl: false,
        });
        link(&mut st, L0, 1, Peer::Ca { port_guid: CA });
        st.local = Some(Peer::Ca { port_guid: CA });
        st
    }

    fn rec(st: &State, g: Guid) -> &SwitchRec {
        &st.switches[st.sw_by_guid[&g]]
    }

    /// Sets IsSLMappingSupported on every switch port 0 and on the CA.
    fn with_sl_mapping(st: &mut State) {
        for s in &mut st.switches {
            if let Some(i) = s.ports[0].info.as_mut() {
                i.set_capability_mask(CAP_SL_MAPPING);
            }
        }
        for c in &mut st.cas {
            c.info.set_capability_mask(CAP_SL_MAPPING);
        }
    }

    fn pairs_of(targets: &[Sl2VlSet], g: Guid) -> Vec<(u8, u8)> {
        let mut v: Vec<(u8, u8)> = targets
            .iter()
            .filter(|t| t.guid == g && t.is_switch)
            .filter_map(|t| t.ports)
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn sl2vl_pairs_of_linked_ports_only() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        // Without IsSLMappingSupported nothing is sent (as OpenSM).
        assert!(sl2vl_targets(&st).is_empty());
        with_sl_mapping(&mut st);
        // Spine 0 (2 ports, both cabled): 1→2 and 2→1; base port 0 is no input.
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, S0), vec![(1, 2), (2, 1)]);
        let s0 = t.iter().find(|x| x.guid == S0 && x.ports == Some((2, 1))).unwrap();
        assert_eq!(s0.modifier, 0x0201);
        assert_eq!(s0.path, rec(&st, S0).path);
        // Leaf 1 port 1 is not cabled in this fixture but ACTIVE in its PortInfo; take it
        // down: pairs with port 1 disappear.
        let i = st.sw_by_guid[&L1];
        st.switches[i].ports[1].info = Some(pi(PortState::Down, PHYS_POLLING));
        st.switches[i].ports[4].info = Some(pi(PortState::Down, PHYS_DISABLED));
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, L1), vec![(2, 3), (3, 2)]);
        // Leaf 0: 4 live ports, 12 ordered pairs.
        assert_eq!(pairs_of(&t, L0).len(), 12);
        // The CA: one table, modifier 0.
        let ca: Vec<_> = t.iter().filter(|x| !x.is_switch).collect();
        assert_eq!(ca.len(), 1);
        assert_eq!((ca[0].guid, ca[0].modifier, ca[0].ports), (CA, 0, None));
    }

    #[test]
    fn sl2vl_enhanced_port0_and_optimized_switches() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        with_sl_mapping(&mut st);
        let i = st.sw_by_guid[&S0];
        st.switches[i].info.raw[16] |= 0x08; // EnhancedPort0
        let j = st.sw_by_guid[&S1];
        st.switches[j].info.raw[11] |= 0x01; // OptimizedSLtoVLMappingProgramming
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, S0), vec![(0, 1), (0, 2), (1, 2), (2, 1)]);
        let s1: Vec<_> = t.iter().filter(|x| x.guid == S1).collect();
        assert_eq!(s1.len(), 1, "one Set for every pair");
        assert_eq!((s1[0].modifier, s1[0].ports), (0x0003_0000, None));
    }

    #[test]
    fn sl2vl_written_tables_are_not_written_again() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        with_sl_mapping(&mut st);
        let i = st.sw_by_guid[&S0];
        st.switches[i].sl2vl.insert(1, 2);
        st.cas[0].sl2vl = true;
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, S0), vec![(2, 1)]);
        assert!(t.iter().all(|x| x.is_switch));
        assert!(st.switches[i].sl2vl.contains(1, 2) && !st.switches[i].sl2vl.contains(2, 1));
        // Output ports above 64 land in the right word.
        st.switches[i].sl2vl.insert(200, 130);
        assert!(st.switches[i].sl2vl.contains(200, 130) && !st.switches[i].sl2vl.contains(200, 2));
        // A down switch gets nothing.
        st.switches[i].up = false;
        assert!(pairs_of(&sl2vl_targets(&st), S0).is_empty());
    }

    #[test]
    fn sl2vl_of_relinked_ports_and_returning_nodes() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        with_sl_mapping(&mut st);
        // Leaf 1's port 2 is down while the tables are written.
        let i = st.sw_by_guid[&L1];
        st.switches[i].ports[2].info = Some(pi(PortState::Down, PHYS_POLLING));
        let first = sl2vl_targets(&st);
        for t in &first {
            if let (true, Some((a, b))) = (t.is_switch, t.ports) {
                let k = st.sw_by_guid[&t.guid];
                st.switches[k].sl2vl.insert(a, b);
            }
        }
        st.cas[0].sl2vl = true;
        assert!(sl2vl_targets(&st).is_empty(), "everything written");
        // The port comes up: the pairs with it, in both directions, are due.
        st.switches[i].ports[2].info = Some(pi(PortState::Init, PHYS_LINK_UP));
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, L1), vec![(1, 2), (2, 1), (2, 3), (2, 4), (3, 2), (4, 2)]);
        assert_eq!(t.len(), 6);
        // A switch and a CA that come back are written whole again; a link event alone
        // forgets nothing.
        let st2 = &mut st;
        sl2vl_forget(st2, &[FabricEvent::LinkUp { switch: S0, port: 1 }]);
        assert!(pairs_of(&sl2vl_targets(st2), S0).is_empty());
        sl2vl_forget(st2, &[FabricEvent::SwitchUp(S0), FabricEvent::EndPortUp(CA)]);
        let t = sl2vl_targets(st2);
        assert_eq!(pairs_of(&t, S0), vec![(1, 2), (2, 1)]);
        assert!(t.iter().any(|x| !x.is_switch && x.guid == CA));
    }

    #[test]
    fn sl2vl_failures_name_guid_and_ports() {
        let t = Sl2VlSet {
            guid: 0x20,
            is_switch: true,
            path: vec![1],
            ports: Some((3, 5)),
            modifier: 0x0305,
        };
        assert_eq!(
            t.describe(),
            "SLtoVLMappingTable Set on switch 0x0000000000000020 input port 3 output port 5"
        );
    }

    #[test]
    fn routes_go_around_a_silent_switch() {
        let mut st = two_by_two();
        let reached = recompute_paths(&mut st);
        assert_eq!(reached.len(), 4);
        // Breadth first, lowest port first: leaf 1 is reached through spine 0.
        assert_eq!(rec(&st, L1).path, vec![1, 2, 2]);
        st.switches[st.sw_by_guid[&S0]].responsive = false;
        let reached = recompute_paths(&mut st);
        assert!(reached.contains(&S0), "a silent switch keeps a route to be probed on");
        assert!(!rec(&st, S0).up);
        assert_eq!(rec(&st, S0).path, vec![1, 2]);
        assert_eq!(rec(&st, L1).path, vec![1, 3, 2], "leaf 1 through spine 1");
        assert!(rec(&st, L1).up && rec(&st, S1).up);
    }

    #[test]
    fn a_port_change_goes_over_a_route_avoiding_that_port() {
        let st = two_by_two();
        // Leaf 1's port 2 (to spine 0) is on its usual route; the other spine avoids it.
        assert_eq!(path_avoiding(&st, L1, (L1, 2)), Some(vec![1, 3, 2]));
        // Either end of the cable names it.
        assert_eq!(path_avoiding(&st, L1, (S0, 2)), Some(vec![1, 3, 2]));
        assert_eq!(path_avoiding(&st, S0, (S0, 2)), Some(vec![1, 2]));
        // With spine 1's cable to leaf 1 down too, every route to leaf 1 crosses the port.
        let mut st = st;
        let i = st.sw_by_guid[&L1];
        st.switches[i].ports[3].info = Some(pi(PortState::Down, PHYS_POLLING));
        assert_eq!(path_avoiding(&st, L1, (L1, 2)), None);
    }

    #[test]
    fn a_physically_disabled_end_takes_the_link_down() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        // The simulator leaves the logical state ACTIVE when the physical state is Disabled.
        let i = st.sw_by_guid[&L1];
        let mut events = Vec::new();
        let mut to_arm = Vec::new();
        apply_port_reads(
            &mut st,
            vec![(L1, 2, pi(PortState::Active, PHYS_DISABLED))],
            &mut events,
            &mut to_arm,
        );
        assert_eq!(events, vec![FabricEvent::LinkDown { switch: L1, port: 2 }]);
        assert!(to_arm.is_empty());
        // The far end is marked down with it: re-reading it alone reports nothing more.
        let far = &rec(&st, S0).ports[2];
        assert!(!far.info.as_ref().is_some_and(live));
        let f = build_fabric(&st).unwrap();
        let l1 = f.switch_by_guid(L1).unwrap();
        assert_eq!(f.switch(l1).ports[2].state, LinkState::Down);
        assert_eq!(f.switch(l1).ports[3].state, LinkState::Up);
        // Re-enabled straight to LinkUp (ibsim): the link is reported up once.
        recompute_paths(&mut st);
        events.clear();
        apply_port_reads(
            &mut st,
            vec![(L1, 2, pi(PortState::Active, PHYS_LINK_UP))],
            &mut events,
            &mut to_arm,
        );
        assert_eq!(events, vec![FabricEvent::LinkUp { switch: L1, port: 2 }]);
        assert!(st.switches[i].ports[2].info.as_ref().is_some_and(live));
    }
}
