//! The Subnet Administration agent of the transport thread: what the thread does with the GSI
//! MADs addressed to the manager's port once a [`SaService`] is attached
//! ([`super::Transport::set_sa`]), and what it sends on its own (RMPP segments, Reports).
//!
//! Pure apart from the counters: given the received MAD, its sender and `now`, it returns the
//! MADs to send ([`Outgoing`]); the thread writes them. Per MAD of class 0x03:
//!
//! 1. RMPP ACK / STOP / ABORT (Active, type 2..4) go to the [`Transfer`] keyed by (requester
//!    LID, QPN, TID); a ReportResp (0x86) acknowledges the pending Report with its TID.
//!    Other responses are dropped.
//! 2. While the service is not serving (standby manager, LIDs not configured), requests are
//!    dropped and counted (`sa_dropped_standby`): the client's timeout sends it to the master.
//! 3. A request sent as RMPP DATA (GetMulti of MultiPathRecord): one segment (First|Last) is
//!    acknowledged (ACK of segment 1, NewWindowLast 1, as the kernel's receiver does) and
//!    answered; a request of several segments (more than 11 GIDs) is reassembled by an
//!    [`rmpp::receiver::Receiver`] keyed like a transfer (its ACKs, or its ABORT / STOP, go
//!    back to the requester) and answered once complete, as if it had come in one MAD. At most
//!    [`SaAgentParams::max_transfers`] receptions at once (beyond: STOP, ResX), at most
//!    [`MAX_REQUEST_PAYLOAD`] bytes each (beyond: STOP), a reception without a new segment for
//!    [`SaAgentParams::request_idle`] is dropped; every refusal counts in
//!    `rmpp_requests_refused`, a segment of no reception in `rmpp_unmatched`.
//! 4. GetTable / GetMulti beyond [`SaAgentParams::max_transfers`] concurrent transfers:
//!    ERR_NO_RESOURCES (0x0100) at once (`sa_busy`), without computing the answer.
//! 5. Everything else: [`SaService::handle`]. A GetTableResp / GetMultiResp with status 0
//!    starts an RMPP transfer (even of one segment); every other answer, errors of a GetTable
//!    included (as OpenSM's `osm_sa_send_error` sends them), goes out as one MAD. A request
//!    repeated with the TID of a transfer in flight (the client's retry) restarts it.
//!
//! [`SaAgent::poll`], called every round of the thread: transfer deadlines (resend the window
//! or abort), Reports queued by the service ([`SaService::take_reports`], sent to the
//! subscriber's LID/QPN with QP1's Q_Key and a TID of this agent's), and Reports not
//! acknowledged by a ReportResp in time (resent up to [`SaAgentParams::report_retries`]
//! times, then given up).
//!
//! `handle` runs on this thread: it reads the service's snapshot through arc-swap and takes its
//! short locks (registry, counters); only a Set or Delete of a registry record writes a file
//! (the registry's persistence) before it answers. Nothing else here blocks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use fabric_sa::request::error_response;
use fabric_sa::rmpp::receiver::{self, Progress, Receiver, ReceiverConfig};
use fabric_sa::rmpp::sender::{SenderParams, Step, Transfer, TransferEnd};
use fabric_sa::rmpp::{self, status as rmpp_status};
use fabric_sa::service::OutgoingReport;
use fabric_sa::wire::{self, rmpp_flag, rmpp_type, SaHeader, SA_DATA_SIZE, SA_HEADER_SIZE};
use fabric_sa::{Requester, SaResponse, SaService};

use super::shared::Stats;
use crate::mad::MAD_SIZE;
use crate::sa::{GsiAnswer, GsiResponder, CLASS_SUBN_ADM, QP1_QKEY};

/// What the agent needs of the SA: [`SaService`] (the tests use a stand-in that answers
/// tables of any size).
pub trait SaEndpoint: Send + Sync {
    /// Whether requests are answered (master) or dropped (standby).
    fn serving(&self) -> bool;
    /// The answer to one SA request ([`SaService::handle`]).
    fn handle(&self, mad: &[u8], from: &Requester, now: SystemTime) -> Option<SaResponse>;
    /// Reports owed to subscribers since the last call.
    fn take_reports(&self) -> Vec<OutgoingReport>;
}

impl SaEndpoint for SaService {
    fn serving(&self) -> bool {
        SaService::serving(self)
    }
    fn handle(&self, mad: &[u8], from: &Requester, now: SystemTime) -> Option<SaResponse> {
        SaService::handle(self, mad, from, now)
    }
    fn take_reports(&self) -> Vec<OutgoingReport> {
        SaService::take_reports(self)
    }
}

