//! Up*/Down* over a BFS spanning tree (thesis §5.1.3: BFS directions of Alg. 10, then
//! BFS-Dmodc, Alg. 12, or BFS-Random, Alg. 11), routed on shortest *legal* paths as OpenSM's
//! `updn` does. This is also the escape routing of every five-phase update.
//!
//! Directions: every live link is oriented. A switch's key is (BFS depth from the roots, GUID)
//! and a link is *up* towards the smaller key: towards the roots, and between switches of
//! equal depth towards the smaller GUID (OpenSM `updn`'s rank + GUID rule). A route that never
//! turns up after going down is deadlock-free on one VL, on any topology (the channel
//! dependencies follow the strict order of the keys) — this is what makes Up*/Down* the escape
//! routing. Alg. 10 as printed keeps only the links between different depths; keeping the
//! others too is what lets the fabric's shortest paths through them be used.
//!
//! Roots ([`prepare`]): the switches OpenSM `updn` would detect (one hop-count bar to the end
//! ports above 90 %), restricted to the most central non-leaf ones — the top switches of a
//! fat-tree — searched from all at once, as OpenSM ranks from all its roots. Alg. 10's single
//! root (the leaf with the smallest GUID of each component, stable while that leaf lives) is
//! used for a component without such a switch, and for the whole fabric when several roots
//! would leave two leaves without a legal path. A disconnected fabric gets one search per
//! component, so every component is routed.
//!
//! Hop counts (the "costs" of Alg. 11–12): per destination leaf `λ`, a breadth-first search
//! from `λ` over the switches, level-synchronous for all leaves at once. Each switch `s` is
//! settled at the first distance `L(s)` where a neighbour offers it a legal continuation, in one
//! of two modes: *down* (`s` forwards down, to neighbours settled in down mode at `L(s) − 1`)
//! or *up* (`s` forwards up, to neighbours settled in any mode at `L(s) − 1`); when both are
//! offered at the same distance, down mode wins. Only a switch in down mode accepts packets
//! arriving from above, so every route is up*-down*. This is OpenSM `updn`'s
//! `updn_bfs_by_node` (a BFS from the destination in which a switch takes the direction of
//! the step that first reached it and illegal down→up steps are skipped) with two
//! differences: a tie goes to down mode instead of to the first neighbour in port order, and a
//! switch forwards only through neighbours consistent with its own mode (OpenSM's min-hop
//! table may mix both, which can put an up hop after a down one).
//!
//! What is guaranteed, exactly (all checked in `tests/updown_minimal.rs`):
//! * no route turns up after going down;
//! * every leaf has a route to every leaf of its component (checked, else single roots: then
//!   every switch has, since a switch on a BFS-tree path from the root down to `λ` is settled
//!   in down mode at its depth difference, so the root is and everything can go up to it);
//! * **no pair that has a legal minimal path is routed non-minimally**: when a shortest path
//!   of the graph from `s` to `λ` has no down→up turn, the route from `s` is that long (by
//!   induction from `λ` along such a path: its down part is settled in down mode at the graph
//!   distance, thanks to the tie rule, its up part at the graph distance at most).
//!
//! What is not: a pair whose shortest paths all turn up after going down may be routed longer
//! than its shortest legal path. A table indexed by destination only cannot always avoid it
//! (a switch that some sources reach going down must forward down, even when its own shortest
//! legal path goes up); like OpenSM, the switch nearer to the destination gets its shortest path.
//!
//! Selection among the neighbours at `L(s) − 1`: for `updown`, OpenSM's port balancing (the
//! least loaded port among them, destinations in topological NID order, [`Select::Balanced`])
//! instead of Alg. 12's eqs. 4.7–4.8: on the real JANUS dump the Dmodc arithmetic gives mu_rp
//! median 9 / q39 12 on these paths (exactly Dmodc's), the balancing 8 / 11 (OpenSM `updn`:
//! 8 / 10). `updown-random` keeps Alg. 11's seeded random port ([`crate::fill`]).

use std::collections::VecDeque;

use rayon::prelude::*;

