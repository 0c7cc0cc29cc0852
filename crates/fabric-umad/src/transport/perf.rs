//! The Performance Management lane of the transport thread: PerfMgt GMPs (class 0x04, QP1)
//! with their own small window, so that reading port counters never takes a slot from the
//! subnet management SMPs.
//!
//! * **Budget:** at most `perf_window` PerfMgt MADs in flight, counted apart from the SMP
//!   window (the two add up: the simulator's deadlock bound of ~32 outstanding MADs stays
//!   out of reach with the defaults, 16 + 4).
//! * **Priority:** a new PerfMgt MAD is sent only in a round where no normal-priority SMP is
//!   waiting for a slot (LID configuration, LFT upload, sweeps go first); re-sends of MADs
//!   already admitted go at once.
//! * **Deadlines and retries:** those of the SMPs (`timeout` per attempt, `retries` re-sends);
//!   a MAD bounced by the simulator (umad status `ETIMEDOUT`) is re-sent at once.
//!
//! Replies are matched on the low 32 bits of the TID, drawn from the thread's one counter (so
//! they never collide with an SMP's), and only for class-0x04 packets: the transport thread
//! hands every class-0x04 packet here first ([`PerfLane::on_packet`]) and passes on what is not
//! ours (to the GSI agent, which drops it).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::oneshot;

use super::device::{RawPort, UMAD_HDR_LEN};
use super::shared::Stats;
use super::{TransportError, TransportParams, TID_HIGH};
use crate::mad::{PerfMad, CLASS_PERF_MGT, MAD_SIZE};
use crate::sa::QP1_QKEY;

/// A good PerfMgt reply.
#[derive(Clone, Debug)]
pub struct PerfReply {
    /// The GetResp (its MAD status may still be non-zero: the caller decides).
    pub mad: PerfMad,
    /// Attempts it took (1 = first try).
    pub attempts: u32,
}

/// A queued PerfMgt request: the MAD for the agent at `lid`.
pub(super) struct PerfRequest {
    pub(super) lid: u16,
    pub(super) mad: PerfMad,
    pub(super) reply: oneshot::Sender<Result<PerfReply, TransportError>>,
}

struct InFlight {
    req: PerfRequest,
    attempts: u32,
    deadline: Instant,
}

/// The lane: waiting requests, those in flight (by low TID), those to re-send.
pub(super) struct PerfLane {
    window: usize,
    queue: VecDeque<PerfRequest>,
    inflight: HashMap<u32, InFlight>,
    retry: Vec<InFlight>,
}

impl PerfLane {
    /// A lane of `window` MADs in flight (at least one).
    pub(super) fn new(window: usize) -> PerfLane {
        PerfLane {
            window: window.max(1),
            queue: VecDeque::new(),
            inflight: HashMap::new(),
            retry: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, r: PerfRequest) {
        self.queue.push_back(r);
    }

    /// Nothing waiting, in flight or to re-send.
    pub(super) fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.inflight.is_empty() && self.retry.is_empty()
    }

    /// Gives up every request (their receivers see the channel closed) and returns the low
    /// TIDs of those still in flight, whose answers may yet arrive.
    pub(super) fn abandon(self) -> impl Iterator<Item = u32> {
        self.inflight.into_keys()
    }

    /// MADs in flight.
    pub(super) fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Sends the re-sends, then (unless `smps_waiting`) new requests, while fewer than the
    /// window are in flight.
    pub(super) fn send<P: RawPort>(
        &mut self,
        port: &mut P,
        smps_waiting: bool,
        next_tid: &mut u32,
        params: &TransportParams,
        stats: &Stats,
    ) {
        let mut out = [0u8; UMAD_HDR_LEN + MAD_SIZE];
        let resend: Vec<InFlight> = self.retry.drain(..).collect();
        for f in resend {
            self.transmit(f, port, next_tid, params, stats, &mut out);
        }
        while !smps_waiting && self.inflight.len() < self.window {
            let Some(req) = self.queue.pop_front() else { break };
            let f = InFlight {
                req,
                attempts: 0,
                deadline: Instant::now(),
            };
            self.transmit(f, port, next_tid, params, stats, &mut out);
        }
    }

    fn transmit<P: RawPort>(
        &mut self,
        mut f: InFlight,
        port: &mut P,
        next_tid: &mut u32,
        params: &TransportParams,
        stats: &Stats,
        out: &mut [u8; UMAD_HDR_LEN + MAD_SIZE],
    ) {
        let tid = *next_tid;
        *next_tid = next_tid.wrapping_add(1).max(1);
        f.req.mad.set_tid(TID_HIGH | u64::from(tid));
        f.attempts += 1;
        f.deadline = Instant::now() + params.timeout;
        encode(out, port, f.req.lid, &f.req.mad, params);
        stats.perf_sent.fetch_add(1, Ordering::Relaxed);
        // A failed write is an attempt lost: the deadline re-sends it.
        let _ = port.write(&out[..]);
        self.inflight.insert(tid, f);
    }

