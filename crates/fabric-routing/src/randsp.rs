//! RandSP (thesis §1.4.4, Alg. 2): for every (switch, destination) a uniformly random choice
//! among the minimal next hops, from a generator seeded by the engine seed and the switch GUID
//! (ChaCha8): deterministic for a seed, the same bytes whatever the number of threads (rows are
//! filled in parallel, one task per switch, each with its own generator).
//!
//! Minimal next hops are taken among the up*/down*-legal paths, as the thesis requires for
//! deadlock freedom ("deadlock-free if shortest path routing is deadlock-free, such as in PGFTs
//! wherein shortest paths are up–down", §5.1.1): a switch with a downward path to the
//! destination leaf picks among its down ports towards a smaller downcost, any other among its
//! up ports towards a smaller cost (Dmodc's fill rule, [`crate::fill`]). On a complete PGFT
//! these are exactly all shortest paths; on a degraded one the down→up shortcuts are excluded.
//! Each parallel cable counts as one next hop. Directions: the ranking's levels when they keep
//! every pair of leaves up-down connected, BFS levels (Alg. 10) otherwise, exactly as for SSSP
//! ([`crate::sssp::updown_frame`]); on BFS directions RandSP is BFS-Random (Alg. 11).

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::fill::{fill_set, Select};
use crate::lft::Lfts;
use crate::sssp::updown_frame;

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
        let frame = updown_frame(ctx.fabric, &ctx.ranking.level);
        fill_set(ctx, &frame.level, set, Select::Random { seed: self.seed }, lfts);
        Ok(())
    }
}
