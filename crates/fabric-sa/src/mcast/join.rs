//! SubnAdmSet(MCMemberRecord): create a group or join one, in the order of OpenSM's
//! `mcmr_rcv_join_mgrp` (the first failing check gives the status):
//!
//! 1. MGID, PortGID and JoinState in the mask, else ERR_REQ_INSUFFICIENT_COMPONENTS (0x0600);
//! 2. PortGID of another subnet prefix: ERR_REQ_INVALID_GID (0x0500);
//! 3. PortGID of no end port of the snapshot, a requester LID of no port, a join on behalf of
//!    another port (ProxyJoin) by an untrusted requester, an invalid P_Key (base 0) in the
//!    mask: ERR_REQ_INVALID (0x0200);
//! 4. no group of that MGID: the join must carry FullMember (else ERR_REQ_INVALID) and the
//!    create components Q_Key, TClass, P_Key, FlowLabel, SL (else 0x0600); MGID 0 gets an
//!    MGID assigned by the SA (`ff1S:a01b:<prefix>` + a counter, scope from the request when
//!    in the mask, link-local otherwise; ERR_NO_RESOURCES when none is free); a given MGID
//!    must be valid (o15-0.1.5: 0xFF first, no reserved flag, no SA signature 0xA01B with
//!    link-local scope) and an IPoIB MGID other than the IPv4 broadcast one needs the
//!    partition's broadcast group and the same parameters as it; MTU and rate must be
//!    realisable on the joining port; an MLID must be free (ERR_NO_RESOURCES);
//!    a group that exists: Q_Key, P_Key (same partition, not both limited), TClass, SL,
//!    FlowLabel and HopLimit in the mask must be the group's (ERR_REQ_INVALID);
//! 5. the MTU and rate selectors in the mask must accept the group's, the joining port must
//!    carry the group's MTU and rate, JoinState must not be 0, the port must be in the group's
//!    partition (ERR_REQ_INVALID; a group just created is removed again);
//! 6. a member joining again: by itself, or (stored as a proxy join) by a port of the group's
//!    partition (ERR_REQ_INVALID otherwise); its JoinState becomes the union of both.

use super::{join_state, mlid_limit, AddError, Ctx, McastState, Member};
use crate::partitions::{ipoib_signature, ipv4_broadcast_mgid, pkey_invalid};
use crate::path::walk::{port_rate, rate_code_below, rate_mbps, FALLBACK_RATE};
use crate::query::request_error;
use crate::records::mc_member::comp;
use crate::records::{sel, Gid, McMemberRecord, Record};
use crate::request::{records_response, SaResponse};
use crate::subnet::Port;
use crate::wire::status;

/// The components every join and leave needs.
pub(super) const JOIN_MASK: u64 = 1 << comp::MGID | 1 << comp::PORT_GID | 1 << comp::JOIN_STATE;
/// The components a join that creates its group needs (OpenSM's
/// `REQUIRED_MC_CREATE_COMP_MASK`).
const CREATE_MASK: u64 =
    JOIN_MASK | 1 << comp::QKEY | 1 << comp::TCLASS | 1 << comp::PKEY | 1 << comp::FLOW_LABEL | 1 << comp::SL;
/// Selector "exactly".
const EXACTLY: u8 = 2;
/// MGIDs the SA tries before giving up (OpenSM's loop).
const MGID_TRIES: u32 = 1000;

