//! What clients register with the SA: ServiceRecords (with leases) and InformInfo
//! subscriptions; its persisted form (the daemon writes it to the state directory so that a
//! restarted or new master keeps them); the Reports (Notice, traps 64/65) owed to subscribers
//! when end ports go in or out of service.

/// Everything clients registered.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Registry {}

use crate::request::{error_response, Request, SaResponse};
use crate::subnet::Subnet;
use crate::wire::{self, status};

/// Whether an attribute is the registry's (ServiceRecord, InformInfo, InformInfoRecord).
pub fn is_registry_attr(attr: u16) -> bool {
    matches!(
        attr,
        wire::attr::SERVICE_RECORD | wire::attr::INFORM_INFO | wire::attr::INFORM_INFO_RECORD
    )
}

impl Registry {
    /// The answer to a request for a registry attribute, and whether the registry changed
    /// (the service persists it before the answer goes out).
    pub fn answer(&mut self, _subnet: &Subnet, req: &Request<'_>) -> (SaResponse, bool) {
        (
            error_response(&req.header, req.data, status::UNSUPPORTED_METHOD_ATTR),
            false,
        )
    }
}
