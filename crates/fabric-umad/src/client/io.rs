//! The client's I/O thread: owns the port, sends the queries (a new TID per attempt),
//! reassembles RMPP answers and ACKs them, answers Reports (ReportResp) and, with `issm` open
//! under the simulator, the SM's SMInfo polls; deadlines and retries.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fabric_sa::rmpp::receiver::{segments, Progress, Receiver, ReceiverConfig, RmppError};
use fabric_sa::rmpp::sender::{self, SenderParams, TransferEnd};
use fabric_sa::wire::{self, rmpp_flag, rmpp_type, SaHeader, MAD_SIZE, SA_DATA_SIZE, SA_HEADER_SIZE};

use super::{
    answer_smp, valid_mad_bytes, ClientConfig, ClientError, ClientStats, LocalPort, Report, SaAnswer, SaQuery,
    QP1_QKEY, RX_BUF,
};
use crate::mad::{CLASS_SMP_DR, CLASS_SMP_LID};
use crate::transport::{RawPort, UMAD_HDR_LEN};

/// A request to the I/O thread.
pub(super) enum Cmd {
    Query {
        q: SaQuery,
        reply: mpsc::Sender<Result<SaAnswer, ClientError>>,
    },
}

struct Pending {
    q: SaQuery,
    reply: mpsc::Sender<Result<SaAnswer, ClientError>>,
    attempts: u32,
    started: Instant,
    deadline: Instant,
    receiver: Option<Receiver>,
    /// The RMPP header of the request as sent (a GetMulti's one segment; default otherwise).
    sent_rmpp: wire::RmppHeader,
    /// A multi-MAD GetMulti request still being sent (until the SA ACKs its last segment).
    sending: Option<sender::Transfer>,
}

pub(super) struct Io<P: RawPort> {
    port: P,
    sm_lid: u16,
    sm_sl: u8,
    timeout: Duration,
    retries: u32,
    rmpp: ReceiverConfig,
    valid: usize,
    next_tid: u32,
    /// Outstanding queries by the low 32 bits of their current TID.
    pending: HashMap<u32, Pending>,
    reports: mpsc::Sender<Report>,
    stats: Arc<Mutex<ClientStats>>,
    /// This port's GUID (the SMInfo answer under `issm`).
    port_guid: u64,
}

/// Why a multi-MAD request's transfer ended without being delivered.
fn request_rmpp_error(end: TransferEnd) -> RmppError {
    match end {
        TransferEnd::Stopped(status) => RmppError::PeerEnded {
            rmpp_type: rmpp_type::STOP,
            status,
        },
        TransferEnd::AbortedByReceiver(status) => RmppError::PeerEnded {
            rmpp_type: rmpp_type::ABORT,
            status,
        },
        TransferEnd::Aborted(status) => RmppError::Aborted {
            status,
            why: "the SA did not acknowledge the request's segments".to_string(),
        },
        // Not an error; not reached.
        TransferEnd::Completed => RmppError::Aborted {
            status: 0,
            why: "completed".to_string(),
        },
    }
}

fn what(q: &SaQuery) -> String {
    format!("method {:#04x} attribute {:#06x}", q.method, q.attr_id)
}

impl<P: RawPort> Io<P> {
    /// The I/O state of a client on `port` (see [`super::SaClient::start`]).
    pub(super) fn new(
        port: P,
        local: &LocalPort,
        cfg: &ClientConfig,
        reports: mpsc::Sender<Report>,
        stats: Arc<Mutex<ClientStats>>,
    ) -> Io<P> {
        Io {
            port,
            sm_lid: local.sm_lid,
            sm_sl: local.sm_sl,
            timeout: cfg.timeout,
            retries: cfg.retries,
            rmpp: cfg.rmpp,
            valid: valid_mad_bytes(cfg),
            next_tid: 1,
            pending: HashMap::new(),
            reports,
            stats,
            port_guid: local
                .gid
                .map_or(0, |g| u64::from_be_bytes(g[8..16].try_into().unwrap_or([0; 8]))),
        }
    }

    fn stat(&self, f: impl FnOnce(&mut ClientStats)) {
        f(&mut self.stats.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    }

    pub(super) fn run(mut self, rx: mpsc::Receiver<Cmd>, stop: &AtomicBool) {
        let mut open = true;
        let mut buf = vec![0u8; RX_BUF];
        let mut queue: VecDeque<Cmd> = VecDeque::new();
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if open && self.pending.is_empty() {
                match rx.recv_timeout(Duration::from_millis(5)) {
                    Ok(c) => queue.push_back(c),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => open = false,
                }
            }
            while open {
                match rx.try_recv() {
                    Ok(c) => queue.push_back(c),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => open = false,
                }
            }
            while let Some(Cmd::Query { q, reply }) = queue.pop_front() {
                let now = Instant::now();
                let p = Pending {
                    q,
                    reply,
                    attempts: 0,
                    started: now,
                    deadline: now,
                    receiver: None,
                    sent_rmpp: wire::RmppHeader::default(),
                    sending: None,
                };
                self.send_attempt(p);
            }
            self.port.wait(Duration::from_millis(1));
            while let Some(n) = self.port.read(&mut buf) {
                self.on_packet(&buf[..n.min(buf.len())]);
            }
            self.deadlines(Instant::now());
        }
    }

