//! The user-MAD transport: one OS thread per umad file descriptor, bridged to tokio by channels.
//!
//! The thread owns the descriptor (a raw `c_int`: under the umad2sim preload shim it is a fake
//! number that must never be wrapped in `OwnedFd`/`File`). It keeps at most `window` SMPs in
//! flight, stamps transaction ids (matched on their low 32 bits only), enforces a deadline per
//! attempt and re-sends lost or bounced SMPs (umad status `ETIMEDOUT`) up to `retries` times.
//! Unsolicited MADs (traps) go to a separate channel.
//!
//! Requests have one of two priorities: normal ([`Transport::submit`]) and background
//! ([`Transport::submit_background`]). Both share the window; a background SMP is sent only
//! when no normal one is waiting, and background SMPs leave an eighth of the window (at least one
//! slot) to normal ones, so bulk work that is off the critical path (SL-to-VL tables) fills idle
//! slots without ever taking the whole window (not even while its SMPs time out on a dead
//! switch).
//!
//! The 56-byte `ib_user_mad_hdr` layout is used (no `IB_USER_MAD_ENABLE_PKEY`): the kernel uses
//! it by default and the simulator shim only understands it.
//!
//! Layout: this module is the thread (queues, window, transaction ids, deadlines, retries,
//! packet framing); `device` is the ioctl layer ([`UmadDevice`], [`RawPort`]: all the `unsafe`
//! code of the crate); `responder` answers the SMPs addressed to the manager's port (SMInfo);
//! `shared` holds what the thread shares lock-free with its users ([`Stats`], [`SmIdentity`],
//! the attached SA service). GSI MADs (Subnet Administration and the guard classes) go to
//! `sa_agent` ([`SaAgent`]): the attached [`fabric_sa::SaService`] answers them, RMPP answers
//! and Reports are driven on this thread; without a service, [`crate::sa::GsiResponder`]
//! answers "not supported". `client_port` is the end-node descriptor of the project's own SA
//! client ([`crate::client`]: one SA agent without kernel RMPP, sysfs reads through the shim).
//!
//! While a service is attached, an idle thread waits on the port (1 ms) rather than on the
//! request channel (2 ms), so an SA query is read as soon as it arrives; an SMP submitted to an
//! idle thread then waits up to 1 ms for the round to end.

mod client_port;
mod device;
mod perf;
mod responder;
mod sa_agent;
#[cfg(test)]
mod sa_tests;
mod shared;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fabric_sa::{Requester, SaService};
use tokio::sync::{mpsc, oneshot};

use crate::mad::{
    stamp_m_key, PerfMad, Route, Smp, CLASS_PERF_MGT, CLASS_SMP_DR, CLASS_SMP_LID, MAD_SIZE, METHOD_TRAP,
};
pub use client_port::{read_sysfs, ClientPort};
pub use device::{OpenError, RawPort, UmadDevice, UMAD_HDR_LEN};
pub use perf::PerfReply;
use perf::{PerfLane, PerfRequest};
use responder::SmResponder;
pub use sa_agent::{Outgoing, SaAgent, SaAgentParams, SaEndpoint};
pub use shared::{SaSlot, SmIdentity, Stats};

/// High TID bits stamped on requests (the kernel overwrites them; matching uses the low 32).
const TID_HIGH: u64 = 0x00fa_b01c << 32;

/// Why an SMP did not get a good reply.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// Every attempt was lost, bounced or timed out.
    #[error("no reply after {attempts} attempt(s)")]
    Timeout {
        /// Attempts made.
        attempts: u32,
    },
    /// The transport thread is gone (driver dropped or device error).
    #[error("umad transport closed")]
    Closed,
    /// The SMP could not be built.
    #[error("bad SMP: {0}")]
    Mad(String),
}

/// A good reply.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The GetResp (its status may still be non-zero: the caller decides).
    pub smp: Smp,
    /// Attempts it took (1 = first try).
    pub attempts: u32,
}

/// Timing and window parameters of the transport.
#[derive(Clone, Copy, Debug)]
pub struct TransportParams {
    /// Deadline of one attempt.
    pub timeout: Duration,
    /// Re-sends after the first attempt.
    pub retries: u32,
    /// SMPs in flight.
    pub window: usize,
    /// PerfMgt MADs in flight, apart from the SMPs (see the `perf` lane).
    pub perf_window: usize,
}

struct Request {
    route: Route,
    smp: Smp,
    reply: oneshot::Sender<Result<Reply, TransportError>>,
    /// Sent only when no normal request waits.
    background: bool,
}

/// The waiting requests of the two priorities.
struct Queues<T> {
    normal: VecDeque<T>,
    background: VecDeque<T>,
}

impl<T> Queues<T> {
    fn new() -> Self {
        Queues {
            normal: VecDeque::new(),
            background: VecDeque::new(),
        }
    }
    fn push(&mut self, r: T, background: bool) {
        if background {
            self.background.push_back(r);
        } else {
            self.normal.push_back(r);
        }
    }
    /// The next request to send: the oldest normal one, else (when `background_ok`) the oldest
    /// background one.
    fn pop(&mut self, background_ok: bool) -> Option<T> {
        match self.normal.pop_front() {
            Some(r) => Some(r),
            None if background_ok => self.background.pop_front(),
            None => None,
        }
    }
    fn is_empty(&self) -> bool {
        self.normal.is_empty() && self.background.is_empty()
    }
}

/// What the request channel carries: an SMP, or a PerfMgt MAD for the PerfMgt lane.
enum Job {
    Smp(Request),
    Perf(PerfRequest),
}

/// Queues a job on its lane.
fn intake(job: Job, queue: &mut Queues<Request>, perf: &mut PerfLane) {
    match job {
        Job::Smp(r) => {
            let b = r.background;
            queue.push(r, b);
        }
        Job::Perf(r) => perf.push(r),
    }
}

struct InFlight {
    req: Request,
    attempts: u32,
    deadline: Instant,
}

