//! RandSP (thesis §1.4.4): a seeded uniformly random choice among shortest paths.
//!
//! SCAFFOLD: being built by the sssp helper; until then it refuses every fabric.

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;

/// The RandSP engine (deterministic for a seed).
#[derive(Copy, Clone, Debug, Default)]
pub struct RandSp {
    /// Seed of the random choices.
    pub seed: u64,
}

impl RoutingEngine for RandSp {
    fn name(&self) -> &'static str {
        "randsp"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        Err(RoutingError::Unsupported {
            engine: self.name(),
            reason: "not built yet".into(),
        })
    }
}
