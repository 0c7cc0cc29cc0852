//! The Up*/Down* preparation of the escape LIDs ([`crate::updown::prepare`]) with its most
//! expensive part made incremental: the root detection needs the hop counts from every live
//! leaf to every switch (one breadth-first search per leaf). The previous generation's hop
//! counts of a leaf are kept when they are still the distances of the new graph, which is
//! checked locally around the links that changed: hop counts are the distances exactly when
//! the leaf is at 0, every link joins counts that differ by at most one (an unreachable switch
//! only joins unreachable ones), and every other reachable switch has a neighbour one hop
//! closer (a switch that went down is unreachable, one that came up is one hop further than
//! its nearest neighbour, before the check). The roots come from per-switch histograms kept
//! up to date from the leaves whose hop counts changed. Everything after the roots is [`crate::updown::prepare_with_roots`] (BFS levels,
//! orientation, shortest legal paths, dividers, NIDs), or, when it proves the escape's
//! preparation equal to the base's ([`crate::updown::escape_prep`]), nothing more.

use std::collections::VecDeque;
use std::sync::Arc;

use rayon::prelude::*;

use fabric_topology::{Fabric, SwitchId};

use crate::fill::Prepared;
use crate::prep::INF;
use crate::updown::{dominant_bar, escape_prep_with_roots, roots_of_candidates, EscapePrep};

