//! ServiceRecord (IBA 15.2.5.14): Set registers or replaces (key: ServiceID, ServiceGID,
//! ServiceP_Key), Get / GetTable match a template under the component mask, Delete removes
//! and answers the deleted record. As OpenSM's `osm_sa_service_record.c`:
//!
//! * Set needs ServiceID and ServiceGID in the mask (else ERR_REQ_INVALID);
//! * no ServiceLease in the mask: an infinite lease (0xFFFFFFFF);
//! * no ServiceP_Key in the mask: the default P_Key 0xFFFF (OpenSM answers that but stores
//!   what the request carried; fabricd stores what it answers, so a later Delete with the
//!   same mask finds it);
//! * ServiceP_Key in the mask: the port of ServiceGID must be in the subnet (else
//!   ERR_REQ_INVALID); the ServiceGID is not checked otherwise;
//! * the ServiceKey is returned only to a trusted requester (its request carries the
//!   manager's SM_Key, [`crate::SaService::set_trusted_key`], as OpenSM answers); zero to
//!   every other.

use super::{unix_ms, Registry, ServiceEntry, MAX_SERVICE_RECORDS};
use crate::query::respond;
use crate::records::service::{comp, INDEFINITE_LEASE};
use crate::records::{sel, Raw, Record, ServiceRecord};
use crate::request::{error_response, records_response, Request, SaResponse};
use crate::subnet::Subnet;
use crate::wire::{self, status};

/// The default (full-member) P_Key.
const DEFAULT_PKEY: u16 = 0xFFFF;

pub(super) fn answer(reg: &mut Registry, subnet: &Subnet, req: &Request<'_>) -> (SaResponse, bool) {
    let h = &req.header;
    let err = |st| (error_response(h, req.data, st), false);
    if !matches!(
        h.method,
        wire::METHOD_GET | wire::METHOD_GET_TABLE | wire::METHOD_SET | wire::METHOD_DELETE
    ) {
        return err(status::UNSUPPORTED_METHOD_ATTR);
    }
    let Ok(mut rec) = ServiceRecord::decode(req.data) else {
        return err(status::REQ_INVALID);
    };
    let mask = h.component_mask;
    match h.method {
        wire::METHOD_GET | wire::METHOD_GET_TABLE => {
            let found: Vec<ServiceRecord> = reg
                .services
                .values()
                .filter(|e| e.record.matches(&rec, mask))
                .map(|e| answered(&e.record, req.trusted))
                .collect();
            (respond(req, &found), false)
        }
        wire::METHOD_SET => {
            if !(sel(mask, comp::SERVICE_ID) && sel(mask, comp::SERVICE_GID)) {
                return err(status::REQ_INVALID);
            }
            if !sel(mask, comp::SERVICE_LEASE) {
                rec.service_lease = INDEFINITE_LEASE;
            }
            if !normalise_pkey(&mut rec, mask, subnet) {
                return err(status::REQ_INVALID);
            }
            let key = (rec.service_id, rec.service_gid, rec.service_pkey);
            if !reg.services.contains_key(&key) && reg.services.len() >= MAX_SERVICE_RECORDS {
                return err(status::NO_RESOURCES);
            }
            let expires_unix_ms = (rec.service_lease != INDEFINITE_LEASE)
                .then(|| unix_ms(req.now).saturating_add(u64::from(rec.service_lease) * 1000));
            let out = answered(&rec, req.trusted);
            reg.services.insert(
                key,
                ServiceEntry {
                    record: rec,
                    expires_unix_ms,
                },
            );
            (records_response(h, &[out]), true)
        }
        _ => {
            // Delete.
            if !normalise_pkey(&mut rec, mask, subnet) {
                return err(status::REQ_INVALID);
            }
            let key = (rec.service_id, rec.service_gid, rec.service_pkey);
            match reg.services.remove(&key) {
                Some(e) => (records_response(h, &[answered(&e.record, req.trusted)]), true),
                None => err(status::NO_RECORDS),
            }
        }
    }
}

/// The P_Key a Set or Delete is about: the default one when not in the mask; when in the
/// mask, the port of the ServiceGID must be an end port of the subnet (OpenSM's
/// `match_service_pkey_with_ports_pkey`; partitions are not enforced yet).
fn normalise_pkey(rec: &mut ServiceRecord, mask: u64, subnet: &Subnet) -> bool {
    if !sel(mask, comp::SERVICE_PKEY) {
        rec.service_pkey = DEFAULT_PKEY;
        return true;
    }
    subnet.port_index_by_guid(rec.service_gid.guid()).is_some()
}

/// A record as it goes out: without its ServiceKey unless the requester is trusted.
fn answered(r: &ServiceRecord, trusted: bool) -> ServiceRecord {
    if trusted {
        return r.clone();
    }
    ServiceRecord {
        service_key: Raw::default(),
        ..r.clone()
    }
}