    /// Sends (or re-sends under a new TID) the request of `p`.
    fn send_attempt(&mut self, mut p: Pending) {
        let tid = self.next_tid;
        self.next_tid = self.next_tid.wrapping_add(1).max(1);
        p.attempts += 1;
        p.deadline = Instant::now() + self.timeout;
        p.receiver = None;
        let h = SaHeader {
            class_version: wire::SA_CLASS_VERSION,
            method: p.q.method,
            status: 0,
            tid: u64::from(tid),
            attr_id: p.q.attr_id,
            attr_mod: p.q.attr_mod,
            rmpp: Default::default(),
            sm_key: p.q.sm_key,
            attr_offset: p.q.attr_offset,
            component_mask: p.q.component_mask,
        };
        p.sending = None;
        if p.q.method == wire::METHOD_GET_MULTI && p.q.data.len() > SA_DATA_SIZE {
            // More than one MAD: an RMPP transfer of its own, ACK-driven.
            let now = Instant::now();
            let ms = self.timeout_ms();
            if let Ok((t, step)) = sender::Transfer::start_request(h, p.q.data.clone(), SenderParams::default(), now) {
                for m in &step.send {
                    self.send(m, self.sm_lid, 1, ms);
                }
                p.sent_rmpp = SaHeader::decode(&step.send[0][..]).map(|s| s.rmpp).unwrap_or_default();
                p.deadline = t.deadline().unwrap_or(p.deadline);
                p.sending = Some(t);
                self.pending.insert(tid, p);
                return;
            }
        }
        let mut mad = [0u8; MAD_SIZE];
        if p.q.method == wire::METHOD_GET_MULTI {
            // A GetMulti request is an RMPP transfer (OpenSM rejects one without RMPP ACTIVE:
            // "ERR 4510"); one segment, FIRST|LAST, as the kernel's sender would cut it.
            let n = p.q.data.len().min(SA_DATA_SIZE);
            mad = *segments(&h, &p.q.data[..n])[0];
            p.sent_rmpp = SaHeader::decode(&mad).map(|s| s.rmpp).unwrap_or_default();
        } else {
            h.encode(&mut mad);
            let n = p.q.data.len().min(SA_DATA_SIZE);
            mad[SA_HEADER_SIZE..SA_HEADER_SIZE + n].copy_from_slice(&p.q.data[..n]);
        }
        let bad = &p.q.malformed;
        if let Some(v) = bad.class_version {
            mad[2] = v;
        }
        if let Some(r) = bad.rmpp {
            mad[24..36].copy_from_slice(&r);
            p.sent_rmpp = SaHeader::decode(&mad).map(|s| s.rmpp).unwrap_or_default();
        }
        let len = bad.mad_bytes.map_or(MAD_SIZE, |n| n.min(MAD_SIZE));
        // timeout_ms: the kernel matches a (non-RMPP) response only to a request sent with one.
        let ms = self.timeout_ms();
        self.send_len(&mad, len, self.sm_lid, 1, ms);
        self.pending.insert(tid, p);
    }

    /// `timeout_ms` of a request's umad header (the client's timeout, at least 1 ms).
    fn timeout_ms(&self) -> u32 {
        self.timeout.as_millis().clamp(1, u128::from(u32::MAX)) as u32
    }

    fn send(&mut self, mad: &[u8; MAD_SIZE], lid: u16, qpn: u32, timeout_ms: u32) {
        self.send_len(mad, MAD_SIZE, lid, qpn, timeout_ms);
    }

    /// Sends the first `len` bytes of `mad` (a whole MAD but for malformed test requests).
    fn send_len(&mut self, mad: &[u8; MAD_SIZE], len: usize, lid: u16, qpn: u32, timeout_ms: u32) {
        let mut out = [0u8; UMAD_HDR_LEN + MAD_SIZE];
        out[0..4].copy_from_slice(&self.port.agent(wire::CLASS_SUBN_ADM).to_ne_bytes());
        out[8..12].copy_from_slice(&timeout_ms.to_ne_bytes());
        out[20..24].copy_from_slice(&qpn.to_be_bytes());
        out[24..28].copy_from_slice(&QP1_QKEY.to_be_bytes());
        out[28..30].copy_from_slice(&lid.to_be_bytes());
        out[30] = self.sm_sl;
        out[UMAD_HDR_LEN..].copy_from_slice(mad);
        // A failed write is a lost attempt: the deadline re-sends it.
        let _ = self.port.write(&out[..UMAD_HDR_LEN + len.min(MAD_SIZE)]);
        self.stat(|s| s.sent += 1);
    }

