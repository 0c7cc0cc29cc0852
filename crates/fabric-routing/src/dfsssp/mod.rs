//! DFSSSP (Domke, Hoefler, Nagel, "Deadlock-free oblivious routing for arbitrary topologies",
//! IPDPS 2011; OpenSM's `dfsssp`): SSSP's balanced shortest paths on any topology
//! ([`crate::sssp::route_paths`] with [`PathSet::Shortest`]), made deadlock-free by assigning the
//! routes to virtual layers ([`crate::vl`]).
//!
//! The engine ([`Dfsssp`], `dfsssp`) fills the tables; the layering is a function of the final
//! tables ([`crate::vl::layer_base`]), run after the validity repair
//! ([`crate::route_all_checked`]) so that it covers the routes actually installed. On one VL the routing is in general *not*
//! deadlock-free (a torus or a Slim Fly has CDG cycles): the daemon installs it only with its
//! layering ([`crate::vl_layering`]: the fewest layers), the SL-to-VL tables of those data VLs
//! programmed first and the per-path SLs published in PathRecords; it refuses the generation
//! when the driver's data VLs do not suffice.
//!
//! Switch LIDs are routed along the up-down paths of the BFS directions (as SSSP's, see
//! [`crate::swlid`]); they are layered with the end-port routes.

#[cfg(test)]
mod tests;
use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;
use crate::sssp::{updown_frame, write_paths, PathSet};
use crate::swlid;

/// The DFSSSP engine: unrestricted balanced shortest paths (see the module documentation).
#[derive(Copy, Clone, Debug, Default)]
pub struct Dfsssp;

impl RoutingEngine for Dfsssp {
    fn name(&self) -> &'static str {
        "dfsssp"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let f = ctx.fabric;
        write_paths(ctx, set, PathSet::Shortest, lfts);
        if set == LidSet::Base {
            let frame = updown_frame(f, &ctx.ranking.level);
            swlid::fill_switch_lids(f, ctx.lids, &frame.o, lfts);
        }
        Ok(())
    }
}
