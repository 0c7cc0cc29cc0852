//! RMPP (IBA vol. 1 13.6): segmentation of multi-MAD answers. Pure state machines given `now`:
//! the sender (segments, window, ACK, resend on timeout, STOP/ABORT) and the receiver
//! (reassembly, ACKs) that the project's own SA client uses.
//!
//! Layout: `sender` (the SA side: one transfer per answered GetTable/GetMulti) and `receiver`
//! (the client side, and the SA's intake of multi-MAD GetMulti requests). This module holds
//! what both sides share: the RMPP constants, the PayloadLength arithmetic and the control
//! MADs (ACK, STOP, ABORT).
//!
//! # PayloadLength (verified against the Linux kernel's `mad.c` / `mad_rmpp.c`)
//!
//! Every segment carries the 36-byte common + RMPP header, then 220 bytes of RMPP payload:
//! for SA those are the 20 bytes of the SA header (SM_Key, AttributeOffset, ComponentMask,
//! replicated in every segment) and 200 bytes of SA data. PayloadLength counts RMPP payload,
//! so the SA header is counted once per segment:
//!
//! * first segment: `segments * 220 - pad`, where `pad` is the unused tail of the last
//!   segment's 200 data bytes (the kernel's `seg_count * seg_rmpp_size - pad`);
//! * last segment: `220 - pad` (the kernel's `seg_rmpp_size - pad`); a single segment (First
//!   and Last) carries the same value under both rules;
//! * middle segments: 0.
//!
//! An empty answer is one segment with `pad = 200`: PayloadLength 20. A receiver reassembles
//! `(segments - 1) * 200 + (last PayloadLength - 20)` data bytes (the kernel's `get_mad_len`).

use crate::wire::{self, rmpp_flag, rmpp_type, RmppHeader, SaHeader, MAD_SIZE, SA_DATA_SIZE, SA_HEADER_SIZE};

pub mod receiver;
pub mod sender;

/// RMPPVersion of IBA 1.x.
pub const RMPP_VERSION: u8 = 1;
/// RMPP payload bytes of one segment: the 20 class-header bytes (SM_Key, AttributeOffset,
/// ComponentMask) and 200 SA data bytes (`MAD_SIZE` - the 36-byte common + RMPP header).
pub const SEGMENT_PAYLOAD: u32 = (MAD_SIZE - 36) as u32;
/// The SA header bytes counted in every segment's payload.
pub const SA_CLASS_HEADER: u32 = SEGMENT_PAYLOAD - SA_DATA_SIZE as u32;
/// RRespTime value meaning "no time value" (what the kernel's sender puts in DATA segments).
pub const NO_RESP_TIME: u8 = 0x1f;

/// RMPPStatus values (IBA 13.6.2.1, table 172).
pub mod status {
    /// Normal (DATA, ACK).
    pub const NORMAL: u8 = 0;
    /// STOP: the receiver is out of resources.
    pub const RESOURCES_EXHAUSTED: u8 = 1;
    /// ABORT: total transfer too long.
    pub const TOTAL_TOO_LONG: u8 = 118;
    /// ABORT: inconsistent last segment and PayloadLength.
    pub const INCONSISTENT_LAST: u8 = 119;
    /// ABORT: inconsistent first segment and PayloadLength.
    pub const INCONSISTENT_FIRST: u8 = 120;
    /// ABORT: bad RMPPType.
    pub const BAD_TYPE: u8 = 121;
    /// ABORT: NewWindowLast below the segment acknowledged.
    pub const WINDOW_TOO_SMALL: u8 = 122;
    /// ABORT: SegmentNumber too big (beyond the last segment or the window).
    pub const SEGMENT_TOO_BIG: u8 = 123;
    /// ABORT: illegal status.
    pub const ILLEGAL_STATUS: u8 = 124;
    /// ABORT: unsupported RMPPVersion.
    pub const UNSUPPORTED_VERSION: u8 = 125;
    /// ABORT: too many retries.
    pub const TOO_MANY_RETRIES: u8 = 126;
    /// ABORT: unspecified.
    pub const UNSPECIFIED: u8 = 127;
}

/// Segments needed for `data_len` SA data bytes (at least one: an empty answer is one segment).
pub fn segment_count(data_len: usize) -> u32 {
    u32::try_from(data_len.div_ceil(SA_DATA_SIZE).max(1)).unwrap_or(u32::MAX)
}

/// Unused bytes of the last segment's data.
fn pad(data_len: usize) -> u32 {
    let used = data_len % SA_DATA_SIZE;
    if data_len == 0 {
        SA_DATA_SIZE as u32
    } else if used == 0 {
        0
    } else {
        (SA_DATA_SIZE - used) as u32
    }
}

/// PayloadLength of the first segment of an answer of `data_len` SA data bytes.
pub fn first_payload_length(data_len: usize) -> u32 {
    segment_count(data_len)
        .saturating_mul(SEGMENT_PAYLOAD)
        .saturating_sub(pad(data_len))
}

/// PayloadLength of the last segment of an answer of `data_len` SA data bytes.
pub fn last_payload_length(data_len: usize) -> u32 {
    SEGMENT_PAYLOAD - pad(data_len)
}

/// Whether RMPP is active on an SA MAD (the Active flag of its RMPP header).
pub fn active(h: &SaHeader) -> bool {
    h.rmpp.flags & rmpp_flag::ACTIVE != 0
}

