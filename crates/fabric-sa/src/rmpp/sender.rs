//! The RMPP sender (IBA 13.6.5): one [`Transfer`] per answer that goes out as RMPP
//! (GetTableResp, GetMultiResp), as a pure state machine given `now`.
//!
//! * Segments: 200 SA data bytes each, every one a full MAD with the answer's SA header
//!   replicated; RMPP header: version 1, type DATA, RRespTime "none" (0x1f), flags Active
//!   (+First on segment 1, +Last on the last), SegmentNumber from 1, PayloadLength as the
//!   module above defines it (first: the total, last: the bytes of that segment, both counting
//!   the 20-byte SA header of each segment). An empty table and a table of one segment are one
//!   segment flagged Active|First|Last.
//! * Window: segment 1 alone until the first ACK (IBA 13.6.5.1, the kernel's `init_newwin`),
//!   then up to the NewWindowLast of the latest ACK.
//! * ACKs (checked as the kernel's `process_rmpp_ack` does): a non-zero RMPPStatus aborts
//!   (ILLEGAL_STATUS), NewWindowLast below SegmentNumber aborts (WINDOW_TOO_SMALL), a
//!   SegmentNumber beyond the last segment or the window aborts (SEGMENT_TOO_BIG); an ACK that
//!   lowers the window or acknowledges less than an earlier one is stale and ignored; any other
//!   ACK moves the last acknowledged segment and the window, restores the retries and sends
//!   what the window now allows. The ACK of the last segment completes the transfer.
//! * Timeout: no progress within [`SenderParams::timeout`] resends the window from the segment
//!   after the last acknowledged one; after [`SenderParams::retries`] such resends without
//!   progress the sender sends ABORT (TOO_MANY_RETRIES) and ends.
//! * STOP or ABORT from the receiver ends the transfer (nothing is sent back).
//!
//! Control MADs this sender sends (its ABORTs) travel in the direction of the data, so they
//! carry the answer's method (the kernel's `nack_recv` flips the method of the ACK it answers).

use std::time::{Duration, Instant};

use super::{segment_count, status, RMPP_VERSION};
use crate::request::SaResponse;
use crate::wire::{self, rmpp_flag, rmpp_type, RmppHeader, SaHeader, MAD_SIZE};

/// Timing of a sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderParams {
    /// How long the sender waits for an ACK that makes progress before it resends the window.
    pub timeout: Duration,
    /// Resends of the window without progress before the transfer is aborted.
    pub retries: u32,
}

impl Default for SenderParams {
    /// 200 ms (the kernel waits up to 2 s; ibsim answers in well under a millisecond), 5
    /// resends: a receiver that went away is given up after about 1.2 s.
    fn default() -> Self {
        SenderParams {
            timeout: Duration::from_millis(200),
            retries: 5,
        }
    }
}

/// How a transfer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferEnd {
    /// The receiver acknowledged the last segment.
    Completed,
    /// The receiver sent STOP with this RMPPStatus.
    Stopped(u8),
    /// The receiver sent ABORT with this RMPPStatus.
    AbortedByReceiver(u8),
    /// This sender aborted with this RMPPStatus (its ABORT is in the step's `send`).
    Aborted(u8),
}

/// What the caller does after one input: send `send` (in order) to the receiver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// MADs for the receiver: DATA segments, or this sender's ABORT.
    pub send: Vec<Box<[u8; MAD_SIZE]>>,
    /// How many of the segments in `send` had been sent before (resends).
    pub resent: u32,
    /// Set when the transfer ended with this input.
    pub end: Option<TransferEnd>,
}

/// Why an answer cannot be sent as RMPP.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SenderError {
    #[error("method {0:#04x} is not sent as RMPP (only GetTableResp 0x92, GetMultiResp 0x94 and GetMulti 0x14 requests are)")]
    NotRmpp(u8),
}