/// The answer to a Set and whether the state changed.
pub(super) fn join(st: &mut McastState, cx: &Ctx<'_, '_>) -> (SaResponse, bool) {
    let req = cx.req;
    let mask = req.header.component_mask;
    let err = |s| (request_error(req, s), false);
    let Ok(rec) = McMemberRecord::decode(req.data) else {
        return err(status::REQ_INVALID);
    };
    if mask & JOIN_MASK != JOIN_MASK {
        return err(status::INSUFFICIENT_COMPONENTS);
    }
    if rec.port_gid.prefix() != cx.subnet.subnet_prefix {
        return err(status::INVALID_GID);
    }
    let guid = rec.port_gid.guid();
    let Some(pi) = cx.subnet.port_index_by_guid(guid) else {
        return err(status::REQ_INVALID);
    };
    let port = &cx.subnet.ports[pi as usize];
    let proxy = match cx.requester() {
        super::RequesterPort::Local => false,
        super::RequesterPort::Port(g) => g != guid,
        super::RequesterPort::Unknown => return err(status::REQ_INVALID),
    };
    if proxy && !req.trusted {
        return err(status::REQ_INVALID);
    }
    if sel(mask, comp::PKEY) && pkey_invalid(rec.pkey) {
        return err(status::REQ_INVALID);
    }
    let js = rec.join_state & 0x0f;
    let created = if let Some(g) = st.groups.get(&rec.mgid) {
        if !other_fields_match(&rec, mask, &g.rec) {
            return err(status::REQ_INVALID);
        }
        None
    } else {
        if js & join_state::FULL == 0 {
            return err(status::REQ_INVALID);
        }
        if mask & CREATE_MASK != CREATE_MASK {
            return err(status::INSUFFICIENT_COMPONENTS);
        }
        match create(st, cx, &rec, mask, port) {
            Ok(mgid) => Some(mgid),
            Err(s) => return err(s),
        }
    };
    let mgid = created.unwrap_or(rec.mgid);
    let Some(g) = st.groups.get(&mgid) else {
        return err(status::REQ_INVALID);
    };
    let undo = |st: &mut McastState| {
        if created.is_some() {
            st.remove_group(&mgid);
        }
    };
    if !more_fields_match(&rec, mask, &g.rec) || !port_caps(port, &g.rec) || js == 0 {
        undo(st);
        return err(status::REQ_INVALID);
    }
    if !cx.pkeys.has_pkey(guid, g.rec.pkey) {
        undo(st);
        return err(status::REQ_INVALID);
    }
    if let Some(m) = g.members.get(&guid) {
        let allowed = match cx.requester() {
            super::RequesterPort::Local => true,
            super::RequesterPort::Port(r) if !m.proxy => r == guid,
            super::RequesterPort::Port(r) => cx.pkeys.has_pkey(r, g.rec.pkey),
            super::RequesterPort::Unknown => false,
        };
        if !allowed {
            return err(status::REQ_INVALID);
        }
    }
    let Some(g) = st.groups.get_mut(&mgid) else {
        return err(status::REQ_INVALID);
    };
    let before = g.members.get(&guid).map(|m| m.join_state);
    let m = g.members.entry(guid).or_insert(Member {
        port_gid: rec.port_gid,
        join_state: 0,
        proxy,
    });
    m.join_state |= js;
    let changed = created.is_some() || before != Some(m.join_state);
    let out = McMemberRecord {
        port_gid: m.port_gid,
        join_state: m.join_state,
        proxy_join: u8::from(m.proxy),
        ..g.rec.clone()
    };
    (records_response(&req.header, &[out]), changed)
}