use fabric_topology::{Fabric, SwitchId};

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::fill::{fill_prepared, Prepared, Select};
use crate::lft::Lfts;
use crate::prep::{self, Costs, Oriented, INF, NONE};

/// The Up*/Down* engine (thesis §5.1.3 with OpenSM `updn`'s path rule, module doc).
/// `random_seed: None` = BFS directions with OpenSM's port balancing (where Alg. 12, BFS-Dmodc,
/// has Dmodc's arithmetic), `Some(seed)` = BFS-Random (Alg. 11, deterministic for a seed).
/// Both route on shortest legal paths.
#[derive(Copy, Clone, Debug, Default)]
pub struct UpDown {
    /// `None`: balanced selection; `Some(seed)`: seeded random selection.
    pub random_seed: Option<u64>,
}

impl RoutingEngine for UpDown {
    fn name(&self) -> &'static str {
        match self.random_seed {
            None => "updown",
            Some(_) => "updown-random",
        }
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let select = match self.random_seed {
            None => Select::Balanced,
            Some(seed) => Select::Random { seed },
        };
        fill_prepared(ctx, &prepare(ctx.fabric), set, select, lfts);
        Ok(())
    }
}

/// The escape LIDs of every five-phase update: [`UpDown`]'s shortest legal paths (same
/// directions, same closer groups `C`) with thesis Alg. 12's closed-form selection (eqs.
/// 4.7–4.8: topological NID / divider mod `#C`) instead of the sequential port balancing of
/// the `updown` engine: parallel over switches, and on fat-trees it keeps Dmodc's structure
/// (fewer ports per destination pair, fewer changed blocks per fault). The `updown` engine
/// keeps the balancing (its JANUS figures, module doc).
pub fn route_escape(ctx: &RoutingContext<'_>, lfts: &mut Lfts) -> Result<(), RoutingError> {
    check_route_args(ctx, LidSet::Escape, lfts)?;
    fill_prepared(ctx, &prepare(ctx.fabric), LidSet::Escape, Select::Dmodc, lfts);
    Ok(())
}

/// Alg. 10 per connected component of the live switches: BFS depth from the root, turned into
/// a level (`max depth − depth`, so the root is the top and "up" means towards it). These are
/// the directions of the BFS-Ftree family; Up*/Down* itself ranks from its roots
/// ([`prepare`]).
pub(crate) fn bfs_levels(fabric: &Fabric) -> Vec<Option<u32>> {
    bfs_levels_from(fabric, &[])
}

