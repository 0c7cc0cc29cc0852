//! Tests of the SA agent on the transport thread (fake port, stand-in SA) and the stand-in
//! SA the agent's own tests use.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use fabric_sa::request::response_header;
use fabric_sa::service::OutgoingReport;
use fabric_sa::wire::{self, SaHeader};
use fabric_sa::{Requester, SaResponse};
use tokio::sync::mpsc;

use super::sa_agent::SaEndpoint;
use super::{RawPort, Transport, TransportParams, UMAD_HDR_LEN};
use crate::mad::MAD_SIZE;
use crate::sa;

/// A stand-in SA answering GetTable with a table of `len` bytes (64-byte records) and Get
/// with one record; Reports queued by the test.
pub struct TableSa {
    pub serving: AtomicBool,
    pub len: usize,
    pub reports: Mutex<Vec<OutgoingReport>>,
    /// The SA data of every request handled.
    pub requests: Mutex<Vec<Vec<u8>>>,
}

impl TableSa {
    pub fn new(len: usize) -> TableSa {
        TableSa {
            serving: AtomicBool::new(true),
            len,
            reports: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
        }
    }
}

impl SaEndpoint for TableSa {
    fn serving(&self) -> bool {
        self.serving.load(Ordering::Relaxed)
    }
    fn handle(&self, mad: &[u8], _: &Requester, _: SystemTime) -> Option<SaResponse> {
        let h = SaHeader::decode(mad).ok()?;
        self.requests.lock().unwrap().push(mad[56..].to_vec());
        let mut header = response_header(&h);
        header.attr_offset = 8;
        let len = if h.method == wire::METHOD_GET { 64 } else { self.len };
        Some(SaResponse {
            header,
            data: (0..len).map(|i| i as u8).collect(),
        })
    }
    fn take_reports(&self) -> Vec<OutgoingReport> {
        std::mem::take(&mut *self.reports.lock().unwrap())
    }
}

fn params() -> TransportParams {
    TransportParams {
        timeout: Duration::from_millis(20),
        retries: 0,
        window: 4,
        perf_window: 4,
    }
}

/// A port the test feeds while the thread runs; records what is written. `wait` sleeps (an
/// idle thread with an SA attached waits on the port).
#[derive(Clone, Default)]
struct SaPort {
    inbound: Arc<Mutex<VecDeque<Vec<u8>>>>,
    written: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl RawPort for SaPort {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.written.lock().unwrap().push(buf.to_vec());
        Ok(())
    }
    fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
        let p = self.inbound.lock().unwrap().pop_front()?;
        buf[..p.len()].copy_from_slice(&p);
        Some(p.len())
    }
    fn wait(&mut self, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
    }
    fn agent(&self, class: u8) -> u32 {
        u32::from(class) + 100
    }
}

impl SaPort {
    /// Queues `mad` as received from LID `lid`, QP 1 (232 valid bytes, as the shim gives).
    fn deliver(&self, lid: u16, mad: &[u8; MAD_SIZE]) {
        let mut p = vec![0u8; UMAD_HDR_LEN];
        p[20..24].copy_from_slice(&1u32.to_be_bytes());
        p[28..30].copy_from_slice(&lid.to_be_bytes());
        p.extend_from_slice(&mad[..232]);
        self.inbound.lock().unwrap().push_back(p);
    }
    /// The SA MADs written so far (umad header, SA header).
    fn sa_written(&self) -> Vec<(Vec<u8>, fabric_sa::wire::SaHeader)> {
        self.written
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p[UMAD_HDR_LEN + 1] == sa::CLASS_SUBN_ADM)
            .map(|p| {
                (
                    p.clone(),
                    fabric_sa::wire::SaHeader::decode(&p[UMAD_HDR_LEN..]).unwrap(),
                )
            })
            .collect()
    }
}

/// Waits (up to 5 s) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(5), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn sa_request(method: u8, tid: u64) -> [u8; MAD_SIZE] {
    let h = fabric_sa::wire::SaHeader {
        class_version: 2,
        method,
        tid,
        attr_id: fabric_sa::wire::attr::NODE_RECORD,
        ..Default::default()
    };
    let mut b = [0u8; MAD_SIZE];
    h.encode(&mut b);
    b
}

fn data_segments(port: &SaPort, seg: u32) -> usize {
    port.sa_written()
        .iter()
        .filter(|(_, h)| h.rmpp.rmpp_type == fabric_sa::wire::rmpp_type::DATA && h.rmpp.data1 == seg)
        .count()
}