/// A control MAD (ACK, STOP, ABORT) answering the RMPP MAD whose header is `h`, as the kernel
/// builds them: `h` copied, the method's response bit flipped (an ACK of a GetTableResp
/// segment is a GetTable), RMPPVersion 1, Active, the type, status, Data1 = `segment`,
/// Data2 = `new_window_last`, no SA data.
pub fn control_mad(h: &SaHeader, kind: u8, rmpp_status: u8, segment: u32, new_window_last: u32) -> [u8; MAD_SIZE] {
    let mut c = *h;
    c.method ^= wire::METHOD_RESPONSE;
    c.rmpp.version = RMPP_VERSION;
    c.rmpp.rmpp_type = kind;
    c.rmpp.resp_time = NO_RESP_TIME;
    c.rmpp.flags = rmpp_flag::ACTIVE;
    c.rmpp.status = rmpp_status;
    c.rmpp.data1 = segment;
    c.rmpp.data2 = new_window_last;
    let mut b = [0u8; MAD_SIZE];
    c.encode(&mut b);
    b
}

/// The ACK of segment `segment` (the last one received in order) opening the window up to
/// `new_window_last`.
pub fn ack(h: &SaHeader, segment: u32, new_window_last: u32) -> [u8; MAD_SIZE] {
    control_mad(h, rmpp_type::ACK, status::NORMAL, segment, new_window_last)
}

/// An ABORT with `rmpp_status` (118..=127).
pub fn abort(h: &SaHeader, rmpp_status: u8) -> [u8; MAD_SIZE] {
    control_mad(h, rmpp_type::ABORT, rmpp_status, 0, 0)
}

/// DATA segment `n` (1-based) of a transfer of `data` (SA data bytes) under `header` (method,
/// status, TID, attribute, AttributeOffset, ComponentMask: replicated in every segment; its
/// RMPP fields are replaced): version 1, type DATA, RRespTime "none", Active (+First on
/// segment 1, +Last on the last), SegmentNumber `n`, PayloadLength by the rules above.
pub fn segment(header: &SaHeader, data: &[u8], n: u32) -> Box<[u8; MAD_SIZE]> {
    let segments = segment_count(data.len());
    let mut h = *header;
    let mut flags = rmpp_flag::ACTIVE;
    let mut paylen = 0;
    if n == 1 {
        flags |= rmpp_flag::FIRST;
        paylen = first_payload_length(data.len());
    }
    if n == segments {
        flags |= rmpp_flag::LAST;
        paylen = last_payload_length(data.len());
    }
    h.rmpp = RmppHeader {
        version: RMPP_VERSION,
        rmpp_type: rmpp_type::DATA,
        resp_time: NO_RESP_TIME,
        flags,
        status: status::NORMAL,
        data1: n,
        data2: paylen,
    };
    let mut b = Box::new([0u8; MAD_SIZE]);
    h.encode(&mut b[..]);
    let from = (n.saturating_sub(1) as usize).saturating_mul(SA_DATA_SIZE);
    if from < data.len() {
        let to = (from + SA_DATA_SIZE).min(data.len());
        b[SA_HEADER_SIZE..SA_HEADER_SIZE + (to - from)].copy_from_slice(&data[from..to]);
    }
    b
}

/// Every DATA segment of a transfer of `data` under `header`, in order (at least one, also
/// for empty `data`): what a sender puts on the wire when it sends the whole transfer at once
/// (tests, the fake SA) and the reference the windowed [`sender::Transfer`] cuts from.
pub fn segments(header: &SaHeader, data: &[u8]) -> Vec<Box<[u8; MAD_SIZE]>> {
    (1..=segment_count(data.len()))
        .map(|n| segment(header, data, n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_lengths_follow_the_kernel_definition() {
        // Empty: one segment, the SA header only.
        assert_eq!(segment_count(0), 1);
        assert_eq!((first_payload_length(0), last_payload_length(0)), (20, 20));
        // One record of 64 bytes.
        assert_eq!(segment_count(64), 1);
        assert_eq!((first_payload_length(64), last_payload_length(64)), (84, 84));
        // Exactly one full segment.
        assert_eq!(segment_count(200), 1);
        assert_eq!((first_payload_length(200), last_payload_length(200)), (220, 220));
        // 5 PathRecords (320 bytes): two segments, 120 bytes in the last.
        assert_eq!(segment_count(320), 2);
        assert_eq!(first_payload_length(320), 2 * 220 - 80);
        assert_eq!(last_payload_length(320), 140);
        // What a receiver computes back: (segments - 1) * 200 + last - 20.
        for len in [0usize, 1, 199, 200, 201, 399, 400, 401, 6400, 12_345] {
            let n = segment_count(len) as usize;
            assert_eq!((n - 1) * 200 + last_payload_length(len) as usize - 20, len, "{len}");
            assert_eq!(
                first_payload_length(len) as usize,
                len + 20 * n,
                "first PayloadLength counts the SA header of every segment ({len})"
            );
        }
    }

    #[test]
    fn control_mads_flip_the_method_and_carry_the_fields() {
        let h = SaHeader {
            class_version: 2,
            method: wire::METHOD_GET_TABLE_RESP,
            tid: 0x77,
            attr_id: wire::attr::NODE_RECORD,
            ..SaHeader::default()
        };
        let a = SaHeader::decode(&ack(&h, 3, 9)).unwrap();
        assert_eq!(a.method, wire::METHOD_GET_TABLE);
        assert_eq!((a.tid, a.attr_id), (0x77, wire::attr::NODE_RECORD));
        assert_eq!(
            (
                a.rmpp.version,
                a.rmpp.rmpp_type,
                a.rmpp.flags,
                a.rmpp.data1,
                a.rmpp.data2
            ),
            (1, rmpp_type::ACK, rmpp_flag::ACTIVE, 3, 9)
        );
        assert!(active(&a));
        let b = SaHeader::decode(&abort(&h, status::TOO_MANY_RETRIES)).unwrap();
        assert_eq!((b.rmpp.rmpp_type, b.rmpp.status), (rmpp_type::ABORT, 126));
    }
}