/// The roots of Up*/Down* (OpenSM `updn`'s automatic root detection,
/// `updn_find_root_nodes_by_min_hop`, made robust): per switch, the histogram of the hop
/// counts to the live end ports of its component; a switch is a candidate when one bar holds
/// more than 90 % of those end ports and no other bar more than 5 %. OpenSM takes every
/// candidate; on large fat-trees that includes the leaves and the pod switches (their own end
/// ports are under 5 %), which it then joins by links that are "up" both ways (not
/// deadlock-free in general). Here only the non-leaf candidates whose dominant hop count is the
/// smallest of the component are roots: the top switches of a fat-tree, equidistant from every
/// end port. Returns the roots and, per leaf (dense order of live leaves), which leaves reach
/// it, reused to check connectivity. The hop counts come from one breadth-first search from all
/// leaves at once on bitsets over the leaves (`switches × leaves / 64` words per hop, parallel
/// over switches) instead of one search per leaf.
fn detect_roots(fabric: &Fabric) -> Roots {
    let n = fabric.num_switches();
    let leaves: Vec<(SwitchId, u32)> = fabric
        .switch_ids()
        .filter(|&s| fabric.switch(s).up && fabric.is_leaf(s))
        .map(|s| (s, fabric.attached_end_ports(s).len() as u32))
        .collect();
    let nl = leaves.len();
    let w = nl.div_ceil(64).max(1);
    // One breadth-first search from every leaf at once, level-synchronous on bitsets over the
    // leaves: `front[s]` = leaves whose search reaches `s` at the current distance. Pulled
    // over the incoming port groups (the reverse of `port_groups`), so rows are independent.
    let mut incoming: Vec<Vec<u32>> = vec![Vec::new(); n];
    for s in fabric.switch_ids() {
        for g in fabric.port_groups(s) {
            incoming[g.remote.idx()].push(s.0);
        }
    }
    let mut reached = vec![0u64; n * w];
    let mut front = vec![0u64; n * w];
    for (i, &(l, _)) in leaves.iter().enumerate() {
        reached[l.idx() * w + i / 64] |= 1 << (i % 64);
        front[l.idx() * w + i / 64] |= 1 << (i % 64);
    }
    // Per switch: end ports per hop count (the histogram of OpenSM's root detection), hop
    // counts up to 254 (255 = unreachable, as a hop count of `u8`).
    let weight: Vec<u64> = leaves.iter().map(|&(_, k)| u64::from(k)).collect();
    let mut hist: Vec<Vec<u64>> = vec![Vec::new(); n];
    let add = |h: &mut Vec<u64>, d: usize, bits: &[u64]| {
        let mut sum = 0;
        for (wi, &b) in bits.iter().enumerate() {
            let mut b = b;
            while b != 0 {
                sum += weight[wi * 64 + b.trailing_zeros() as usize];
                b &= b - 1;
            }
        }
        if sum > 0 {
            if h.len() <= d {
                h.resize(d + 1, 0);
            }
            h[d] += sum;
        }
    };
    for (s, h) in hist.iter_mut().enumerate() {
        add(h, 0, &front[s * w..(s + 1) * w]);
    }
    let mut next = vec![0u64; n * w];
    for d in 1..INF as usize {
        let (f, r): (&[u64], &[u64]) = (&front, &reached);
        let any = next
            .par_chunks_mut(w)
            .zip(hist.par_iter_mut())
            .enumerate()
            .map(|(s, (row, h))| {
                row.iter_mut().for_each(|x| *x = 0);
                for &t in &incoming[s] {
                    let src = &f[t as usize * w..(t as usize + 1) * w];
                    row.iter_mut().zip(src).for_each(|(a, &b)| *a |= b);
                }
                let mut any = false;
                for (a, &b) in row.iter_mut().zip(&r[s * w..(s + 1) * w]) {
                    *a &= !b;
                    any |= *a != 0;
                }
                if any {
                    add(h, d, row);
                }
                any
            })
            .reduce(|| false, |a, b| a || b);
        if !any {
            break;
        }
        reached.iter_mut().zip(&next).for_each(|(a, &b)| *a |= b);
        std::mem::swap(&mut front, &mut next);
    }
    // Per switch: Some((dominant hop count, component key)) when it is a non-leaf candidate.
    let cand: Vec<Option<(u8, usize)>> = (0..n)
        .into_par_iter()
        .map(|s| {
            let sid = SwitchId(s as u32);
            if !fabric.switch(sid).up || fabric.is_leaf(sid) {
                return None;
            }
            let hist = &hist[s];
            let total: u64 = hist.iter().sum();
            // Component key: the first leaf it reaches.
            let row = &reached[s * w..(s + 1) * w];
            let comp = row
                .iter()
                .position(|&b| b != 0)
                .map_or(usize::MAX, |wi| wi * 64 + row[wi].trailing_zeros() as usize);
            Some((dominant_bar(hist, total)?, comp))
        })
        .collect();
    let roots = roots_of_candidates(&cand);
    // Which leaves reach each leaf.
    let reach = leaves
        .iter()
        .flat_map(|&(l, _)| reached[l.idx() * w..(l.idx() + 1) * w].iter().copied())
        .collect();
    Roots {
        roots,
        leaves,
        w,
        reach,
    }
}

/// OpenSM `updn`'s root test on one switch's histogram (end ports per hop count, `total` of
/// them): exactly one hop count holds more than 90 % of the end ports and no other more than
/// 5 %; returns that hop count (the switch's bar).
pub(crate) fn dominant_bar(hist: &[u64], total: u64) -> Option<u8> {
    let over = |pct: u64| hist.iter().filter(|&&h| h * 100 > total * pct).count();
    if total == 0 || over(90) != 1 || over(5) != 1 {
        return None;
    }
    hist.iter().position(|&h| h * 100 > total * 90).map(|b| b as u8)
}