    fn on_packet(&mut self, pkt: &[u8]) {
        if pkt.len() < UMAD_HDR_LEN + SA_HEADER_SIZE {
            return;
        }
        self.stat(|s| s.received += 1);
        let status = u32::from_ne_bytes([pkt[4], pkt[5], pkt[6], pkt[7]]);
        let from_qpn = u32::from_be_bytes([pkt[20], pkt[21], pkt[22], pkt[23]]);
        let from_lid = u16::from_be_bytes([pkt[28], pkt[29]]);
        let mad = &pkt[UMAD_HDR_LEN..pkt.len().min(UMAD_HDR_LEN + self.valid)];
        if matches!(mad[1], CLASS_SMP_LID | CLASS_SMP_DR) {
            if status == 0 {
                self.on_smp(mad, from_lid);
            }
            return;
        }
        let Ok(h) = SaHeader::decode(mad) else {
            self.stat(|s| s.stray += 1);
            return;
        };
        let tid = h.tid as u32;
        if status != 0 {
            // Our request came back undelivered (the kernel's send timeout): a lost attempt.
            if let Some(p) = self.pending.remove(&tid) {
                self.retry_or_fail(p);
            }
            return;
        }
        if h.method == wire::METHOD_REPORT {
            self.on_report(&h, mad, from_lid, from_qpn);
            return;
        }
        if h.method & wire::METHOD_RESPONSE == 0 {
            self.stat(|s| s.stray += 1);
            return;
        }
        let Some(mut p) = self.pending.remove(&tid) else {
            self.stat(|s| s.stray += 1);
            return;
        };
        let active = h.rmpp.flags & rmpp_flag::ACTIVE != 0;
        if let Some(t) = p.sending.as_mut() {
            if active && h.rmpp.rmpp_type != rmpp_type::DATA {
                // The SA's ACK, STOP or ABORT of our request's segments.
                let now = Instant::now();
                let step = t.on_mad(mad, now);
                let ms = self.timeout_ms();
                for m in &step.send {
                    self.send(m, from_lid, from_qpn.max(1), ms);
                }
                match step.end {
                    None => p.deadline = t.deadline().unwrap_or(now + self.timeout),
                    Some(TransferEnd::Completed) => {
                        // Delivered: now the answer.
                        p.sending = None;
                        p.deadline = now + self.timeout;
                    }
                    Some(end) => {
                        let err = request_rmpp_error(end);
                        let _ = p.reply.send(Err(ClientError::Rmpp { what: what(&p.q), err }));
                        return;
                    }
                }
                self.pending.insert(tid, p);
                return;
            }
            // The answer itself (the final ACK was lost): the request was delivered.
            p.sending = None;
        }
        if !active {
            let mut data = mad[SA_HEADER_SIZE..].to_vec();
            let undelivered = self.undelivered(1, SA_DATA_SIZE);
            data.resize(SA_DATA_SIZE, 0);
            let _ = p.reply.send(Ok(SaAnswer {
                header: h,
                data,
                rmpp: false,
                segments: 1,
                unsegmented: false,
                attempts: p.attempts,
                elapsed: p.started.elapsed(),
                undelivered,
            }));
            return;
        }
        let s = p.sent_rmpp;
        let echoed = s.rmpp_type != 0
            && (h.rmpp.rmpp_type, h.rmpp.status, h.rmpp.data1, h.rmpp.data2)
                == (s.rmpp_type, s.status, s.data1, s.data2);
        if (h.rmpp.rmpp_type == 0 && h.rmpp.data1 == 0) || echoed {
            // RMPP ACTIVE without a segment header of its own (none, or the request's echoed):
            // an SA that leaves segmentation to a kernel that is not there (OpenSM behind the
            // simulator shim). Its first MAD is all there is.
            // Only what was delivered: records cut by the end are dropped by `records()`.
            let valid = mad.len().saturating_sub(SA_HEADER_SIZE).min(SA_DATA_SIZE);
            let _ = p.reply.send(Ok(SaAnswer {
                header: h,
                data: mad[SA_HEADER_SIZE..SA_HEADER_SIZE + valid].to_vec(),
                rmpp: true,
                segments: 1,
                unsegmented: true,
                attempts: p.attempts,
                elapsed: p.started.elapsed(),
                undelivered: Vec::new(),
            }));
            return;
        }
        let now = Instant::now();
        let rmpp_cfg = self.rmpp;
        let step = p
            .receiver
            .get_or_insert_with(|| Receiver::new(rmpp_cfg, now))
            .on_mad(now, mad);
        if let Some(ack) = step.reply {
            // ACK, STOP or ABORT to the sender: the SA's LID and QP as the segment came.
            self.send(&ack, from_lid, from_qpn.max(1), 0);
            self.stat(|s| s.acks_sent += 1);
        }
        match step.progress {
            Progress::Receiving => {
                p.deadline = now + self.timeout;
                self.pending.insert(tid, p);
            }
            Progress::Complete(t) => {
                let undelivered = self.undelivered(t.segments, t.data.len());
                let _ = p.reply.send(Ok(SaAnswer {
                    header: t.header,
                    data: t.data,
                    rmpp: true,
                    segments: t.segments,
                    unsegmented: false,
                    attempts: p.attempts,
                    elapsed: p.started.elapsed(),
                    undelivered,
                }));
            }
            Progress::Failed(err) => {
                let _ = p.reply.send(Err(ClientError::Rmpp { what: what(&p.q), err }));
            }
        }
    }

