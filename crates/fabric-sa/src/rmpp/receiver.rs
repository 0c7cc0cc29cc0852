//! The RMPP receiver (IBA vol. 1 13.6.6): one transfer (one TID) reassembled from its DATA
//! segments, with the ACKs it owes the sender. Pure: the caller hands in each received MAD and
//! the current instant, and sends the MAD that comes back.
//!
//! Wire rules, as the Linux kernel's `mad_rmpp.c` applies them (the SA's peer on every real
//! HCA), verified there:
//!
//! * SegmentNumber (Data1) counts from 1; segment 1 carries the FIRST flag, the final one the
//!   LAST flag (a one-segment transfer carries both); ACTIVE is set on every RMPP MAD.
//! * PayloadLength (Data2) counts the RMPP data of a segment, i.e. everything after the 36-byte
//!   common + RMPP header: [`SEGMENT_PAYLOAD`] = 220 bytes a segment, of which the SA class
//!   header (SM_Key, AttributeOffset, ComponentMask: 20 bytes) is repeated in every segment and
//!   200 are SA data. The FIRST segment says `segments × 220 − pad`, the LAST one `220 − pad`
//!   (middle segments 0), where `pad` is the unused tail of the last segment's 200 data bytes.
//!   The transfer's SA data is therefore `segments × 200 − (220 − last PayloadLength)` bytes.
//! * The receiver ACKs with type ACK, SegmentNumber = the last segment received in order and
//!   NewWindowLast = the last segment the sender may send before the next ACK. It ACKs
//!   segment 1 at once (the kernel's `start_rmpp`: a sender starts with a window of one and
//!   learns the receiver's from that ACK), then when the window's last segment or the LAST
//!   segment arrives, and again on every duplicate (a re-sent segment means the sender missed
//!   an ACK). Out-of-order segments are dropped and
//!   answered with an ACK of what was received in order, so the sender resends from there.
//! * The ACK carries the DATA segments' header with the response bit of the method flipped
//!   (the kernel's `format_ack`: the ACK of a GetTableResp goes out with method GetTable),
//!   the same TID, attribute and SA header, and no data.
//! * Protocol errors end the transfer with an ABORT (status 118..127) or, for a transfer the
//!   receiver cannot hold, a STOP with status 1 (ResX). An ABORT or STOP from the sender ends
//!   it too.
//!
//! The reassembled size is bounded ([`ReceiverConfig::max_payload`], 16 MiB by default) by the
//! FIRST segment's PayloadLength and by the segments actually received.

use std::time::{Duration, Instant};

use super::{control_mad, status, RMPP_VERSION, SA_CLASS_HEADER, SEGMENT_PAYLOAD};
use crate::wire::{rmpp_flag, rmpp_type, SaHeader, MAD_SIZE, SA_DATA_SIZE, SA_HEADER_SIZE};

/// Segments the receiver lets the sender send past the last ACKed one.
pub const DEFAULT_WINDOW: u32 = 16;
/// Largest transfer accepted by default (SA data bytes).
pub const DEFAULT_MAX_PAYLOAD: usize = 16 << 20;
/// How long a transfer may go without a new segment before the receiver gives up
/// (IBA's total transaction timer is 40 s; a client gives up well before).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Limits of one reassembly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Segments the sender may send past the last one ACKed (NewWindowLast − SegmentNumber).
    pub window: u32,
    /// Largest transfer accepted (SA data bytes); a larger one is STOPped (ResX).
    pub max_payload: usize,
    /// How long the transfer may go without a new in-order segment.
    pub idle_timeout: Duration,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            window: DEFAULT_WINDOW,
            max_payload: DEFAULT_MAX_PAYLOAD,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Why a transfer ended without its payload.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RmppError {
    /// The receiver aborted: the sender broke the protocol (status 118..127).
    #[error("RMPP transfer aborted (status {status}): {why}")]
    Aborted { status: u8, why: String },
    /// The receiver stopped a transfer it cannot hold (ResX).
    #[error("RMPP transfer stopped: {0}")]
    Stopped(String),
    /// The sender sent ABORT or STOP.
    #[error("the sender ended the RMPP transfer (type {rmpp_type}, status {status})")]
    PeerEnded { rmpp_type: u8, status: u8 },
    /// No new segment within the idle timeout.
    #[error("RMPP transfer timed out after segment {last_segment}")]
    Timeout { last_segment: u32 },
}

