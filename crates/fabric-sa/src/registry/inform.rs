//! Set(InformInfo) (IBA 13.4.8.3, subscribe / unsubscribe) and InformInfoRecord
//! (IBA 15.2.5.12) Get / GetTable, as OpenSM's `osm_sa_informinfo.c`:
//!
//! * the subscriber is the requester: its GID from the request's GRH, else the GID of the
//!   end port owning its LID (a LID not in the subnet: ERR_REQ_INVALID); Reports go to its
//!   LID and QP, with its SL and P_Key index;
//! * Subscribe above 1: ERR_REQ_INVALID; on every error the echoed InformInfo has
//!   Subscribe = 0 (o13-13.1.1);
//! * a subscription with a GID names a port that must be in the subnet; with GID 0 and
//!   LIDRangeBegin ≠ 0xFFFF the range must start inside the LID space in use (else
//!   ERR_REQ_INVALID);
//! * a subscription is identified by the requester (LID, QP) and its filter (GID or LID
//!   range, IsGeneric, Type, TrapNumber/DeviceID, ProducerType/VendorID): subscribing again
//!   replaces it, Subscribe = 0 removes it (none: ERR_REQ_INVALID). OpenSM also compares the
//!   QPN/RespTimeValue word a client put in an unsubscribe; fabricd takes the QP the
//!   request came from;
//! * the answer is the InformInfo received, in a GetResp;
//! * InformInfoRecord lists the subscriptions whose subscriber port is in the subnet,
//!   matching every component of the mask (OpenSM compares SubscriberGID and Enum only).
//!   Enum is the smallest number free for that subscriber (OpenSM: always 0).

use super::{Registry, Subscription, MAX_SUBSCRIPTIONS};
use crate::query::respond;
use crate::records::inform_info::ALL_LIDS;
use crate::records::{Gid, InformInfo, InformInfoRecord, Record};
use crate::request::{error_response, records_response, Request, SaResponse};
use crate::subnet::Subnet;
use crate::wire::{self, status};

/// Byte offset of Subscribe in the InformInfo image (from the record's layout).
fn subscribe_offset() -> Option<usize> {
    InformInfo::FIELDS
        .iter()
        .find(|f| f.name == "subscribe")
        .map(|f| f.start / 8)
}

pub(super) fn answer_inform_info(reg: &mut Registry, subnet: &Subnet, req: &Request<'_>) -> (SaResponse, bool) {
    let h = &req.header;
    let err = |st| {
        let mut r = error_response(h, req.data, st);
        if let Some(b) = subscribe_offset().and_then(|o| r.data.get_mut(o)) {
            *b = 0;
        }
        (r, false)
    };
    if h.method != wire::METHOD_SET {
        return (error_response(h, req.data, status::UNSUPPORTED_METHOD_ATTR), false);
    }
    let Ok(ii) = InformInfo::decode(req.data) else {
        return err(status::REQ_INVALID);
    };
    if ii.subscribe > 1 {
        return err(status::REQ_INVALID);
    }
    let Some(subscriber_gid) = requester_gid(subnet, req) else {
        return err(status::REQ_INVALID);
    };
    let from = req.from;
    let found = reg
        .subscriptions
        .iter()
        .position(|s| s.lid == from.lid && s.qpn == from.qpn && same_filter(&s.inform_info, &ii));
    if ii.subscribe == 0 {
        return match found {
            Some(i) => {
                reg.subscriptions.remove(i);
                (records_response(h, &[ii]), true)
            }
            None => err(status::REQ_INVALID),
        };
    }
    if !valid_source(subnet, &ii) {
        return err(status::REQ_INVALID);
    }
    let stored = InformInfo {
        qpn: from.qpn & 0x00FF_FFFF,
        ..ii.clone()
    };
    let changed = match found {
        Some(i) => {
            let s = &mut reg.subscriptions[i];
            let new = Subscription {
                subscriber_gid,
                subscriber_enum: s.subscriber_enum,
                inform_info: stored,
                lid: from.lid,
                qpn: from.qpn,
                sl: from.sl,
                pkey_index: from.pkey_index,
            };
            let changed = *s != new;
            *s = new;
            changed
        }
        None => {
            if reg.subscriptions.len() >= MAX_SUBSCRIPTIONS {
                return err(status::NO_RESOURCES);
            }
            let subscriber_enum = free_enum(reg, &subscriber_gid);
            reg.subscriptions.push(Subscription {
                subscriber_gid,
                subscriber_enum,
                inform_info: stored,
                lid: from.lid,
                qpn: from.qpn,
                sl: from.sl,
                pkey_index: from.pkey_index,
            });
            true
        }
    };
    (records_response(h, &[ii]), changed)
}

pub(super) fn answer_records(reg: &Registry, subnet: &Subnet, req: &Request<'_>) -> (SaResponse, bool) {
    let h = &req.header;
    if !matches!(h.method, wire::METHOD_GET | wire::METHOD_GET_TABLE) {
        return (error_response(h, req.data, status::UNSUPPORTED_METHOD_ATTR), false);
    }
    let Ok(template) = InformInfoRecord::decode(req.data) else {
        return (error_response(h, req.data, status::REQ_INVALID), false);
    };
    let found: Vec<InformInfoRecord> = reg
        .subscriptions
        .iter()
        .filter(|s| subnet.port_index_by_guid(s.subscriber_gid.guid()).is_some())
        .map(|s| InformInfoRecord {
            subscriber_gid: s.subscriber_gid,
            subscriber_enum: s.subscriber_enum,
            inform_info: s.inform_info.clone(),
        })
        .filter(|r| r.matches(&template, h.component_mask))
        .collect();
    (respond(req, &found), false)
}

/// The requester's GID: from its GRH, else that of the end port owning its LID.
fn requester_gid(subnet: &Subnet, req: &Request<'_>) -> Option<Gid> {
    if let Some(g) = req.from.gid {
        return Some(Gid(g));
    }
    let p = subnet.port_by_lid(req.from.lid)?;
    Some(Gid::new(subnet.subnet_prefix, p.guid))
}

/// Whether the trap source a subscription names exists (OpenSM's
/// `validate_ports_access_rights`, without partitions).
fn valid_source(subnet: &Subnet, ii: &InformInfo) -> bool {
    if ii.gid != Gid::default() {
        return subnet.port_index_by_guid(ii.gid.guid()).is_some();
    }
    ii.lid_range_begin == ALL_LIDS || usize::from(ii.lid_range_begin) < subnet.lid_port.len()
}

/// Same filter: the fields OpenSM's `match_inf_rec` compares, but the QPN/RespTimeValue word.
fn same_filter(a: &InformInfo, b: &InformInfo) -> bool {
    let source = if b.gid != Gid::default() {
        a.gid == b.gid
    } else {
        a.gid == b.gid && a.lid_range_begin == b.lid_range_begin && a.lid_range_end == b.lid_range_end
    };
    source
        && a.is_generic == b.is_generic
        && a.trap_type == b.trap_type
        && a.trap_number == b.trap_number
        && a.producer_type == b.producer_type
}

/// The smallest Enum the subscriber does not use yet.
fn free_enum(reg: &Registry, gid: &Gid) -> u16 {
    let mut used: Vec<u16> = reg
        .subscriptions
        .iter()
        .filter(|s| &s.subscriber_gid == gid)
        .map(|s| s.subscriber_enum)
        .collect();
    used.sort_unstable();
    let mut e = 0u16;
    for u in used {
        if u == e {
            e = e.saturating_add(1);
        } else if u > e {
            break;
        }
    }
    e
}