/// Handle to the transport thread. Dropping it stops the thread at once: SMPs still queued or
/// in flight are abandoned (their receivers yield [`TransportError::Closed`]; the thread reads
/// the answers already on their way for at most [`SETTLE_WAIT`] before closing), so a daemon
/// stopping in the middle of a stalled discovery does not wait for every deadline. A thread
/// blocked inside the device for longer than [`STOP_WAIT`] (a `write()` to a simulator that
/// stopped reading) is left behind rather than waited for.
pub struct Transport {
    tx: std_mpsc::Sender<Job>,
    stats: Arc<Stats>,
    sm: Arc<SmIdentity>,
    sa: Arc<SaSlot>,
    stop: Arc<AtomicBool>,
    /// Disconnected when the thread returns (in a mutex only to make the handle `Sync`).
    done: std::sync::Mutex<std_mpsc::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How long dropping a [`Transport`] waits for its thread to stop.
pub const STOP_WAIT: Duration = Duration::from_secs(1);

impl Transport {
    /// Starts the thread on `port`. Unsolicited MADs (traps) are sent to `traps`.
    pub fn start<P: RawPort>(port: P, params: TransportParams, traps: mpsc::UnboundedSender<Smp>) -> Transport {
        let (tx, rx) = std_mpsc::channel();
        let stats = Arc::new(Stats::default());
        let sm = Arc::new(SmIdentity::default());
        let sa = Arc::new(SaSlot::new());
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = std_mpsc::channel::<()>();
        let shared = Shared {
            stats: stats.clone(),
            sm: sm.clone(),
            sa: sa.clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("fabric-umad".into())
            .spawn(move || {
                let _done = done_tx;
                run(port, params, rx, traps, shared);
            })
            .ok();
        Transport {
            tx,
            stats,
            sm,
            sa,
            stop,
            done: std::sync::Mutex::new(done),
            thread,
        }
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The SMInfo the transport thread answers with.
    pub fn sm_identity(&self) -> &SmIdentity {
        &self.sm
    }

    /// Attaches the Subnet Administration service: from now on the thread answers SA MADs with
    /// it (while it is serving), sends its answers as RMPP where they are tables and delivers
    /// its Reports. Set once: `false` when a service was already attached (it stays).
    pub fn set_sa(&self, sa: Arc<SaService>) -> bool {
        self.set_sa_endpoint(sa)
    }

    /// [`Transport::set_sa`] for any [`SaEndpoint`].
    pub fn set_sa_endpoint(&self, sa: Arc<dyn SaEndpoint>) -> bool {
        self.sa.set(sa).is_ok()
    }

    /// Whether an SA service is attached.
    pub fn has_sa(&self) -> bool {
        self.sa.get().is_some()
    }

    /// Queues an SMP; the receiver yields its reply (or why there is none).
    pub fn submit(&self, route: Route, smp: Smp) -> oneshot::Receiver<Result<Reply, TransportError>> {
        self.enqueue(route, smp, false)
    }

    /// Queues an SMP at background priority: it is sent only when no normal SMP is waiting
    /// (it still takes one slot of the window while in flight).
    pub fn submit_background(&self, route: Route, smp: Smp) -> oneshot::Receiver<Result<Reply, TransportError>> {
        self.enqueue(route, smp, true)
    }

    fn enqueue(&self, route: Route, smp: Smp, background: bool) -> oneshot::Receiver<Result<Reply, TransportError>> {
        let (reply, rx) = oneshot::channel();
        // On a closed channel the request (and its sender) is dropped: the receiver then yields
        // an error that `wait` maps to `Closed`.
        let _ = self.tx.send(Job::Smp(Request {
            route,
            smp,
            reply,
            background,
        }));
        rx
    }

    /// Queues a PerfMgt MAD for the agent at `lid` on the PerfMgt lane (its own window; sent
    /// only while no normal SMP waits); the receiver yields its reply (or why there is none).
    pub fn submit_perf(&self, lid: u16, mad: PerfMad) -> oneshot::Receiver<Result<PerfReply, TransportError>> {
        let (reply, rx) = oneshot::channel();
        // On a closed channel the receiver yields an error that `wait_perf` maps to `Closed`.
        let _ = self.tx.send(Job::Perf(PerfRequest { lid, mad, reply }));
        rx
    }

    /// Sends an SMP and waits for its reply.
    pub async fn call(
        &self,
        route: Route,
        method: u8,
        attr: u16,
        modifier: u32,
        data: &[u8; 64],
    ) -> Result<Reply, TransportError> {
        let smp = Smp::request(&route, method, attr, modifier, data).map_err(|e| TransportError::Mad(e.to_string()))?;
        wait(self.submit(route, smp)).await
    }
}

/// Waits on a submitted PerfMgt request.
pub async fn wait_perf(rx: oneshot::Receiver<Result<PerfReply, TransportError>>) -> Result<PerfReply, TransportError> {
    rx.await.unwrap_or(Err(TransportError::Closed))
}

/// Waits on a submitted request.
pub async fn wait(rx: oneshot::Receiver<Result<Reply, TransportError>>) -> Result<Reply, TransportError> {
    rx.await.unwrap_or(Err(TransportError::Closed))
}

impl Drop for Transport {
    fn drop(&mut self) {
        // The thread checks the flag every round (at most a few milliseconds apart).
        self.stop.store(true, Ordering::Relaxed);
        let (tx, _) = std_mpsc::channel();
        drop(std::mem::replace(&mut self.tx, tx));
        if let Some(t) = self.thread.take() {
            let stopped = match self.done.get_mut() {
                Ok(done) => done.recv_timeout(STOP_WAIT),
                Err(poisoned) => poisoned.into_inner().recv_timeout(STOP_WAIT),
            };
            match stopped {
                Err(std_mpsc::RecvTimeoutError::Timeout) => tracing::warn!(
                    "the umad transport thread did not stop within {STOP_WAIT:?} (blocked in the device: a \
                     simulator or HCA that stopped reading?); leaving it behind"
                ),
                _ => {
                    let _ = t.join();
                }
            }
        }
    }
}

/// What the thread shares with the [`Transport`] handle.
struct Shared {
    stats: Arc<Stats>,
    sm: Arc<SmIdentity>,
    sa: Arc<SaSlot>,
    stop: Arc<AtomicBool>,
}

/// The requester of a GSI MAD, from the receive header of its packet (pre-pkey layout: no
/// P_Key index; the GID when a GRH came with it).
fn requester(rx: &[u8]) -> Requester {
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&rx[36..52]);
    Requester {
        lid: u16::from_be_bytes([rx[28], rx[29]]),
        // As received (not masked to 24 bits): written back unchanged in the answers.
        qpn: u32::from_be_bytes([rx[20], rx[21], rx[22], rx[23]]),
        sl: rx[30],
        pkey_index: 0,
        gid: (rx[32] != 0).then_some(gid),
    }
}

fn run<P: RawPort>(
    mut port: P,
    params: TransportParams,
    rx: std_mpsc::Receiver<Job>,
    traps: mpsc::UnboundedSender<Smp>,
    shared: Shared,
) {
    let Shared { stats, sm, sa, stop } = shared;
    let window = params.window.max(1);
    // Slots kept for normal SMPs: an eighth of the window (at least one).
    let background_cap = window.saturating_sub((window / 8).max(1)).max(1);
    let mut queue: Queues<Request> = Queues::new();
    let mut perf = PerfLane::new(params.perf_window);
    let mut inflight: HashMap<u32, InFlight> = HashMap::with_capacity(window * 2);
    let mut next_tid: u32 = 1;
    let mut open = true;
    let mut buf = [0u8; UMAD_HDR_LEN + MAD_SIZE];
    let mut out = [0u8; UMAD_HDR_LEN + MAD_SIZE];
    let mut retry: Vec<InFlight> = Vec::new();
    let mut responder = SmResponder::new(sm.clone(), stats.clone());
    let mut agent = SaAgent::new(SaAgentParams::default());
    let mut gsi_out: Vec<Outgoing> = Vec::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            // Dropping the queued and in-flight requests closes their reply channels; the
            // answers still on their way are read before the device closes.
            drop(queue);
            settle(
                &mut port,
                &mut buf,
                inflight,
                perf.abandon(),
                Instant::now() + SETTLE_WAIT,
            );
            return;
        }
        // Intake: block briefly when idle, otherwise drain what is queued.
        let idle = inflight.is_empty() && queue.is_empty() && perf.is_idle();
        if open && idle && sa.get().is_some() {
            // Idle with an SA attached: wait for a MAD; the channel is drained below.
            port.wait(Duration::from_millis(1));
        } else if open && idle {
            match rx.recv_timeout(Duration::from_millis(2)) {
                Ok(j) => intake(j, &mut queue, &mut perf),
                Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                Err(std_mpsc::RecvTimeoutError::Disconnected) => open = false,
            }
        }
        if open {
            loop {
                match rx.try_recv() {
                    Ok(j) => intake(j, &mut queue, &mut perf),
                    Err(std_mpsc::TryRecvError::Empty) => break,
                    Err(std_mpsc::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
        }
        if !open && inflight.is_empty() && queue.is_empty() && perf.is_idle() {
            return;
        }
        // Re-sends first, then new requests, within the window.
        let mut send = |f: InFlight, inflight: &mut HashMap<u32, InFlight>, next_tid: &mut u32| {
            let tid = *next_tid;
            *next_tid = next_tid.wrapping_add(1).max(1);
            let mut f = f;
            f.req.smp.set_tid(TID_HIGH | u64::from(tid));
            // Every SMP carries the manager's M_Key (and every PortInfo Set its protection).
            stamp_m_key(&mut f.req.smp, &sm.m_key_protection());
            f.attempts += 1;
            f.deadline = Instant::now() + params.timeout;
            encode_packet(&mut out, &port, &f.req);
            stats.sent.fetch_add(1, Ordering::Relaxed);
            // A failed write is an attempt lost: the deadline re-sends it.
            let _ = port.write(&out);
            inflight.insert(tid, f);
        };
        for f in retry.drain(..) {
            send(f, &mut inflight, &mut next_tid);
        }
        let mut background = inflight.values().filter(|f| f.req.background).count();
        while inflight.len() < window {
            let Some(req) = queue.pop(background < background_cap) else {
                break;
            };
            background += usize::from(req.background);
            let f = InFlight {
                req,
                attempts: 0,
                deadline: Instant::now(),
            };
            send(f, &mut inflight, &mut next_tid);
        }
        // PerfMgt MADs: their own window, new ones only while no normal SMP waits for a slot.
        perf.send(&mut port, !queue.normal.is_empty(), &mut next_tid, &params, &stats);
        if !inflight.is_empty() || perf.in_flight() > 0 {
            port.wait(Duration::from_millis(1));
        }
        // Receive everything queued.
        while let Some(n) = port.read(&mut buf) {
            if n < UMAD_HDR_LEN + 24 {
                continue;
            }
            let status = u32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
            // Only the first 232 MAD bytes of a received packet are valid.
            let end = n.min(UMAD_HDR_LEN + 232);
            let class = buf[UMAD_HDR_LEN + 1];
            if class == CLASS_PERF_MGT && perf.on_packet(&buf[..end], status, &params, &stats) {
                continue;
            }
            if class != CLASS_SMP_DR && class != CLASS_SMP_LID {
                // A GSI MAD addressed to the manager's port: an SA query, an RMPP ACK of one of
                // our answers, a ReportResp, or a guard class. A non-zero status is one of our
                // Reports coming back undelivered (its resend is the agent's).
                if status == 0 {
                    let from = requester(&buf);
                    let service = sa.get().map(Arc::as_ref);
                    let mad = &buf[UMAD_HDR_LEN..end];
                    if service.is_none()
                        && class == fabric_sa::wire::CLASS_SUBN_ADM
                        && sm.state.load(Ordering::Relaxed) != crate::mad::SM_STATE_MASTER
                    {
                        // Not the master (standing by for another manager) and no SA service
                        // attached yet (the daemon attaches it once it holds the subnet): no
                        // answer, as from a standby with a service.
                        stats.sa_dropped_standby.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    agent.on_mad(
                        service,
                        mad,
                        &from,
                        Instant::now(),
                        SystemTime::now(),
                        &stats,
                        &mut gsi_out,
                    );
                    for o in gsi_out.drain(..) {
                        let n = encode_gsi(&mut out, &port, &o);
                        let _ = port.write(&out[..n]);
                    }
                }
                continue;
            }
            let Ok(smp) = Smp::parse(&buf[UMAD_HDR_LEN..end]) else {
                continue;
            };
            if smp.method() == METHOD_TRAP {
                stats.traps.fetch_add(1, Ordering::Relaxed);
                if status == 0 && smp.class() == CLASS_SMP_LID {
                    // The manager acknowledges every trap with a TrapRepress to its source LID
                    // (IBA 13.4.9): a switch repeats an unrepressed trap, and another SM
                    // (OpenSM's trap 144 to a lower-priority master) keeps a transaction open
                    // for it. ibsim drops TrapRepress MADs (its switches never repeat traps).
                    let slid = u16::from_be_bytes([buf[28], buf[29]]);
                    encode_raw(&mut out, &port, slid, &smp.trap_repress());
                    let _ = port.write(&out);
                    stats.trap_represses.fetch_add(1, Ordering::Relaxed);
                }
                let _ = traps.send(smp);
                continue;
            }
            if status == 0 && smp.is_request() && !smp.direction() {
                // A request addressed to the manager's port (the HCA's agent and the simulator
                // forward what they do not handle themselves: SMInfo from `sminfo` or from
                // another subnet manager's sweep). With a non-zero umad status it is one of
                // ours coming back undelivered (below).
                let slid = u16::from_be_bytes([buf[28], buf[29]]);
                let (resp, to) = responder.answer(&smp, slid);
                encode_raw(&mut out, &port, to, &resp);
                let _ = port.write(&out);
                continue;
            }
            let tid = smp.tid() as u32;
            let Some(f) = inflight.remove(&tid) else { continue };
            if status != 0 {
                // UMAD_STATUS_TIMEOUT (the MAD could not be delivered) or another send error:
                // the request came back, count it as a lost attempt.
                fail_or_retry(f, &params, &stats, &mut retry);
                continue;
            }
            let _ = f.req.reply.send(Ok(Reply {
                smp,
                attempts: f.attempts,
            }));
        }
        // Deadlines.
        let now = Instant::now();
        let expired: Vec<u32> = inflight
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in expired {
            if let Some(f) = inflight.remove(&t) {
                fail_or_retry(f, &params, &stats, &mut retry);
            }
        }
        perf.expire(now, &params, &stats);
        // RMPP deadlines and Reports.
        agent.poll(sa.get().map(Arc::as_ref), now, &stats, &mut gsi_out);
        for o in gsi_out.drain(..) {
            let n = encode_gsi(&mut out, &port, &o);
            let _ = port.write(&out[..n]);
        }
    }
}

/// How long a stopping thread keeps reading the answers to the MADs it has in flight before
/// it closes the device.
pub const SETTLE_WAIT: Duration = Duration::from_millis(250);

/// Reads (and drops) the answers to the MADs still in flight — SMPs `inflight` and PerfMgt
/// MADs `perf` (low TIDs) — until every one came back or `until`, whichever is first; their
/// requesters already saw [`TransportError::Closed`].
///
/// Why: a device closed with answers on their way is an ordinary event for the kernel, but
/// the ibsim preload shim (umad2sim) dereferences the freed per-descriptor queue when a MAD
/// arrives for a descriptor closed under it, and the process dies of SIGSEGV — a daemon
/// stopped on SIGTERM in the middle of a sweep exited by a signal instead of with status 0.
fn settle<P: RawPort>(
    port: &mut P,
    buf: &mut [u8],
    inflight: HashMap<u32, InFlight>,
    perf: impl Iterator<Item = u32>,
    until: Instant,
) {
    let mut waiting: std::collections::HashSet<u32> = inflight.into_keys().chain(perf).collect();
    while !waiting.is_empty() && Instant::now() < until {
        port.wait(Duration::from_millis(1));
        while let Some(n) = port.read(buf) {
            if n >= UMAD_HDR_LEN + 24 {
                // The low 32 bits of the MAD's TransactionID (bytes 12..16) are the key.
                let low = &buf[UMAD_HDR_LEN + 12..UMAD_HDR_LEN + 16];
                waiting.remove(&u32::from_be_bytes([low[0], low[1], low[2], low[3]]));
            }
        }
    }
}

fn fail_or_retry(f: InFlight, params: &TransportParams, stats: &Stats, retry: &mut Vec<InFlight>) {
    if f.attempts <= params.retries {
        stats.retries.fetch_add(1, Ordering::Relaxed);
        retry.push(f);
    } else {
        stats.failures.fetch_add(1, Ordering::Relaxed);
        let attempts = f.attempts;
        let _ = f.req.reply.send(Err(TransportError::Timeout { attempts }));
    }
}

/// A packet carrying `smp` as is (its TID untouched) to `lid` on QP0.
fn encode_raw<P: RawPort>(out: &mut [u8; UMAD_HDR_LEN + MAD_SIZE], port: &P, lid: u16, smp: &Smp) {
    out[..UMAD_HDR_LEN].fill(0);
    out[0..4].copy_from_slice(&port.agent(smp.class()).to_ne_bytes());
    out[28..30].copy_from_slice(&lid.to_be_bytes());
    out[UMAD_HDR_LEN..].copy_from_slice(&smp.bytes);
}

/// A packet carrying the GSI MAD `o`: from the agent of the MAD's class to the destination's
/// LID, QP and SL with `o`'s Q_Key (QP1's), a GRH to the destination's GID when it has one
/// (a request that came with a GRH is answered with one), `timeout_ms` for a Report. Returns
/// the bytes of `out` to write: the umad header and the first [`Outgoing::len`] MAD bytes.
fn encode_gsi<P: RawPort>(out: &mut [u8; UMAD_HDR_LEN + MAD_SIZE], port: &P, o: &Outgoing) -> usize {
    out[..UMAD_HDR_LEN].fill(0);
    out[0..4].copy_from_slice(&port.agent(o.mad[1]).to_ne_bytes());
    out[8..12].copy_from_slice(&o.timeout_ms.to_ne_bytes());
    out[20..24].copy_from_slice(&o.to.qpn.to_be_bytes());
    out[24..28].copy_from_slice(&o.qkey.to_be_bytes());
    out[28..30].copy_from_slice(&o.to.lid.to_be_bytes());
    out[30] = o.to.sl;
    if let Some(gid) = o.to.gid {
        out[32] = 1;
        // hop_limit: the GRH may cross routers.
        out[34] = 0xff;
        out[36..52].copy_from_slice(&gid);
    }
    out[UMAD_HDR_LEN..].copy_from_slice(&o.mad[..]);
    UMAD_HDR_LEN + o.len.clamp(fabric_sa::wire::SA_HEADER_SIZE, MAD_SIZE)
}

fn encode_packet<P: RawPort>(out: &mut [u8; UMAD_HDR_LEN + MAD_SIZE], port: &P, req: &Request) {
    out[..UMAD_HDR_LEN].fill(0);
    let class = req.smp.class();
    out[0..4].copy_from_slice(&port.agent(class).to_ne_bytes());
    // timeout_ms: the kernel only matches replies to requests sent with a timeout.
    out[8..12].copy_from_slice(&1000u32.to_ne_bytes());
    // qpn 0 (QP0), qkey 0.
    let lid = match req.route {
        Route::Directed(_) => 0xffff,
        Route::Lid(l) => l,
    };
    out[28..30].copy_from_slice(&lid.to_be_bytes());
    out[UMAD_HDR_LEN..].copy_from_slice(&req.smp.bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::*;
    use crate::sa;
    use std::sync::Mutex;

    /// A fake port answering every SMP; drops the first `drop_first` writes and bounces the
    /// next `bounce` with status ETIMEDOUT.
    struct Fake {
        queue: Arc<Mutex<VecDeque<Vec<u8>>>>,
        drop_first: usize,
        bounce: usize,
        max_inflight_seen: Arc<Mutex<usize>>,
        outstanding: usize,
    }

    impl RawPort for Fake {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
            if self.drop_first > 0 {
                self.drop_first -= 1;
                return Ok(());
            }
            let mut p = buf.to_vec();
            if self.bounce > 0 {
                self.bounce -= 1;
                p[4..8].copy_from_slice(&110u32.to_ne_bytes());
            } else {
                p[UMAD_HDR_LEN + 3] = METHOD_GET_RESP;
            }
            self.outstanding += 1;
            let mut m = self.max_inflight_seen.lock().unwrap();
            *m = (*m).max(self.queue.lock().unwrap().len() + 1);
            self.queue.lock().unwrap().push_back(p);
            Ok(())
        }
        fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
            let p = self.queue.lock().unwrap().pop_front()?;
            buf[..p.len()].copy_from_slice(&p);
            Some(p.len())
        }
        fn wait(&mut self, _: Duration) {}
        fn agent(&self, class: u8) -> u32 {
            u32::from(class)
        }
    }

    fn fake(drop_first: usize, bounce: usize) -> (Fake, Arc<Mutex<usize>>) {
        let m = Arc::new(Mutex::new(0));
        (
            Fake {
                queue: Arc::default(),
                drop_first,
                bounce,
                max_inflight_seen: m.clone(),
                outstanding: 0,
            },
            m,
        )
    }

    /// A port whose answers arrive `delay` after the request; it counts, when dropped (the
    /// device closed), the answers sent to it that it had not read.
    struct Slow {
        pending: VecDeque<(Instant, Vec<u8>)>,
        delay: Duration,
        unread_at_close: Arc<Mutex<Option<usize>>>,
    }

    impl RawPort for Slow {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
            let mut p = buf.to_vec();
            p[UMAD_HDR_LEN + 3] = METHOD_GET_RESP;
            self.pending.push_back((Instant::now() + self.delay, p));
            Ok(())
        }
        fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
            if self.pending.front()?.0 > Instant::now() {
                return None;
            }
            let (_, p) = self.pending.pop_front()?;
            buf[..p.len()].copy_from_slice(&p);
            Some(p.len())
        }
        fn wait(&mut self, timeout: Duration) {
            std::thread::sleep(timeout);
        }
        fn agent(&self, class: u8) -> u32 {
            u32::from(class)
        }
    }

