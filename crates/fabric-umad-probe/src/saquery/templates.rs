//! The SA requests of each `fabric-saquery` command: method, attribute, component mask and the
//! record template, at the offsets of IBA vol. 1 15.2.5 (and 13.4.8.3 for InformInfo), with the
//! component-mask bits `saquery` / OpenSM's `ib_types.h` use.

use anyhow::{bail, Context, Result};
use fabric_sa::wire::{attr, METHOD_DELETE, METHOD_GET, METHOD_GET_MULTI, METHOD_GET_TABLE, METHOD_SET};
use fabric_umad::client::SaQuery;

/// Record sizes (bytes of the wire image; AttributeOffset × 8 in tables).
pub mod size {
    pub const NODE_RECORD: usize = 108;
    pub const PORT_INFO_RECORD: usize = 72;
    pub const SWITCH_INFO_RECORD: usize = 24;
    pub const LINK_RECORD: usize = 8;
    pub const LFT_RECORD: usize = 72;
    pub const GUID_INFO_RECORD: usize = 72;
    pub const SM_INFO_RECORD: usize = 28;
    pub const SERVICE_RECORD: usize = 176;
    pub const PATH_RECORD: usize = 64;
    pub const INFORM_INFO: usize = 36;
}

/// PathRecord component-mask bits (IBA table 205; `IB_PR_COMPMASK_*`).
pub mod pr_mask {
    pub const DGID: u64 = 1 << 2;
    pub const SGID: u64 = 1 << 3;
    pub const DLID: u64 = 1 << 4;
    pub const SLID: u64 = 1 << 5;
    pub const NUMB_PATH: u64 = 1 << 12;
}

/// MultiPathRecord component-mask bits (`IB_MPR_COMPMASK_*`).
pub mod mpr_mask {
    pub const NUMB_PATH: u64 = 1 << 6;
    pub const SGID_COUNT: u64 = 1 << 19;
    pub const DGID_COUNT: u64 = 1 << 20;
}

/// ServiceRecord component-mask bits (`IB_SR_COMPMASK_*`).
pub mod sr_mask {
    pub const ID: u64 = 1 << 0;
    pub const GID: u64 = 1 << 1;
    pub const PKEY: u64 = 1 << 2;
    pub const LEASE: u64 = 1 << 4;
    pub const NAME: u64 = 1 << 6;
}

/// A query with no template: every record of `attr` (GetTable).
pub fn table(attr_id: u16, size: usize) -> SaQuery {
    SaQuery {
        method: METHOD_GET_TABLE,
        attr_id,
        data: vec![0; size],
        ..SaQuery::default()
    }
}

/// Records whose first field (a LID at offset 0, component bit 0) is `lid`: Get when
/// `one` (one record expected), GetTable otherwise; every record without a LID.
fn by_lid(attr_id: u16, size: usize, lid: Option<u16>, one: bool) -> SaQuery {
    let mut q = table(attr_id, size);
    if let Some(l) = lid {
        q.data[0..2].copy_from_slice(&l.to_be_bytes());
        q.component_mask = 1;
        if one {
            q.method = METHOD_GET;
        }
    }
    q
}

/// `nr [LID]`.
pub fn node_records(lid: Option<u16>) -> SaQuery {
    by_lid(attr::NODE_RECORD, size::NODE_RECORD, lid, true)
}

/// `pir [LID [PORT]]`: a switch has a record per port, so a LID alone is a table.
pub fn port_info_records(lid: Option<u16>, port: Option<u8>) -> SaQuery {
    let mut q = by_lid(attr::PORT_INFO_RECORD, size::PORT_INFO_RECORD, lid, false);
    if let Some(p) = port {
        q.data[2] = p;
        q.component_mask |= 1 << 1;
        q.method = METHOD_GET;
    }
    q
}

/// `swir [LID]`.
pub fn switch_info_records(lid: Option<u16>) -> SaQuery {
    by_lid(attr::SWITCH_INFO_RECORD, size::SWITCH_INFO_RECORD, lid, true)
}

/// `lftr [LID [BLOCK]]`.
pub fn lft_records(lid: Option<u16>, block: Option<u16>) -> SaQuery {
    let mut q = by_lid(attr::LFT_RECORD, size::LFT_RECORD, lid, false);
    if let Some(b) = block {
        q.data[2..4].copy_from_slice(&b.to_be_bytes());
        q.component_mask |= 1 << 1;
        q.method = METHOD_GET;
    }
    q
}

/// `gir [LID]`.
pub fn guid_info_records(lid: Option<u16>) -> SaQuery {
    by_lid(attr::GUID_INFO_RECORD, size::GUID_INFO_RECORD, lid, false)
}