/// A reassembled transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The header of the FIRST segment (method, status, TID, attribute, AttributeOffset, ...).
    pub header: SaHeader,
    /// The SA data of every segment, in order, cut to the length the LAST segment declares.
    pub data: Vec<u8>,
    /// Segments it took.
    pub segments: u32,
}

/// What became of the transfer after one MAD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Still receiving (the MAD was taken, or dropped as a duplicate / out of order).
    Receiving,
    /// Complete: every segment arrived.
    Complete(Transfer),
    /// Ended without a payload.
    Failed(RmppError),
}

/// The answer to one MAD: the MAD to send back to the sender (an ACK, ABORT or STOP) and
/// what became of the transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub reply: Option<Box<[u8; MAD_SIZE]>>,
    pub progress: Progress,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Receiving,
    /// Complete; duplicates of the final window are still ACKed.
    Done,
    Failed,
}

/// One reassembly.
#[derive(Clone, Debug)]
pub struct Receiver {
    cfg: ReceiverConfig,
    state: State,
    /// Header of the FIRST segment.
    first: Option<SaHeader>,
    /// Last segment received in order (0: none).
    last_in_order: u32,
    /// NewWindowLast of the last ACK.
    window_last: u32,
    /// Segments the FIRST segment's PayloadLength announces (0: not announced).
    announced: u32,
    data: Vec<u8>,
    last_progress: Instant,
}

impl Receiver {
    /// A receiver waiting for segment 1 of a transfer, at `now`.
    pub fn new(cfg: ReceiverConfig, now: Instant) -> Receiver {
        Receiver {
            cfg: ReceiverConfig {
                window: cfg.window.max(1),
                ..cfg
            },
            state: State::Receiving,
            first: None,
            last_in_order: 0,
            window_last: cfg.window.max(1),
            announced: 0,
            data: Vec::new(),
            last_progress: now,
        }
    }

    /// Whether the transfer is over (complete or failed).
    pub fn is_finished(&self) -> bool {
        self.state != State::Receiving
    }

