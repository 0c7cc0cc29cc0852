//! The JSON document `fabric-saquery` prints for an answer:
//! `{"attribute", "method", "status", "records": [decoded], "raw_records_hex": [...]}` (one
//! entry of `records` per image: its fields, or null when it was not delivered whole) plus how
//! it travelled (`rmpp`, `segments`, `unsegmented`, `attempts`, `elapsed_us`) and which bytes
//! the transport did not deliver (`undelivered_ranges`, `records_delivered`: under the
//! simulator shim the last 24 data bytes of every MAD).

use fabric_sa::wire::{self, attr};
use fabric_umad::client::{Report, SaAnswer};
use serde_json::{json, Value};

/// The name of an SA attribute (`saquery`'s names), or its id in hex.
pub fn attribute_name(id: u16) -> String {
    let n = match id {
        attr::CLASS_PORT_INFO => "ClassPortInfo",
        attr::NOTICE => "Notice",
        attr::INFORM_INFO => "InformInfo",
        attr::NODE_RECORD => "NodeRecord",
        attr::PORT_INFO_RECORD => "PortInfoRecord",
        attr::SL_TO_VL_RECORD => "SLtoVLMappingTableRecord",
        attr::SWITCH_INFO_RECORD => "SwitchInfoRecord",
        attr::LFT_RECORD => "LinearForwardingTableRecord",
        attr::RFT_RECORD => "RandomForwardingTableRecord",
        attr::MFT_RECORD => "MulticastForwardingTableRecord",
        attr::SM_INFO_RECORD => "SMInfoRecord",
        attr::LINK_RECORD => "LinkRecord",
        attr::GUID_INFO_RECORD => "GUIDInfoRecord",
        attr::SERVICE_RECORD => "ServiceRecord",
        attr::P_KEY_TABLE_RECORD => "P_KeyTableRecord",
        attr::PATH_RECORD => "PathRecord",
        attr::VL_ARB_RECORD => "VLArbitrationTableRecord",
        attr::MC_MEMBER_RECORD => "MCMemberRecord",
        attr::TRACE_RECORD => "TraceRecord",
        attr::MULTI_PATH_RECORD => "MultiPathRecord",
        attr::SERVICE_ASSOCIATION_RECORD => "ServiceAssociationRecord",
        attr::INFORM_INFO_RECORD => "InformInfoRecord",
        _ => return format!("{id:#06x}"),
    };
    n.to_string()
}

/// The name of a method (request or response), or its value in hex.
pub fn method_name(m: u8) -> String {
    let n = match m {
        wire::METHOD_GET => "Get",
        wire::METHOD_SET => "Set",
        wire::METHOD_SEND => "Send",
        wire::METHOD_TRAP => "Trap",
        wire::METHOD_REPORT => "Report",
        wire::METHOD_TRAP_REPRESS => "TrapRepress",
        wire::METHOD_GET_TABLE => "GetTable",
        wire::METHOD_GET_TRACE_TABLE => "GetTraceTable",
        wire::METHOD_GET_MULTI => "GetMulti",
        wire::METHOD_DELETE => "Delete",
        wire::METHOD_GET_RESP => "GetResp",
        wire::METHOD_REPORT_RESP => "ReportResp",
        wire::METHOD_GET_TABLE_RESP => "GetTableResp",
        wire::METHOD_GET_MULTI_RESP => "GetMultiResp",
        wire::METHOD_DELETE_RESP => "DeleteResp",
        _ => return format!("{m:#04x}"),
    };
    n.to_string()
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The document of one answer.
pub fn answer(a: &SaAnswer) -> Value {
    let recs = a.records();
    // One entry per image (aligned with `raw_records_hex`): the decoded fields, or null for
    // an image the transport did not deliver whole or an attribute without a record type.
    let decoded: Vec<Value> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            a.record_delivered(i)
                .then(|| super::decode::fields(a.header.attr_id, r))
                .flatten()
                .unwrap_or(Value::Null)
        })
        .collect();
    json!({
        "attribute": attribute_name(a.header.attr_id),
        "method": method_name(a.header.method),
        "status": a.header.status,
        "records": decoded,
        "raw_records_hex": recs.iter().map(|r| hex(r)).collect::<Vec<_>>(),
        "attr_offset": a.header.attr_offset,
        "rmpp": a.rmpp,
        "segments": a.segments,
        "unsegmented": a.unsegmented,
        "attempts": a.attempts,
        "elapsed_us": a.elapsed.as_micros() as u64,
        "undelivered_ranges": a.undelivered,
        "records_delivered": (0..recs.len()).map(|i| a.record_delivered(i)).collect::<Vec<_>>(),
    })
}

/// The JSON line of a Report (a Notice, IBA 13.4.8.2: IsGeneric/Type/ProducerType @0,
/// TrapNumber @4, IssuerLID @6, DataDetails @10, where traps 64/65 carry the GID after 6
/// reserved bytes, i.e. @16).
pub fn report(r: &Report) -> Value {
    let d = &r.data;
    let be16 = |o: usize| d.get(o..o + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    json!({
        "attribute": attribute_name(r.header.attr_id),
        "method": method_name(r.header.method),
        "from_lid": r.from_lid,
        "generic": d.first().is_some_and(|b| b & 0x80 != 0),
        "trap_number": be16(4),
        "issuer_lid": be16(6),
        "gid_hex": d.get(16..32).map(hex),
        "notice_hex": hex(d),
    })
}