    impl Drop for Slow {
        fn drop(&mut self) {
            *self.unread_at_close.lock().unwrap() = Some(self.pending.len());
        }
    }

    #[tokio::test]
    async fn a_stopped_transport_reads_the_answers_on_their_way_before_closing_the_device() {
        // Under the ibsim shim a MAD arriving for a closed descriptor kills the process: the
        // device is closed only once the answers to what was sent came back.
        let unread = Arc::new(Mutex::new(None));
        let port = Slow {
            pending: VecDeque::new(),
            delay: Duration::from_millis(40),
            unread_at_close: unread.clone(),
        };
        let (ttx, _trx) = mpsc::unbounded_channel();
        let mut p = params(0, 8);
        p.timeout = Duration::from_secs(5);
        let t = Transport::start(port, p, ttx);
        let rxs: Vec<_> = (0..3u32)
            .map(|i| {
                let smp = Smp::request(&Route::Directed(vec![1]), METHOD_GET, ATTR_NODE_INFO, i, &[0; 64]).unwrap();
                t.submit(Route::Directed(vec![1]), smp)
            })
            .collect();
        let t0 = Instant::now();
        while t.stats().sent.load(Ordering::Relaxed) < 3 {
            assert!(t0.elapsed() < Duration::from_secs(5), "the SMPs were not sent");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(t);
        assert_eq!(
            *unread.lock().unwrap(),
            Some(0),
            "answers unread when the device closed"
        );
        for rx in rxs {
            assert!(matches!(wait(rx).await, Err(TransportError::Closed)));
        }
    }

    fn params(retries: u32, window: usize) -> TransportParams {
        TransportParams {
            timeout: Duration::from_millis(20),
            retries,
            window,
            perf_window: 4,
        }
    }

    #[test]
    fn background_requests_wait_for_normal_ones() {
        let mut q = Queues::new();
        q.push("b1", true);
        q.push("n1", false);
        q.push("b2", true);
        q.push("n2", false);
        assert_eq!(q.pop(true), Some("n1"));
        q.push("n3", false);
        // Background ones wait while the cap is reached; normal ones go.
        assert_eq!(q.pop(false), Some("n2"));
        assert_eq!(q.pop(false), Some("n3"));
        assert_eq!(q.pop(false), None);
        assert!(!q.is_empty());
        let order: Vec<_> = std::iter::from_fn(|| q.pop(true)).collect();
        assert_eq!(order, ["b1", "b2"]);
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn background_smps_get_replies_too() {
        let (f, _) = fake(0, 0);
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(f, params(0, 2), ttx);
        let mut rxs = Vec::new();
        for i in 0..6u32 {
            let smp = Smp::request(&Route::Directed(vec![1]), METHOD_GET, ATTR_NODE_INFO, i, &[0; 64]).unwrap();
            rxs.push(if i % 2 == 0 {
                t.submit_background(Route::Directed(vec![1]), smp)
            } else {
                t.submit(Route::Directed(vec![1]), smp)
            });
        }
        for (i, rx) in rxs.into_iter().enumerate() {
            assert_eq!(wait(rx).await.unwrap().smp.attr_mod(), i as u32);
        }
        assert_eq!(t.stats().sent.load(Ordering::Relaxed), 6);
    }

    #[tokio::test]
    async fn every_smp_and_every_resend_carries_the_m_key() {
        // The fake echoes what was written: the replies show the SMPs as sent. The first
        // write is lost, so the first SMP is a re-send.
        let (f, _) = fake(1, 0);
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(f, params(2, 4), ttx);
        let sm = t.sm_identity();
        sm.m_key.store(0x005e_c2e7, Ordering::Relaxed);
        sm.m_key_protect.store(3, Ordering::Relaxed);
        sm.m_key_lease_s.store(15, Ordering::Relaxed);
        let mut pi = PortInfo::decode(&[0; 64]);
        pi.set_lid(4);
        let sent = [
            (METHOD_GET, ATTR_NODE_INFO, [0; 64]),
            (METHOD_SET, ATTR_PORT_INFO, pi.raw),
            (METHOD_SET, ATTR_MFT, [0xab; 64]),
        ];
        let mut rxs = Vec::new();
        for (m, a, d) in sent {
            let smp = Smp::request(&Route::Directed(vec![1, 2]), m, a, 0, &d).unwrap();
            rxs.push(t.submit(Route::Directed(vec![1, 2]), smp));
        }
        let mut attempts = Vec::new();
        for ((_, a, d), rx) in sent.into_iter().zip(rxs) {
            let r = wait(rx).await.unwrap();
            attempts.push(r.attempts);
            assert_eq!(r.smp.m_key(), 0x005e_c2e7, "attribute {a:#06x}");
            if a == ATTR_PORT_INFO {
                let got = PortInfo::decode(r.smp.data());
                assert_eq!(
                    (got.m_key(), got.m_key_protect(), got.m_key_lease(), got.lid()),
                    (0x005e_c2e7, 3, 15, 4)
                );
            } else {
                assert_eq!(r.smp.data(), &d, "only PortInfo data gets the protection");
            }
        }
        assert_eq!(attempts[0], 2, "the first SMP was re-sent");
    }

    #[tokio::test]
    async fn replies_match_and_window_is_bounded() {
        let (f, max) = fake(0, 0);
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(f, params(0, 4), ttx);
        let mut rxs = Vec::new();
        for i in 0..50u32 {
            let smp = Smp::request(&Route::Directed(vec![1]), METHOD_GET, ATTR_NODE_INFO, i, &[0; 64]).unwrap();
            rxs.push(t.submit(Route::Directed(vec![1]), smp));
        }
        for (i, rx) in rxs.into_iter().enumerate() {
            let r = wait(rx).await.unwrap();
            assert_eq!(r.smp.attr_mod(), i as u32);
            assert_eq!(r.attempts, 1);
        }
        assert!(*max.lock().unwrap() <= 4);
        assert_eq!(t.stats().sent.load(Ordering::Relaxed), 50);
    }

    /// A port on which a SubnGet(SMInfo) from LID 7 is queued; records what is written.
    struct Asked {
        queue: VecDeque<Vec<u8>>,
        written: Arc<Mutex<Vec<Vec<u8>>>>,
        /// Nothing is read before something was written (the test sets the SM state first).
        hold: bool,
    }

    impl RawPort for Asked {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
            self.written.lock().unwrap().push(buf.to_vec());
            Ok(())
        }
        fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
            if self.hold && self.written.lock().unwrap().is_empty() {
                return None;
            }
            let p = self.queue.pop_front()?;
            buf[..p.len()].copy_from_slice(&p);
            Some(p.len())
        }
        fn wait(&mut self, _: Duration) {}
        fn agent(&self, class: u8) -> u32 {
            u32::from(class) + 100
        }
    }