    /// Takes one MAD of the transfer (an RMPP response: DATA, or ABORT/STOP from the sender)
    /// received at `now`.
    pub fn on_mad(&mut self, now: Instant, mad: &[u8]) -> Step {
        let Ok(h) = SaHeader::decode(mad) else {
            // Not an SA MAD (a runt, another class): not part of this transfer.
            return keep(None);
        };
        let r = h.rmpp;
        if self.state == State::Failed {
            return keep(None);
        }
        if r.flags & rmpp_flag::ACTIVE == 0 {
            // Not an RMPP MAD: not part of this transfer.
            return keep(None);
        }
        if r.version != RMPP_VERSION {
            return self.abort(&h, status::UNSUPPORTED_VERSION, format!("RMPPVersion {}", r.version));
        }
        match r.rmpp_type {
            rmpp_type::DATA => {}
            rmpp_type::ABORT | rmpp_type::STOP => {
                self.state = State::Failed;
                return Step {
                    reply: None,
                    progress: Progress::Failed(RmppError::PeerEnded {
                        rmpp_type: r.rmpp_type,
                        status: r.status,
                    }),
                };
            }
            // An ACK travels to the sender, never to a receiver: ignored.
            rmpp_type::ACK => return keep(None),
            t => return self.abort(&h, status::BAD_TYPE, format!("RMPPType {t}")),
        }
        if r.status != status::NORMAL {
            return self.abort(&h, status::ILLEGAL_STATUS, format!("DATA with RMPPStatus {}", r.status));
        }
        let seg = r.data1;
        let first_flag = r.flags & rmpp_flag::FIRST != 0;
        let last_flag = r.flags & rmpp_flag::LAST != 0;
        if seg == 0 || (seg == 1) != first_flag {
            return self.abort(
                &h,
                status::INCONSISTENT_FIRST,
                format!(
                    "segment {seg} with the FIRST flag {}",
                    if first_flag { "set" } else { "clear" }
                ),
            );
        }
        if self.state == State::Done {
            // A re-sent segment after completion: the final ACK was lost.
            return keep(Some(self.ack(&h)));
        }
        if seg <= self.last_in_order {
            // Duplicate: ACK again what we have.
            return keep(Some(self.ack(&h)));
        }
        if seg > self.window_last {
            return self.abort(
                &h,
                status::SEGMENT_TOO_BIG,
                format!("segment {seg} beyond the window (last {})", self.window_last),
            );
        }
        if seg != self.last_in_order + 1 {
            // Out of order: dropped; the ACK tells the sender where to resume.
            return keep((self.last_in_order > 0).then(|| self.ack(&h)));
        }
        if seg == 1 {
            if r.data2 > 0 {
                let announced = r.data2.div_ceil(SEGMENT_PAYLOAD);
                let bytes = u64::from(announced) * SA_DATA_SIZE as u64;
                if bytes > self.cfg.max_payload as u64 {
                    return self.stop(
                        &h,
                        format!("{} bytes announced, at most {} accepted", r.data2, self.cfg.max_payload),
                    );
                }
                self.announced = announced;
            }
            self.first = Some(h);
        }
        if self.announced > 0 && (seg > self.announced || (last_flag && seg != self.announced)) {
            return self.abort(
                &h,
                status::INCONSISTENT_LAST,
                format!(
                    "segment {seg}{} of a transfer of {} segments",
                    if last_flag { " (LAST)" } else { "" },
                    self.announced
                ),
            );
        }
        if self.data.len() + SA_DATA_SIZE > self.cfg.max_payload {
            return self.stop(&h, format!("more than {} bytes", self.cfg.max_payload));
        }
        let mut chunk = [0u8; SA_DATA_SIZE];
        let body = mad.get(SA_HEADER_SIZE..).unwrap_or_default();
        let n = body.len().min(SA_DATA_SIZE);
        chunk[..n].copy_from_slice(&body[..n]);
        self.data.extend_from_slice(&chunk);
        self.last_in_order = seg;
        self.last_progress = now;
        if last_flag {
            let paylen = r.data2;
            if !(SA_CLASS_HEADER..=SEGMENT_PAYLOAD).contains(&paylen) {
                return self.abort(
                    &h,
                    status::INCONSISTENT_LAST,
                    format!(
                        "LAST segment with PayloadLength {paylen} (expected {SA_CLASS_HEADER}..={SEGMENT_PAYLOAD})"
                    ),
                );
            }
            let pad = (SEGMENT_PAYLOAD - paylen) as usize;
            self.data.truncate(self.data.len() - pad);
            self.state = State::Done;
            let ack = self.ack(&h);
            let header = self.first.unwrap_or(h);
            return Step {
                reply: Some(ack),
                progress: Progress::Complete(Transfer {
                    header,
                    data: std::mem::take(&mut self.data),
                    segments: seg,
                }),
            };
        }
        if seg == 1 || seg == self.window_last {
            // The first segment is ACKed at once (the sender starts with a window of one and
            // learns the receiver's window from this ACK), then every window end.
            self.window_last = seg + self.cfg.window;
            return keep(Some(self.ack(&h)));
        }
        keep(None)
    }

    /// Checks the idle timeout at `now`: a transfer without progress for
    /// [`ReceiverConfig::idle_timeout`] fails (no MAD is sent: the sender's own timer ends it).
    pub fn on_tick(&mut self, now: Instant) -> Option<RmppError> {
        if self.state != State::Receiving {
            return None;
        }
        if now.saturating_duration_since(self.last_progress) >= self.cfg.idle_timeout {
            self.state = State::Failed;
            return Some(RmppError::Timeout {
                last_segment: self.last_in_order,
            });
        }
        None
    }

    /// The ACK owed for what was received in order (on the FIRST segment's header, status 0).
    fn ack(&self, data: &SaHeader) -> Box<[u8; MAD_SIZE]> {
        let mut h = self.first.unwrap_or(*data);
        h.status = 0;
        Box::new(super::ack(
            &h,
            self.last_in_order,
            self.window_last.max(self.last_in_order),
        ))
    }

    fn control(h: &SaHeader, rmpp_type: u8, st: u8) -> Box<[u8; MAD_SIZE]> {
        let mut h = *h;
        h.status = 0;
        Box::new(control_mad(&h, rmpp_type, st, 0, 0))
    }

    fn abort(&mut self, h: &SaHeader, st: u8, why: String) -> Step {
        self.fail(
            Some(Self::control(h, rmpp_type::ABORT, st)),
            RmppError::Aborted { status: st, why },
        )
    }

