//! One SA request → one answer for the read-only attributes: dispatch on (method, attribute),
//! component-mask checks, status codes. PathRecord and MultiPathRecord go to [`crate::path`].
//!
//! Every read-only record is answered the same way ([`records_answer`]): the method must be
//! Get or GetTable (else `0x000C`, unsupported method/attribute), the SA data must hold the
//! whole template (else ERR_REQ_INVALID), the component mask must select only components the
//! record has (else ERR_REQ_INVALID), then the records built from the [`Subnet`] snapshot that
//! match the template are answered ([`respond`]: Get → exactly one or ERR_NO_RECORDS /
//! ERR_REQ_TOO_MANY_RECORDS; GetTable → all, an empty table being a GetTableResp with status 0,
//! no records and AttributeOffset 0, as OpenSM's `osm_sa_respond`).
//!
//! A LID component matches every LID of the port's LMC range (the record carries the base
//! LID), as OpenSM; a switch is addressed by its port-0 LID on all its ports.

use crate::partitions::PkeyTables;
use crate::records::pkey_table::{PkeyTableRecord, PKEYS_PER_BLOCK};
use crate::records::{
    self, ClassPortInfo, GuidInfoRecord, LftRecord, LinkRecord, McMemberRecord, NodeRecord, PortInfoRecord, Record,
    SmInfoRecord, SwitchInfoRecord,
};
use crate::request::{error_response, records_response, Request, SaResponse};
use crate::subnet::{Node, Port, Subnet, NODE_DESC_SIZE, NODE_INFO_SIZE, PORT_INFO_SIZE};
use crate::wire::{self, attr, status, SA_DATA_SIZE};

/// AttributeModifier bit 31 of a PortInfoRecord query: compare the CapabilityMask bitwise
/// (IBA 1.2 errata, OpenSM's "enhanced component mask").
pub const PIR_ENHANCED_CAPMASK: u32 = 1 << 31;
/// PortInfo CapabilityMask bit IsExtendedSpeedsSupported.
const CAP_HAS_EXT_SPEEDS: u32 = 0x0000_4000;

/// The answer to a request for a read-only attribute (every attribute but those of the
/// registry: ServiceRecord, InformInfo, InformInfoRecord) with the default P_Key tables.
/// PathRecord and MultiPathRecord go to [`crate::path::answer`].
pub fn answer(subnet: &Subnet, req: &Request<'_>) -> SaResponse {
    answer_in(subnet, PkeyTables::default(), req)
}

/// [`answer`] under the P_Key tables `pkeys` (PathRecord, MultiPathRecord,
/// P_KeyTableRecord). MCMemberRecord is answered here as an empty table: the groups are the
/// [`crate::SaService`]'s, which answers them before coming here.
pub fn answer_in(subnet: &Subnet, pkeys: PkeyTables<'_>, req: &Request<'_>) -> SaResponse {
    match req.header.attr_id {
        attr::PATH_RECORD | attr::MULTI_PATH_RECORD => crate::path::answer_in(subnet, pkeys, req),
        attr::P_KEY_TABLE_RECORD => pkey_table_records(subnet, pkeys, req),
        attr::CLASS_PORT_INFO => class_port_info(req),
        attr::NODE_RECORD => records_answer(req, |t, mask| node_records(subnet, t, mask)),
        attr::PORT_INFO_RECORD => {
            records_answer(req, |t, mask| port_info_records(subnet, t, mask, req.header.attr_mod))
        }
        attr::SWITCH_INFO_RECORD => records_answer(req, |t, mask| switch_info_records(subnet, t, mask)),
        attr::LFT_RECORD => records_answer(req, |t, mask| lft_records(subnet, t, mask)),
        attr::SM_INFO_RECORD => records_answer(req, |t, mask| sm_info_records(subnet, t, mask)),
        attr::LINK_RECORD => records_answer(req, |t, mask| link_records(subnet, t, mask)),
        attr::GUID_INFO_RECORD => records_answer(req, |t, mask| guid_info_records(subnet, t, mask)),
        attr::MC_MEMBER_RECORD => records_answer(req, |_: &McMemberRecord, _| Vec::new()),
        _ => request_error(req, status::UNSUPPORTED_METHOD_ATTR),
    }
}

/// The error answer to `req`: its header with `st`, its SA data echoed (OpenSM's
/// `osm_sa_send_error`).
pub fn request_error(req: &Request<'_>, st: u16) -> SaResponse {
    let mut r = error_response(&req.header, &[], st);
    r.data = req.data[..req.data.len().min(SA_DATA_SIZE)].to_vec();
    r
}