    /// A received class-0x04 packet (`rx`: umad header and MAD, `status`: its umad status).
    /// Returns whether it was the answer to (or the bounce of) one of ours.
    pub(super) fn on_packet(&mut self, rx: &[u8], status: u32, params: &TransportParams, stats: &Stats) -> bool {
        let Ok(mad) = PerfMad::parse(&rx[UMAD_HDR_LEN.min(rx.len())..]) else {
            return false;
        };
        // A response, or one of our requests coming back undelivered.
        if mad.method() & 0x80 == 0 && status == 0 {
            return false;
        }
        let Some(f) = self.inflight.remove(&(mad.tid() as u32)) else {
            return false;
        };
        if status != 0 {
            self.fail_or_retry(f, params, stats);
        } else {
            let _ = f.req.reply.send(Ok(PerfReply {
                mad,
                attempts: f.attempts,
            }));
        }
        true
    }

    /// Re-sends or gives up the MADs whose deadline passed.
    pub(super) fn expire(&mut self, now: Instant, params: &TransportParams, stats: &Stats) {
        let expired: Vec<u32> = self
            .inflight
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in expired {
            if let Some(f) = self.inflight.remove(&t) {
                self.fail_or_retry(f, params, stats);
            }
        }
    }

    fn fail_or_retry(&mut self, f: InFlight, params: &TransportParams, stats: &Stats) {
        if f.attempts <= params.retries {
            stats.perf_retries.fetch_add(1, Ordering::Relaxed);
            self.retry.push(f);
        } else {
            stats.perf_failures.fetch_add(1, Ordering::Relaxed);
            let attempts = f.attempts;
            let _ = f.req.reply.send(Err(TransportError::Timeout { attempts }));
        }
    }
}

