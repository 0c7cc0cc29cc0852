//! MCMemberRecord methods other than the join: SubnAdmDelete (leave, OpenSM's
//! `mcmr_rcv_leave_mgrp`) and SubnAdmGet / GetTable (OpenSM's `mcmr_query_mgrp`).
//!
//! Delete: MGID, PortGID and JoinState in the mask (else 0x0600); PortGID of another prefix
//! 0x0500; no such group, the port not a member, a JoinState sharing no bit with the stored
//! one or having bits it has not (o15-0.1.14), or a requester that may not modify the member
//! (not the port itself when joined by itself; not in the group's partition when joined by a
//! proxy): ERR_REQ_INVALID. The answer is the member's record with the JoinState it keeps
//! (0 when it left the group).
//!
//! Get / GetTable: every group whose MGID, MLID, Q_Key, P_Key, TClass, SL, FlowLabel,
//! HopLimit, ProxyJoin, MTU and rate selectors match and whose partition the requester is in
//! (a requester of no known port sees none; LID 0, the daemon's gRPC, sees all);
//! with PortGID in the mask only groups that port is a member of (the member's JoinState);
//! Scope and JoinState compared when in the mask. A trusted requester asking without PortGID
//! gets one record per matching member; everyone else one per group, with PortGID, JoinState
//! and ProxyJoin zeroed (IBA p923, as OpenSM).

use super::join::{more_fields_match, other_fields_match, JOIN_MASK};
use super::{Ctx, McastState, RequesterPort};
use crate::query::{request_error, respond};
use crate::records::mc_member::comp;
use crate::records::{sel, Gid, McMemberRecord, Record};
use crate::request::{records_response, SaResponse};
use crate::wire::{self, status};

/// The answer to an MCMemberRecord Set or Delete, and whether the state changed.
pub(crate) fn change(st: &mut McastState, cx: &Ctx<'_, '_>) -> (SaResponse, bool) {
    let req = cx.req;
    if req.header.component_mask & !McMemberRecord::COMPONENTS != 0 {
        return (request_error(req, status::REQ_INVALID), false);
    }
    match req.header.method {
        wire::METHOD_SET => super::join::join(st, cx),
        wire::METHOD_DELETE => leave(st, cx),
        _ => (request_error(req, status::UNSUPPORTED_METHOD_ATTR), false),
    }
}

fn leave(st: &mut McastState, cx: &Ctx<'_, '_>) -> (SaResponse, bool) {
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
    let Some(g) = st.groups.get(&rec.mgid) else {
        return err(status::REQ_INVALID);
    };
    let guid = rec.port_gid.guid();
    let Some(m) = g.members.get(&guid) else {
        return err(status::REQ_INVALID);
    };
    let js = rec.join_state & 0x0f;
    if js & m.join_state == 0 || js | m.join_state != m.join_state {
        return err(status::REQ_INVALID);
    }
    let allowed = match cx.requester() {
        RequesterPort::Local => true,
        RequesterPort::Port(r) if !m.proxy => r == guid,
        RequesterPort::Port(r) => cx.pkeys.has_pkey(r, g.rec.pkey),
        RequesterPort::Unknown => false,
    };
    if !allowed {
        return err(status::REQ_INVALID);
    }
    let mut out = McMemberRecord {
        port_gid: m.port_gid,
        proxy_join: u8::from(m.proxy),
        ..g.rec.clone()
    };
    out.join_state = st.leave(&rec.mgid, guid, js);
    (records_response(&req.header, &[out]), true)
}

/// The answer to an MCMemberRecord Get or GetTable (never a change).
pub(crate) fn query(st: &McastState, cx: &Ctx<'_, '_>) -> SaResponse {
    let req = cx.req;
    let Ok(t) = McMemberRecord::decode(req.data) else {
        return request_error(req, status::REQ_INVALID);
    };
    let mask = req.header.component_mask;
    if mask & !McMemberRecord::COMPONENTS != 0 {
        return request_error(req, status::REQ_INVALID);
    }
    let requester = cx.requester();
    let trusted = req.trusted;
    let mut state_mask = 0u8;
    if sel(mask, comp::JOIN_STATE) {
        state_mask |= 0x0f;
    }
    let scope_ok = |scope: u8| !sel(mask, comp::SCOPE) || scope == t.scope;
    let mut out = Vec::new();
    for g in st.groups.values() {
        if sel(mask, comp::MGID) && t.mgid != g.rec.mgid || sel(mask, comp::MLID) && t.mlid != g.rec.mlid {
            continue;
        }
        match requester {
            RequesterPort::Port(r) if !cx.pkeys.has_pkey(r, g.rec.pkey) => continue,
            // OpenSM does not answer a requester it cannot place; nothing is shown to it.
            RequesterPort::Unknown => continue,
            _ => {}
        }
        if !other_fields_match(&t, mask, &g.rec)
            || sel(mask, comp::PROXY_JOIN) && t.proxy_join != g.rec.proxy_join
            || !more_fields_match(&t, mask, &g.rec)
            || !scope_ok(g.rec.scope)
        {
            continue;
        }
        if sel(mask, comp::PORT_GID) {
            let Some(m) = g.members.get(&t.port_gid.guid()) else {
                continue;
            };
            if m.port_gid != t.port_gid || t.join_state & state_mask != m.join_state & state_mask {
                continue;
            }
            out.push(McMemberRecord {
                port_gid: m.port_gid,
                join_state: m.join_state,
                proxy_join: u8::from(m.proxy),
                ..g.rec.clone()
            });
        } else if trusted {
            for m in g.members.values() {
                if t.join_state & state_mask == m.join_state & state_mask {
                    out.push(McMemberRecord {
                        port_gid: m.port_gid,
                        join_state: m.join_state,
                        proxy_join: u8::from(m.proxy),
                        ..g.rec.clone()
                    });
                }
            }
        } else if t.join_state & state_mask == g.rec.join_state & state_mask {
            out.push(g.rec.clone());
        }
    }
    if !trusted {
        for r in &mut out {
            r.port_gid = Gid::default();
            r.join_state = 0;
            r.proxy_join = 0;
        }
    }
    respond(req, &out)
}