    /// The ranges of `len` bytes of SA data in `segments` MADs that the transport did not
    /// deliver (the tail of each MAD beyond [`Io::valid`]).
    fn undelivered(&self, segments: u32, len: usize) -> Vec<(usize, usize)> {
        let per = self.valid.saturating_sub(SA_HEADER_SIZE).min(SA_DATA_SIZE);
        if per == SA_DATA_SIZE {
            return Vec::new();
        }
        (0..segments as usize)
            .map(|k| (k * SA_DATA_SIZE + per, ((k + 1) * SA_DATA_SIZE).min(len)))
            .filter(|(a, b)| a < b)
            .collect()
    }

    fn on_report(&mut self, h: &SaHeader, mad: &[u8], from_lid: u16, from_qpn: u32) {
        self.stat(|s| s.reports += 1);
        let mut r = *h;
        r.method = wire::METHOD_REPORT_RESP;
        r.status = 0;
        r.rmpp = Default::default();
        let mut out = [0u8; MAD_SIZE];
        r.encode(&mut out);
        let n = mad.len().min(MAD_SIZE);
        out[SA_HEADER_SIZE..n].copy_from_slice(&mad[SA_HEADER_SIZE..n]);
        // (Under the shim the Notice's tail beyond the delivered bytes stays zero.)
        self.send(&out, from_lid, from_qpn.max(1), 0);
        let _ = self.reports.send(Report {
            header: *h,
            data: mad[SA_HEADER_SIZE..].to_vec(),
            from_lid,
        });
    }

    /// An SMP addressed to this port (only with `issm` open under the simulator).
    fn on_smp(&mut self, mad: &[u8], from_lid: u16) {
        let Some((resp, to)) = answer_smp(mad, from_lid, self.port_guid) else {
            return;
        };
        let mut out = [0u8; UMAD_HDR_LEN + MAD_SIZE];
        out[0..4].copy_from_slice(&self.port.agent(resp.class()).to_ne_bytes());
        out[28..30].copy_from_slice(&to.to_be_bytes());
        out[UMAD_HDR_LEN..].copy_from_slice(&resp.bytes);
        let _ = self.port.write(&out);
        self.stat(|s| s.sm_info_answers += 1);
    }

    fn retry_or_fail(&mut self, p: Pending) {
        if p.attempts <= self.retries {
            self.stat(|s| s.retries += 1);
            self.send_attempt(p);
        } else {
            self.stat(|s| s.timeouts += 1);
            let err = ClientError::Timeout {
                sm_lid: self.sm_lid,
                what: what(&p.q),
                attempts: p.attempts,
            };
            let _ = p.reply.send(Err(err));
        }
    }

    fn deadlines(&mut self, now: Instant) {
        // Requests still being sent: the RMPP sender's timer (resend the window or abort).
        let due: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                p.sending
                    .as_ref()
                    .and_then(sender::Transfer::deadline)
                    .is_some_and(|d| d <= now)
            })
            .map(|(t, _)| *t)
            .collect();
        for tid in due {
            let Some(mut p) = self.pending.remove(&tid) else {
                continue;
            };
            let Some(t) = p.sending.as_mut() else { continue };
            let step = t.on_timer(now);
            let ms = self.timeout_ms();
            for m in &step.send {
                self.send(m, self.sm_lid, 1, ms);
            }
            match step.end {
                Some(end) => {
                    let err = request_rmpp_error(end);
                    let _ = p.reply.send(Err(ClientError::Rmpp { what: what(&p.q), err }));
                }
                None => {
                    p.deadline = t.deadline().unwrap_or(now + self.timeout);
                    self.pending.insert(tid, p);
                }
            }
        }
        let expired: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.sending.is_none() && p.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in expired {
            if let Some(p) = self.pending.remove(&t) {
                self.retry_or_fail(p);
            }
        }
    }
}
