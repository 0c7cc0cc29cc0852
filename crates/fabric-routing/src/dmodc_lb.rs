//! Load-aware Dmodc (`dmodc-lb`): Dmodc's closed form (thesis §4.2, eqs. 4.5–4.8) where the
//! fabric is intact, balanced by load where it is not (issue #16, beyond the thesis).
//!
//! Dmodc on a degraded fat-tree re-indexes *every* destination of a switch whose closer set
//! `C` lost a member (`C[⌊d/Π⌋ mod #C]` with a smaller `#C`), so the destinations of one leaf
//! no longer converge on one top switch, and a switch with few surviving up-links carries the
//! same share as its intact siblings (docs/routing.md, "Quality"). This engine instead:
//!
//! 1. gives every switch its *nominal* choice, the one Dmodc makes on the complete fabric,
//!    from the up-link components of the fabric ([`plan`]): the same for every switch of a
//!    component, whatever its own dead links;
//! 2. keeps the nominal choice wherever the whole nominal route from the switch exists;
//! 3. places the other (displaced) destinations by load: the closer upper group with the least
//!    flow per onward capacity ([`kernel`]), levels bottom-up, the flows of each level passed
//!    up to the next.
//!
//! On a complete fabric nothing is displaced and the tables are Dmodc's, byte for byte (the
//! engine then runs Dmodc's own kernel). Every choice is among Dmodc's candidates (eq. 4.5
//! with the downcost rule of §4.2.1), so every route is up*/down* (deadlock-free) and valid
//! wherever Dmodc's is. Deterministic: each switch's row depends only on the levels below it,
//! the switches of a level are routed in parallel (rayon). A fabric with a switch of more
//! than 64 up- or down-neighbours, or an up-link component of more than 64 upper switches, is
//! routed by Dmodc.

mod kernel;
mod plan;
mod targets;

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::fill::{fill_prepared, Prepared, Select};
use crate::lft::Lfts;
use crate::swlid;

/// The load-aware Dmodc engine (see the module doc).
#[derive(Copy, Clone, Debug, Default)]
pub struct DmodcLb;

impl RoutingEngine for DmodcLb {
    fn name(&self) -> &'static str {
        "dmodc-lb"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        route_lb(ctx, set, lfts, false);
        Ok(())
    }
}

/// Routes `set`; `force_kernel` runs the load-aware kernel even on an intact fabric (tests).
pub(crate) fn route_lb(ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts, force_kernel: bool) {
    let level = &ctx.ranking.level;
    let prep = Prepared::new(ctx.fabric, level);
    match plan::Plan::new(ctx.fabric, &prep) {
        Ok(plan) if force_kernel || !plan.intact => {
            let tg = targets::Targets::new(ctx.fabric, &prep, &plan);
            kernel::fill_end_ports(ctx.fabric, ctx.lids, &prep, &plan, &tg, set, lfts);
            if set == LidSet::Base {
                swlid::fill_switch_lids(ctx.fabric, ctx.lids, &prep.o, lfts);
            }
        }
        _ => fill_prepared(ctx, &prep, set, Select::Dmodc, lfts),
    }
}

#[cfg(test)]
mod tests;