/// One RMPP answer in flight to one receiver.
#[derive(Clone, Debug)]
pub struct Transfer {
    /// The answer's SA header (RMPP fields cleared; each segment fills its own).
    header: SaHeader,
    data: Vec<u8>,
    segments: u32,
    /// Last segment the receiver acknowledged (0: none yet).
    last_ack: u32,
    /// Last segment the receiver's window allows.
    window_last: u32,
    /// Highest segment sent since the last (re)send of the window.
    sent: u32,
    deadline: Instant,
    retries_left: u32,
    params: SenderParams,
    end: Option<TransferEnd>,
    resent_total: u64,
}

impl Transfer {
    /// Starts the transfer of `resp` at `now`: the first step sends segment 1.
    pub fn start(resp: SaResponse, params: SenderParams, now: Instant) -> Result<(Transfer, Step), SenderError> {
        if !resp.is_rmpp() {
            return Err(SenderError::NotRmpp(resp.header.method));
        }
        Ok(Self::begin(resp.header, resp.data, params, now))
    }

    /// Starts the transfer of a request sent as RMPP (a GetMulti whose payload does not fit
    /// one MAD: the client's side; the SA reassembles it with [`super::receiver`]): `header`
    /// is the request's, `data` its whole SA data.
    pub fn start_request(
        header: SaHeader,
        data: Vec<u8>,
        params: SenderParams,
        now: Instant,
    ) -> Result<(Transfer, Step), SenderError> {
        if header.method != wire::METHOD_GET_MULTI {
            return Err(SenderError::NotRmpp(header.method));
        }
        Ok(Self::begin(header, data, params, now))
    }

    fn begin(mut header: SaHeader, data: Vec<u8>, params: SenderParams, now: Instant) -> (Transfer, Step) {
        header.rmpp = RmppHeader::default();
        let mut t = Transfer {
            header,
            segments: segment_count(data.len()),
            data,
            last_ack: 0,
            window_last: 1,
            sent: 0,
            deadline: now + params.timeout,
            retries_left: params.retries,
            params,
            end: None,
            resent_total: 0,
        };
        let mut step = Step::default();
        t.send_window(&mut step, now);
        (t, step)
    }

    /// The answer's transaction id.
    pub fn tid(&self) -> u64 {
        self.header.tid
    }

    /// Segments of the answer.
    pub fn segments(&self) -> u32 {
        self.segments
    }

    /// Last segment acknowledged by the receiver.
    pub fn last_acked(&self) -> u32 {
        self.last_ack
    }

    /// Segments resent so far.
    pub fn resent_total(&self) -> u64 {
        self.resent_total
    }

    /// How the transfer ended, if it did.
    pub fn end(&self) -> Option<TransferEnd> {
        self.end
    }

    /// When [`Transfer::on_timer`] has something to do (`None` once ended).
    pub fn deadline(&self) -> Option<Instant> {
        self.end.is_none().then_some(self.deadline)
    }

    /// The image of segment `n` (1-based).
    pub fn segment(&self, n: u32) -> Box<[u8; MAD_SIZE]> {
        super::segment(&self.header, &self.data, n)
    }

    /// An RMPP MAD from the receiver for this transfer (ACK, STOP, ABORT); anything else
    /// (no RMPP, DATA) is ignored.
    pub fn on_mad(&mut self, mad: &[u8], now: Instant) -> Step {
        let Ok(h) = SaHeader::decode(mad) else {
            return Step::default();
        };
        if self.end.is_some() || h.rmpp.flags & rmpp_flag::ACTIVE == 0 {
            return Step::default();
        }
        if h.rmpp.version != RMPP_VERSION {
            return self.abort(status::UNSUPPORTED_VERSION);
        }
        match h.rmpp.rmpp_type {
            rmpp_type::ACK => self.on_ack(h.rmpp.status, h.rmpp.data1, h.rmpp.data2, now),
            rmpp_type::STOP => self.finish(TransferEnd::Stopped(h.rmpp.status)),
            rmpp_type::ABORT => self.finish(TransferEnd::AbortedByReceiver(h.rmpp.status)),
            rmpp_type::DATA => Step::default(),
            _ => self.abort(status::BAD_TYPE),
        }
    }