    fn stop(&mut self, h: &SaHeader, why: String) -> Step {
        self.fail(
            Some(Self::control(h, rmpp_type::STOP, status::RESOURCES_EXHAUSTED)),
            RmppError::Stopped(why),
        )
    }

    fn fail(&mut self, reply: Option<Box<[u8; MAD_SIZE]>>, e: RmppError) -> Step {
        self.state = State::Failed;
        self.data = Vec::new();
        Step {
            reply,
            progress: Progress::Failed(e),
        }
    }
}

fn keep(reply: Option<Box<[u8; MAD_SIZE]>>) -> Step {
    Step {
        reply,
        progress: Progress::Receiving,
    }
}

/// The DATA segments of a transfer (the builder both sides share, in the parent module).
pub use super::segments;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{self, attr};
    use proptest::prelude::*;

    fn header() -> SaHeader {
        SaHeader {
            class_version: 2,
            method: wire::METHOD_GET_TABLE_RESP,
            tid: 0x0102_0304_0506_0708,
            attr_id: attr::PATH_RECORD,
            attr_offset: 8,
            ..SaHeader::default()
        }
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn rmpp_of(mad: &[u8]) -> wire::RmppHeader {
        SaHeader::decode(mad).expect("header").rmpp
    }

    #[test]
    fn payload_length_follows_the_kernel() {
        // 450 bytes: 3 segments, 150 bytes of padding in the last one.
        let s = segments(&header(), &payload(450));
        assert_eq!(s.len(), 3);
        let r: Vec<_> = s.iter().map(|m| rmpp_of(&m[..])).collect();
        assert_eq!((r[0].data1, r[0].flags, r[0].data2), (1, 0x03, 3 * 220 - 150));
        assert_eq!((r[1].data1, r[1].flags, r[1].data2), (2, 0x01, 0));
        assert_eq!((r[2].data1, r[2].flags, r[2].data2), (3, 0x05, 220 - 150));
        // One segment: FIRST|LAST, PayloadLength of the last rule.
        let one = segments(&header(), &payload(64));
        assert_eq!(rmpp_of(&one[0][..]).flags, 0x07);
        assert_eq!(rmpp_of(&one[0][..]).data2, 220 - 136);
        // An empty table is one segment with only the SA header counted.
        let empty = segments(&header(), &[]);
        assert_eq!(rmpp_of(&empty[0][..]).data2, 20);
    }

    #[test]
    fn in_order_transfer_is_acked_at_window_ends_and_at_the_last_segment() {
        let t0 = Instant::now();
        let data = payload(200 * 5 + 17);
        let segs = segments(&header(), &data);
        let mut r = Receiver::new(
            ReceiverConfig {
                window: 2,
                ..ReceiverConfig::default()
            },
            t0,
        );
        let mut acks = Vec::new();
        let mut done = None;
        for s in &segs {
            let step = r.on_mad(t0, &s[..]);
            if let Some(a) = step.reply {
                let h = SaHeader::decode(&a[..]).expect("ack");
                assert_eq!(
                    h.method,
                    wire::METHOD_GET_TABLE,
                    "ACK method is the response bit flipped"
                );
                assert_eq!(h.tid, header().tid);
                assert_eq!(h.rmpp.rmpp_type, rmpp_type::ACK);
                acks.push((h.rmpp.data1, h.rmpp.data2));
            }
            if let Progress::Complete(t) = step.progress {
                done = Some(t);
            }
        }
        assert_eq!(acks, vec![(1, 3), (3, 5), (5, 7), (6, 7)]);
        let t = done.expect("complete");
        assert_eq!(t.data, data);
        assert_eq!(t.segments, 6);
        assert_eq!(t.header.attr_offset, 8);
    }

    #[test]
    fn duplicates_are_reacked_and_out_of_order_segments_dropped() {
        let t0 = Instant::now();
        let data = payload(1000);
        let segs = segments(&header(), &data);
        let mut r = Receiver::new(ReceiverConfig::default(), t0);
        let first = r.on_mad(t0, &segs[0][..]).reply.expect("segment 1 is ACKed at once");
        assert_eq!(
            (rmpp_of(&first[..]).data1, rmpp_of(&first[..]).data2),
            (1, 1 + DEFAULT_WINDOW)
        );
        let dup = r.on_mad(t0, &segs[0][..]);
        assert_eq!(rmpp_of(&dup.reply.expect("re-ACK")[..]).data1, 1);
        // Segment 3 before 2: dropped, ACK of 1.
        let ooo = r.on_mad(t0, &segs[2][..]);
        assert_eq!(rmpp_of(&ooo.reply.expect("ACK")[..]).data1, 1);
        assert_eq!(ooo.progress, Progress::Receiving);
        for s in &segs[1..] {
            if let Progress::Complete(t) = r.on_mad(t0, &s[..]).progress {
                assert_eq!(t.data, data);
                return;
            }
        }
        panic!("transfer did not complete");
    }

    #[test]
    fn protocol_errors_abort_and_oversized_transfers_stop() {
        let t0 = Instant::now();
        let segs = segments(&header(), &payload(1000));
        // Segment 2 first: not FIRST, yet nothing received: dropped without an ACK.
        let mut r = Receiver::new(ReceiverConfig::default(), t0);
        assert_eq!(r.on_mad(t0, &segs[1][..]).progress, Progress::Receiving);
        // Segment 1 without FIRST: ABORT 120.
        let mut bad = segs[0].clone();
        bad[26] &= !rmpp_flag::FIRST;
        let mut r = Receiver::new(ReceiverConfig::default(), t0);
        let s = r.on_mad(t0, &bad[..]);
        assert!(matches!(
            s.progress,
            Progress::Failed(RmppError::Aborted { status: 120, .. })
        ));
        let a = rmpp_of(&s.reply.expect("ABORT")[..]);
        assert_eq!((a.rmpp_type, a.status), (rmpp_type::ABORT, 120));
        // Beyond the window: ABORT 123.
        let mut r = Receiver::new(
            ReceiverConfig {
                window: 1,
                ..ReceiverConfig::default()
            },
            t0,
        );
        let many = segments(&header(), &payload(2000));
        r.on_mad(t0, &many[0][..]);
        r.on_mad(t0, &many[1][..]);
        let s = r.on_mad(t0, &many[3][..]);
        assert!(matches!(
            s.progress,
            Progress::Failed(RmppError::Aborted { status: 123, .. })
        ));
        // Announced size above the bound: STOP ResX.
        let mut r = Receiver::new(
            ReceiverConfig {
                max_payload: 600,
                ..ReceiverConfig::default()
            },
            t0,
        );
        let s = r.on_mad(t0, &segs[0][..]);
        assert!(matches!(s.progress, Progress::Failed(RmppError::Stopped(_))));
        let a = rmpp_of(&s.reply.expect("STOP")[..]);
        assert_eq!((a.rmpp_type, a.status), (rmpp_type::STOP, status::RESOURCES_EXHAUSTED));
        // Unannounced size above the bound: STOP once the data passes it.
        let mut unannounced: Vec<_> = segs.clone();
        unannounced[0][32..36].fill(0);
        let mut r = Receiver::new(
            ReceiverConfig {
                max_payload: 600,
                ..ReceiverConfig::default()
            },
            t0,
        );
        let ends: Vec<_> = unannounced.iter().map(|s| r.on_mad(t0, &s[..]).progress).collect();
        assert!(ends
            .iter()
            .any(|p| matches!(p, Progress::Failed(RmppError::Stopped(_)))));
        // Wrong version, bad type, peer ABORT.
        let mut v = segs[0].clone();
        v[24] = 2;
        let s = Receiver::new(ReceiverConfig::default(), t0).on_mad(t0, &v[..]);
        assert!(matches!(
            s.progress,
            Progress::Failed(RmppError::Aborted { status: 125, .. })
        ));
        let mut t = segs[0].clone();
        t[25] = 9;
        let s = Receiver::new(ReceiverConfig::default(), t0).on_mad(t0, &t[..]);
        assert!(matches!(
            s.progress,
            Progress::Failed(RmppError::Aborted { status: 121, .. })
        ));
        let mut p = segs[0].clone();
        p[25] = rmpp_type::ABORT;
        p[27] = 127;
        let s = Receiver::new(ReceiverConfig::default(), t0).on_mad(t0, &p[..]);
        assert_eq!(
            s.progress,
            Progress::Failed(RmppError::PeerEnded {
                rmpp_type: rmpp_type::ABORT,
                status: 127
            })
        );
        assert!(s.reply.is_none());
    }

    #[test]
    fn a_stalled_transfer_times_out() {
        let t0 = Instant::now();
        let segs = segments(&header(), &payload(1000));
        let mut r = Receiver::new(ReceiverConfig::default(), t0);
        r.on_mad(t0, &segs[0][..]);
        assert_eq!(r.on_tick(t0 + Duration::from_secs(1)), None);
        assert_eq!(
            r.on_tick(t0 + DEFAULT_IDLE_TIMEOUT),
            Some(RmppError::Timeout { last_segment: 1 })
        );
        assert!(r.is_finished());
    }

    /// An in-test sender over a lossy, duplicating, reordering channel: go-back-N from the
    /// last ACK, as IBA 13.6.5 describes the sender, starting with a window of one segment
    /// (as the kernel's sender does until the first ACK).
    fn run_lossy(data: &[u8], window: u32, seed: u64, max_payload: usize) -> Result<Vec<u8>, RmppError> {
        let t0 = Instant::now();
        let segs = segments(&header(), data);
        let n = segs.len() as u32;
        let mut r = Receiver::new(
            ReceiverConfig {
                window,
                max_payload,
                ..ReceiverConfig::default()
            },
            t0,
        );
        let mut x = seed | 1;
        let mut rnd = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        // Sender state: last ACKed segment, window end from the receiver.
        let (mut acked, mut wl) = (0u32, 1u32);
        for _round in 0..10_000 {
            // Send acked+1..=min(wl, n) with loss, duplication and reordering.
            let mut wire: Vec<u32> = Vec::new();
            for s in acked + 1..=wl.min(n) {
                match rnd(10) {
                    0 => {}
                    1 => wire.extend([s, s]),
                    _ => wire.push(s),
                }
            }
            if wire.len() > 1 && rnd(3) == 0 {
                let i = rnd(wire.len() as u64) as usize;
                let j = rnd(wire.len() as u64) as usize;
                wire.swap(i, j);
            }
            for s in wire {
                let step = r.on_mad(t0, &segs[(s - 1) as usize][..]);
                if let Some(a) = step.reply {
                    let h = SaHeader::decode(&a[..]).expect("reply");
                    if h.rmpp.rmpp_type == rmpp_type::ACK && rnd(8) != 0 {
                        acked = acked.max(h.rmpp.data1);
                        wl = wl.max(h.rmpp.data2);
                        assert!(h.rmpp.data2 >= h.rmpp.data1, "NewWindowLast below SegmentNumber");
                    }
                }
                match step.progress {
                    Progress::Complete(t) => return Ok(t.data),
                    Progress::Failed(e) => return Err(e),
                    Progress::Receiving => {}
                }
            }
        }
        panic!("no progress in 10000 rounds");
    }

    proptest! {
        #[test]
        fn reassembly_over_a_lossy_channel_is_exact_or_stops(
            len in 0usize..6000,
            window in 1u32..20,
            seed in any::<u64>(),
            bounded in any::<bool>(),
        ) {
            let data = payload(len);
            let max = if bounded { 2000 } else { DEFAULT_MAX_PAYLOAD };
            match run_lossy(&data, window, seed, max) {
                Ok(got) => prop_assert_eq!(got, data),
                Err(e) => {
                    prop_assert!(bounded && len > 1800, "failed without cause: {e}");
                    prop_assert!(matches!(e, RmppError::Stopped(_)), "{e}");
                }
            }
        }

        #[test]
        fn arbitrary_mads_never_panic(
            mads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..30),
            valid_prefix in any::<bool>(),
        ) {
            let t0 = Instant::now();
            let mut r = Receiver::new(ReceiverConfig { max_payload: 4000, ..ReceiverConfig::default() }, t0);
            for mut m in mads {
                if valid_prefix && m.len() >= 27 {
                    m[0] = 1;
                    m[1] = wire::CLASS_SUBN_ADM;
                    m[24] = RMPP_VERSION;
                    m[26] |= rmpp_flag::ACTIVE;
                }
                let step = r.on_mad(t0, &m);
                if let Progress::Complete(t) = step.progress {
                    prop_assert!(t.data.len() <= 4000);
                }
                let _ = r.on_tick(t0);
            }
        }
    }
}