/// Limits and timing of the agent.
#[derive(Clone, Copy, Debug)]
pub struct SaAgentParams {
    /// RMPP sender timing (ACK timeout, resends).
    pub rmpp: SenderParams,
    /// RMPP transfers in flight at once; beyond, GetTable/GetMulti get ERR_NO_RESOURCES.
    pub max_transfers: usize,
    /// How long a Report waits for its ReportResp before it is sent again.
    pub report_timeout: Duration,
    /// Resends of an unanswered Report.
    pub report_retries: u32,
    /// Reports awaiting their ReportResp at once; beyond, new ones are given up.
    pub max_pending_reports: usize,
    /// How long a multi-MAD request may go without a new segment before it is dropped.
    pub request_idle: Duration,
}

/// Largest multi-MAD request reassembled (SA data bytes): 41 segments, where a MultiPathRecord
/// of 255 SGIDs and 255 DGIDs (24 + 510 × 16 = 8 184 bytes) fits (the receiver bounds a
/// transfer by its announced segments × 200).
pub const MAX_REQUEST_PAYLOAD: usize = 41 * SA_DATA_SIZE;

impl Default for SaAgentParams {
    fn default() -> Self {
        SaAgentParams {
            rmpp: SenderParams::default(),
            max_transfers: 256,
            report_timeout: Duration::from_secs(1),
            report_retries: 3,
            max_pending_reports: 1024,
            request_idle: Duration::from_secs(2),
        }
    }
}

/// One MAD to send on the class's GSI agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// Destination (LID, QPN, SL, GID when the request came with a GRH).
    pub to: Requester,
    /// Q_Key (QP1's well-known one).
    pub qkey: u32,
    /// `timeout_ms` of the umad header: set for Reports only (the kernel then hands their
    /// ReportResp to this agent); 0 for answers.
    pub timeout_ms: u32,
    /// The MAD.
    pub mad: Box<[u8; MAD_SIZE]>,
    /// Bytes of `mad` to write: 56 + the SA data bytes used for a single-MAD answer and for
    /// the last RMPP segment (as OpenSM sends them: `saquery` counts records from the length
    /// it receives); [`MAD_SIZE`] for everything else. On a real HCA the kernel pads a short
    /// non-RMPP send to 256 bytes on the wire (`ib_create_send_mad`).
    pub len: usize,
}

/// (requester LID, QPN, TID).
type TransferKey = (u16, u32, u64);

struct Sending {
    to: Requester,
    transfer: Transfer,
}

/// A multi-MAD request being reassembled.
struct Receiving {
    receiver: Receiver,
}

struct PendingReport {
    to: Requester,
    mad: Box<[u8; MAD_SIZE]>,
    resends: u32,
    deadline: Instant,
}

/// The SA agent (one per transport thread).
pub struct SaAgent {
    params: SaAgentParams,
    transfers: HashMap<TransferKey, Sending>,
    /// Multi-MAD requests being reassembled, by the same key.
    receiving: HashMap<TransferKey, Receiving>,
    /// By (subscriber LID, low 32 bits of the TID: the kernel rewrites the high ones).
    reports: HashMap<(u16, u32), PendingReport>,
    next_report_tid: u32,
    fallback: GsiResponder,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn reply(to: &Requester, mad: Box<[u8; MAD_SIZE]>) -> Outgoing {
    let len = wire_len(&mad[..]);
    Outgoing {
        to: *to,
        qkey: QP1_QKEY,
        timeout_ms: 0,
        mad,
        len,
    }
}

/// A single-MAD answer: the SA header and the data bytes `resp` uses.
fn answer(to: &Requester, resp: &SaResponse) -> Outgoing {
    Outgoing {
        len: SA_HEADER_SIZE + resp.data.len().min(SA_DATA_SIZE),
        ..reply(to, Box::new(resp.single_mad()))
    }
}

/// Bytes to write of an RMPP MAD: a LAST DATA segment ends where its PayloadLength says
/// (56 + PayloadLength - the 20 SA header bytes it counts), every other one is whole.
fn wire_len(mad: &[u8]) -> usize {
    match SaHeader::decode(mad) {
        Ok(h)
            if rmpp::active(&h)
                && h.rmpp.rmpp_type == rmpp_type::DATA
                && h.rmpp.flags & rmpp_flag::LAST != 0
                && (rmpp::SA_CLASS_HEADER..=rmpp::SEGMENT_PAYLOAD).contains(&h.rmpp.data2) =>
        {
            SA_HEADER_SIZE + (h.rmpp.data2 - rmpp::SA_CLASS_HEADER) as usize
        }
        _ => MAD_SIZE,
    }
}

impl SaAgent {
    /// An agent with no transfer in flight.
    pub fn new(params: SaAgentParams) -> SaAgent {
        SaAgent {
            params,
            transfers: HashMap::new(),
            receiving: HashMap::new(),
            reports: HashMap::new(),
            next_report_tid: 1,
            fallback: GsiResponder::default(),
        }
    }