    /// An ACK of `segment` with `new_window_last` (RMPPStatus `rmpp_status`).
    pub fn on_ack(&mut self, rmpp_status: u8, segment: u32, new_window_last: u32, now: Instant) -> Step {
        if self.end.is_some() {
            return Step::default();
        }
        if rmpp_status != status::NORMAL {
            return self.abort(status::ILLEGAL_STATUS);
        }
        if new_window_last < segment {
            return self.abort(status::WINDOW_TOO_SMALL);
        }
        if segment > self.segments || segment > self.window_last {
            return self.abort(status::SEGMENT_TOO_BIG);
        }
        if new_window_last < self.window_last || segment < self.last_ack {
            // Stale: an ACK overtaken by a later one.
            return Step::default();
        }
        if segment > self.last_ack {
            self.last_ack = segment;
            self.retries_left = self.params.retries;
            self.deadline = now + self.params.timeout;
        }
        self.window_last = new_window_last;
        if self.last_ack == self.segments {
            return self.finish(TransferEnd::Completed);
        }
        let mut step = Step::default();
        // A resend may have gone back below what an ACK now covers.
        self.sent = self.sent.max(self.last_ack);
        self.send_window(&mut step, now);
        step
    }

    /// Checks the deadline at `now`: resends the window, or aborts after the last retry.
    pub fn on_timer(&mut self, now: Instant) -> Step {
        if self.end.is_some() || now < self.deadline {
            return Step::default();
        }
        if self.retries_left == 0 {
            return self.abort(status::TOO_MANY_RETRIES);
        }
        self.retries_left -= 1;
        let before = self.sent;
        self.sent = self.last_ack;
        let mut step = Step::default();
        self.deadline = now + self.params.timeout;
        self.send_window(&mut step, now);
        step.resent = before.saturating_sub(self.last_ack).min(step.send.len() as u32);
        self.resent_total += u64::from(step.resent);
        step
    }

    /// Sends the segments after `sent` that the window allows.
    fn send_window(&mut self, step: &mut Step, now: Instant) {
        let last = self.window_last.min(self.segments);
        if self.sent < last {
            self.deadline = now + self.params.timeout;
        }
        while self.sent < last {
            self.sent += 1;
            step.send.push(self.segment(self.sent));
        }
    }

    fn finish(&mut self, end: TransferEnd) -> Step {
        self.end = Some(end);
        Step {
            end: Some(end),
            ..Step::default()
        }
    }