#[test]
fn get_table_is_answered_by_an_ack_driven_rmpp_transfer_with_a_lost_segment_resent() {
    use fabric_sa::rmpp::ack;
    let port = SaPort::default();
    let (ttx, _trx) = mpsc::unbounded_channel();
    let t = Transport::start(port.clone(), params(), ttx);
    let table = Arc::new(TableSa::new(1000));
    assert!(t.set_sa_endpoint(table.clone()));
    assert!(!t.set_sa_endpoint(table.clone()), "attached once");
    port.deliver(9, &sa_request(fabric_sa::wire::METHOD_GET_TABLE, 0x77));
    eventually("segment 1", || data_segments(&port, 1) == 1);
    let (raw, first) = port.sa_written()[0].clone();
    // Agent of class 0x03, the requester's QP and LID, QP1's Q_Key.
    assert_eq!(u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]), 103);
    assert_eq!(u32::from_be_bytes([raw[20], raw[21], raw[22], raw[23]]), 1);
    assert_eq!(u32::from_be_bytes([raw[24], raw[25], raw[26], raw[27]]), sa::QP1_QKEY);
    assert_eq!(u16::from_be_bytes([raw[28], raw[29]]), 9);
    assert_eq!((first.method, first.tid, first.rmpp.data2), (0x92, 0x77, 5 * 220));
    // Window 1 until the ACK; the ACK opens segments 2..5.
    port.deliver(9, &ack(&first, 1, 5));
    eventually("segments 2..5", || data_segments(&port, 5) == 1);
    assert_eq!(data_segments(&port, 2), 1);
    // Segment 3 is lost: the receiver acknowledges 2 only; after the ACK timeout the
    // sender resends from 3.
    port.deliver(9, &ack(&first, 2, 5));
    eventually("segment 3 resent", || data_segments(&port, 3) == 2);
    assert_eq!(data_segments(&port, 2), 1, "no resend of an acknowledged segment");
    port.deliver(9, &ack(&first, 5, 5));
    eventually("completion", || t.stats().rmpp_completed.load(Ordering::Relaxed) == 1);
    let s = t.stats();
    assert_eq!(s.rmpp_started.load(Ordering::Relaxed), 1);
    assert_eq!(s.rmpp_segments_resent.load(Ordering::Relaxed), 3);
    assert_eq!(s.rmpp_aborted.load(Ordering::Relaxed), 0);
    assert_eq!(s.sa_requests.load(Ordering::Relaxed), 1);
    // The segments (latest copy of each) reassemble the table.
    let mut data = Vec::new();
    for seg in 1..=5 {
        let w = port.sa_written();
        let (p, h) = w.iter().rev().find(|(_, h)| h.rmpp.data1 == seg).unwrap();
        let n = if seg == 5 { h.rmpp.data2 as usize - 20 } else { 200 };
        data.extend_from_slice(&p[UMAD_HDR_LEN + 56..UMAD_HDR_LEN + 56 + n]);
    }
    assert_eq!(data, (0..1000).map(|i| i as u8).collect::<Vec<u8>>());
}

#[test]
fn a_standby_sa_drops_queries_and_answers_once_serving() {
    let port = SaPort::default();
    let (ttx, _trx) = mpsc::unbounded_channel();
    let t = Transport::start(port.clone(), params(), ttx);
    let service = Arc::new(fabric_sa::SaService::new(Default::default(), None));
    assert!(t.set_sa(service.clone()));
    assert!(t.has_sa());
    port.deliver(9, &sa_request(fabric_sa::wire::METHOD_GET_TABLE, 1));
    eventually("the standby drop", || {
        t.stats().sa_dropped_standby.load(Ordering::Relaxed) == 1
    });
    assert!(port.sa_written().is_empty());
    service.set_serving(true);
    port.deliver(9, &sa_request(fabric_sa::wire::METHOD_GET_TABLE, 2));
    eventually("an answer", || !port.sa_written().is_empty());
    let (raw, h) = port.sa_written()[0].clone();
    assert_eq!((h.method, h.tid), (fabric_sa::wire::METHOD_GET_TABLE_RESP, 2));
    assert_eq!(u16::from_be_bytes([raw[28], raw[29]]), 9);
    assert_eq!(t.stats().sa_requests.load(Ordering::Relaxed), 1);
}

#[test]
fn guard_classes_are_still_received_and_dropped_with_an_sa_attached() {
    let port = SaPort::default();
    let (ttx, _trx) = mpsc::unbounded_channel();
    let t = Transport::start(port.clone(), params(), ttx);
    let table = Arc::new(TableSa::new(64));
    assert!(t.set_sa_endpoint(table));
    for (class, version) in sa::GUARD_CLASSES {
        let mut m = [0u8; MAD_SIZE];
        m[..4].copy_from_slice(&[1, class, version, wire::METHOD_GET]);
        port.deliver(9, &m);
    }
    // The thread lives on and answers the SA query queued after them.
    port.deliver(9, &sa_request(wire::METHOD_GET, 3));
    eventually("the SA answer", || !port.sa_written().is_empty());
    assert_eq!(
        t.stats().gsi_dropped.load(Ordering::Relaxed),
        sa::GUARD_CLASSES.len() as u64
    );
    assert_eq!(port.written.lock().unwrap().len(), 1, "nothing answers a guard class");
}

/// MAD bytes of a written packet.
fn mad_len(p: &[u8]) -> usize {
    p.len() - UMAD_HDR_LEN
}