/// The roots among the candidates (per switch: `Some((bar, component key))`): in each component
/// the candidates with the smallest bar.
pub(crate) fn roots_of_candidates(cand: &[Option<(u8, usize)>]) -> Vec<SwitchId> {
    let mut best: std::collections::HashMap<usize, u8> = std::collections::HashMap::new();
    for &(bar, comp) in cand.iter().flatten() {
        let b = best.entry(comp).or_insert(bar);
        *b = (*b).min(bar);
    }
    (0..cand.len())
        .filter(|&s| matches!(cand[s], Some((bar, comp)) if best[&comp] == bar))
        .map(|s| SwitchId(s as u32))
        .collect()
}

/// What [`detect_roots`] found.
struct Roots {
    roots: Vec<SwitchId>,
    /// Live leaves with their number of live end ports.
    leaves: Vec<(SwitchId, u32)>,
    /// Words per row of `reach`.
    w: usize,
    /// Per leaf of `leaves` (rows of `w` words): bit `i` set when the search from leaf `i` of
    /// `leaves` reaches it (over at most 254 hops).
    reach: Vec<u64>,
}

/// BFS levels from `first` (all at depth 0, one multi-source search), then from the root of
/// Alg. 10 (leaf with the smallest GUID, else switch with the smallest GUID) of every component
/// not reached.
fn bfs_levels_from(fabric: &Fabric, first: &[SwitchId]) -> Vec<Option<u32>> {
    let n = fabric.num_switches();
    let mut depth: Vec<u32> = vec![u32::MAX; n];
    let mut rest: Vec<SwitchId> = fabric.switch_ids().filter(|&s| fabric.switch(s).up).collect();
    // Leaves first, each class by GUID.
    rest.sort_by_key(|&s| (!fabric.is_leaf(s), fabric.switch(s).guid));
    let mut queue = VecDeque::new();
    let mut max_depth = 0;
    let mut search = |seeds: &[SwitchId], depth: &mut Vec<u32>| {
        for &r in seeds {
            if depth[r.idx()] == u32::MAX {
                depth[r.idx()] = 0;
                queue.push_back(r);
            }
        }
        while let Some(s) = queue.pop_front() {
            let d = depth[s.idx()];
            max_depth = max_depth.max(d);
            for g in fabric.port_groups(s) {
                if depth[g.remote.idx()] == u32::MAX {
                    depth[g.remote.idx()] = d + 1;
                    queue.push_back(g.remote);
                }
            }
        }
    };
    search(first, &mut depth);
    for root in rest {
        if depth[root.idx()] == u32::MAX {
            search(&[root], &mut depth);
        }
    }
    depth
        .into_iter()
        .map(|d| (d != u32::MAX).then(|| max_depth - d))
        .collect()
}

/// Levels that orient every link of `bfs` (levels of [`bfs_levels`]): the BFS level is the
/// major key; inside one BFS level, the links between its switches are oriented towards the
/// smaller GUID and layered (a switch is one above the highest of its same-level neighbours
/// with a larger GUID). Every link then joins two different levels, "up" = towards the higher,
/// and there are as many levels as BFS levels when no link joins two switches of equal depth
/// (always the case in a fat-tree, whose switch graph is bipartite).
pub(crate) fn oriented_levels(fabric: &Fabric, bfs: &[Option<u32>]) -> Vec<Option<u32>> {
    let n = fabric.num_switches();
    let mut order: Vec<SwitchId> = fabric
        .switch_ids()
        .filter(|&s| bfs.get(s.idx()).copied().flatten().is_some())
        .collect();
    let guid = |s: SwitchId| fabric.switch(s).guid;
    // Ascending BFS level, then descending GUID: the lower end of a same-level link first.
    order.sort_by_key(|&s| (bfs[s.idx()], std::cmp::Reverse(guid(s))));
    let mut sub = vec![0u32; n];
    let mut out = vec![None; n];
    let mut base = 0u32;
    let mut i = 0;
    while i < order.len() {
        let lv = bfs[order[i].idx()];
        let mut j = i;
        let mut top = 0;
        while j < order.len() && bfs[order[j].idx()] == lv {
            let s = order[j];
            let mut v = 0;
            for g in fabric.port_groups(s) {
                if bfs[g.remote.idx()] == lv && g.remote_guid > guid(s) {
                    v = v.max(sub[g.remote.idx()] + 1);
                }
            }
            sub[s.idx()] = v;
            top = top.max(v);
            j += 1;
        }
        for &s in &order[i..j] {
            out[s.idx()] = Some(base + sub[s.idx()]);
        }
        base += top + 1;
        i = j;
    }
    out
}