/// The answer to a Get or GetTable from the records that matched: Get answers exactly one
/// record (ERR_NO_RECORDS for none, ERR_REQ_TOO_MANY_RECORDS for more, both echoing the
/// request); GetTable answers them all (AttributeOffset 0 when there are none).
pub fn respond<R: Record>(req: &Request<'_>, records: &[R]) -> SaResponse {
    let h = &req.header;
    if h.method == wire::METHOD_GET && records.len() != 1 {
        let st = if records.is_empty() {
            status::NO_RECORDS
        } else {
            status::TOO_MANY_RECORDS
        };
        return request_error(req, st);
    }
    let mut r = records_response(h, records);
    if records.is_empty() {
        r.header.attr_offset = 0;
    }
    r
}

/// Checks a Get/GetTable of record type `R` (method, template length, component mask) and
/// answers the records `find(template, mask)` returns.
pub fn records_answer<R: Record>(req: &Request<'_>, find: impl FnOnce(&R, u64) -> Vec<R>) -> SaResponse {
    let h = &req.header;
    if h.method != wire::METHOD_GET && h.method != wire::METHOD_GET_TABLE {
        return request_error(req, status::UNSUPPORTED_METHOD_ATTR);
    }
    let Ok(template) = R::decode(req.data) else {
        return request_error(req, status::REQ_INVALID);
    };
    if h.component_mask & !R::COMPONENTS != 0 {
        return request_error(req, status::REQ_INVALID);
    }
    respond(req, &find(&template, h.component_mask))
}

fn class_port_info(req: &Request<'_>) -> SaResponse {
    if req.header.method != wire::METHOD_GET {
        return request_error(req, status::UNSUPPORTED_METHOD_ATTR);
    }
    respond(req, &[ClassPortInfo::sa()])
}

/// Whether `lid` is one of the `1 << lmc` LIDs from `base`.
fn lid_in_range(lid: u16, base: u16, lmc: u8) -> bool {
    base != 0 && lid >= base && u32::from(lid) < u32::from(base) + (1u32 << (lmc & 7))
}

/// The LID-range match of a record's LID component (`bit`), or true when not selected.
fn lid_selected(mask: u64, bit: u32, template_lid: u16, base: u16, lmc: u8) -> bool {
    !records::sel(mask, bit) || lid_in_range(template_lid, base, lmc)
}

/// The port whose base LID and LMC address `node` (a switch: port 0; a CA: `port`).
fn addressing_port<'a>(subnet: &'a Subnet, node: &Node, port: &'a Port) -> &'a Port {
    if node.is_switch() {
        subnet.node_port(port.node, 0).unwrap_or(port)
    } else {
        port
    }
}

/// The end ports (CA ports, switch port 0) to consider for a LID or port GUID, or all.
fn end_ports<'a>(subnet: &'a Subnet, lid: Option<u16>) -> Box<dyn Iterator<Item = &'a Port> + 'a> {
    match lid {
        Some(lid) => Box::new(subnet.port_by_lid(lid).into_iter()),
        None => Box::new(subnet.ports.iter().filter(move |p| {
            subnet
                .nodes
                .get(p.node as usize)
                .is_some_and(|n| !n.is_switch() || p.port_num == 0)
        })),
    }
}

fn node_record(node: &Node, port: &Port) -> NodeRecord {
    let mut b = [0u8; NodeRecord::SIZE];
    b[0..2].copy_from_slice(&port.lid().to_be_bytes());
    b[4..4 + NODE_INFO_SIZE].copy_from_slice(&node.node_info);
    b[44..44 + NODE_DESC_SIZE].copy_from_slice(&node.description);
    let mut r = NodeRecord::decode(&b).unwrap_or_default();
    r.port_guid = port.guid;
    r.port_num = port.port_num;
    r
}

/// One NodeRecord per CA port and one per switch (port 0), LID = the port's base LID,
/// PortGUID and LocalPortNum those of the port (OpenSM's `nr_rcv_new_nr`).
fn node_records(subnet: &Subnet, t: &NodeRecord, mask: u64) -> Vec<NodeRecord> {
    use records::node::comp;
    let lid = records::sel(mask, comp::LID).then_some(t.lid);
    end_ports(subnet, lid)
        .filter_map(|p| {
            let node = subnet.nodes.get(p.node as usize)?;
            let r = node_record(node, p);
            (lid_selected(mask, comp::LID, t.lid, p.lid(), p.lmc()) && r.matches(t, mask)).then_some(r)
        })
        .collect()
}

fn port_info_record(lid: u16, port: &Port) -> PortInfoRecord {
    let mut b = [0u8; PortInfoRecord::SIZE];
    b[0..2].copy_from_slice(&lid.to_be_bytes());
    b[2] = port.port_num;
    b[4..4 + PORT_INFO_SIZE].copy_from_slice(&port.port_info);
    let mut r = PortInfoRecord::decode(&b).unwrap_or_default();
    // The M_Key is answered only to trusted requesters (IBA p922); there are none here.
    r.m_key = 0;
    r
}