/// The hop counts of the root detection: live leaves (with their live end-port counts) and,
/// per leaf, the hop count from every switch (shared with the previous generation when
/// unchanged); and, kept up to date from the leaves whose hop counts changed, per switch the
/// histogram of OpenSM's root test (end ports per hop count) and its component key (the first
/// leaf that reaches it), so that the roots cost one pass over the switches.
pub(super) struct HopCounts {
    leaves: Vec<(SwitchId, u32)>,
    dist: Vec<Arc<[u8]>>,
    /// Per switch, rows of `width`: end ports per hop count (hop counts below `width`).
    hist: Vec<u64>,
    width: usize,
    /// Per switch: the index in `leaves` of the first leaf whose search reaches it
    /// (`u32::MAX`: none).
    comp: Vec<u32>,
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
        // the comparison does not apply (other switches).
        let changes: Option<Vec<LinkChange>> = previous.and_then(|(old, _)| {
            if old.num_switches() != n {
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
        // Switches that went down (their hop counts become unreachable) and came up (theirs
        // are one more than their nearest neighbour's); the check then decides.
        let (went_down, came_up): (Vec<SwitchId>, Vec<SwitchId>) = match previous {
            Some((old, _)) if changes.is_some() => (
                fabric
                    .switch_ids()
                    .filter(|&s| old.switch(s).up && !fabric.switch(s).up)
                    .collect(),
                fabric
                    .switch_ids()
                    .filter(|&s| !old.switch(s).up && fabric.switch(s).up)
                    .collect(),
            ),
            _ => (Vec::new(), Vec::new()),
        };
        let searches = std::sync::atomic::AtomicUsize::new(0);
        let dist: Vec<Arc<[u8]>> = leaves
            .par_iter()
            .map(|&(l, _)| {
                if let (Some((_, prev)), Some(changes)) = (previous, &changes) {
                    if let Ok(i) = prev.leaves.binary_search_by_key(&l, |x| x.0) {
                        let d = &prev.dist[i];
                        if went_down.is_empty() && came_up.is_empty() {
                            if still_distances(fabric, d, changes) {
                                return d.clone();
                            }
                        } else {
                            let mut v = d.to_vec();
                            for s in &went_down {
                                v[s.idx()] = INF;
                            }
                            for s in &came_up {
                                let m = fabric.port_groups(*s).iter().map(|g| v[g.remote.idx()]).min();
                                v[s.idx()] = m.map_or(INF, |m| m.saturating_add(1));
                            }
                            if still_distances(fabric, &v, changes) {
                                return v.into();
                            }
                        }
                    }
                }
                searches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                bfs(fabric, l).into()
            })
            .collect();
        let mut h = HopCounts {
            leaves,
            dist,
            hist: Vec::new(),
            width: 0,
            comp: Vec::new(),
        };
        if !previous.is_some_and(|(_, prev)| h.update_hist(prev)) {
            h.rebuild_hist(n);
        }
        (h, searches.into_inner())
    }

    /// Number of live leaves (searches of a routing from scratch).
    #[cfg(test)]
    pub(super) fn num_leaves(&self) -> usize {
        self.leaves.len()
    }

    /// Same leaves, hop counts, histograms (trailing zero bars aside) and component keys.
    #[cfg(test)]
    pub(super) fn same_as(&self, o: &HopCounts) -> bool {
        let bars = |h: &HopCounts, s: usize| {
            let mut r = h.hist[s * h.width..(s + 1) * h.width].to_vec();
            while r.last() == Some(&0) {
                r.pop();
            }
            r
        };
        self.leaves == o.leaves
            && self.dist.iter().zip(&o.dist).all(|(a, b)| a[..] == b[..])
            && self.comp == o.comp
            && (0..self.comp.len()).all(|s| bars(self, s) == bars(o, s))
    }

    /// The histograms and component keys from scratch.
    fn rebuild_hist(&mut self, n: usize) {
        let width = 1 + self
            .dist
            .par_iter()
            .map(|d| d.iter().filter(|&&x| x != INF).max().copied().unwrap_or(0))
            .max()
            .unwrap_or(0) as usize;
        let (leaves, dist) = (&self.leaves, &self.dist);
        let mut hist = vec![0u64; n * width];
        let comp: Vec<u32> = hist
            .par_chunks_mut(width)
            .enumerate()
            .map(|(s, row)| {
                let mut comp = u32::MAX;
                for (i, &(_, k)) in leaves.iter().enumerate() {
                    let d = dist[i][s];
                    if d != INF {
                        row[d as usize] += u64::from(k);
                        comp = comp.min(i as u32);
                    }
                }
                comp
            })
            .collect();
        (self.hist, self.width, self.comp) = (hist, width, comp);
    }

    /// The histograms and component keys from `prev`'s, updated by the leaves whose hop counts
    /// or end-port counts changed; `false` (nothing set) when a hop count does not fit the
    /// previous width or the switch count changed.
    fn update_hist(&mut self, prev: &HopCounts) -> bool {
        let n = prev.comp.len();
        if self.dist.iter().any(|d| d.len() != n) {
            return false;
        }
        // Contributions removed (previous leaves) and added (new leaves): those not kept as
        // they were (same switch, same end-port count, same shared hop counts).
        let kept =
            |a: &(SwitchId, u32), da: &Arc<[u8]>, b: &(SwitchId, u32), db: &Arc<[u8]>| a == b && Arc::ptr_eq(da, db);
        let find = |hc: &HopCounts, l: SwitchId| hc.leaves.binary_search_by_key(&l, |x| x.0).ok();
        let added: Vec<usize> = (0..self.leaves.len())
            .filter(|&i| {
                find(prev, self.leaves[i].0)
                    .is_none_or(|j| !kept(&self.leaves[i], &self.dist[i], &prev.leaves[j], &prev.dist[j]))
            })
            .collect();
        let removed: Vec<usize> = (0..prev.leaves.len())
            .filter(|&j| {
                find(self, prev.leaves[j].0)
                    .is_none_or(|i| !kept(&self.leaves[i], &self.dist[i], &prev.leaves[j], &prev.dist[j]))
            })
            .collect();
        let width = prev.width;
        if added
            .par_iter()
            .any(|&i| self.dist[i].iter().any(|&x| x != INF && x as usize >= width))
        {
            return false;
        }
        let mut hist = prev.hist.clone();
        hist.par_chunks_mut(width).enumerate().for_each(|(s, row)| {
            for &j in &removed {
                let d = prev.dist[j][s];
                if d != INF {
                    row[d as usize] -= u64::from(prev.leaves[j].1);
                }
            }
            for &i in &added {
                let d = self.dist[i][s];
                if d != INF {
                    row[d as usize] += u64::from(self.leaves[i].1);
                }
            }
        });
        // The component keys hold when the leaves are the same switches and every changed leaf
        // reaches the same switches.
        let same_reach = self.leaves.len() == prev.leaves.len()
            && self.leaves.iter().zip(&prev.leaves).all(|(a, b)| a.0 == b.0)
            && added.par_iter().all(|&i| {
                self.dist[i]
                    .iter()
                    .zip(prev.dist[i].iter())
                    .all(|(&a, &b)| (a == INF) == (b == INF))
            });
        let comp = if same_reach {
            prev.comp.clone()
        } else {
            (0..n)
                .into_par_iter()
                .map(|s| {
                    (0..self.leaves.len())
                        .find(|&i| self.dist[i][s] != INF)
                        .map_or(u32::MAX, |i| i as u32)
                })
                .collect()
        };
        (self.hist, self.width, self.comp) = (hist, width, comp);
        true
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
/// [`roots_of_candidates`]), from the kept histograms and component keys.
fn roots(fabric: &Fabric, h: &HopCounts) -> Vec<SwitchId> {
    let n = fabric.num_switches();
    let cand: Vec<Option<(u8, usize)>> = (0..n)
        .into_par_iter()
        .map(|s| {
            let sid = SwitchId(s as u32);
            if !fabric.switch(sid).up || fabric.is_leaf(sid) {
                return None;
            }
            let hist = &h.hist[s * h.width..(s + 1) * h.width];
            let total: u64 = hist.iter().sum();
            let comp = match h.comp[s] {
                u32::MAX => usize::MAX,
                c => c as usize,
            };
            Some((dominant_bar(hist, total)?, comp))
        })
        .collect();
    roots_of_candidates(&cand)
}