    /// RMPP transfers in flight.
    pub fn transfers(&self) -> usize {
        self.transfers.len()
    }

    /// Multi-MAD requests being reassembled.
    pub fn receptions(&self) -> usize {
        self.receiving.len()
    }

    /// Reports awaiting their ReportResp.
    pub fn pending_reports(&self) -> usize {
        self.reports.len()
    }

    /// One GSI MAD (`mad`: the valid received bytes) from `from`, received at `now` / `wall`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_mad(
        &mut self,
        sa: Option<&dyn SaEndpoint>,
        mad: &[u8],
        from: &Requester,
        now: Instant,
        wall: SystemTime,
        stats: &Stats,
        out: &mut Vec<Outgoing>,
    ) {
        let sa = match sa {
            Some(sa) if mad.get(1) == Some(&CLASS_SUBN_ADM) => sa,
            // Guard classes, and SA requests while no service is attached.
            _ => {
                match self.fallback.answer(mad, from.lid) {
                    GsiAnswer::Reply(m) => {
                        bump(&stats.sa_requests);
                        out.push(reply(from, m));
                    }
                    GsiAnswer::Drop => bump(&stats.gsi_dropped),
                }
                return;
            }
        };
        let Ok(h) = SaHeader::decode(mad) else {
            bump(&stats.gsi_dropped);
            return;
        };
        let key = (from.lid, from.qpn, h.tid);
        if rmpp::active(&h) && h.rmpp.rmpp_type != rmpp_type::DATA {
            match self.transfers.get_mut(&key) {
                Some(s) => {
                    let step = s.transfer.on_mad(mad, now);
                    self.apply(key, step, stats, out);
                }
                None => bump(&stats.rmpp_unmatched),
            }
            return;
        }
        if h.method == wire::METHOD_REPORT_RESP {
            match self.reports.remove(&(from.lid, h.tid as u32)) {
                Some(_) => bump(&stats.reports_acknowledged),
                None => bump(&stats.gsi_dropped),
            }
            return;
        }
        if h.method & wire::METHOD_RESPONSE != 0 {
            bump(&stats.gsi_dropped);
            return;
        }
        if !sa.serving() {
            bump(&stats.sa_dropped_standby);
            return;
        }
        if rmpp::active(&h) {
            // A request sent as RMPP DATA.
            if h.rmpp.version != rmpp::RMPP_VERSION {
                bump(&stats.rmpp_requests_refused);
                out.push(reply(from, Box::new(rmpp::abort(&h, rmpp_status::UNSUPPORTED_VERSION))));
                return;
            }
            let whole = rmpp_flag::FIRST | rmpp_flag::LAST;
            if h.rmpp.data1 != 1 || h.rmpp.flags & whole != whole || self.receiving.contains_key(&key) {
                // A request of several segments.
                if let Some(request) = self.reassemble(key, &h, mad, from, now, stats, out) {
                    self.answer_request(sa, key, &request, from, now, wall, stats, out);
                }
                return;
            }
            out.push(reply(from, Box::new(rmpp::ack(&h, 1, 1))));
        }
        self.answer_request(sa, key, mad, from, now, wall, stats, out);
    }

    /// One segment of a multi-MAD request: to its reception (started by segment 1). Returns
    /// the whole request (header and reassembled SA data) once its last segment is in.
    #[allow(clippy::too_many_arguments)]
    fn reassemble(
        &mut self,
        key: TransferKey,
        h: &SaHeader,
        mad: &[u8],
        from: &Requester,
        now: Instant,
        stats: &Stats,
        out: &mut Vec<Outgoing>,
    ) -> Option<Vec<u8>> {
        if !self.receiving.contains_key(&key) {
            if h.rmpp.data1 != 1 {
                // A segment of a reception that ended (or never began): nothing to ACK.
                bump(&stats.rmpp_unmatched);
                return None;
            }
            if self.receiving.len() >= self.params.max_transfers {
                bump(&stats.rmpp_requests_refused);
                let stop = rmpp::control_mad(h, rmpp_type::STOP, rmpp_status::RESOURCES_EXHAUSTED, 0, 0);
                out.push(reply(from, Box::new(stop)));
                return None;
            }
            let cfg = ReceiverConfig {
                max_payload: MAX_REQUEST_PAYLOAD,
                idle_timeout: self.params.request_idle,
                ..ReceiverConfig::default()
            };
            self.receiving.insert(
                key,
                Receiving {
                    receiver: Receiver::new(cfg, now),
                },
            );
        }
        let r = self.receiving.get_mut(&key)?;
        let step: receiver::Step = r.receiver.on_mad(now, mad);
        if let Some(m) = step.reply {
            out.push(reply(from, m));
        }
        match step.progress {
            Progress::Receiving => None,
            Progress::Failed(_) => {
                self.receiving.remove(&key);
                bump(&stats.rmpp_requests_refused);
                None
            }
            Progress::Complete(t) => {
                self.receiving.remove(&key);
                let mut header = t.header;
                header.rmpp = wire::RmppHeader::default();
                let mut request = vec![0u8; SA_HEADER_SIZE + t.data.len()];
                header.encode(&mut request);
                request[SA_HEADER_SIZE..].copy_from_slice(&t.data);
                Some(request)
            }
        }
    }

