//! Dmodc (thesis §4.2), the default engine: the fill kernel ([`crate::fill`]) with the link
//! directions of the ranking and eqs. 4.7–4.8 on topological NIDs; and grouped Dmodc (thesis
//! §3.4, Alg. 4), the same on NIDs re-indexed by group ([`NodeGroups`]).

use std::time::Instant;

use crate::engine::{check_route_args, validate_context, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::fill::{fill_dmodc_fresh, fill_prepared, fill_set, Prepared, Select};
use crate::groups::NodeGroups;
use crate::lft::Lfts;
use crate::updown::{escape_prep, EscapePrep};

/// The Dmodc engine (default). Uses the ranking for link directions.
#[derive(Copy, Clone, Debug, Default)]
pub struct Dmodc;

impl RoutingEngine for Dmodc {
    fn name(&self) -> &'static str {
        "dmodc"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        fill_set(ctx, &ctx.ranking.level, set, Select::Dmodc, lfts);
        Ok(())
    }
}

/// The tables of [`crate::route_all`] for Dmodc without groups, with the time of each part.
pub(crate) struct BaseAndEscape {
    pub lfts: Lfts,
    /// Preparation, allocation and fill of the base LIDs (and of the escape LIDs when shared).
    pub base_ms: f64,
    /// The escape's preparation (root detection, orientation, and its costs when not shared)
    /// and its own fill when not shared; 0 with LMC 0.
    pub escape_ms: f64,
    /// Whether the escape LIDs were written with the base LIDs ([`EscapePrep::SameAsBase`]).
    pub escape_shared: bool,
}

/// Dmodc's base LIDs and, with LMC ≥ 1, the escape LIDs of [`crate::updown::route_escape`]
/// (issue #17, routing at scale): the same bytes as [`Dmodc`] on [`Lfts::new`] tables followed
/// by `route_escape`, computed with one preparation when Up*/Down*'s would be the same
/// ([`escape_prep`]; on fat-trees whose top switches are the roots), then one pass per row
/// that initialises it and writes base and escape entries together
/// ([`fill_dmodc_fresh`]). Otherwise the escape is prepared and filled on its own, as
/// `route_escape` does.
///
/// `spare`: tables whose allocation is reused ([`Lfts::recycled`]; every entry is rewritten).
pub(crate) fn route_with_escape(ctx: &RoutingContext<'_>, spare: Option<Lfts>) -> Result<BaseAndEscape, RoutingError> {
    validate_context(ctx)?;
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let prep = Prepared::new(ctx.fabric, &ctx.ranking.level);
    let mut base_ms = ms(t);
    let t = Instant::now();
    let escape = (ctx.lids.lmc >= 1).then(|| escape_prep(ctx.fabric, &prep));
    let mut escape_ms = ms(t);
    let shared = matches!(escape, Some(EscapePrep::SameAsBase));
    let t = Instant::now();
    let (ns, top) = (ctx.fabric.num_switches(), ctx.lids.top());
    let mut lfts = match spare {
        Some(l) => l.recycled(ns, top),
        None => Lfts::unfilled(ns, top),
    };
    fill_dmodc_fresh(ctx, &prep, shared, &mut lfts);
    base_ms += ms(t);
    if let Some(EscapePrep::Own(p)) = escape {
        let t = Instant::now();
        fill_prepared(ctx, &p, LidSet::Escape, Select::Dmodc, &mut lfts);
        escape_ms += ms(t);
    }
    Ok(BaseAndEscape {
        lfts,
        base_ms,
        escape_ms,
        escape_shared: shared,
    })
}

/// Gdmodc: Dmodc (costs, dividers, closer groups, eqs. 4.7–4.8) on the topological NIDs
/// re-indexed by group (Alg. 4). With a single group it writes Dmodc's bytes.
#[derive(Copy, Clone, Debug)]
pub struct GroupedDmodc<'g>(pub &'g NodeGroups);

impl RoutingEngine for GroupedDmodc<'_> {
    fn name(&self) -> &'static str {
        "gdmodc"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        self.0.check(ctx)?;
        fill_set(ctx, &ctx.ranking.level, set, Select::Grouped(self.0), lfts);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::check;
    use crate::fill::Prepared;
    use crate::testutil::*;
    use crate::{EngineKind, LidSet};

    /// Eqs. 4.7–4.8 evaluated directly (with divisions) on a complete PGFT must give the same
    /// entries as the incremental loop.
    #[test]
    fn dmodc_matches_the_formula_on_a_complete_pgft() {
        let t = pgft(&[4, 3, 4], &[1, 3, 2], &[1, 2, 1]);
        let f = &t.fabric;
        let (_, lids, lfts) = routed(f, EngineKind::Dmodc, 1);
        let prep = Prepared::new(f, &bfs_rank(f));
        let o = &prep.o;
        for s in f.switch_ids() {
            let sp = o.pos[s.idx()] as usize;
            for ep in f.end_port_ids() {
                let (leaf, lport) = f.end_port(ep).attach.unwrap();
                let got = lfts.get(s, lids.base_lid(ep));
                if leaf == s {
                    assert_eq!(got, lport);
                    continue;
                }
                let lp = o.pos[leaf.idx()] as usize;
                let li = o.leaf_idx[lp] as usize;
                let c = prep.costs.full_row(sp)[li];
                let closer: Vec<usize> = f
                    .port_groups(s)
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| prep.costs.full_row(o.pos[g.remote.idx()] as usize)[li] < c)
                    .map(|(i, _)| i)
                    .collect();
                let d = u64::from(prep.tn.of_end_port[ep.idx()]);
                let pi = prep.div[sp];
                let g = &f.port_groups(s)[closer[((d / pi) % closer.len() as u64) as usize]];
                let want = g.ports[((d / (pi * closer.len() as u64)) % g.ports.len() as u64) as usize];
                assert_eq!(got, want, "switch {s:?} end port {ep:?}");
            }
        }
    }

    #[test]
    fn every_route_is_up_down_and_valid_on_degraded_pgfts() {
        let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
        for seed in 0..6 {
            let f = degrade(&t.fabric, 6 + seed as usize * 4, (seed % 3) as usize, seed);
            let (r, lids, lfts) = routed(&f, EngineKind::Dmodc, 1);
            assert_eq!(
                check::updown_violations(&f, &r, &lids, &lfts, LidSet::Base),
                0,
                "seed {seed}"
            );
            assert!(check::deadlock_free(&f, &r, &lids, &lfts), "seed {seed}");
            let v = check::validity(&f, &lids, &lfts);
            assert_eq!(
                v.escape_unreachable_count, 0,
                "escape routing must reach everything (seed {seed})"
            );
            if check::leaves_updown_connected(&f, &r) {
                assert!(v.valid, "seed {seed}: {v:?}");
            }
        }
    }
}