/// Everything the selection needs: the complete orientation, the shortest-legal-path costs,
/// dividers (Alg. 5) over the links between different BFS depths (the fat-tree-like part; the
/// other links would multiply Π along every same-depth chain) and topological NIDs (Alg. 7) on
/// the route lengths.
///
/// The BFS starts from the roots of [`detect_roots`] (one multi-source search; components
/// without a root get the root of Alg. 10). Several roots can leave a leaf without any legal
/// path to another leaf of its component (through roots that reach each other only through
/// other roots); then the whole fabric is oriented from single roots (Alg. 10), which always
/// connects every pair. A switch that no leaf's route crosses may keep no route to a leaf
/// (e.g. a top switch that lost its cables to that leaf's pod: it has nowhere to go up).
pub(crate) fn prepare(fabric: &Fabric) -> Prepared {
    let Roots {
        roots,
        leaves,
        w,
        reach,
    } = detect_roots(fabric);
    prepare_with_roots(fabric, &roots, &leaves, |i, j| {
        reach[j * w + i / 64] & (1 << (i % 64)) != 0
    })
}

/// [`prepare`] after the root detection: `roots` and the live `leaves` (with their end-port
/// counts) it found, `reaches(i, j)` whether the search from leaf `i` of `leaves` reaches leaf
/// `j` (the connectivity the orientation from `roots` must keep, else every switch is oriented
/// from Alg. 10's per-component roots). Shared with the incremental re-routing, which finds the
/// roots from kept hop counts.
pub(crate) fn prepare_with_roots(
    fabric: &Fabric,
    roots: &[SwitchId],
    leaves: &[(SwitchId, u32)],
    reaches: impl Fn(usize, usize) -> bool + Sync,
) -> Prepared {
    let attempt = |first: &[SwitchId]| {
        let bfs = bfs_levels_from(fabric, first);
        let o = Oriented::new(fabric, &oriented_levels(fabric, &bfs));
        let costs = legal_costs(&o);
        (bfs, o, costs)
    };
    let (mut bfs, mut o, mut costs) = attempt(roots);
    if roots.len() > 1 && !roots_connect(&o, &costs, leaves, &reaches) {
        (bfs, o, costs) = attempt(&[]);
    }
    let strict = Oriented::new(fabric, &bfs);
    let sdiv = prep::dividers(&strict);
    let div = o.order.iter().map(|s| sdiv[strict.pos[s.idx()] as usize]).collect();
    let tn = prep::topological_nids(fabric, &o, &costs);
    Prepared { o, costs, div, tn }
}

/// Whether the orientation `o` with legal costs `costs` keeps every pair of `leaves` that the
/// root detection found connected (`reaches(i, j)`) connected by a legal path.
fn roots_connect(
    o: &Oriented,
    costs: &Costs,
    leaves: &[(SwitchId, u32)],
    reaches: &(impl Fn(usize, usize) -> bool + Sync),
) -> bool {
    let nl = costs.nleaves;
    // Column of each leaf in the cost rows; then, per source leaf `j`, its (contiguous) cost
    // row, the pair looked up in `reaches` only where the cost is ∞.
    let li: Vec<usize> = leaves
        .iter()
        .map(|&(l, _)| o.leaf_idx[o.pos[l.idx()] as usize] as usize)
        .collect();
    leaves.par_iter().enumerate().all(|(j, &(s, _))| {
        let p = o.pos[s.idx()];
        if p == NONE {
            return true;
        }
        let row = &costs.full[p as usize * nl..(p as usize + 1) * nl];
        li.iter().enumerate().all(|(i, &c)| row[c] != INF || !reaches(i, j))
    })
}