    /// Answers one whole request (`mad`: one MAD, or a reassembled multi-MAD one).
    #[allow(clippy::too_many_arguments)]
    fn answer_request(
        &mut self,
        sa: &dyn SaEndpoint,
        key: TransferKey,
        mad: &[u8],
        from: &Requester,
        now: Instant,
        wall: SystemTime,
        stats: &Stats,
        out: &mut Vec<Outgoing>,
    ) {
        let Ok(h) = SaHeader::decode(mad) else { return };
        let table = matches!(h.method, wire::METHOD_GET_TABLE | wire::METHOD_GET_MULTI);
        if table && !self.transfers.contains_key(&key) && self.transfers.len() >= self.params.max_transfers {
            bump(&stats.sa_busy);
            let e = error_response(
                &h,
                mad.get(SA_HEADER_SIZE..).unwrap_or_default(),
                wire::status::NO_RESOURCES,
            );
            out.push(answer(from, &e));
            return;
        }
        let Some(resp) = sa.handle(mad, from, wall) else {
            bump(&stats.gsi_dropped);
            return;
        };
        bump(&stats.sa_requests);
        if !(resp.is_rmpp() && resp.header.status == wire::status::OK) {
            out.push(answer(from, &resp));
            return;
        }
        if self.transfers.remove(&key).is_some() {
            // The client repeated its request: the old transfer is replaced.
            bump(&stats.rmpp_aborted);
        }
        let single = answer(from, &resp);
        match Transfer::start(resp, self.params.rmpp, now) {
            Ok((transfer, step)) => {
                bump(&stats.rmpp_started);
                let one_segment = transfer.segments() == 1;
                self.transfers.insert(key, Sending { to: *from, transfer });
                self.apply(key, step, stats, out);
                // A one-segment answer (a record looked up by key, a short table) is not held
                // for its ACK: a lost one is covered by the client's request retry, as a lost
                // GetResp is, and nothing is resent to a requester that never ACKs (`saquery`
                // under the ibsim shim, which has no RMPP: resent segments would reach whatever
                // process attaches to that node next, and the shim kills a process receiving a
                // class it did not register). A late ACK is counted unmatched.
                if one_segment && self.transfers.remove(&key).is_some() {
                    bump(&stats.rmpp_completed);
                }
            }
            // `is_rmpp` said it is one; never reached.
            Err(_) => out.push(single),
        }
    }