/// `classportinfo`.
pub fn class_port_info() -> SaQuery {
    SaQuery {
        method: METHOD_GET,
        attr_id: attr::CLASS_PORT_INFO,
        ..SaQuery::default()
    }
}

/// Parses a GID: IPv6 text (`fe80::2:c903:0:1`) or 32 hex digits.
pub fn parse_gid(s: &str) -> Result<[u8; 16]> {
    if let Ok(a) = s.parse::<std::net::Ipv6Addr>() {
        return Ok(a.octets());
    }
    let h = s.trim_start_matches("0x");
    if h.len() == 32 {
        let v = u128::from_str_radix(h, 16).with_context(|| format!("GID {s:?} is not hex"))?;
        return Ok(v.to_be_bytes());
    }
    bail!("GID {s:?} is neither IPv6 text (fe80::...) nor 32 hex digits")
}

/// Parses a number in decimal or `0x` hex.
pub fn parse_u64(s: &str) -> Result<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).with_context(|| format!("{s:?} is not a hex number")),
        None => s.parse().with_context(|| format!("{s:?} is not a number")),
    }
}

/// Parses hex bytes (`00ab..`, spaces and colons ignored).
pub fn parse_hex(s: &str) -> Result<Vec<u8>> {
    let h: String = s.chars().filter(|c| !c.is_whitespace() && *c != ':').collect();
    let h = h.trim_start_matches("0x");
    if !h.len().is_multiple_of(2) {
        bail!("hex data {s:?} has an odd number of digits");
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).with_context(|| format!("{:?} is not hex", &h[i..i + 2])))
        .collect()
}

/// `pr [--slid A --dlid B] [--sgid G --dgid G] [--numb-path N]`: GetTable, as `saquery` asks.
pub fn path_records(
    slid: Option<u16>,
    dlid: Option<u16>,
    sgid: Option<[u8; 16]>,
    dgid: Option<[u8; 16]>,
    numb_path: Option<u8>,
) -> SaQuery {
    let mut q = table(attr::PATH_RECORD, size::PATH_RECORD);
    if let Some(g) = dgid {
        q.data[8..24].copy_from_slice(&g);
        q.component_mask |= pr_mask::DGID;
    }
    if let Some(g) = sgid {
        q.data[24..40].copy_from_slice(&g);
        q.component_mask |= pr_mask::SGID;
    }
    if let Some(l) = dlid {
        q.data[40..42].copy_from_slice(&l.to_be_bytes());
        q.component_mask |= pr_mask::DLID;
    }
    if let Some(l) = slid {
        q.data[42..44].copy_from_slice(&l.to_be_bytes());
        q.component_mask |= pr_mask::SLID;
    }
    if let Some(n) = numb_path {
        q.data[49] = n & 0x7f;
        q.component_mask |= pr_mask::NUMB_PATH;
    }
    q
}

/// `mpr --sgid G.. --dgid G..`: GetMulti of a MultiPathRecord whose SDGID list is the SGIDs
/// then the DGIDs (more than 11 GIDs do not fit one MAD: the client sends the request as a
/// multi-segment RMPP transfer).
pub fn multi_path_records(sgids: &[[u8; 16]], dgids: &[[u8; 16]], numb_path: u8) -> Result<SaQuery> {
    let n = sgids.len() + dgids.len();
    if sgids.is_empty() || dgids.is_empty() {
        bail!("mpr needs at least one --sgid and one --dgid");
    }
    if sgids.len() > 255 || dgids.len() > 255 {
        bail!(
            "mpr: {} SGIDs and {} DGIDs, at most 255 of each (SGIDCount and DGIDCount are one byte)",
            sgids.len(),
            dgids.len()
        );
    }
    let size = 24 + 16 * n;
    let mut data = vec![0u8; size];
    data[5] = 0x80 | (numb_path & 0x7f);
    data[15] = sgids.len() as u8;
    data[16] = dgids.len() as u8;
    for (i, g) in sgids.iter().chain(dgids).enumerate() {
        data[24 + 16 * i..40 + 16 * i].copy_from_slice(g);
    }
    Ok(SaQuery {
        method: METHOD_GET_MULTI,
        attr_id: attr::MULTI_PATH_RECORD,
        component_mask: mpr_mask::SGID_COUNT | mpr_mask::DGID_COUNT | mpr_mask::NUMB_PATH,
        attr_offset: (size / 8) as u16,
        data,
        ..SaQuery::default()
    })
}