    #[tokio::test]
    async fn sm_info_requests_are_answered_to_their_source_lid() {
        use crate::mad::{SmInfo, ATTR_NODE_DESC, SM_STATE_MASTER};
        let request = |attr: u16, tid: u64| {
            let mut smp = Smp::request(&Route::Lid(2), METHOD_GET, attr, 0, &[0; 64]).unwrap();
            smp.set_tid(tid);
            let mut p = vec![0u8; UMAD_HDR_LEN];
            p[28..30].copy_from_slice(&7u16.to_be_bytes());
            p.extend_from_slice(&smp.bytes[..232]);
            p
        };
        let written = Arc::new(Mutex::new(Vec::new()));
        let port = Asked {
            queue: VecDeque::from([request(ATTR_SM_INFO, 0x0001_0000_0000_0005), request(ATTR_NODE_DESC, 6)]),
            written: written.clone(),
            hold: false,
        };
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(port, params(0, 4), ttx);
        let sm = t.sm_identity();
        sm.guid.store(0x0002_c980_0000_0001, Ordering::Relaxed);
        sm.priority.store(9, Ordering::Relaxed);
        sm.state.store(SM_STATE_MASTER, Ordering::Relaxed);
        // Sending something makes the thread poll the port (and go through its queue).
        let _ = t.call(Route::Lid(3), METHOD_GET, ATTR_NODE_INFO, 0, &[0; 64]).await;
        let t0 = Instant::now();
        while t.stats().sm_requests.load(Ordering::Relaxed) < 2 {
            assert!(t0.elapsed() < Duration::from_secs(5), "requests not answered");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let w = written.lock().unwrap();
        let replies: Vec<Smp> = w
            .iter()
            .map(|p| Smp::parse(&p[UMAD_HDR_LEN..]).unwrap())
            .filter(|s| s.method() == METHOD_GET_RESP)
            .collect();
        assert_eq!(replies.len(), 2, "{replies:?}");
        let r = replies.iter().find(|r| r.attr_id() == ATTR_SM_INFO).unwrap();
        // The TID is echoed whole; the reply goes to the requester's LID on the LID agent.
        assert_eq!(r.tid(), 0x0001_0000_0000_0005);
        assert_eq!(r.status(), 0);
        let raw = w
            .iter()
            .find(|p| p[UMAD_HDR_LEN + 3] == METHOD_GET_RESP && p[UMAD_HDR_LEN + 17] == 0x20)
            .unwrap();
        assert_eq!(u16::from_be_bytes([raw[28], raw[29]]), 7);
        assert_eq!(
            u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]),
            u32::from(CLASS_SMP_LID) + 100
        );
        let info = SmInfo::decode(r.data());
        assert_eq!(info.guid, 0x0002_c980_0000_0001);
        assert_eq!((info.priority, info.state), (9, SM_STATE_MASTER));
        assert!(info.act_count >= 1, "ActCount counts the SMPs sent");
        let other = replies.iter().find(|r| r.attr_id() == ATTR_NODE_DESC).unwrap();
        assert_eq!(other.status(), STATUS_UNSUPPORTED_ATTR);
    }