    /// The thread's periodic work at `now`: transfer deadlines, new and unanswered Reports.
    pub fn poll(&mut self, sa: Option<&dyn SaEndpoint>, now: Instant, stats: &Stats, out: &mut Vec<Outgoing>) {
        let due: Vec<TransferKey> = self
            .transfers
            .iter()
            .filter(|(_, s)| s.transfer.deadline().is_some_and(|d| d <= now))
            .map(|(k, _)| *k)
            .collect();
        for key in due {
            if self.transfers.get(&key).is_some_and(|s| s.transfer.last_acked() == 0) {
                // Not one ACK: the requester does not do RMPP (`saquery` under the ibsim shim
                // gets the first segment only) or never got the first segment. Nothing is
                // resent — the client's request retry starts a new transfer — since a resent
                // segment would reach whatever process attaches to that node next (the shim
                // kills a process receiving a class it did not register).
                self.transfers.remove(&key);
                bump(&stats.rmpp_aborted);
                continue;
            }
            if let Some(s) = self.transfers.get_mut(&key) {
                let step = s.transfer.on_timer(now);
                self.apply(key, step, stats, out);
            }
        }
        self.receiving.retain(|_, r| {
            let alive = r.receiver.on_tick(now).is_none();
            if !alive {
                bump(&stats.rmpp_requests_refused);
            }
            alive
        });
        if let Some(sa) = sa.filter(|sa| sa.serving()) {
            for r in sa.take_reports() {
                if self.reports.len() >= self.params.max_pending_reports {
                    bump(&stats.reports_given_up);
                    continue;
                }
                let tid = self.next_report_tid;
                self.next_report_tid = tid.wrapping_add(1).max(1);
                let mut mad = r.mad;
                mad[12..16].copy_from_slice(&tid.to_be_bytes());
                let to = Requester {
                    lid: r.lid,
                    qpn: r.qpn,
                    pkey_index: r.pkey_index,
                    ..Requester::default()
                };
                out.push(self.report(&to, mad.clone()));
                bump(&stats.reports_sent);
                self.reports.insert(
                    (r.lid, tid),
                    PendingReport {
                        to,
                        mad,
                        resends: 0,
                        deadline: now + self.params.report_timeout,
                    },
                );
            }
        }
        let late: Vec<(u16, u32)> = self
            .reports
            .iter()
            .filter(|(_, r)| r.deadline <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in late {
            let Some(r) = self.reports.get_mut(&key) else { continue };
            if r.resends >= self.params.report_retries {
                self.reports.remove(&key);
                bump(&stats.reports_given_up);
                continue;
            }
            r.resends += 1;
            r.deadline = now + self.params.report_timeout;
            let (to, mad) = (r.to, r.mad.clone());
            out.push(self.report(&to, mad));
            bump(&stats.reports_resent);
        }
    }

    fn report(&self, to: &Requester, mad: Box<[u8; MAD_SIZE]>) -> Outgoing {
        Outgoing {
            to: *to,
            qkey: QP1_QKEY,
            timeout_ms: u32::try_from(self.params.report_timeout.as_millis()).unwrap_or(u32::MAX),
            mad,
            len: MAD_SIZE,
        }
    }

    /// Carries out a transfer's step: its MADs to the requester, its end.
    fn apply(&mut self, key: TransferKey, step: Step, stats: &Stats, out: &mut Vec<Outgoing>) {
        let Some(s) = self.transfers.get(&key) else { return };
        let to = s.to;
        let abort = usize::from(matches!(step.end, Some(TransferEnd::Aborted(_))));
        stats
            .rmpp_segments_sent
            .fetch_add((step.send.len() - abort) as u64, Ordering::Relaxed);
        stats
            .rmpp_segments_resent
            .fetch_add(u64::from(step.resent), Ordering::Relaxed);
        out.extend(step.send.into_iter().map(|m| reply(&to, m)));
        if let Some(end) = step.end {
            self.transfers.remove(&key);
            match end {
                TransferEnd::Completed => bump(&stats.rmpp_completed),
                TransferEnd::Stopped(_) | TransferEnd::AbortedByReceiver(_) | TransferEnd::Aborted(_) => {
                    bump(&stats.rmpp_aborted);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sa_tests::TableSa;
    use super::*;

    fn request(method: u8, tid: u64) -> [u8; MAD_SIZE] {
        let h = SaHeader {
            class_version: 2,
            method,
            tid,
            attr_id: wire::attr::PATH_RECORD,
            ..SaHeader::default()
        };
        let mut b = [0u8; MAD_SIZE];
        h.encode(&mut b);
        b
    }

    fn client(lid: u16) -> Requester {
        Requester {
            lid,
            qpn: 1,
            ..Requester::default()
        }
    }

    fn hdr(o: &Outgoing) -> SaHeader {
        SaHeader::decode(&o.mad[..]).unwrap()
    }

    struct Rig {
        agent: SaAgent,
        sa: TableSa,
        stats: Stats,
        now: Instant,
    }

    impl Rig {
        fn new(len: usize, params: SaAgentParams) -> Rig {
            Rig {
                agent: SaAgent::new(params),
                sa: TableSa::new(len),
                stats: Stats::default(),
                now: Instant::now(),
            }
        }
        fn send(&mut self, mad: &[u8], from: u16) -> Vec<Outgoing> {
            let mut out = Vec::new();
            let sa: &dyn SaEndpoint = &self.sa;
            self.agent.on_mad(
                Some(sa),
                mad,
                &client(from),
                self.now,
                SystemTime::now(),
                &self.stats,
                &mut out,
            );
            out
        }
        fn poll(&mut self, after: Duration) -> Vec<Outgoing> {
            self.now += after;
            let mut out = Vec::new();
            let sa: &dyn SaEndpoint = &self.sa;
            self.agent.poll(Some(sa), self.now, &self.stats, &mut out);
            out
        }
        fn count(&self, c: &AtomicU64) -> u64 {
            c.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn get_table_answers_go_out_as_rmpp_and_get_answers_as_one_mad() {
        let mut r = Rig::new(64, SaAgentParams::default());
        let out = r.send(&request(wire::METHOD_GET_TABLE, 5), 9);
        assert_eq!(out.len(), 1);
        let h = hdr(&out[0]);
        assert_eq!(h.method, wire::METHOD_GET_TABLE_RESP);
        assert_eq!(h.rmpp.flags, rmpp_flag::ACTIVE | rmpp_flag::FIRST | rmpp_flag::LAST);
        assert_eq!((out[0].to.lid, out[0].qkey, out[0].timeout_ms), (9, QP1_QKEY, 0));
        // One segment: complete once sent, never resent (a late ACK is only counted).
        assert_eq!(r.agent.transfers(), 0);
        assert_eq!(r.count(&r.stats.rmpp_completed), 1);
        assert!(r.poll(Duration::from_secs(5)).is_empty(), "nothing resent");
        let out = r.send(&rmpp::ack(&h, 1, 1), 9);
        assert!(out.is_empty());
        assert_eq!(r.count(&r.stats.rmpp_unmatched), 1);
        let out = r.send(&request(wire::METHOD_GET, 6), 9);
        let h = hdr(&out[0]);
        assert_eq!((h.method, h.rmpp.flags), (wire::METHOD_GET_RESP, 0));
        assert_eq!(r.count(&r.stats.sa_requests), 2);
    }

    #[test]
    fn acks_from_another_requester_or_tid_do_not_touch_a_transfer() {
        let mut r = Rig::new(1000, SaAgentParams::default());
        let out = r.send(&request(wire::METHOD_GET_TABLE, 5), 9);
        let h = hdr(&out[0]);
        assert!(r.send(&rmpp::ack(&h, 1, 5), 10).is_empty());
        let mut other = h;
        other.tid = 6;
        assert!(r.send(&rmpp::ack(&other, 1, 5), 9).is_empty());
        assert_eq!(r.count(&r.stats.rmpp_unmatched), 2);
        assert_eq!(r.send(&rmpp::ack(&h, 1, 5), 9).len(), 4);
    }

    #[test]
    fn transfers_beyond_the_limit_get_no_resources_and_a_repeat_restarts_its_transfer() {
        let p = SaAgentParams {
            max_transfers: 2,
            ..SaAgentParams::default()
        };
        let mut r = Rig::new(1000, p);
        r.send(&request(wire::METHOD_GET_TABLE, 1), 9);
        r.send(&request(wire::METHOD_GET_TABLE, 2), 9);
        let out = r.send(&request(wire::METHOD_GET_TABLE, 3), 9);
        let h = hdr(&out[0]);
        assert_eq!(
            (h.method, h.status, h.rmpp.flags),
            (0x92, wire::status::NO_RESOURCES, 0)
        );
        assert_eq!(r.count(&r.stats.sa_busy), 1);
        // The error echoes the request's SA data (not its header), as one MAD.
        let req = request(wire::METHOD_GET_TABLE, 3);
        assert_eq!(&out[0].mad[SA_HEADER_SIZE..], &req[SA_HEADER_SIZE..]);
        assert_eq!(out[0].len, MAD_SIZE);
        // The client's retry of TID 2 (same requester) is no new transfer: it restarts.
        let out = r.send(&request(wire::METHOD_GET_TABLE, 2), 9);
        assert_eq!(hdr(&out[0]).rmpp.data1, 1);
        assert_eq!(r.agent.transfers(), 2);
        assert_eq!(r.count(&r.stats.rmpp_aborted), 1);
        // Gets are never refused for transfers.
        assert_eq!(hdr(&r.send(&request(wire::METHOD_GET, 4), 9)[0]).status, 0);
    }

    #[test]
    fn a_requester_that_never_acks_is_dropped_one_that_stops_gets_resends_then_an_abort() {
        let p = SaAgentParams {
            rmpp: SenderParams {
                timeout: Duration::from_millis(100),
                retries: 2,
            },
            ..SaAgentParams::default()
        };
        // No ACK at all (no RMPP there): dropped at the deadline, nothing more sent to it.
        let mut r = Rig::new(1000, p);
        r.send(&request(wire::METHOD_GET_TABLE, 1), 9);
        assert!(r.poll(Duration::from_millis(50)).is_empty());
        assert!(r.poll(Duration::from_millis(50)).is_empty());
        assert_eq!(r.agent.transfers(), 0);
        assert_eq!(r.count(&r.stats.rmpp_aborted), 1);
        assert_eq!(r.count(&r.stats.rmpp_segments_resent), 0);
        // ACKs segment 1, then goes silent: its window is resent, then ABORT.
        let mut r = Rig::new(1000, p);
        let out = r.send(&request(wire::METHOD_GET_TABLE, 1), 9);
        let h = hdr(&out[0]);
        let window = r.send(&rmpp::ack(&h, 1, 2), 9);
        assert_eq!(window.len(), 1, "segment 2");
        assert_eq!(hdr(&r.poll(Duration::from_millis(100))[0]).rmpp.data1, 2);
        assert_eq!(r.poll(Duration::from_millis(100)).len(), 1);
        let out = r.poll(Duration::from_millis(100));
        let h = hdr(&out[0]);
        assert_eq!((h.rmpp.rmpp_type, h.rmpp.status), (rmpp_type::ABORT, 126));
        assert_eq!(out[0].to.lid, 9);
        assert_eq!(r.agent.transfers(), 0);
        assert_eq!(r.count(&r.stats.rmpp_aborted), 1);
        assert_eq!(r.count(&r.stats.rmpp_segments_resent), 2);
    }

    #[test]
    fn standby_drops_requests_but_finishes_transfers_in_flight() {
        let mut r = Rig::new(300, SaAgentParams::default());
        let out = r.send(&request(wire::METHOD_GET_TABLE, 1), 9);
        let h = hdr(&out[0]);
        r.sa.serving.store(false, Ordering::Relaxed);
        assert!(r.send(&request(wire::METHOD_GET_TABLE, 2), 9).is_empty());
        assert!(r.send(&request(wire::METHOD_GET, 3), 9).is_empty());
        assert_eq!(r.count(&r.stats.sa_dropped_standby), 2);
        assert_eq!(r.send(&rmpp::ack(&h, 1, 2), 9).len(), 1);
        assert!(r.send(&rmpp::ack(&h, 2, 2), 9).is_empty());
        assert_eq!(r.count(&r.stats.rmpp_completed), 1);
        assert_eq!(r.count(&r.stats.sa_requests), 1);
    }

    #[test]
    fn single_segment_rmpp_requests_are_acked_and_answered_longer_ones_reassembled() {
        let mut r = Rig::new(300, SaAgentParams::default());
        let mut one = request(wire::METHOD_GET_MULTI, 7);
        let mut h = SaHeader::decode(&one).unwrap();
        h.rmpp = wire::RmppHeader {
            version: 1,
            rmpp_type: rmpp_type::DATA,
            resp_time: 0,
            flags: rmpp_flag::ACTIVE | rmpp_flag::FIRST | rmpp_flag::LAST,
            status: 0,
            data1: 1,
            data2: 20 + 64,
        };
        h.encode(&mut one);
        let out = r.send(&one, 9);
        let ack = hdr(&out[0]);
        assert_eq!(
            (ack.method, ack.rmpp.rmpp_type, ack.rmpp.data1, ack.rmpp.data2),
            (wire::METHOD_GET_MULTI_RESP, rmpp_type::ACK, 1, 1)
        );
        let answer = hdr(&out[1]);
        assert_eq!(
            (answer.method, answer.rmpp.rmpp_type),
            (wire::METHOD_GET_MULTI_RESP, rmpp_type::DATA)
        );
        let mut first = h;
        first.tid = 8;
        first.rmpp.flags = rmpp_flag::ACTIVE | rmpp_flag::FIRST;
        first.rmpp.data2 = 2 * 220;
        let mut b = [0u8; MAD_SIZE];
        first.encode(&mut b);
        // Segment 1 of 2: a reception starts, segment 1 is ACKed at once with the window.
        let out = r.send(&b, 9);
        let a = hdr(&out[0]);
        assert_eq!(
            (a.method, a.rmpp.rmpp_type, a.rmpp.data1, a.rmpp.data2),
            (wire::METHOD_GET_MULTI_RESP, rmpp_type::ACK, 1, 17)
        );
        assert_eq!(out.len(), 1, "no answer before the last segment");
        assert_eq!(r.agent.receptions(), 1);
        // Its second segment completes it: the final ACK, then the answer.
        first.rmpp.flags = rmpp_flag::ACTIVE | rmpp_flag::LAST;
        first.rmpp.data1 = 2;
        first.rmpp.data2 = 220;
        first.encode(&mut b);
        let out = r.send(&b, 9);
        assert_eq!(out.len(), 2, "{out:?}");
        let a = hdr(&out[0]);
        assert_eq!((a.rmpp.rmpp_type, a.rmpp.data1), (rmpp_type::ACK, 2));
        let answer = hdr(&out[1]);
        assert_eq!(
            (answer.method, answer.tid, answer.rmpp.rmpp_type),
            (wire::METHOD_GET_MULTI_RESP, 8, rmpp_type::DATA)
        );
        assert_eq!(r.agent.receptions(), 0);
        // A segment 2 of no reception is dropped without an answer.
        first.tid = 10;
        first.encode(&mut b);
        assert!(r.send(&b, 9).is_empty());
        assert_eq!(r.count(&r.stats.rmpp_unmatched), 1);
        // An RMPP version this agent does not speak.
        let mut v2 = h;
        v2.tid = 9;
        v2.rmpp.version = 2;
        v2.encode(&mut b);
        let a = hdr(&r.send(&b, 9)[0]);
        assert_eq!(
            (a.rmpp.rmpp_type, a.rmpp.status),
            (rmpp_type::ABORT, rmpp_status::UNSUPPORTED_VERSION)
        );
        assert_eq!(r.count(&r.stats.rmpp_requests_refused), 1);
        assert_eq!(
            r.agent.transfers(),
            2,
            "the single-segment and the two-segment requests"
        );
    }

    /// Segment 1 of a GetMulti request of `segments` segments (PayloadLength announcing them).
    fn first_request_segment(tid: u64, segments: u32) -> [u8; MAD_SIZE] {
        let mut b = request(wire::METHOD_GET_MULTI, tid);
        let mut h = SaHeader::decode(&b).unwrap();
        h.rmpp = wire::RmppHeader {
            version: 1,
            rmpp_type: rmpp_type::DATA,
            resp_time: 0,
            flags: rmpp_flag::ACTIVE | rmpp_flag::FIRST,
            status: 0,
            data1: 1,
            data2: segments * 220,
        };
        h.encode(&mut b);
        b
    }

    #[test]
    fn receptions_are_bounded_in_size_number_and_time() {
        let params = SaAgentParams {
            max_transfers: 2,
            ..SaAgentParams::default()
        };
        let mut r = Rig::new(100, params);
        // Announced beyond MAX_REQUEST_PAYLOAD: STOP (ResX), no reception.
        let out = r.send(&first_request_segment(1, 42), 9);
        let a = hdr(&out[0]);
        assert_eq!(
            (a.rmpp.rmpp_type, a.rmpp.status),
            (rmpp_type::STOP, rmpp_status::RESOURCES_EXHAUSTED)
        );
        assert_eq!(r.agent.receptions(), 0);
        // Two receptions at once; the third is STOPped.
        assert_eq!(
            hdr(&r.send(&first_request_segment(2, 3), 9)[0]).rmpp.rmpp_type,
            rmpp_type::ACK
        );
        assert_eq!(
            hdr(&r.send(&first_request_segment(3, 3), 9)[0]).rmpp.rmpp_type,
            rmpp_type::ACK
        );
        let a = hdr(&r.send(&first_request_segment(4, 3), 10)[0]);
        assert_eq!((a.rmpp.rmpp_type, a.tid), (rmpp_type::STOP, 4));
        assert_eq!(r.agent.receptions(), 2);
        // Idle for longer than request_idle: both dropped, nothing sent, nothing answered.
        assert!(r.poll(params.request_idle).is_empty());
        assert_eq!(r.agent.receptions(), 0);
        assert_eq!(r.count(&r.stats.rmpp_requests_refused), 4);
        assert_eq!(r.count(&r.stats.sa_requests), 0);
    }

    #[test]
    fn reports_go_to_the_subscriber_and_are_resent_until_acknowledged_or_given_up() {
        let p = SaAgentParams {
            report_timeout: Duration::from_millis(100),
            report_retries: 1,
            ..SaAgentParams::default()
        };
        let mut r = Rig::new(0, p);
        let mut notice = Box::new([0u8; MAD_SIZE]);
        notice[..4].copy_from_slice(&[1, CLASS_SUBN_ADM, 2, wire::METHOD_REPORT]);
        notice[16..18].copy_from_slice(&wire::attr::NOTICE.to_be_bytes());
        for lid in [20u16, 21] {
            r.sa.reports.lock().unwrap().push(OutgoingReport {
                lid,
                qpn: 0x33,
                pkey_index: 0,
                mad: notice.clone(),
            });
        }
        let out = r.poll(Duration::ZERO);
        assert_eq!(out.len(), 2);
        for o in &out {
            assert_eq!((o.to.qpn, o.qkey, o.timeout_ms), (0x33, QP1_QKEY, 100));
            assert_eq!(hdr(o).method, wire::METHOD_REPORT);
        }
        assert_ne!(hdr(&out[0]).tid, hdr(&out[1]).tid, "each Report has its own TID");
        // LID 20 answers; LID 21 does not.
        let to20 = out.iter().find(|o| o.to.lid == 20).unwrap();
        let mut resp = to20.mad.clone();
        resp[3] = wire::METHOD_REPORT_RESP;
        assert!(r.send(&resp[..], 20).is_empty());
        assert_eq!(r.count(&r.stats.reports_acknowledged), 1);
        let again = r.poll(Duration::from_millis(100));
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].to.lid, 21);
        assert!(r.poll(Duration::from_millis(100)).is_empty());
        assert_eq!(r.agent.pending_reports(), 0);
        assert_eq!(
            (
                r.count(&r.stats.reports_sent),
                r.count(&r.stats.reports_resent),
                r.count(&r.stats.reports_given_up)
            ),
            (2, 1, 1)
        );
        // A standby manager sends no Reports.
        r.sa.serving.store(false, Ordering::Relaxed);
        r.sa.reports.lock().unwrap().push(OutgoingReport {
            lid: 22,
            qpn: 1,
            pkey_index: 0,
            mad: notice,
        });
        assert!(r.poll(Duration::ZERO).is_empty());
    }
}
