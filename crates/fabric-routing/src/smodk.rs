//! Smodk (thesis §1.4.3): the source-based counterpart of Dmodk.
//!
//! SCAFFOLD: being built by the ftree helper; until then it refuses every fabric.

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;

/// The Smodk engine.
#[derive(Copy, Clone, Debug, Default)]
pub struct Smodk;

impl RoutingEngine for Smodk {
    fn name(&self) -> &'static str {
        "smodk"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        Err(RoutingError::Unsupported {
            engine: self.name(),
            reason: "not built yet".into(),
        })
    }
}