/// Creates the group a join asks for; its MGID.
fn create(st: &mut McastState, cx: &Ctx<'_, '_>, rec: &McMemberRecord, mask: u64, port: &Port) -> Result<Gid, u16> {
    let mut g = rec.clone();
    if rec.mgid == Gid::default() {
        g.mgid = assign_mgid(st, cx.subnet.subnet_prefix, rec, mask).ok_or(status::NO_RESOURCES)?;
    } else {
        if !valid_requested_mgid(&rec.mgid) {
            return Err(status::REQ_INVALID);
        }
        if let Some(sig) = ipoib_signature(&rec.mgid.0) {
            let pkey = u16::from_be_bytes([rec.mgid.0[4], rec.mgid.0[5]]);
            let bcast = Gid(ipv4_broadcast_mgid(pkey, rec.mgid.0[1] & 0x0f));
            if sig != 0x401b || bcast != rec.mgid {
                match st.groups.get(&bcast) {
                    Some(b) if other_fields_match(rec, mask, &b.rec) => {}
                    _ => return Err(status::REQ_INVALID),
                }
            }
        }
    }
    if !realizable(&mut g, mask, port) {
        return Err(status::REQ_INVALID);
    }
    g.port_gid = Gid::default();
    g.proxy_join = 0;
    g.mtu_selector = EXACTLY;
    g.rate_selector = EXACTLY;
    g.pkt_life_selector = EXACTLY;
    if !sel(mask, comp::PKT_LIFE) {
        g.pkt_life = crate::path::PACKET_LIFE_TIME;
    }
    if !sel(mask, comp::HOP_LIMIT) {
        g.hop_limit = 0;
    }
    g.scope = g.mgid.0[1] & 0x0f;
    g.join_state &= 0x0f;
    let mgid = g.mgid;
    match st.add_group(g, false, mlid_limit(cx.subnet)) {
        Ok(()) => Ok(mgid),
        Err(AddError::NoMlid) => Err(status::NO_RESOURCES),
    }
}

/// An MGID for a create with MGID 0 (OpenSM's `build_new_mgid`: `ff1S:a01b`, the subnet
/// prefix from byte 4, a counter in bytes 10..14 over it), `None` after [`MGID_TRIES`] taken.
fn assign_mgid(st: &mut McastState, prefix: u64, rec: &McMemberRecord, mask: u64) -> Option<Gid> {
    let scope = if sel(mask, comp::SCOPE) {
        rec.scope & 0x0f
    } else {
        crate::partitions::SCOPE_LINK_LOCAL
    };
    let mut m = [0u8; 16];
    m[0] = 0xff;
    m[1] = 0x10 | scope;
    m[2] = 0xa0;
    m[3] = 0x1b;
    m[4..12].copy_from_slice(&prefix.to_be_bytes());
    for _ in 0..MGID_TRIES {
        m[10..14].copy_from_slice(&st.next_mgid.to_be_bytes());
        st.next_mgid = st.next_mgid.wrapping_add(1);
        if !st.groups.contains_key(&Gid(m)) {
            return Some(Gid(m));
        }
    }
    None
}

/// o15-0.1.5 (OpenSM's `validate_requested_mgid`): 0xFF first; IPoIB MGIDs pass; no reserved
/// flag; the SA signature 0xA01B not with link-local scope.
fn valid_requested_mgid(mgid: &Gid) -> bool {
    let m = &mgid.0;
    if m[0] != 0xff {
        return false;
    }
    if ipoib_signature(m).is_some() {
        return true;
    }
    if m[1] & 0xe0 != 0 {
        return false;
    }
    !(u16::from_be_bytes([m[2], m[3]]) == 0xa01b && m[1] & 0x0f == crate::partitions::SCOPE_LINK_LOCAL)
}

/// MTUCap of a port (PortInfo byte 41), `None` when not a valid MTU code.
pub(super) fn port_mtu_cap(p: &Port) -> Option<u8> {
    let c = p.port_info[41] & 0x0f;
    (1..=5).contains(&c).then_some(c)
}