/// What the escape LIDs are routed with, given Dmodc's preparation of the base LIDs
/// ([`escape_prep`]).
pub(crate) enum EscapePrep {
    /// [`prepare`] would return exactly the base preparation: the escape ports are the base
    /// ports (both are [`Select::Dmodc`] on the same [`Prepared`]).
    SameAsBase,
    /// The escape's own preparation ([`prepare`]).
    Own(Box<Prepared>),
}

/// [`prepare`], or the proof that it equals `base` (Dmodc's preparation from the ranking) without
/// computing its costs. On a fat-tree whose top switches are the Up*/Down* roots, Up*/Down*
/// orients every link as the ranking does (BFS depth from the roots = height − level), and its
/// shortest-legal-path costs are then Dmodc's costs: by induction on the distance `k`, when
/// every finite downcost equals the cost (`c' ≠ ∞ ⇒ c' = c`), the switches settled at `k` are
/// those of cost `k`, in down mode exactly when `c' = k` (a down neighbour at `k − 1` has
/// `c' = c = k − 1`, so it was settled in down mode; with `c' = ∞`, no down neighbour was). So
/// the escape is [`Prepared`]-equal to the base when (checked here, in this order):
/// the orientation of [`oriented_levels`] and the strict one of the BFS depths (dividers) are
/// both the base orientation (same switches in the same order, same up and down neighbours,
/// same leaves); every finite downcost of `base` equals its cost; and, with several roots, the
/// roots keep every pair of leaves connected (else [`prepare`] re-orients from single roots).
/// Otherwise the escape's own preparation, from the roots found here.
pub(crate) fn escape_prep(fabric: &Fabric, base: &Prepared) -> EscapePrep {
    let Roots {
        roots,
        leaves,
        w,
        reach,
    } = detect_roots(fabric);
    escape_prep_with_roots(fabric, base, &roots, &leaves, |i, j| {
        reach[j * w + i / 64] & (1 << (i % 64)) != 0
    })
}

/// [`escape_prep`] after the root detection (arguments as for [`prepare_with_roots`]): shared
/// with the incremental re-routing, which finds the roots from kept hop counts.
pub(crate) fn escape_prep_with_roots(
    fabric: &Fabric,
    base: &Prepared,
    roots: &[SwitchId],
    leaves: &[(SwitchId, u32)],
    reaches: impl Fn(usize, usize) -> bool + Sync,
) -> EscapePrep {
    let bfs = bfs_levels_from(fabric, roots);
    let same = same_orientation(&Oriented::new(fabric, &bfs), &base.o)
        && same_orientation(&Oriented::new(fabric, &oriented_levels(fabric, &bfs)), &base.o)
        && downcosts_are_costs(&base.costs)
        && (roots.len() <= 1 || roots_connect(&base.o, &base.costs, leaves, &reaches));
    if same {
        EscapePrep::SameAsBase
    } else {
        EscapePrep::Own(Box::new(prepare_with_roots(fabric, roots, leaves, reaches)))
    }
}

/// Same switches in the same row order, same up and down neighbours (groups and positions),
/// same leaves.
fn same_orientation(a: &Oriented, b: &Oriented) -> bool {
    let nbr = |o: &Oriented| o.nbr.iter().map(|n| (n.group, n.pos)).collect::<Vec<_>>();
    a.order == b.order && a.start == b.start && a.split == b.split && a.leaves == b.leaves && nbr(a) == nbr(b)
}

/// Every finite downcost equals the cost (`c' ≠ ∞ ⇒ c' = c`).
fn downcosts_are_costs(c: &Costs) -> bool {
    const CHUNK: usize = 1 << 16;
    c.down
        .par_chunks(CHUNK)
        .zip(c.full.par_chunks(CHUNK))
        .all(|(d, f)| d.iter().zip(f).fold(true, |ok, (&d, &f)| ok & ((d == INF) | (d == f))))
}