    /// A directed-route SMInfo request as ibsim forwards it to the SM client: HopPointer 0, two
    /// hops (InitialPath 1,7), the ReturnPath the simulator walked (1,3,1), `m_key` in the
    /// header, `data` as attribute data.
    fn dr_request(method: u8, modifier: u32, tid: u64, m_key: u64, data: &[u8; 64]) -> Vec<u8> {
        let mut smp = Smp::request(&Route::Directed(vec![1, 7]), method, ATTR_SM_INFO, modifier, data).unwrap();
        smp.set_tid(tid);
        smp.bytes[24..32].copy_from_slice(&m_key.to_be_bytes());
        smp.bytes[192..195].copy_from_slice(&[1, 3, 1]);
        let mut p = vec![0u8; UMAD_HDR_LEN];
        // ibsim leaves the source LID of a directed-route SMP at 0xffff.
        p[28..30].copy_from_slice(&0xffffu16.to_be_bytes());
        p.extend_from_slice(&smp.bytes[..232]);
        p
    }

    #[tokio::test]
    async fn dr_sm_info_requests_are_answered_along_their_return_path() {
        use crate::mad::{SMINFO_STANDBY, SM_STATE_MASTER, SM_STATE_STANDBY};
        let their = SmInfo {
            guid: 0xbeef,
            sm_key: 0x1234,
            act_count: 1,
            priority: 1,
            state: SM_STATE_STANDBY,
        }
        .encode();
        // A response travelling back (D bit set) that is not ours: not a request to answer.
        let mut stray = dr_request(METHOD_GET, 0, 9, 0, &[0; 64]);
        stray[UMAD_HDR_LEN + 4] = 0x80;
        let written = Arc::new(Mutex::new(Vec::new()));
        let port = Asked {
            queue: VecDeque::from([
                dr_request(METHOD_GET, 0, 0x0003_0000_0000_0011, 0, &[0; 64]),
                dr_request(METHOD_SET, SMINFO_STANDBY, 0x0003_0000_0000_0012, 0, &their),
                dr_request(METHOD_SET, SMINFO_STANDBY, 0x0003_0000_0000_0013, 0x66, &their),
                dr_request(METHOD_GET, 0, 0x0003_0000_0000_0014, 0x77, &[0; 64]),
                stray,
            ]),
            written: written.clone(),
            hold: false,
        };
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(port, params(0, 4), ttx);
        let sm = t.sm_identity();
        sm.guid.store(0x0002_c980_0000_0001, Ordering::Relaxed);
        sm.priority.store(14, Ordering::Relaxed);
        sm.state.store(SM_STATE_MASTER, Ordering::Relaxed);
        sm.sm_key.store(0x1234, Ordering::Relaxed);
        // The port has an M_Key: only a request carrying it reads the SM_Key.
        sm.m_key.store(0x77, Ordering::Relaxed);
        let _ = t.call(Route::Lid(3), METHOD_GET, ATTR_NODE_INFO, 0, &[0; 64]).await;
        let t0 = Instant::now();
        while t.stats().sm_requests.load(Ordering::Relaxed) < 4 {
            assert!(t0.elapsed() < Duration::from_secs(5), "requests not answered");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            t.stats().sm_requests.load(Ordering::Relaxed),
            4,
            "the stray response is no request"
        );
        assert_eq!(t.stats().sm_set_requests.load(Ordering::Relaxed), 2);
        let w = written.lock().unwrap();
        let answers: Vec<&Vec<u8>> = w.iter().filter(|p| p[UMAD_HDR_LEN + 3] == METHOD_GET_RESP).collect();
        assert_eq!(answers.len(), 4);
        for (i, p) in answers.iter().enumerate() {
            // On the directed-route agent, to the permissive LID (the ReturnPath steers it).
            assert_eq!(
                u32::from_ne_bytes([p[0], p[1], p[2], p[3]]),
                u32::from(CLASS_SMP_DR) + 100
            );
            assert_eq!(u16::from_be_bytes([p[28], p[29]]), 0xffff);
            let r = Smp::parse(&p[UMAD_HDR_LEN..]).unwrap();
            assert_eq!(r.tid(), 0x0003_0000_0000_0011 + i as u64, "TID echoed whole");
            assert!(r.direction(), "D bit");
            assert_eq!((r.hop_pointer(), r.hop_count()), (0, 2));
            assert_eq!(r.return_path(), &[3, 1]);
            assert_eq!(r.initial_path(), &[1, 7]);
            assert_eq!(r.status(), 0);
            let info = SmInfo::decode(r.data());
            assert_eq!(info.guid, 0x0002_c980_0000_0001);
            assert_eq!((info.priority, info.state), (14, SM_STATE_MASTER));
            // SM_Key only to the request that passed the M_Key check (not even to a Set
            // whose SMInfo holds the right SM_Key).
            assert_eq!(info.sm_key, if i == 3 { 0x1234 } else { 0 }, "answer {i}");
        }
        let r = Smp::parse(&answers[1][UMAD_HDR_LEN..]).unwrap();
        assert_eq!(r.attr_mod(), SMINFO_STANDBY);
    }

