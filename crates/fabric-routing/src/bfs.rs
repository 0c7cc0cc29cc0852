//! The thesis' own Up*/Down* engines (§5.1.3), exactly as printed: BFS-Dmodc (Alg. 12) and
//! BFS-Random (Alg. 11) on the directions of Alg. 10 (one BFS per connected component from its
//! lowest-GUID leaf; links between switches of equal depth unused), with Dmodc's up-down
//! selection ([`crate::fill`]). `updown` ([`crate::UpDown`]) is the escape routing built from
//! them with OpenSM `updn`'s roots, every link oriented and shortest legal paths; these two are
//! kept so that the thesis' degradation study can be reproduced engine for engine.

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::fill::{fill_set, Select};
use crate::lft::Lfts;
use crate::updown::bfs_levels;

/// BFS-Dmodc (`random_seed: None`, Alg. 12) or BFS-Random (`Some(seed)`, Alg. 11) on Alg. 10's
/// BFS directions. Deadlock-free on one VL for any connected topology (every route up*-down*).
#[derive(Copy, Clone, Debug, Default)]
pub struct BfsUpDown {
    /// `None`: eqs. 4.7–4.8 on topological NIDs; `Some(seed)`: a seeded random closer port.
    pub random_seed: Option<u64>,
}

impl RoutingEngine for BfsUpDown {
    fn name(&self) -> &'static str {
        match self.random_seed {
            None => "bfs-dmodc",
            Some(_) => "bfs-random",
        }
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let select = match self.random_seed {
            None => Select::Dmodc,
            Some(seed) => Select::Random { seed },
        };
        fill_set(ctx, &bfs_levels(ctx.fabric), set, select, lfts);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;
    use crate::testutil::*;
    use crate::{assign_lids, Guid2Lid, IB_MAX_UNICAST_LID};

    /// Valid and deadlock-free on degraded PGFTs; BFS-Random depends on its seed only; neither is
    /// `updown` (which orients every link and balances by load).
    #[test]
    fn thesis_bfs_engines_route_degraded_pgfts_deadlock_free() {
        let base = pgft(&[3, 3, 4], &[1, 3, 3], &[1, 1, 1]).fabric;
        for seed in 0..4 {
            let f = degrade(&base, 6 + seed as usize * 3, (seed % 2) as usize, seed);
            let r = ranking(&f);
            let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
            let ctx = RoutingContext {
                fabric: &f,
                ranking: &r,
                lids: &lids,
            };
            let mut tables = Vec::new();
            for e in [
                BfsUpDown { random_seed: None },
                BfsUpDown { random_seed: Some(5) },
                BfsUpDown { random_seed: Some(5) },
                BfsUpDown { random_seed: Some(6) },
            ] {
                let mut lfts = Lfts::new(f.num_switches(), lids.top());
                e.route(&ctx, LidSet::Base, &mut lfts).unwrap();
                let v = check::validity_set(&f, &lids, &lfts, LidSet::Base);
                assert_eq!(v.unreachable_count, 0, "{} seed {seed}: {v:?}", e.name());
                assert!(
                    check::cdg_acyclic(&f, &lids, &lfts, LidSet::Base),
                    "{} seed {seed}",
                    e.name()
                );
                tables.push(lfts);
            }
            assert_eq!(tables[1], tables[2], "same seed, same tables");
        }
    }
}
