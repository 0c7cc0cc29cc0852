//! `fabric-saquery serve-table` (hidden; a test tool): a minimal SA on a simulated port that
//! answers every GetTable with a known table of `records × record_size` bytes (record `i`: its
//! index in the first two bytes, then bytes `i + j`), sent as an RMPP transfer the way the
//! kernel's sender does it (window of one until the first ACK, then up to NewWindowLast, go
//! back to the last ACK after 200 ms without one). It lets the client's RMPP path run through
//! the real simulator (ACKs to the SA's LID, segments back by TID) without the daemon.
//!
//! Simulator only: it opens `issm` (ibsim gives requests to QP1 only to an issm client; the
//! shim ignores method masks) and answers the master's SMInfo polls NOTACTIVE.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use fabric_sa::rmpp::receiver::segments;
use fabric_sa::wire::{self, rmpp_type, SaHeader, MAD_SIZE};
use fabric_umad::client::{answer_smp, QP1_QKEY};
use fabric_umad::transport::{ClientPort, RawPort, UMAD_HDR_LEN};
use serde_json::{json, Value};

/// Resend from the last ACK after this long without one.
const RESEND_AFTER: Duration = Duration::from_millis(200);

/// The table every GetTable is answered with.
pub fn table(records: usize, record_size: usize) -> Vec<u8> {
    let mut d = vec![0u8; records * record_size];
    for (i, r) in d.chunks_exact_mut(record_size.max(1)).enumerate() {
        for (j, b) in r.iter_mut().enumerate() {
            *b = (i + j) as u8;
        }
        if record_size >= 2 {
            r[0..2].copy_from_slice(&(i as u16).to_be_bytes());
        }
    }
    d
}

struct Transfer {
    lid: u16,
    qpn: u32,
    segs: Vec<[u8; MAD_SIZE]>,
    acked: u32,
    window_last: u32,
    next: u32,
    last_progress: Instant,
}

/// Serves for `seconds`; the JSON of what it did. `ready` is called once the port is open.
pub fn serve(
    device: &Path,
    port_guid: u64,
    records: usize,
    record_size: usize,
    seconds: u64,
    ready: impl FnOnce(),
) -> Result<Value> {
    let mut port = ClientPort::open_with_issm(device).context("opening the port")?;
    ready();
    let data = table(records, record_size);
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut buf = vec![0u8; UMAD_HDR_LEN + MAD_SIZE + 512];
    let mut out = [0u8; UMAD_HDR_LEN + MAD_SIZE];
    let mut transfers: HashMap<u32, Transfer> = HashMap::new();
    let (mut served, mut sent, mut acks, mut resends, mut sm_info) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut send = |port: &mut ClientPort, mad: &[u8; MAD_SIZE], lid: u16, qpn: u32, class: u8| {
        out.fill(0);
        out[0..4].copy_from_slice(&port.agent(class).to_ne_bytes());
        out[20..24].copy_from_slice(&qpn.to_be_bytes());
        if qpn != 0 {
            out[24..28].copy_from_slice(&QP1_QKEY.to_be_bytes());
        }
        out[28..30].copy_from_slice(&lid.to_be_bytes());
        out[UMAD_HDR_LEN..].copy_from_slice(mad);
        let _ = port.write(&out);
    };
    while Instant::now() < end {
        port.wait(Duration::from_millis(2));
        while let Some(n) = port.read(&mut buf) {
            if n < UMAD_HDR_LEN + 56 {
                continue;
            }
            let qpn = u32::from_be_bytes([buf[20], buf[21], buf[22], buf[23]]);
            let lid = u16::from_be_bytes([buf[28], buf[29]]);
            let mad = &buf[UMAD_HDR_LEN..n.min(UMAD_HDR_LEN + MAD_SIZE)];
            if mad[1] != wire::CLASS_SUBN_ADM {
                if let Some((resp, to)) = answer_smp(mad, lid, port_guid) {
                    send(&mut port, &resp.bytes, to, 0, resp.class());
                    sm_info += 1;
                }
                continue;
            }
            let Ok(h) = SaHeader::decode(mad) else { continue };
            let tid = h.tid as u32;
            if h.method != wire::METHOD_GET_TABLE {
                continue;
            }
            if h.rmpp.rmpp_type == rmpp_type::ACK {
                if let Some(t) = transfers.get_mut(&tid) {
                    acks += 1;
                    if h.rmpp.data1 > t.acked {
                        t.last_progress = Instant::now();
                    }
                    t.acked = t.acked.max(h.rmpp.data1);
                    t.window_last = t.window_last.max(h.rmpp.data2);
                    t.next = t.next.max(t.acked + 1);
                    if t.acked as usize >= t.segs.len() {
                        transfers.remove(&tid);
                    }
                }
                continue;
            }
            if h.rmpp.rmpp_type != 0 {
                continue;
            }
            // A new GetTable: the whole table, every record matching.
            let mut r = h;
            r.method = wire::METHOD_GET_TABLE_RESP;
            r.status = 0;
            r.sm_key = 0;
            r.attr_offset = (record_size / 8) as u16;
            served += 1;
            transfers.insert(
                tid,
                Transfer {
                    lid,
                    qpn,
                    segs: segments(&r, &data).into_iter().map(|b| *b).collect(),
                    acked: 0,
                    window_last: 1,
                    next: 1,
                    last_progress: Instant::now(),
                },
            );
        }
        let now = Instant::now();
        for t in transfers.values_mut() {
            if now.duration_since(t.last_progress) > RESEND_AFTER {
                t.next = t.acked + 1;
                t.last_progress = now;
                resends += 1;
            }
            let last = t.window_last.min(t.segs.len() as u32);
            while t.next <= last {
                let seg = t.segs[(t.next - 1) as usize];
                send(&mut port, &seg, t.lid, t.qpn, wire::CLASS_SUBN_ADM);
                sent += 1;
                t.next += 1;
            }
        }
    }
    Ok(json!({
        "served": served,
        "segments_sent": sent,
        "acks": acks,
        "resends": resends,
        "sm_info_answers": sm_info,
    }))
}