/// One PortInfoRecord per port of every node, switch external ports included with the
/// switch's LID (OpenSM's `__osm_sa_pir_create`). The CapabilityMask components compare
/// bitwise when AttributeModifier bit 31 is set, for equality otherwise; the LinkSpeedExt
/// components only select among ports with IsExtendedSpeedsSupported.
fn port_info_records(subnet: &Subnet, t: &PortInfoRecord, mask: u64, attr_mod: u32) -> Vec<PortInfoRecord> {
    use records::port_info::comp;
    let enhanced = attr_mod & PIR_ENHANCED_CAPMASK != 0;
    let nodes: Vec<u32> = if records::sel(mask, comp::LID) {
        subnet.port_by_lid(t.endport_lid).map(|p| p.node).into_iter().collect()
    } else {
        (0..subnet.nodes.len() as u32).collect()
    };
    let mut out = Vec::new();
    for n in nodes {
        let Some(node) = subnet.nodes.get(n as usize) else {
            continue;
        };
        for &pi in node.ports.iter() {
            let Some(port) = subnet.ports.get(pi as usize) else {
                continue;
            };
            let addr = addressing_port(subnet, node, port);
            let r = port_info_record(addr.lid(), port);
            let exact_caps = enhanced
                || ((!records::sel(mask, comp::CAPABILITY_MASK) || r.capability_mask == t.capability_mask)
                    && (!records::sel(mask, comp::CAPABILITY_MASK2) || r.capability_mask2 == t.capability_mask2));
            // LinkSpeedExt* count only for ports that have extended speeds (OpenSM).
            let ext = if r.capability_mask.0 & CAP_HAS_EXT_SPEEDS != 0 {
                0
            } else {
                1 << 54 | 1 << 55 | 1 << 57
            };
            if lid_selected(mask, comp::LID, t.endport_lid, addr.lid(), addr.lmc())
                && exact_caps
                && r.matches(t, mask & !(1 << comp::LID) & !ext)
            {
                out.push(r);
            }
        }
    }
    out
}

/// The switches as (node, port 0).
fn switches(subnet: &Subnet) -> impl Iterator<Item = (&Node, &Port)> {
    subnet.nodes.iter().enumerate().filter_map(move |(i, n)| {
        if !n.is_switch() {
            return None;
        }
        Some((n, subnet.node_port(i as u32, 0)?))
    })
}

/// One SwitchInfoRecord per switch, LID = its port-0 LID.
fn switch_info_records(subnet: &Subnet, t: &SwitchInfoRecord, mask: u64) -> Vec<SwitchInfoRecord> {
    switches(subnet)
        .filter_map(|(n, p0)| {
            let si = n.switch_info.as_ref()?;
            let mut b = [0u8; SwitchInfoRecord::SIZE];
            b[0..2].copy_from_slice(&p0.lid().to_be_bytes());
            b[4..24].copy_from_slice(si);
            let r = SwitchInfoRecord::decode(&b).ok()?;
            (lid_selected(mask, 0, t.lid, p0.lid(), p0.lmc()) && r.matches(t, mask & !1)).then_some(r)
        })
        .collect()
}

/// One LFTRecord per (switch LID, block) of the LFT installed on the switch, blocks 0 up to
/// the one holding LinearFDBTop; entries beyond the installed table read 0xff (no route).
fn lft_records(subnet: &Subnet, t: &LftRecord, mask: u64) -> Vec<LftRecord> {
    use records::lft::comp;
    let mut out = Vec::new();
    for (n, p0) in switches(subnet) {
        let (Some(si), Some(lft)) = (n.switch_info.as_ref(), subnet.lft(p0.node)) else {
            continue;
        };
        if !lid_selected(mask, comp::LID, t.lid, p0.lid(), p0.lmc()) {
            continue;
        }
        let top = u16::from_be_bytes([si[6], si[7]]);
        let last = top / 64;
        let blocks = if records::sel(mask, comp::BLOCK) {
            t.block_num..=t.block_num.min(last)
        } else {
            0..=last
        };
        for block in blocks {
            let entries = lft.block(usize::from(block));
            let r = LftRecord {
                lid: p0.lid(),
                block_num: block,
                lft: records::Raw(entries),
            };
            if r.matches(t, mask & !(1 << comp::LID)) {
                out.push(r);
            }
        }
    }
    out
}

