//! What clients register with the SA: ServiceRecords (with leases) and InformInfo
//! subscriptions; its persisted form (the daemon writes it to the state directory so that a
//! restarted or new master keeps them); the Reports (Notice, traps 64/65) owed to subscribers
//! when end ports go in or out of service.
//!
//! * The wire images are those of [`crate::records`] (one codec per record): ServiceRecord,
//!   InformInfo, InformInfoRecord and Notice, with their field names and component bits.
//! * `services`: ServiceRecord Set / Get / GetTable / Delete, leases.
//! * `inform`: Set(InformInfo) (subscribe, unsubscribe), InformInfoRecord Get / GetTable.
//! * [`reports`]: which end ports went in or out of service between two snapshots, the
//!   Notices of traps 64/65 and the subscribers they go to.
//! * `file`: the persisted form (versioned JSON through serde), validated on load; the
//!   multicast groups ([`crate::mcast`]) are persisted with the registry.
//!
//! Behaviour follows OpenSM (`osm_sa_service_record.c`, `osm_sa_informinfo.c`,
//! `osm_inform.c`) except where `docs/subnet-administration.md` ("Registrations") says
//! otherwise. Pure: the time of a request is [`Request::now`]; leases expire lazily, at the
//! next request (no timer).

mod file;
mod inform;
pub mod reports;
mod services;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::mcast::{McGroup, McastState};
use crate::records::{Gid, InformInfo, ServiceRecord};
use crate::request::{error_response, Request, SaResponse};
use crate::subnet::Subnet;
use crate::wire::{self, status};

/// At most this many ServiceRecords are registered; a Set of a new one beyond is answered
/// ERR_NO_RESOURCES. (With the subscriptions' bound, the persisted file of a full registry
/// stays under the daemon's 16 MiB limit on state files.)
pub const MAX_SERVICE_RECORDS: usize = 16_384;
/// At most this many InformInfo subscriptions; beyond, ERR_NO_RESOURCES.
pub const MAX_SUBSCRIPTIONS: usize = 4_096;

/// What identifies a ServiceRecord (OpenSM's RID): ServiceID, ServiceGID, ServiceP_Key.
pub type ServiceKeyId = (u64, Gid, u16);

/// One registered ServiceRecord and when its lease ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceEntry {
    /// As registered (ServiceLease is the lease granted, in seconds, as OpenSM returns it).
    pub record: ServiceRecord,
    /// Milliseconds since the Unix epoch; `None` for an infinite lease.
    pub expires_unix_ms: Option<u64>,
}

/// One InformInfo subscription and where its Reports go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    pub subscriber_gid: Gid,
    /// Distinguishes the subscriptions of one subscriber (the smallest free number).
    pub subscriber_enum: u16,
    /// As subscribed, with QPN set to the subscriber's QP (`Subscribe` = 1).
    pub inform_info: InformInfo,
    /// Report address: the requester's LID, QP, SL and P_Key index.
    pub lid: u16,
    pub qpn: u32,
    pub sl: u8,
    pub pkey_index: u16,
}

/// Everything clients registered.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "file::RegistryFile", into = "file::RegistryFile")]
pub struct Registry {
    services: BTreeMap<ServiceKeyId, ServiceEntry>,
    subscriptions: Vec<Subscription>,
    /// Multicast groups and their members (changed by [`crate::SaService`]).
    mcast: McastState,
}

/// Whether an attribute is the registry's (ServiceRecord, InformInfo, InformInfoRecord).
pub fn is_registry_attr(attr: u16) -> bool {
    matches!(
        attr,
        wire::attr::SERVICE_RECORD | wire::attr::INFORM_INFO | wire::attr::INFORM_INFO_RECORD
    )
}

/// Milliseconds since the Unix epoch (0 before it).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Registry {
    /// The answer to a request for a registry attribute, and whether the registry changed
    /// (the service persists it before the answer goes out). Leases that ended by
    /// `req.now` are dropped first (that is a change too).
    pub fn answer(&mut self, subnet: &Subnet, req: &Request<'_>) -> (SaResponse, bool) {
        let expired = self.drop_expired(req.now) > 0;
        let (resp, changed) = match req.header.attr_id {
            wire::attr::SERVICE_RECORD => services::answer(self, subnet, req),
            wire::attr::INFORM_INFO => inform::answer_inform_info(self, subnet, req),
            wire::attr::INFORM_INFO_RECORD => inform::answer_records(self, subnet, req),
            _ => (
                error_response(&req.header, req.data, status::UNSUPPORTED_METHOD_ATTR),
                false,
            ),
        };
        (resp, changed || expired)
    }

    /// Drops the ServiceRecords whose lease ended at `now`; how many.
    pub fn drop_expired(&mut self, now: SystemTime) -> usize {
        let now = unix_ms(now);
        let before = self.services.len();
        self.services.retain(|_, e| e.expires_unix_ms.is_none_or(|t| now < t));
        before - self.services.len()
    }

    /// The registered ServiceRecords, in (ServiceID, ServiceGID, ServiceP_Key) order.
    pub fn service_records(&self) -> impl Iterator<Item = &ServiceEntry> {
        self.services.values()
    }

    /// The InformInfo subscriptions, in registration order.
    pub fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    /// No registration at all (no multicast group either).
    pub fn is_empty(&self) -> bool {
        self.services.is_empty() && self.subscriptions.is_empty() && self.mcast.is_empty()
    }

    /// The multicast groups, in MLID order.
    pub fn mcast_groups(&self) -> Vec<McGroup> {
        self.mcast.groups()
    }

    /// The multicast state.
    pub fn mcast(&self) -> &McastState {
        &self.mcast
    }

    pub(crate) fn mcast_mut(&mut self) -> &mut McastState {
        &mut self.mcast
    }
}
