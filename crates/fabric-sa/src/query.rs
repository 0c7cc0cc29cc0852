//! One SA request → one answer for the read-only attributes: dispatch on (method, attribute),
//! component-mask checks, status codes. PathRecord and MultiPathRecord go to [`crate::path`].

use crate::request::{error_response, Request, SaResponse};
use crate::subnet::Subnet;
use crate::wire::{self, status};

/// The answer to a request for a read-only attribute (every attribute but those of the
/// registry: ServiceRecord, InformInfo, InformInfoRecord). PathRecord and MultiPathRecord go
/// to [`crate::path::answer`].
pub fn answer(subnet: &Subnet, req: &Request<'_>) -> SaResponse {
    match req.header.attr_id {
        wire::attr::PATH_RECORD | wire::attr::MULTI_PATH_RECORD => crate::path::answer(subnet, req),
        _ => error_response(&req.header, req.data, status::UNSUPPORTED_METHOD_ATTR),
    }
}
