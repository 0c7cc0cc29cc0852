//! The Up*/Down* preparation of the escape LIDs ([`crate::updown::prepare`]) with its most
//! expensive part made incremental: the root detection needs the hop counts from every live
//! leaf to every switch (one breadth-first search per leaf). The previous generation's hop
//! counts of a leaf are kept when they are still the distances of the new graph, which is
//! checked locally around the links that changed: hop counts are the distances exactly when
//! the leaf is at 0, every link joins counts that differ by at most one (an unreachable switch
//! only joins unreachable ones), and every other reachable switch has a neighbour one hop
//! closer. Everything after the roots is [`crate::updown::prepare_with_roots`] (BFS levels,
//! orientation, shortest legal paths, dividers, NIDs), or, when it proves the escape's
//! preparation equal to the base's ([`crate::updown::escape_prep`]), nothing more.

use std::collections::VecDeque;

use rayon::prelude::*;

use fabric_topology::{Fabric, SwitchId};

use crate::fill::Prepared;
use crate::prep::INF;
use crate::updown::{dominant_bar, escape_prep_with_roots, roots_of_candidates, EscapePrep};

/// The hop counts of the root detection: live leaves (with their live end-port counts) and,
/// per leaf, the hop count from every switch.
pub(super) struct HopCounts {
    leaves: Vec<(SwitchId, u32)>,
    dist: Vec<Vec<u8>>,
}

/// The links of each switch (remote switches), to find what changed.
fn remotes(f: &Fabric, s: SwitchId) -> Vec<SwitchId> {
    let mut v: Vec<SwitchId> = f.port_groups(s).iter().map(|g| g.remote).collect();
    v.sort_unstable();
    v
}

/// A switch whose links changed: the switch, its removed remotes and its added remotes.
type LinkChange = (SwitchId, Vec<SwitchId>, Vec<SwitchId>);

/// One breadth-first search from leaf `l` ([`crate::updown`]'s `detect_roots`).
fn bfs(fabric: &Fabric, l: SwitchId) -> Vec<u8> {
    let mut d = vec![INF; fabric.num_switches()];
    d[l.idx()] = 0;
    let mut q = VecDeque::from([l]);
    while let Some(s) = q.pop_front() {
        let next = d[s.idx()].saturating_add(1);
        if next == INF {
            continue;
        }
        for g in fabric.port_groups(s) {
            if d[g.remote.idx()] == INF {
                d[g.remote.idx()] = next;
                q.push_back(g.remote);
            }
        }
    }
    d
}

impl HopCounts {
    /// The hop counts of `fabric`, from `previous` (hop counts of `old`) where they still hold.
    /// Returns them with the number of searches run.
    pub(super) fn new(fabric: &Fabric, previous: Option<(&Fabric, &HopCounts)>) -> (HopCounts, usize) {
        let leaves: Vec<(SwitchId, u32)> = fabric
            .switch_ids()
            .filter(|&s| fabric.switch(s).up && fabric.is_leaf(s))
            .map(|s| (s, fabric.attached_end_ports(s).len() as u32))
            .collect();
        let n = fabric.num_switches();
        // Switches whose links changed: (switch, removed remotes, added remotes); `None` when
        // the comparison does not apply (other switches, a switch up or down).
        let changes: Option<Vec<LinkChange>> = previous.and_then(|(old, _)| {
            if old.num_switches() != n || fabric.switch_ids().any(|s| old.switch(s).up != fabric.switch(s).up) {
                return None;
            }
            Some(
                fabric
                    .switch_ids()
                    .collect::<Vec<_>>()
                    .into_par_iter()
                    .filter_map(|s| {
                        let (a, b) = (remotes(old, s), remotes(fabric, s));
                        (a != b).then(|| {
                            let removed = a.iter().filter(|x| b.binary_search(x).is_err()).copied().collect();
                            let added = b.iter().filter(|x| a.binary_search(x).is_err()).copied().collect();
                            (s, removed, added)
                        })
                    })
                    .collect(),
            )
        });
        let searches = std::sync::atomic::AtomicUsize::new(0);
        let dist: Vec<Vec<u8>> = leaves
            .par_iter()
            .map(|&(l, _)| {
                if let (Some((_, prev)), Some(changes)) = (previous, &changes) {
                    if let Ok(i) = prev.leaves.binary_search_by_key(&l, |x| x.0) {
                        let d = &prev.dist[i];
                        if still_distances(fabric, d, changes) {
                            return d.clone();
                        }
                    }
                }
                searches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                bfs(fabric, l)
            })
            .collect();
        (HopCounts { leaves, dist }, searches.into_inner())
    }
}

/// Whether `d` (distances from a leaf in the previous graph) are the distances in `fabric`,
/// the links of the switches in `changes` being the only ones that changed (module doc).
fn still_distances(fabric: &Fabric, d: &[u8], changes: &[(SwitchId, Vec<SwitchId>, Vec<SwitchId>)]) -> bool {
    let saturated = |x: u8| x >= INF - 1;
    changes.iter().all(|(s, removed, added)| {
        let ds = d[s.idx()];
        if saturated(ds) && ds != INF {
            return false;
        }
        // New links: counts at most one apart (or both unreachable).
        let added_ok = added.iter().all(|r| {
            let dr = d[r.idx()];
            match (ds == INF, dr == INF) {
                (true, true) => true,
                (false, false) => ds.abs_diff(dr) <= 1,
                _ => false,
            }
        });
        // Lost links: a reachable switch keeps a neighbour one hop closer (unless it is the
        // leaf itself).
        let keeps_parent = removed.is_empty()
            || ds == INF
            || ds == 0
            || fabric
                .port_groups(*s)
                .iter()
                .any(|g| d[g.remote.idx()] != INF && d[g.remote.idx()] + 1 == ds);
        added_ok && keeps_parent
    })
}

/// [`crate::updown::escape_prep`] on the hop counts `h`: the roots from them, then
/// [`crate::updown::escape_prep_with_roots`] (the proof that the escape's preparation is
/// `base`, else the escape's own preparation).
pub(super) fn prepare(fabric: &Fabric, h: &HopCounts, base: &Prepared) -> EscapePrep {
    let roots = roots(fabric, h);
    let leaves = &h.leaves;
    escape_prep_with_roots(fabric, base, &roots, leaves, |i, j| h.dist[i][leaves[j].0.idx()] != INF)
}

/// `detect_roots` of [`crate::updown`] on the hop counts `h` (same rule: [`dominant_bar`],
/// [`roots_of_candidates`]).
fn roots(fabric: &Fabric, h: &HopCounts) -> Vec<SwitchId> {
    let n = fabric.num_switches();
    let (leaves, dist) = (&h.leaves, &h.dist);
    let cand: Vec<Option<(u8, usize)>> = (0..n)
        .into_par_iter()
        .map(|s| {
            let sid = SwitchId(s as u32);
            if !fabric.switch(sid).up || fabric.is_leaf(sid) {
                return None;
            }
            let mut hist = [0u64; 256];
            let mut total = 0u64;
            let mut comp = usize::MAX;
            for (i, &(_, k)) in leaves.iter().enumerate() {
                let d = dist[i][s];
                if d != INF {
                    hist[d as usize] += u64::from(k);
                    total += u64::from(k);
                    comp = comp.min(i);
                }
            }
            Some((dominant_bar(&hist, total)?, comp))
        })
        .collect();
    roots_of_candidates(&cand)
}