/// The ServiceRecord template of `sr-register` / `sr-delete`.
fn service_record(id: u64, gid: &[u8; 16], lease: u32, name: Option<&str>) -> Result<Vec<u8>> {
    let mut d = vec![0u8; size::SERVICE_RECORD];
    d[0..8].copy_from_slice(&id.to_be_bytes());
    d[8..24].copy_from_slice(gid);
    d[24..26].copy_from_slice(&0xffffu16.to_be_bytes());
    d[28..32].copy_from_slice(&lease.to_be_bytes());
    if let Some(n) = name {
        if n.len() > 64 {
            bail!("service name {n:?} is longer than 64 bytes");
        }
        d[48..48 + n.len()].copy_from_slice(n.as_bytes());
    }
    Ok(d)
}

/// `sr-register --id ID --name NAME --gid GID --lease SECS` (Set; P_Key 0xffff).
pub fn service_register(id: u64, name: &str, gid: &[u8; 16], lease: u32) -> Result<SaQuery> {
    Ok(SaQuery {
        method: METHOD_SET,
        attr_id: attr::SERVICE_RECORD,
        component_mask: sr_mask::ID | sr_mask::GID | sr_mask::PKEY | sr_mask::LEASE | sr_mask::NAME,
        data: service_record(id, gid, lease, Some(name))?,
        ..SaQuery::default()
    })
}

/// `sr-delete --id ID --gid GID`.
pub fn service_delete(id: u64, gid: &[u8; 16]) -> Result<SaQuery> {
    Ok(SaQuery {
        method: METHOD_DELETE,
        attr_id: attr::SERVICE_RECORD,
        component_mask: sr_mask::ID | sr_mask::GID | sr_mask::PKEY,
        data: service_record(id, gid, 0, None)?,
        ..SaQuery::default()
    })
}

/// `subscribe --trap N [--unsubscribe]`: Set(InformInfo) for generic trap `trap` from every
/// producer and LID (IBA 13.4.8.3: GID 0, LIDRangeBegin 0xFFFF, Type and ProducerType
/// wildcards), Reports to QP1 (where the client's agent listens).
pub fn inform_info(trap: u16, subscribe: bool) -> SaQuery {
    let mut d = vec![0u8; size::INFORM_INFO];
    d[16..18].copy_from_slice(&0xffffu16.to_be_bytes());
    d[22] = 1;
    d[23] = u8::from(subscribe);
    d[24..26].copy_from_slice(&0xffffu16.to_be_bytes());
    d[26..28].copy_from_slice(&trap.to_be_bytes());
    // QPN 1 (24 bits), RespTimeValue 18 (about 1 s).
    d[28..32].copy_from_slice(&((1u32 << 8) | 18).to_be_bytes());
    d[33..36].copy_from_slice(&[0xff, 0xff, 0xff]);
    SaQuery {
        method: METHOD_SET,
        attr_id: attr::INFORM_INFO,
        data: d,
        ..SaQuery::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_record_template_puts_lids_and_gids_where_saquery_does() {
        let g = parse_gid("fe80::20:1").unwrap();
        let q = path_records(Some(1), Some(3), None, Some(g), Some(2));
        assert_eq!(
            q.component_mask,
            pr_mask::SLID | pr_mask::DLID | pr_mask::DGID | pr_mask::NUMB_PATH
        );
        assert_eq!(&q.data[40..44], &[0, 3, 0, 1]);
        assert_eq!(q.data[8], 0xfe);
        assert_eq!(q.data[23], 1);
        assert_eq!(q.data[49], 2);
    }

    #[test]
    fn numbers_gids_and_hex_parse_or_say_why_not() {
        assert_eq!(parse_u64("0x10").unwrap(), 16);
        assert_eq!(parse_u64("10").unwrap(), 10);
        assert!(parse_u64("x").is_err());
        assert_eq!(parse_hex("00 ab:CD").unwrap(), vec![0, 0xab, 0xcd]);
        assert!(parse_hex("abc").unwrap_err().to_string().contains("odd"));
        assert_eq!(parse_gid("fe800000000000000000000000000001").unwrap()[15], 1);
        assert!(parse_gid("fe80").is_err());
        // More than 11 GIDs: a multi-MAD request (the client sends it as RMPP).
        let many = vec![[0u8; 16]; 6];
        let q = multi_path_records(&many, &many, 1).unwrap();
        assert_eq!((q.data.len(), q.data[15], q.data[16]), (24 + 12 * 16, 6, 6));
        // SGIDCount and DGIDCount are one byte each.
        let too_many = vec![[0u8; 16]; 256];
        assert!(multi_path_records(&too_many, &many, 1)
            .unwrap_err()
            .to_string()
            .contains("256 SGIDs"));
        assert_eq!(multi_path_records(&many[..1], &many[..2], 1).unwrap().data.len(), 72);
    }
}
