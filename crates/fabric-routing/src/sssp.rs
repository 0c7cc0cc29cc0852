//! SSSP: balanced shortest-path routing on any topology.
//!
//! SCAFFOLD: being built by the sssp helper; until then it refuses every fabric.

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;

/// The SSSP engine.
#[derive(Copy, Clone, Debug, Default)]
pub struct Sssp;

impl RoutingEngine for Sssp {
    fn name(&self) -> &'static str {
        "sssp"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        Err(RoutingError::Unsupported {
            engine: self.name(),
            reason: "not built yet".into(),
        })
    }
}