    fn abort(&mut self, rmpp_status: u8) -> Step {
        let mut h = self.header;
        // `abort` flips the method back: the ABORT carries the answer's method.
        h.method ^= wire::METHOD_RESPONSE;
        let mut step = self.finish(TransferEnd::Aborted(rmpp_status));
        step.send.push(Box::new(super::abort(&h, rmpp_status)));
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rmpp::{ack, first_payload_length};
    use crate::wire::{SA_DATA_SIZE, SA_HEADER_SIZE};
    use proptest::prelude::*;

    fn answer(len: usize) -> SaResponse {
        SaResponse {
            header: SaHeader {
                class_version: 2,
                method: wire::METHOD_GET_TABLE_RESP,
                tid: 0x0000_0042_0000_0007,
                attr_id: wire::attr::PATH_RECORD,
                attr_offset: 8,
                component_mask: 0x0c,
                ..SaHeader::default()
            },
            data: (0..len).map(|i| (i * 7 + i / 256) as u8).collect(),
        }
    }

    fn hdr(m: &[u8]) -> SaHeader {
        SaHeader::decode(m).unwrap()
    }

    /// The ACK a receiver sends for this transfer's segments.
    fn ack_of(t: &Transfer, seg: u32, nwl: u32) -> [u8; MAD_SIZE] {
        ack(&t.header, seg, nwl)
    }

    #[test]
    fn empty_and_one_segment_tables_are_one_first_last_segment() {
        let t0 = Instant::now();
        for len in [0usize, 64, 200] {
            let (t, step) = Transfer::start(answer(len), SenderParams::default(), t0).unwrap();
            assert_eq!(t.segments(), 1);
            assert_eq!(step.send.len(), 1);
            let h = hdr(&step.send[0][..]);
            assert_eq!(h.rmpp.flags, rmpp_flag::ACTIVE | rmpp_flag::FIRST | rmpp_flag::LAST);
            assert_eq!(
                (h.rmpp.version, h.rmpp.rmpp_type, h.rmpp.data1),
                (1, rmpp_type::DATA, 1)
            );
            assert_eq!(h.rmpp.data2 as usize, 20 + len);
            assert_eq!((h.method, h.tid, h.attr_offset), (0x92, 0x0000_0042_0000_0007, 8));
        }
    }

    #[test]
    fn window_opens_with_acks_and_the_last_ack_completes() {
        let t0 = Instant::now();
        let (mut t, step) = Transfer::start(answer(1000), SenderParams::default(), t0).unwrap();
        assert_eq!(t.segments(), 5);
        // Window 1 before the first ACK.
        assert_eq!(step.send.len(), 1);
        let first = hdr(&step.send[0][..]);
        assert_eq!(first.rmpp.flags, rmpp_flag::ACTIVE | rmpp_flag::FIRST);
        assert_eq!(first.rmpp.data2, 5 * 220);
        let s = t.on_mad(&ack_of(&t, 1, 3), t0);
        let segs: Vec<u32> = s.send.iter().map(|m| hdr(&m[..]).rmpp.data1).collect();
        assert_eq!(segs, [2, 3]);
        assert_eq!(
            hdr(&s.send[0][..]).rmpp.data2,
            0,
            "middle segments carry no PayloadLength"
        );
        // A stale ACK (older window) changes nothing.
        assert_eq!(t.on_mad(&ack_of(&t, 1, 2), t0), Step::default());
        let s = t.on_mad(&ack_of(&t, 3, 10), t0);
        let segs: Vec<u32> = s.send.iter().map(|m| hdr(&m[..]).rmpp.data1).collect();
        assert_eq!(segs, [4, 5]);
        let last = hdr(&s.send[1][..]);
        assert_eq!(last.rmpp.flags, rmpp_flag::ACTIVE | rmpp_flag::LAST);
        assert_eq!(last.rmpp.data2, 220);
        assert_eq!(&s.send[1][SA_HEADER_SIZE..], &answer(1000).data[800..1000]);
        let s = t.on_mad(&ack_of(&t, 5, 10), t0);
        assert_eq!(s.end, Some(TransferEnd::Completed));
        assert_eq!(t.deadline(), None);
    }

    #[test]
    fn timeouts_resend_from_the_last_acked_segment_then_abort() {
        let t0 = Instant::now();
        let p = SenderParams {
            timeout: Duration::from_millis(100),
            retries: 2,
        };
        let (mut t, _) = Transfer::start(answer(1000), p, t0).unwrap();
        let _ = t.on_mad(&ack_of(&t, 1, 4), t0);
        // Not yet due.
        assert_eq!(t.on_timer(t0 + Duration::from_millis(50)), Step::default());
        let s = t.on_timer(t0 + Duration::from_millis(100));
        let segs: Vec<u32> = s.send.iter().map(|m| hdr(&m[..]).rmpp.data1).collect();
        assert_eq!(segs, [2, 3, 4]);
        assert_eq!(s.resent, 3);
        let s = t.on_timer(t0 + Duration::from_millis(200));
        assert_eq!(s.resent, 3);
        let s = t.on_timer(t0 + Duration::from_millis(300));
        assert_eq!(s.end, Some(TransferEnd::Aborted(status::TOO_MANY_RETRIES)));
        let a = hdr(&s.send[0][..]);
        assert_eq!(
            (a.method, a.rmpp.rmpp_type, a.rmpp.status),
            (0x92, rmpp_type::ABORT, 126)
        );
        assert_eq!(t.resent_total(), 6);
    }

    #[test]
    fn progress_restores_the_retries() {
        let t0 = Instant::now();
        let p = SenderParams {
            timeout: Duration::from_millis(100),
            retries: 1,
        };
        let (mut t, _) = Transfer::start(answer(1000), p, t0).unwrap();
        let _ = t.on_timer(t0 + Duration::from_millis(100));
        let _ = t.on_mad(&ack_of(&t, 1, 2), t0 + Duration::from_millis(150));
        let s = t.on_timer(t0 + Duration::from_millis(250));
        assert_eq!(s.end, None, "one retry again after progress");
        assert_eq!(s.resent, 1);
    }

    #[test]
    fn stop_abort_and_bad_acks_end_the_transfer() {
        let t0 = Instant::now();
        let mk = || Transfer::start(answer(1000), SenderParams::default(), t0).unwrap().0;
        let mut t = mk();
        let stop = crate::rmpp::control_mad(&t.header, rmpp_type::STOP, 1, 0, 0);
        assert_eq!(t.on_mad(&stop, t0).end, Some(TransferEnd::Stopped(1)));
        assert_eq!(t.deadline(), None);
        let mut t = mk();
        let abort = crate::rmpp::abort(&t.header, status::TOTAL_TOO_LONG);
        assert_eq!(t.on_mad(&abort, t0).end, Some(TransferEnd::AbortedByReceiver(118)));
        let mut t = mk();
        let s = t.on_mad(&ack_of(&t, 2, 1), t0);
        assert_eq!(s.end, Some(TransferEnd::Aborted(status::WINDOW_TOO_SMALL)));
        assert_eq!(s.send.len(), 1);
        let mut t = mk();
        // Segment 2 was never sent (window 1).
        let s = t.on_mad(&ack_of(&t, 2, 4), t0);
        assert_eq!(s.end, Some(TransferEnd::Aborted(status::SEGMENT_TOO_BIG)));
        let mut t = mk();
        let mut bad = ack_of(&t, 1, 2);
        bad[27] = 5;
        assert_eq!(
            t.on_mad(&bad, t0).end,
            Some(TransferEnd::Aborted(status::ILLEGAL_STATUS))
        );
        let mut t = mk();
        let mut v2 = ack_of(&t, 1, 2);
        v2[24] = 2;
        assert_eq!(
            t.on_mad(&v2, t0).end,
            Some(TransferEnd::Aborted(status::UNSUPPORTED_VERSION))
        );
        // Nothing more once ended; a MAD without RMPP is ignored.
        assert_eq!(t.on_mad(&ack_of(&t, 1, 2), t0), Step::default());
        let mut t = mk();
        let mut plain = ack_of(&t, 1, 2);
        plain[26] = 0;
        assert_eq!(t.on_mad(&plain, t0), Step::default());
        assert_eq!(t.on_mad(&plain[..20], t0), Step::default());
    }

    #[test]
    fn non_rmpp_answers_are_refused() {
        let mut r = answer(10);
        r.header.method = wire::METHOD_GET_RESP;
        let e = Transfer::start(r, SenderParams::default(), Instant::now()).unwrap_err();
        assert_eq!(e, SenderError::NotRmpp(0x81));
    }

    /// A receiver as simple as the spec allows: takes segments in order only (go-back-N),
    /// ACKs at the end of each window, at the last segment and on anything out of order.
    struct TestReceiver {
        window: u32,
        next: u32,
        nwl: u32,
        data: Vec<u8>,
        first_paylen: Option<u32>,
        done: bool,
        header: Option<SaHeader>,
    }

    impl TestReceiver {
        fn new(window: u32) -> Self {
            TestReceiver {
                window,
                next: 1,
                nwl: 1,
                data: Vec::new(),
                first_paylen: None,
                done: false,
                header: None,
            }
        }

        fn on_segment(&mut self, mad: &[u8]) -> Option<[u8; MAD_SIZE]> {
            let h = SaHeader::decode(mad).unwrap();
            assert_eq!(h.rmpp.rmpp_type, rmpp_type::DATA);
            let seg = h.rmpp.data1;
            if self.done || seg != self.next {
                return Some(ack(&h, self.next - 1, self.nwl));
            }
            if let Some(first) = self.header {
                // The SA header is replicated in every segment.
                assert_eq!(
                    (h.tid, h.method, h.attr_id, h.attr_offset),
                    (first.tid, first.method, first.attr_id, first.attr_offset)
                );
            } else {
                self.header = Some(h);
            }
            assert_eq!(seg == 1, h.rmpp.flags & rmpp_flag::FIRST != 0);
            if seg == 1 {
                self.first_paylen = Some(h.rmpp.data2);
            }
            let last = h.rmpp.flags & rmpp_flag::LAST != 0;
            let n = if last { h.rmpp.data2 as usize - 20 } else { SA_DATA_SIZE };
            self.data.extend_from_slice(&mad[SA_HEADER_SIZE..SA_HEADER_SIZE + n]);
            self.next += 1;
            if last {
                self.done = true;
                return Some(ack(&h, seg, self.nwl.max(seg)));
            }
            if seg == self.nwl {
                self.nwl = seg + self.window;
                return Some(ack(&h, seg, self.nwl));
            }
            None
        }
    }

    /// xorshift64*: the network's loss, duplication and reordering, seeded by proptest.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn any_table_reassembles_exactly_through_loss_reorder_and_duplication(
            len in 0usize..4000,
            window in 1u32..8,
            loss in 0u64..40,
            dup in 0u64..25,
            seed in 1u64..u64::MAX,
        ) {
            let mut rng = Rng(seed);
            let resp = answer(len);
            let want = resp.data.clone();
            let p = SenderParams { timeout: Duration::from_millis(200), retries: 10_000 };
            let mut now = Instant::now();
            let (mut tx, step) = Transfer::start(resp, p, now).unwrap();
            let mut rx = TestReceiver::new(window);
            // (towards the receiver?, MAD)
            let mut net: Vec<(bool, Box<[u8; MAD_SIZE]>)> = step.send.into_iter().map(|m| (true, m)).collect();
            let mut end = None;
            for _ in 0..1_000_000 {
                if end.is_some() {
                    break;
                }
                if net.is_empty() {
                    now = tx.deadline().unwrap();
                    let s = tx.on_timer(now);
                    end = s.end;
                    net.extend(s.send.into_iter().map(|m| (true, m)));
                    continue;
                }
                let (to_rx, mad) = net.swap_remove(rng.below(net.len() as u64) as usize);
                if rng.below(100) < loss {
                    continue;
                }
                if rng.below(100) < dup {
                    net.push((to_rx, mad.clone()));
                }
                if to_rx {
                    if let Some(a) = rx.on_segment(&mad[..]) {
                        net.push((false, Box::new(a)));
                    }
                } else {
                    let s = tx.on_mad(&mad[..], now);
                    end = s.end;
                    net.extend(s.send.into_iter().map(|m| (true, m)));
                }
            }
            prop_assert_eq!(end, Some(TransferEnd::Completed));
            prop_assert!(rx.done);
            prop_assert_eq!(rx.first_paylen, Some(first_payload_length(len)));
            prop_assert_eq!(rx.data, want);
        }
    }
}