/// The group's MTU and rate from the request and the creating port (OpenSM's
/// `mgrp_request_is_realizable`; rates compared by bandwidth). A port without a valid MTU or
/// rate in its PortInfo counts as 256 bytes and 2.5 Gb/s.
fn realizable(g: &mut McMemberRecord, mask: u64, port: &Port) -> bool {
    let port_mtu = port_mtu_cap(port).unwrap_or(crate::path::walk::FALLBACK_MTU);
    let mtu = if !sel(mask, comp::MTU) || !sel(mask, comp::MTU_SELECTOR) || g.mtu_selector == 3 {
        port_mtu
    } else {
        let want = g.mtu;
        let mtu = match g.mtu_selector {
            0 if want >= port_mtu => return false,
            0 => port_mtu,
            1 if want > port_mtu => port_mtu,
            1 => want.wrapping_sub(1),
            _ => want,
        };
        if !(1..=5).contains(&mtu) {
            return false;
        }
        mtu
    };
    g.mtu = mtu;
    let port_rate = port_rate(&port.port_info).unwrap_or(FALLBACK_RATE);
    let rate = if !sel(mask, comp::RATE) || !sel(mask, comp::RATE_SELECTOR) || g.rate_selector == 3 {
        port_rate
    } else {
        let want = g.rate;
        let rate = match g.rate_selector {
            0 if rate_mbps(want) >= rate_mbps(port_rate) => return false,
            0 => port_rate,
            1 if rate_mbps(want) > rate_mbps(port_rate) => port_rate,
            1 => match rate_code_below(want) {
                Some(r) => r,
                None => return false,
            },
            _ => want,
        };
        if rate_mbps(rate) == 0 {
            return false;
        }
        rate
    };
    g.rate = rate;
    true
}

/// OpenSM's `validate_other_comp_fields`: Q_Key, P_Key (same partition, not both limited),
/// TClass, SL, FlowLabel, HopLimit of the mask equal the group's.
pub(super) fn other_fields_match(r: &McMemberRecord, mask: u64, g: &McMemberRecord) -> bool {
    use crate::partitions::{is_full, pkey_base};
    if sel(mask, comp::QKEY) && r.qkey != g.qkey {
        return false;
    }
    if sel(mask, comp::PKEY) && (!(is_full(r.pkey) || is_full(g.pkey)) || pkey_base(r.pkey) != pkey_base(g.pkey)) {
        return false;
    }
    !(sel(mask, comp::TCLASS) && r.tclass != g.tclass
        || sel(mask, comp::SL) && r.sl != g.sl
        || sel(mask, comp::FLOW_LABEL) && r.flow_label != g.flow_label
        || sel(mask, comp::HOP_LIMIT) && r.hop_limit != g.hop_limit)
}

/// OpenSM's `validate_more_comp_fields`: with a selector in the mask, the group's MTU and
/// rate must satisfy it (rates by bandwidth).
pub(super) fn more_fields_match(r: &McMemberRecord, mask: u64, g: &McMemberRecord) -> bool {
    let by = |selector: u8, want: u32, have: u32| match selector {
        0 => have > want,
        1 => have < want,
        2 => have == want,
        _ => true,
    };
    (!sel(mask, comp::MTU_SELECTOR) || by(r.mtu_selector, u32::from(r.mtu), u32::from(g.mtu)))
        && (!sel(mask, comp::RATE_SELECTOR) || by(r.rate_selector, rate_mbps(r.rate), rate_mbps(g.rate)))
}

/// OpenSM's `validate_port_caps`: the port's MTUCap and rate reach the group's (a value the
/// port image does not give is not checked).
fn port_caps(p: &Port, g: &McMemberRecord) -> bool {
    port_mtu_cap(p).is_none_or(|m| m >= g.mtu)
        && port_rate(&p.port_info).is_none_or(|r| rate_mbps(r) >= rate_mbps(g.rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requested_mgids_are_checked_as_o15_0_1_5() {
        let mut m = [0u8; 16];
        m[0] = 0xff;
        m[1] = 0x12;
        assert!(valid_requested_mgid(&Gid(m)));
        m[1] = 0x32; // a reserved flag
        assert!(!valid_requested_mgid(&Gid(m)));
        m[1] = 0x12;
        m[2..4].copy_from_slice(&[0xa0, 0x1b]); // SA signature, link-local
        assert!(!valid_requested_mgid(&Gid(m)));
        m[1] = 0x15;
        assert!(valid_requested_mgid(&Gid(m)));
        m[0] = 0xfe;
        assert!(!valid_requested_mgid(&Gid(m)));
        assert!(valid_requested_mgid(&Gid(ipv4_broadcast_mgid(0x7fff, 2))));
    }
}