    #[tokio::test]
    async fn traps_are_repressed_to_their_source_lid() {
        use crate::mad::{METHOD_TRAP_REPRESS, SMP_DATA_OFFSET};
        let mut trap = Smp::request(&Route::Lid(1), METHOD_TRAP, crate::mad::ATTR_NOTICE, 0, &[7; 64]).unwrap();
        trap.set_tid(0x0000_0002_0000_0031);
        let mut p = vec![0u8; UMAD_HDR_LEN];
        p[28..30].copy_from_slice(&9u16.to_be_bytes());
        p.extend_from_slice(&trap.bytes[..232]);
        let written = Arc::new(Mutex::new(Vec::new()));
        let port = Asked {
            queue: VecDeque::from([p]),
            written: written.clone(),
            hold: false,
        };
        let (ttx, mut trx) = mpsc::unbounded_channel();
        let t = Transport::start(port, params(0, 4), ttx);
        let _ = t.call(Route::Lid(3), METHOD_GET, ATTR_NODE_INFO, 0, &[0; 64]).await;
        // The trap still reaches the driver.
        let got = tokio::time::timeout(Duration::from_secs(5), trx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.tid(), 0x0000_0002_0000_0031);
        assert_eq!(t.stats().traps.load(Ordering::Relaxed), 1);
        assert_eq!(t.stats().trap_represses.load(Ordering::Relaxed), 1);
        let w = written.lock().unwrap();
        let r = w
            .iter()
            .find(|p| p[UMAD_HDR_LEN + 3] == METHOD_TRAP_REPRESS)
            .expect("a TrapRepress");
        // To the trap's source LID, on the LID-routed agent, TID and notice echoed.
        assert_eq!(u16::from_be_bytes([r[28], r[29]]), 9);
        assert_eq!(
            u32::from_ne_bytes([r[0], r[1], r[2], r[3]]),
            u32::from(CLASS_SMP_LID) + 100
        );
        let s = Smp::parse(&r[UMAD_HDR_LEN..]).unwrap();
        assert_eq!(s.tid(), 0x0000_0002_0000_0031);
        assert_eq!(s.attr_id(), crate::mad::ATTR_NOTICE);
        assert_eq!(&s.bytes[SMP_DATA_OFFSET..SMP_DATA_OFFSET + 64], &[7u8; 64][..]);
        assert_eq!(t.stats().sm_requests.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn dropping_the_transport_abandons_smps_in_flight() {
        // Every write is lost and the deadline is long: the SMP stays in flight.
        let (f, _) = fake(usize::MAX, 0);
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(
            f,
            TransportParams {
                timeout: Duration::from_secs(600),
                retries: 5,
                window: 4,
                perf_window: 4,
            },
            ttx,
        );
        let smp = Smp::request(&Route::Directed(vec![1]), METHOD_GET, ATTR_NODE_INFO, 0, &[0; 64]).unwrap();
        let rx = t.submit(Route::Directed(vec![1]), smp);
        while t.stats().sent.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Returns (joins the thread) without waiting for the deadline: the test would hang.
        drop(t);
        assert_eq!(wait(rx).await.unwrap_err(), TransportError::Closed);
    }

    #[tokio::test]
    async fn sa_queries_are_answered_not_supported_to_the_requesters_lid_and_qp() {
        // A SubnAdmGetTable(NodeRecord) from LID 9, QP 0x47 (as `saquery` sends it), and a CM
        // MAD (a guard class: dropped, not answered).
        let mut mad = [0u8; MAD_SIZE];
        mad[..4].copy_from_slice(&[
            1,
            sa::CLASS_SUBN_ADM,
            sa::SA_CLASS_VERSION,
            fabric_sa::wire::METHOD_GET_TABLE,
        ]);
        mad[8..16].copy_from_slice(&0x0000_0005_0000_0077u64.to_be_bytes());
        mad[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
        let packet = |mad: &[u8; MAD_SIZE]| {
            let mut p = vec![0u8; UMAD_HDR_LEN];
            p[20..24].copy_from_slice(&0x47u32.to_be_bytes());
            p[28..30].copy_from_slice(&9u16.to_be_bytes());
            p.extend_from_slice(&mad[..232]);
            p
        };
        let mut cm = mad;
        cm[1] = 0x07;
        cm[3] = fabric_sa::wire::METHOD_GET;
        let written = Arc::new(Mutex::new(Vec::new()));
        let port = Asked {
            queue: VecDeque::from([packet(&mad), packet(&cm)]),
            written: written.clone(),
            hold: true,
        };
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(port, params(0, 4), ttx);
        // The master (a standby without a service drops SA requests: see below).
        t.sm_identity()
            .state
            .store(crate::mad::SM_STATE_MASTER, Ordering::Relaxed);
        // Drives the loop (the port answers no SMP: this one times out after the MADs were read).
        let _ = t.call(Route::Lid(3), METHOD_GET, ATTR_NODE_INFO, 0, &[0; 64]).await;
        assert_eq!(t.stats().sa_requests.load(Ordering::Relaxed), 1);
        assert_eq!(t.stats().gsi_dropped.load(Ordering::Relaxed), 1);
        let w = written.lock().unwrap();
        let gsi: Vec<_> = w.iter().filter(|p| p[UMAD_HDR_LEN + 1] != CLASS_SMP_LID).collect();
        assert_eq!(gsi.len(), 1, "one GSI answer (none for the CM MAD)");
        let r = gsi[0];
        // Agent of class 0x03, requester's QP and LID, QP1's Q_Key; GetTableResp, status 0x000C.
        assert_eq!(
            u32::from_ne_bytes([r[0], r[1], r[2], r[3]]),
            u32::from(sa::CLASS_SUBN_ADM) + 100
        );
        assert_eq!(u32::from_be_bytes([r[20], r[21], r[22], r[23]]), 0x47);
        assert_eq!(u32::from_be_bytes([r[24], r[25], r[26], r[27]]), sa::QP1_QKEY);
        assert_eq!(u16::from_be_bytes([r[28], r[29]]), 9);
        let m = &r[UMAD_HDR_LEN..];
        assert_eq!(m[3], 0x92);
        assert_eq!(
            u16::from_be_bytes([m[4], m[5]]),
            fabric_sa::wire::status::UNSUPPORTED_METHOD_ATTR
        );
        assert_eq!(m[8..18], mad[8..18]);
    }

    #[test]
    fn sm_key_goes_to_everyone_without_an_m_key_and_sets_are_counted() {
        use crate::mad::{SMINFO_DISABLE, SM_STATE_MASTER};
        let sm = Arc::new(SmIdentity::default());
        let stats = Arc::new(Stats::default());
        sm.guid.store(0x42, Ordering::Relaxed);
        sm.state.store(SM_STATE_MASTER, Ordering::Relaxed);
        sm.sm_key.store(1, Ordering::Relaxed);
        stats.sent.store(0x1_0000_0007, Ordering::Relaxed);
        let mut r = SmResponder::new(sm.clone(), stats.clone());
        let req = |method: u8, m_key: u64| {
            let raw = dr_request(method, SMINFO_DISABLE, 5, m_key, &[0; 64]);
            Smp::parse(&raw[UMAD_HDR_LEN..]).unwrap()
        };
        for (method, m_key) in [
            (METHOD_GET, 0),
            (METHOD_GET, 0x99),
            (METHOD_SET, 0x99),
            (METHOD_SET, 0x99),
        ] {
            let (resp, to) = r.answer(&req(method, m_key), 0xffff);
            assert_eq!(to, 0xffff);
            let info = SmInfo::decode(resp.data());
            // No M_Key on the port: every requester passes the check and reads the key (what
            // OpenSM, key 1 by default, needs to accept this master).
            assert_eq!((info.guid, info.sm_key, info.state), (0x42, 1, SM_STATE_MASTER));
            // ActCount is the low 32 bits of the SMPs sent.
            assert_eq!(info.act_count, 7);
        }
        assert_eq!(stats.sm_requests.load(Ordering::Relaxed), 4);
        assert_eq!(stats.sm_set_requests.load(Ordering::Relaxed), 2);
        // Logged once per (requester GUID, modifier): the two DISABLE Sets of GUID 0 count once.
        assert_eq!(r.sets_logged.len(), 1);
        // Another attribute: unsupported, on the same route.
        let mut other = req(METHOD_GET, 0);
        other.bytes[16..18].copy_from_slice(&crate::mad::ATTR_NODE_DESC.to_be_bytes());
        let (resp, _) = r.answer(&other, 0xffff);
        assert_eq!(resp.status(), STATUS_UNSUPPORTED_ATTR);
        assert!(resp.direction());
        // A request whose directed part ended at a switch and a LID-routed part (DrDLID)
        // brought here goes back to the LRH source LID first.
        let mut mixed = req(METHOD_GET, 0);
        mixed.bytes[34..36].copy_from_slice(&9u16.to_be_bytes());
        assert_eq!(r.answer(&mixed, 12).1, 12);
    }

    #[tokio::test]
    async fn bounced_smps_are_resent_at_once() {
        // The request comes back undelivered (umad status ETIMEDOUT, method still Get): it is
        // re-sent at once, not left to its deadline, and not taken for a request to answer.
        let (f, _) = fake(0, 3);
        let (ttx, _trx) = mpsc::unbounded_channel();
        let p = TransportParams {
            timeout: Duration::from_secs(30),
            retries: 3,
            window: 4,
            perf_window: 4,
        };
        let t = Transport::start(f, p, ttx);
        let t0 = Instant::now();
        let r = t
            .call(Route::Directed(vec![1]), METHOD_GET, ATTR_NODE_INFO, 0, &[0; 64])
            .await
            .unwrap();
        assert_eq!(r.attempts, 4);
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(t.stats().sm_requests.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn lost_and_bounced_smps_are_retried_then_given_up() {
        let (f, _) = fake(1, 1);
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(f, params(2, 4), ttx);
        let r = t
            .call(Route::Directed(vec![]), METHOD_GET, ATTR_NODE_INFO, 0, &[0; 64])
            .await
            .unwrap();
        assert_eq!(r.attempts, 3);
        assert_eq!(t.stats().retries.load(Ordering::Relaxed), 2);

        let (f, _) = fake(10, 0);
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(f, params(2, 4), ttx);
        let e = t
            .call(Route::Lid(3), METHOD_GET, ATTR_NODE_INFO, 0, &[0; 64])
            .await
            .unwrap_err();
        assert_eq!(e, TransportError::Timeout { attempts: 3 });
    }
}