/// The packet of a PerfMgt request: from the agent of class 0x04 to `lid`, QP1 with its Q_Key,
/// SL 0, the deadline as `timeout_ms` (the kernel matches replies only to requests sent with
/// one).
fn encode<P: RawPort>(out: &mut [u8; UMAD_HDR_LEN + MAD_SIZE], port: &P, lid: u16, mad: &PerfMad, p: &TransportParams) {
    out[..UMAD_HDR_LEN].fill(0);
    out[0..4].copy_from_slice(&port.agent(CLASS_PERF_MGT).to_ne_bytes());
    let ms = u32::try_from(p.timeout.as_millis()).unwrap_or(u32::MAX).max(1);
    out[8..12].copy_from_slice(&ms.to_ne_bytes());
    out[20..24].copy_from_slice(&1u32.to_be_bytes());
    out[24..28].copy_from_slice(&QP1_QKEY.to_be_bytes());
    out[28..30].copy_from_slice(&lid.to_be_bytes());
    out[UMAD_HDR_LEN..].copy_from_slice(&mad.bytes);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::sync::mpsc;

    use fabric_southbound::PortCounters;

    use super::super::{wait, wait_perf, Transport};
    use super::*;
    use crate::mad::*;

    /// What the fake agent saw: the class of every packet written, and the PerfMgt MADs
    /// written but not answered yet (most at once).
    #[derive(Default)]
    struct Seen {
        classes: Mutex<Vec<u8>>,
        perf_out: AtomicUsize,
        perf_max: AtomicUsize,
    }

    /// A port answering every MAD (PerfMgt ones with PortCounters data naming their LID and
    /// PortSelect), one answer per `read`, none before `release` is set.
    struct Agent {
        answers: std::collections::VecDeque<Vec<u8>>,
        seen: Arc<Seen>,
        release: Arc<AtomicBool>,
    }

    impl RawPort for Agent {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
            let class = buf[UMAD_HDR_LEN + 1];
            self.seen.classes.lock().unwrap().push(class);
            let mut p = buf.to_vec();
            if class == CLASS_PERF_MGT {
                let n = self.seen.perf_out.fetch_add(1, Ordering::SeqCst) + 1;
                self.seen.perf_max.fetch_max(n, Ordering::SeqCst);
                // QP1, its Q_Key, the agent of class 0x04.
                assert_eq!(u32::from_be_bytes([p[20], p[21], p[22], p[23]]), 1);
                assert_eq!(u32::from_be_bytes([p[24], p[25], p[26], p[27]]), QP1_QKEY);
                assert_eq!(u32::from_ne_bytes([p[0], p[1], p[2], p[3]]), 104);
                let req = PerfMad::parse(&p[UMAD_HDR_LEN..]).unwrap();
                let lid = u16::from_be_bytes([p[28], p[29]]);
                let c = PortCounters {
                    symbol_errors: u64::from(lid),
                    ..PortCounters::default()
                };
                let r = req.response(0, &encode_port_counters(&c, req.port_select()));
                p[UMAD_HDR_LEN..].copy_from_slice(&r.bytes);
            } else {
                p[UMAD_HDR_LEN + 3] = METHOD_GET_RESP;
            }
            self.answers.push_back(p);
            Ok(())
        }
        fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
            if !self.release.load(Ordering::SeqCst) {
                return None;
            }
            let p = self.answers.pop_front()?;
            if p[UMAD_HDR_LEN + 1] == CLASS_PERF_MGT {
                self.seen.perf_out.fetch_sub(1, Ordering::SeqCst);
            }
            buf[..p.len()].copy_from_slice(&p);
            Some(p.len())
        }
        fn wait(&mut self, _: Duration) {}
        fn agent(&self, class: u8) -> u32 {
            u32::from(class) + 100
        }
    }

    fn start(window: usize, perf_window: usize, released: bool) -> (Transport, Arc<Seen>, Arc<AtomicBool>) {
        let seen = Arc::new(Seen::default());
        let release = Arc::new(AtomicBool::new(released));
        let port = Agent {
            answers: Default::default(),
            seen: seen.clone(),
            release: release.clone(),
        };
        let (ttx, _trx) = mpsc::unbounded_channel();
        let params = TransportParams {
            timeout: Duration::from_secs(5),
            retries: 0,
            window,
            perf_window,
        };
        (Transport::start(port, params, ttx), seen, release)
    }

    #[tokio::test]
    async fn never_more_than_the_perf_window_in_flight() {
        let (t, seen, _) = start(16, 3, true);
        let rxs: Vec<_> = (0..60u16)
            .map(|i| t.submit_perf(10 + i, PerfMad::get(ATTR_PORT_COUNTERS, (i % 36) as u8 + 1)))
            .collect();
        for (i, rx) in rxs.into_iter().enumerate() {
            let r = wait_perf(rx).await.unwrap();
            assert_eq!(r.attempts, 1);
            // Each answer is matched to its own request.
            assert_eq!(r.mad.port_select(), (i % 36) as u8 + 1);
            assert_eq!(port_counters(r.mad.data(), 0).symbol_errors, 10 + i as u64);
        }
        let max = seen.perf_max.load(Ordering::SeqCst);
        assert!(
            (1..=3).contains(&max),
            "{max} PerfMgt MADs in flight with a window of 3"
        );
        assert_eq!(t.stats().perf_sent.load(Ordering::Relaxed), 60);
        assert_eq!(t.stats().sent.load(Ordering::Relaxed), 0, "PerfMgt MADs are not SMPs");
    }

    #[tokio::test]
    async fn waiting_smps_go_before_perf_mads() {
        // Nothing is answered until everything is queued: 2 SMPs fill the window, 18 wait.
        let (t, seen, release) = start(2, 4, false);
        let smps: Vec<_> = (0..20u32)
            .map(|i| {
                let smp = Smp::request(&Route::Lid(3), METHOD_GET, ATTR_NODE_INFO, i, &[0; 64]).unwrap();
                t.submit(Route::Lid(3), smp)
            })
            .collect();
        let perf: Vec<_> = (0..8u8)
            .map(|i| t.submit_perf(7, PerfMad::get(ATTR_PORT_COUNTERS, i + 1)))
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            *seen.classes.lock().unwrap(),
            vec![CLASS_SMP_LID; 2],
            "no PerfMgt MAD while SMPs wait for the window"
        );
        release.store(true, Ordering::SeqCst);
        for rx in smps {
            wait(rx).await.unwrap();
        }
        for rx in perf {
            wait_perf(rx).await.unwrap();
        }
        let classes = seen.classes.lock().unwrap().clone();
        let last_smp = classes.iter().rposition(|&c| c == CLASS_SMP_LID).unwrap();
        let first_perf = classes.iter().position(|&c| c == CLASS_PERF_MGT).unwrap();
        assert!(first_perf > last_smp, "{classes:?}");
        assert!(seen.perf_max.load(Ordering::SeqCst) <= 4);
    }

    #[tokio::test]
    async fn unanswered_perf_mads_time_out_alone() {
        // Never answered: the PerfMgt MAD is re-sent then given up; the SMPs still get theirs.
        let seen = Arc::new(Seen::default());
        struct Deaf(Arc<Seen>);
        impl RawPort for Deaf {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
                self.0.classes.lock().unwrap().push(buf[UMAD_HDR_LEN + 1]);
                Ok(())
            }
            fn read(&mut self, _: &mut [u8]) -> Option<usize> {
                None
            }
            fn wait(&mut self, _: Duration) {}
            fn agent(&self, class: u8) -> u32 {
                u32::from(class)
            }
        }
        let (ttx, _trx) = mpsc::unbounded_channel();
        let t = Transport::start(
            Deaf(seen.clone()),
            TransportParams {
                timeout: Duration::from_millis(20),
                retries: 2,
                window: 4,
                perf_window: 2,
            },
            ttx,
        );
        let e = wait_perf(t.submit_perf(5, PerfMad::get(ATTR_PORT_COUNTERS, 1)))
            .await
            .unwrap_err();
        assert_eq!(e, TransportError::Timeout { attempts: 3 });
        let s = t.stats();
        assert_eq!(
            (
                s.perf_sent.load(Ordering::Relaxed),
                s.perf_retries.load(Ordering::Relaxed),
                s.perf_failures.load(Ordering::Relaxed)
            ),
            (3, 2, 1)
        );
        assert_eq!(s.failures.load(Ordering::Relaxed), 0, "no SMP failed");
    }
}
