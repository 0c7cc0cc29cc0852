//! PQFT (QFT paper Sec. IV, eqs. 9–18; fault-resilient variant Sec. V, Alg. 1).
//!
//! SCAFFOLD: being built by the pqft helper; until then it refuses every fabric.

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;

/// The PQFT engine.
#[derive(Copy, Clone, Debug, Default)]
pub struct Pqft;

impl RoutingEngine for Pqft {
    fn name(&self) -> &'static str {
        "pqft"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        Err(RoutingError::Unsupported {
            engine: self.name(),
            reason: "not built yet".into(),
        })
    }
}