/// Route lengths and modes of every oriented switch towards every leaf (module doc): `full` =
/// `L(s)`, `down` = `L(s)` in down mode and ∞ in up mode. Level-synchronous BFS from all leaves
/// at once: at step `k`, an unsettled `s` is settled at `k + 1` in down mode when a down
/// neighbour has `down = k`, else in up mode when an up neighbour has `full = k`. Rows are
/// computed in parallel from the previous step's matrices (double-buffered), each step is a
/// vectorisable pass over the neighbours' rows; a row with nothing left to settle is copied.
pub(crate) fn legal_costs(o: &Oriented) -> Costs {
    let nl = o.num_leaves();
    let np = o.len();
    if nl == 0 {
        return Costs {
            nleaves: 0,
            down: Vec::new(),
            full: Vec::new(),
        };
    }
    let mut full = vec![INF; np * nl];
    let mut down = vec![INF; np * nl];
    for (li, &p) in o.leaves.iter().enumerate() {
        full[p as usize * nl + li] = 0;
        down[p as usize * nl + li] = 0;
    }
    let mut next_full = full.clone();
    let mut next_down = down.clone();
    let mut open = vec![true; np];
    for k in 0..INF - 1 {
        let (cf, cd): (&[u8], &[u8]) = (&full, &down);
        let changed = next_full
            .par_chunks_mut(nl)
            .zip(next_down.par_chunks_mut(nl))
            .zip(open.par_iter_mut())
            .enumerate()
            .map_init(
                || (Vec::new(), Vec::new()),
                |(dn, up): &mut (Vec<u8>, Vec<u8>), (p, ((nf, nd), op))| {
                    let of = &cf[p * nl..(p + 1) * nl];
                    let od = &cd[p * nl..(p + 1) * nl];
                    if !*op {
                        nf.copy_from_slice(of);
                        nd.copy_from_slice(od);
                        return false;
                    }
                    dn.clear();
                    dn.resize(nl, 0);
                    up.clear();
                    up.resize(nl, 0);
                    for nb in o.downs(p) {
                        let r = &cd[nb.pos as usize * nl..(nb.pos as usize + 1) * nl];
                        dn.iter_mut().zip(r).for_each(|(a, &b)| *a |= u8::from(b == k));
                    }
                    for nb in o.ups(p) {
                        let r = &cf[nb.pos as usize * nl..(nb.pos as usize + 1) * nl];
                        up.iter_mut().zip(r).for_each(|(a, &b)| *a |= u8::from(b == k));
                    }
                    let (mut any, mut left) = (0u8, 0u8);
                    for l in 0..nl {
                        let unset = u8::from(of[l] == INF);
                        let by_down = unset & dn[l];
                        let by_up = unset & up[l] & !by_down;
                        nf[l] = if (by_down | by_up) != 0 { k + 1 } else { of[l] };
                        nd[l] = if by_down != 0 { k + 1 } else { od[l] };
                        any |= by_down | by_up;
                        left |= unset & !(by_down | by_up) & 1;
                    }
                    *op = left != 0;
                    any != 0
                },
            )
            .reduce(|| false, |a, b| a || b);
        std::mem::swap(&mut full, &mut next_full);
        std::mem::swap(&mut down, &mut next_down);
        if !changed {
            break;
        }
    }
    Costs {
        nleaves: nl,
        down,
        full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;
    use crate::testutil::*;
    use crate::{assign_lids, engine, EngineKind, Guid2Lid, LidPlan, IB_MAX_UNICAST_LID};

    fn route_set(f: &Fabric, kind: EngineKind, set: LidSet) -> (LidPlan, Lfts) {
        let r = ranking(f);
        let lids = assign_lids(f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let mut lfts = Lfts::new(f.num_switches(), lids.top());
        engine(kind)
            .route(
                &RoutingContext {
                    fabric: f,
                    ranking: &r,
                    lids: &lids,
                },
                set,
                &mut lfts,
            )
            .unwrap();
        (lids, lfts)
    }

    #[test]
    fn updown_is_valid_and_deadlock_free_on_any_connected_topology() {
        for f in [
            ring(7),
            ring(12),
            degrade(&pgft(&[3, 3, 4], &[1, 3, 3], &[1, 1, 1]).fabric, 25, 2, 3),
        ] {
            for kind in [EngineKind::UpDown, EngineKind::UpDownRandom { seed: 7 }] {
                for set in [LidSet::Base, LidSet::Escape] {
                    let (lids, lfts) = route_set(&f, kind, set);
                    let v = check::validity_set(&f, &lids, &lfts, set);
                    assert_eq!(v.unreachable_count, 0, "{kind} {set:?}: {v:?}");
                    assert!(check::cdg_acyclic(&f, &lids, &lfts, set), "{kind} {set:?}");
                }
            }
        }
    }

    #[test]
    fn balanced_selection_spreads_destinations_evenly_on_a_complete_pgft() {
        let f = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 2, 1]).fabric;
        let (lids, lfts) = route_set(&f, EngineKind::UpDown, LidSet::Escape);
        for s in f.switch_ids().filter(|&s| f.is_leaf(s)) {
            let mut per_port = std::collections::BTreeMap::new();
            for ep in f.end_port_ids() {
                if f.end_port(ep).attach.map(|a| a.0) != Some(s) {
                    let port = lfts.get(s, lids.base_lid(ep) + 1);
                    *per_port.entry(port).or_insert(0u32) += 1;
                }
            }
            // Every up port (4 parents, 2 cables each) gets its share, within one.
            assert_eq!(per_port.len(), 8, "{s:?}: {per_port:?}");
            let (lo, hi) = (per_port.values().min().unwrap(), per_port.values().max().unwrap());
            assert!(hi - lo <= 1, "{s:?}: {per_port:?}");
        }
    }

    #[test]
    fn random_selection_depends_on_the_seed_only() {
        let f = pgft(&[4, 4], &[1, 4], &[1, 2]).fabric;
        let a = route_set(&f, EngineKind::UpDownRandom { seed: 1 }, LidSet::Escape).1;
        let b = route_set(&f, EngineKind::UpDownRandom { seed: 1 }, LidSet::Escape).1;
        let c = route_set(&f, EngineKind::UpDownRandom { seed: 2 }, LidSet::Escape).1;
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn split_fabric_routes_each_component() {
        // Two disjoint 2-level trees in one fabric.
        let t = pgft(&[2, 2], &[1, 2], &[1, 1]);
        let mut f = t.fabric.clone();
        // Cut every link of the first spine and the second leaf's link to the second spine.
        let mut ev = Vec::new();
        for s in f.switch_ids() {
            for (pn, p) in f.switch(s).external_ports() {
                if let fabric_topology::Remote::Switch { sw, .. } = p.remote {
                    let (a, b) = (f.switch(s).guid, f.switch(sw).guid);
                    // leaf0-spine1 and leaf1-spine0 removed: {leaf0, spine0}, {leaf1, spine1}.
                    if (a, b) == (t.fabric.switch(SwitchId(0)).guid, t.fabric.switch(SwitchId(3)).guid)
                        || (a, b) == (t.fabric.switch(SwitchId(1)).guid, t.fabric.switch(SwitchId(2)).guid)
                    {
                        ev.push(fabric_topology::FabricEvent::LinkDown { switch: a, port: pn });
                    }
                }
            }
        }
        f = f.apply(&ev).unwrap();
        let lv = bfs_levels(&f);
        assert!(lv.iter().all(std::option::Option::is_some));
        let (lids, lfts) = route_set(&f, EngineKind::UpDown, LidSet::Escape);
        let v = check::validity_set(&f, &lids, &lfts, LidSet::Escape);
        assert_eq!(v.unreachable_count, 0);
        assert_eq!(v.components, 2);
        assert!(v.disconnected_pairs > 0);
    }
}
