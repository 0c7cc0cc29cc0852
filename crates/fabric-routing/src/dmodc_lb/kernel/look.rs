//! What the load-aware fill looks up per span: a leaf switch's view of every span (computed
//! once per fill) and a switch's memory of its last targets lookup.

use super::super::plan::Plan;
use super::super::targets::Targets;
use crate::fill::{Destinations, Prepared};
use crate::prep::NONE;

/// A span as every leaf switch sees it: the destination leaf is its own mirror.
#[derive(Clone, Copy, Default)]
pub(super) struct OwnSpan {
    /// The leaf's own targets entry exists and every first rank there is the nominal one.
    pub(super) nat: bool,
    /// The leaf's component (`Plan::klow`).
    pub(super) comp: u32,
    /// The next span's LIDs and NIDs follow this one's (one copy of the table writes both).
    pub(super) cont: bool,
}

/// [`OwnSpan`] of every span of `dst`.
pub(super) fn own_tabled(p: &Prepared, plan: &Plan, tg: &Targets, dst: &Destinations) -> Vec<OwnSpan> {
    let spans = &dst.spans;
    (0..spans.len())
        .map(|si| {
            let span = &spans[si];
            let leaf = p.o.leaves[span.li as usize] as usize;
            let comp = plan.klow[leaf];
            let mut hint = 0;
            let nat = comp != NONE
                && tg
                    .entry_in(
                        tg.bstart[leaf] as usize,
                        tg.bstart[leaf + 1] as usize,
                        span.t0,
                        &mut hint,
                    )
                    .is_some_and(|(e, _)| tg.nat[e]);
            let cont = spans.get(si + 1).is_some_and(|nx| {
                let (a, na) = (span.start as usize, nx.start as usize);
                span.step == 1
                    && nx.step == 1
                    && na == a + span.len as usize
                    && nx.t0 == span.t0 + span.len
                    && dst.lids[na] == dst.lids[na - 1] + 1
            });
            OwnSpan { nat, comp, cont }
        })
        .collect()
}

/// [`super::Ctx::targets_of`]'s memory for one switch above the leaves: the leaf component of the
/// last lookup, its mirror, the mirror's entries `below[b0..b1]` (empty without targets) and
/// the next entry's index there (a leaf switch only says it is one).
pub(super) struct Look {
    pub(super) leafq: bool,
    pub(super) k: u32,
    pub(super) m: u32,
    pub(super) b0: usize,
    pub(super) b1: usize,
    pub(super) hint: usize,
}

impl Look {
    pub(super) fn new(plan: &Plan, q: usize) -> Look {
        // An empty rank path (a leaf): the mirror is the destination's leaf itself.
        Look {
            leafq: plan.rp_start[q] == plan.rp_start[q + 1],
            k: NONE,
            m: NONE,
            b0: 0,
            b1: 0,
            hint: 0,
        }
    }
}