/// The SMInfoRecord of the master (this manager); SM_Key 0.
fn sm_info_records(subnet: &Subnet, t: &SmInfoRecord, mask: u64) -> Vec<SmInfoRecord> {
    let sm = subnet.sm;
    if sm.guid == 0 {
        return Vec::new();
    }
    let r = SmInfoRecord {
        lid: sm.lid,
        guid: sm.guid,
        sm_key: 0,
        act_count: sm.act_count,
        priority: sm.priority & 0xf,
        sm_state: sm.state & 0xf,
    };
    let lmc = subnet.port_by_lid(sm.lid).map_or(0, Port::lmc);
    if lid_selected(mask, 0, t.lid, sm.lid, lmc) && r.matches(t, mask & !1) {
        vec![r]
    } else {
        Vec::new()
    }
}

/// The LID (base, LMC) addressing `port`'s node: port 0's for a switch, the port's own for a CA.
fn lid_of(subnet: &Subnet, port: &Port) -> (u16, u8) {
    match subnet.nodes.get(port.node as usize) {
        Some(n) => {
            let a = addressing_port(subnet, n, port);
            (a.lid(), a.lmc())
        }
        None => (port.lid(), port.lmc()),
    }
}

/// One LinkRecord per live link and direction (every port with a peer).
fn link_records(subnet: &Subnet, t: &LinkRecord, mask: u64) -> Vec<LinkRecord> {
    subnet
        .ports
        .iter()
        .filter_map(|p| {
            let (peer_node, peer_port) = p.peer?;
            let peer = subnet.node_port(peer_node, peer_port)?;
            let (from, from_lmc) = lid_of(subnet, p);
            let (to, to_lmc) = lid_of(subnet, peer);
            let r = LinkRecord {
                from_lid: from,
                from_port_num: p.port_num,
                to_port_num: peer_port,
                to_lid: to,
            };
            (lid_selected(mask, 0, t.from_lid, from, from_lmc)
                && lid_selected(mask, 3, t.to_lid, to, to_lmc)
                && r.matches(t, mask & !(1 | 1 << 3)))
            .then_some(r)
        })
        .collect()
}

/// One GUIDInfoRecord per end port: block 0 holding the port GUID (no alias GUIDs).
fn guid_info_records(subnet: &Subnet, t: &GuidInfoRecord, mask: u64) -> Vec<GuidInfoRecord> {
    let lid = records::sel(mask, 0).then_some(t.lid);
    end_ports(subnet, lid)
        .filter_map(|p| {
            let r = GuidInfoRecord {
                lid: p.lid(),
                block_num: 0,
                guid0: p.guid,
                ..Default::default()
            };
            (lid_selected(mask, 0, t.lid, p.lid(), p.lmc()) && r.matches(t, mask & !1)).then_some(r)
        })
        .collect()
}

/// P_KeyTableRecords (OpenSM's `osm_pkey_rec_rcv_process`): only for trusted requesters (IBA
/// p922; ERR_REQ_INVALID otherwise); one record per block of the P_Key table of every end port
/// (a CA port with its base LID and port number, a switch's port 0 with the switch LID),
/// from the tables in force ([`PkeyTables`]: the partitions set, or 0xFFFF alone). Switch
/// external ports are not listed (their enforcement tables are not the SA's); a block beyond
/// the table is no record.
fn pkey_table_records(subnet: &Subnet, pkeys: PkeyTables<'_>, req: &Request<'_>) -> SaResponse {
    use records::pkey_table::comp;
    let h = &req.header;
    if h.method != wire::METHOD_GET && h.method != wire::METHOD_GET_TABLE {
        return request_error(req, status::UNSUPPORTED_METHOD_ATTR);
    }
    if !req.trusted {
        return request_error(req, status::REQ_INVALID);
    }
    records_answer(req, |t: &PkeyTableRecord, mask| {
        let lid = records::sel(mask, comp::LID).then_some(t.lid);
        let mut out = Vec::new();
        for p in end_ports(subnet, lid) {
            let table = pkeys.table(p.guid);
            let blocks = table.len().div_ceil(PKEYS_PER_BLOCK) as u16;
            let range = if records::sel(mask, comp::BLOCK) {
                t.block_num..t.block_num.saturating_add(1).min(blocks)
            } else {
                0..blocks
            };
            for block in range {
                let from = usize::from(block) * PKEYS_PER_BLOCK;
                let mut entries = [0u16; PKEYS_PER_BLOCK];
                let n = (table.len() - from).min(PKEYS_PER_BLOCK);
                entries[..n].copy_from_slice(&table[from..from + n]);
                let r = PkeyTableRecord {
                    lid: p.lid(),
                    block_num: block,
                    port_num: p.port_num,
                    pkeys: entries,
                };
                if lid_selected(mask, comp::LID, t.lid, p.lid(), p.lmc()) && r.matches(t, mask & !(1 << comp::LID)) {
                    out.push(r);
                }
            }
        }
        out
    })
}
