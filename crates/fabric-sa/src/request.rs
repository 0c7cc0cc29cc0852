//! What every answer is made of: the decoded [`Request`], its [`Requester`], the
//! [`SaResponse`], and the response builders shared by every attribute (OpenSM's error
//! echo, Get / GetTable from a list of matching records).

use std::time::SystemTime;

use crate::records::Record;
use crate::wire::{self, status, SaHeader, MAD_SIZE, SA_DATA_SIZE, SA_HEADER_SIZE};

/// Who sent a request (from the umad receive header, or the gRPC caller's stand-in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Requester {
    pub lid: u16,
    pub qpn: u32,
    pub sl: u8,
    pub pkey_index: u16,
    /// Source GID when the request carried a GRH.
    pub gid: Option<[u8; 16]>,
}

/// One answer: the response header and the SA data (one record, or the records of a table,
/// `header.attr_offset * 8` bytes each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaResponse {
    pub header: SaHeader,
    pub data: Vec<u8>,
}

impl SaResponse {
    /// GetTableResp and GetMultiResp go out as RMPP transfers (even of one segment), every
    /// other response as one MAD.
    pub fn is_rmpp(&self) -> bool {
        matches!(
            self.header.method,
            wire::METHOD_GET_TABLE_RESP | wire::METHOD_GET_MULTI_RESP
        )
    }

    /// The one-MAD image of a non-RMPP response (data beyond 200 bytes is cut).
    pub fn single_mad(&self) -> [u8; MAD_SIZE] {
        let mut b = [0u8; MAD_SIZE];
        self.header.encode(&mut b);
        let n = self.data.len().min(SA_DATA_SIZE);
        b[SA_HEADER_SIZE..SA_HEADER_SIZE + n].copy_from_slice(&self.data[..n]);
        b
    }
}

/// The "not supported" answer OpenSM's `osm_sa_send_error` gives: the request echoed with
/// the status and the response method (Set → GetResp), SM_Key 0, AttributeOffset 0, a
/// MultiPathRecord query answered as PathRecord. `None` for what gets no answer.
pub fn unsupported(h: &SaHeader, mad: &[u8]) -> Option<SaResponse> {
    if h.method & wire::METHOD_RESPONSE != 0
        || matches!(
            h.method,
            wire::METHOD_SEND | wire::METHOD_TRAP | wire::METHOD_REPORT | wire::METHOD_TRAP_REPRESS
        )
    {
        return None;
    }
    let st = if h.class_version != wire::SA_CLASS_VERSION {
        status::BAD_VERSION
    } else if matches!(
        h.method,
        wire::METHOD_GET
            | wire::METHOD_SET
            | wire::METHOD_GET_TABLE
            | wire::METHOD_GET_TRACE_TABLE
            | wire::METHOD_GET_MULTI
            | wire::METHOD_DELETE
    ) {
        status::UNSUPPORTED_METHOD_ATTR
    } else {
        status::UNSUPPORTED_METHOD
    };
    Some(error_response(h, mad.get(SA_HEADER_SIZE..).unwrap_or_default(), st))
}

/// The error response to request `h`, echoing `data` (the request's SA data, the bytes after
/// its 56-byte header), as OpenSM does.
pub fn error_response(h: &SaHeader, data: &[u8], st: u16) -> SaResponse {
    let mut header = *h;
    header.method = if h.method == wire::METHOD_SET {
        wire::METHOD_GET_RESP
    } else {
        h.method | wire::METHOD_RESPONSE
    };
    header.status = st;
    header.sm_key = 0;
    header.attr_offset = 0;
    header.rmpp = Default::default();
    if header.attr_id == wire::attr::MULTI_PATH_RECORD {
        header.attr_id = wire::attr::PATH_RECORD;
    }
    let data = data[..data.len().min(SA_DATA_SIZE)].to_vec();
    SaResponse { header, data }
}

/// One decoded request.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub header: SaHeader,
    /// The SA data after the 56-byte header: the record template (Get, GetTable, Set,
    /// Delete) or, for GetMulti, the reassembled RMPP payload.
    pub data: &'a [u8],
    pub from: Requester,
    pub now: SystemTime,
    /// The request carried the SM_Key of this manager (a trusted requester: it gets the keys
    /// in the records, e.g. ServiceKey, as OpenSM answers requests carrying its SM_Key).
    pub trusted: bool,
}

/// The response header to request `h`: response method, status OK, SM_Key 0, RMPP cleared.
pub fn response_header(h: &SaHeader) -> SaHeader {
    let mut r = *h;
    r.method = if h.method == wire::METHOD_SET {
        wire::METHOD_GET_RESP
    } else {
        h.method | wire::METHOD_RESPONSE
    };
    r.status = status::OK;
    r.sm_key = 0;
    r.rmpp = Default::default();
    r
}

/// The answer to a Get (one record: ERR_NO_RECORDS for none, ERR_REQ_TOO_MANY_RECORDS for
/// more than one) or a GetTable (every matching record, AttributeOffset = record size / 8)
/// from the records that match.
pub fn records_response<R: Record>(h: &SaHeader, records: &[R]) -> SaResponse {
    let mut header = response_header(h);
    header.attr_offset = (R::SIZE / 8) as u16;
    if h.method == wire::METHOD_GET_TABLE || h.method == wire::METHOD_GET_MULTI {
        if records.is_empty() {
            // OpenSM answers an empty table with AttributeOffset 0.
            header.attr_offset = 0;
        }
        let mut data = vec![0u8; R::SIZE * records.len()];
        for (r, out) in records.iter().zip(data.chunks_exact_mut(R::SIZE)) {
            r.encode(out);
        }
        return SaResponse { header, data };
    }
    match records {
        [] => {
            header.status = status::NO_RECORDS;
            SaResponse {
                header,
                data: Vec::new(),
            }
        }
        [r] => {
            let mut data = vec![0u8; R::SIZE];
            r.encode(&mut data);
            SaResponse { header, data }
        }
        _ => {
            header.status = status::TOO_MANY_RECORDS;
            SaResponse {
                header,
                data: Vec::new(),
            }
        }
    }
}