#[test]
fn single_mad_answers_and_last_segments_are_written_with_their_exact_length() {
    use fabric_sa::rmpp::ack;
    use fabric_sa::wire::{METHOD_GET, METHOD_GET_TABLE};
    let port = SaPort::default();
    let (ttx, _trx) = mpsc::unbounded_channel();
    let t = Transport::start(port.clone(), params(), ttx);
    // 330 bytes: a full first segment, 130 bytes in the last one.
    assert!(t.set_sa_endpoint(Arc::new(TableSa::new(330))));
    // Get: one 64-byte record, 56 + 64 bytes (OpenSM's length; saquery counts records by it).
    port.deliver(9, &sa_request(METHOD_GET, 1));
    eventually("the Get answer", || port.sa_written().len() == 1);
    let (raw, h) = port.sa_written()[0].clone();
    assert_eq!((h.method, h.status), (wire::METHOD_GET_RESP, 0));
    assert_eq!(mad_len(&raw), 56 + 64);
    // GetTable: segment 1 is whole, the LAST one ends with its data.
    port.deliver(9, &sa_request(METHOD_GET_TABLE, 2));
    eventually("segment 1", || data_segments(&port, 1) == 1);
    let (raw, first) = port.sa_written()[1].clone();
    assert_eq!(mad_len(&raw), MAD_SIZE, "a segment that is not the last is a whole MAD");
    port.deliver(9, &ack(&first, 1, 2));
    eventually("segment 2", || data_segments(&port, 2) == 1);
    let (raw, last) = port.sa_written()[2].clone();
    assert_eq!((last.rmpp.data1, last.rmpp.data2), (2, 20 + 130));
    assert_eq!(mad_len(&raw), 56 + 130);
    assert_eq!(
        &raw[UMAD_HDR_LEN + 56..],
        &(200..330).map(|i| i as u8).collect::<Vec<u8>>()[..]
    );
}

#[test]
fn an_empty_table_is_one_header_only_segment() {
    let port = SaPort::default();
    let (ttx, _trx) = mpsc::unbounded_channel();
    let t = Transport::start(port.clone(), params(), ttx);
    assert!(t.set_sa_endpoint(Arc::new(TableSa::new(0))));
    port.deliver(9, &sa_request(wire::METHOD_GET_TABLE, 1));
    eventually("the answer", || port.sa_written().len() == 1);
    let (raw, h) = port.sa_written()[0].clone();
    assert_eq!((h.method, h.status, h.rmpp.data1, h.rmpp.data2), (0x92, 0, 1, 20));
    assert_eq!(mad_len(&raw), 56);
}

#[test]
fn a_multi_mad_get_multi_is_reassembled_acked_and_answered() {
    use fabric_sa::rmpp::segments;
    use fabric_sa::wire::{rmpp_type, METHOD_GET_MULTI, METHOD_GET_MULTI_RESP};
    let port = SaPort::default();
    let (ttx, _trx) = mpsc::unbounded_channel();
    let t = Transport::start(port.clone(), params(), ttx);
    let table = Arc::new(TableSa::new(64 * 3));
    assert!(t.set_sa_endpoint(table.clone()));
    // 36 GIDs: 24 + 576 bytes, three segments.
    let payload: Vec<u8> = (0..600).map(|i| (i % 253) as u8 | 1).collect();
    let h = SaHeader {
        class_version: 2,
        method: METHOD_GET_MULTI,
        tid: 0x55,
        attr_id: wire::attr::MULTI_PATH_RECORD,
        ..SaHeader::default()
    };
    let segs = segments(&h, &payload);
    assert_eq!(segs.len(), 3);
    let acks = |port: &SaPort| -> Vec<(u32, u32)> {
        port.sa_written()
            .iter()
            .filter(|(_, h)| h.rmpp.rmpp_type == rmpp_type::ACK)
            .map(|(_, h)| (h.rmpp.data1, h.rmpp.data2))
            .collect()
    };
    port.deliver(9, &segs[0]);
    eventually("the ACK of segment 1", || acks(&port) == [(1, 17)]);
    let (raw, ack) = port.sa_written()[0].clone();
    assert_eq!((ack.method, ack.tid), (METHOD_GET_MULTI_RESP, 0x55));
    assert_eq!(u16::from_be_bytes([raw[28], raw[29]]), 9, "to the requester");
    port.deliver(9, &segs[1]);
    port.deliver(9, &segs[2]);
    eventually("the answer", || data_segments(&port, 1) == 1);
    assert_eq!(acks(&port), [(1, 17), (3, 17)], "segment 3 (LAST) is ACKed");
    let answer = port
        .sa_written()
        .into_iter()
        .find(|(_, h)| h.rmpp.rmpp_type == rmpp_type::DATA)
        .unwrap()
        .1;
    assert_eq!(
        (answer.method, answer.tid, answer.status),
        (METHOD_GET_MULTI_RESP, 0x55, 0)
    );
    // The SA got the whole payload as one request, but for what the port did not deliver:
    // `deliver` hands over 232 bytes like the ibsim shim, so data bytes 176..200 of every
    // segment are zero.
    let got = table.requests.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].len(), payload.len());
    for (i, (g, p)) in got[0].iter().zip(&payload).enumerate() {
        assert_eq!(*g, if i % 200 >= 176 { 0 } else { *p }, "byte {i}");
    }
}
