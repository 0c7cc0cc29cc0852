//! Load-aware Dmodc: Dmodc's closed form where the fabric is intact, balanced by load where it
//! is not.
//!
//! SCAFFOLD: being built by the dmodc-lb helper; until then it refuses every fabric.

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;

/// The load-aware Dmodc engine.
#[derive(Copy, Clone, Debug, Default)]
pub struct DmodcLb;

impl RoutingEngine for DmodcLb {
    fn name(&self) -> &'static str {
        "dmodc-lb"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        Err(RoutingError::Unsupported {
            engine: self.name(),
            reason: "not built yet".into(),
        })
    }
}
