//! mu-sssp's VL layering: LASH-like first fit of whole routes into layers (Skeie, Lysne,
//! Theiss, "Layered shortest path (LASH) routing in irregular system area networks", IPDPS
//! 2002; own code). Each (source switch, destination LID) route — with LMC 0 the path of
//! every end port of that switch, whose SL the SA hands out — goes entirely into the first
//! layer whose channel-dependency graph stays acyclic with all of the route's dependencies
//! added (the incremental topological order of [`crate::balanced`]'s CDG). A first fit of
//! one or two layers is kept as it is (it opens a second layer only for a route that closes a
//! cycle with layer 0: nothing needs fewer); otherwise it is compared with DFSSSP's cycle
//! breaking ([`crate::vl::layer_base_fewest`]) and the one with fewer layers is kept
//! (DFSSSP's on ties). Until 28 Nov 2026 the cycle breaking always ran first and won ties of
//! two layers too (same layer counts; other SLs).
//!
//! Routes are tried longest first (they constrain most), then in (LID, switch) order:
//! deterministic and sequential. Layers only gain edges, so each distinct path is fitted once
//! (equal paths share its layer; one-dependency paths found by their edge slot, longer ones by
//! hash; a destination LID forwarded to the same channels as the one before it copies its
//! routes without walking them), a dependency refused by a layer (it closed a cycle there)
//! is remembered and refuses later paths without a search, and the first fit stops once it
//! needs as many layers as DFSSSP's cycle breaking (which wins ties). The layers' CDGs start
//! from a depth-first order of all the routes' dependencies (most additions then need no
//! search; [`Shape::components`]), hold only the dependencies inside a strongly connected
//! component of that union (the others close no cycle in any layer: a route with none of them
//! goes into layer 0 without a search) and search both ways at once ([`Cdg::try_add`]); none
//! of this changes a layer
//! (28 Nov 2026: same tables and layering digests on the 12 files, and
//! `first_fit_equals_the_per_route_reference`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use fabric_topology::{Fabric, Lid, SwitchId};

use crate::balanced::cdg::{Cdg, Scratch, Shape};
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::sssp::Channels;
use crate::vl::{self, VlError, VlLayering, IB_MAX_DATA_VLS};

/// The layering mu-sssp's routes are installed with: the fewer layers of the first fit and
/// DFSSSP's cycle breaking, at most `max_layers`.
pub fn layering(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, max_layers: u8) -> Result<VlLayering, VlError> {
    if max_layers == 0 || max_layers > IB_MAX_DATA_VLS {
        return Err(VlError::BadMaximum {
            got: max_layers,
            max: IB_MAX_DATA_VLS,
        });
    }
    let best = match super::cache::lookup(fabric, lids, lfts) {
        Some(l) => l,
        None => fewest(fabric, lids, lfts)?,
    };
    if best.num_layers > max_layers {
        return Err(VlError::TooFewVls {
            available: max_layers,
            needed: best.num_layers,
        });
    }
    Ok(best)
}

/// The fewer layers of DFSSSP's cycle breaking and the first fit, at most [`IB_MAX_DATA_VLS`].
/// A first fit of at most two layers is kept without the cycle breaking: the first fit opens a
/// second layer only for a route whose dependencies close a cycle with layer 0's, so the
/// routes need two layers and nothing does better. Otherwise DFSSSP's wins ties (the first
/// fit is stopped as soon as it needs as many layers).
pub(super) fn fewest(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> Result<VlLayering, VlError> {
    let (l, dfsssp) = fewest_of(fabric, lids, lfts, IB_MAX_DATA_VLS);
    match (l, dfsssp) {
        (Some(l), _) => Ok(l),
        (None, Some(Err(e))) => Err(e),
        // (Not reached: without a layering within 15 layers DFSSSP's error is there.)
        (None, _) => vl::layer_base_fewest(fabric, lids, lfts, IB_MAX_DATA_VLS),
    }
}

/// [`layering`]'s result (without the cache) if it needs at most `max` layers, else `None`
/// (the first fit stops as soon as it needs more).
pub(super) fn fewest_within(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, max: u8) -> Option<VlLayering> {
    if max == 0 {
        return None;
    }
    fewest_of(fabric, lids, lfts, max).0
}

/// [`fewest_within`] when the first fit fits within `max` layers, else `None` without
/// DFSSSP's cycle breaking: the check of port order against the rip-up rounds' routing
/// (port order is kept only with fewer layers), where the cycle breaking fitting what the
/// first fit did not was never seen (measured 28 Nov 2026: on the cut DRAGONFLY files it cost a tenth of
/// the engine's time to say no).
pub(super) fn within_by_first_fit(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, max: u8) -> Option<VlLayering> {
    if max == 0 {
        return None;
    }
    match first_fit(fabric, lids, lfts, max) {
        Ok(l) if l.num_layers <= 2 && l.routes_per_layer.iter().any(|&n| n > 0) => Some(l),
        Err(VlError::TooFewVls { .. }) => None,
        _ => fewest_within(fabric, lids, lfts, max),
    }
}

/// [`within_by_first_fit`] with a maximum `max()` known only later: the first fit starts
/// within one layer and asks `max()` (once) when a route needs a second one, or at the end.
/// The same result as `within_by_first_fit(fabric, lids, lfts, max())` (a first fit goes on
/// from the route that needed the higher maximum exactly as a run with it: [`first_fit_with`]);
/// mu-sssp runs it alongside the layering that gives `max` (28 Nov 2026).
pub(super) fn within_by_first_fit_later(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    max: impl FnOnce() -> u8,
) -> Option<VlLayering> {
    let mut max = Some(max);
    let mut m = None;
    let mut get = || *m.get_or_insert_with(|| max.take().map_or(0, |f| f()));
    let ff = first_fit_with(fabric, lids, lfts, 1, |_| {
        let m = get();
        if m > IB_MAX_DATA_VLS {
            0
        } else {
            m
        }
    });
    let m = get();
    if m == 0 {
        return None;
    }
    if m > IB_MAX_DATA_VLS {
        // (Not reached from mu-sssp: its maximum is below a layering's.)
        return within_by_first_fit(fabric, lids, lfts, m);
    }
    match ff {
        Ok(l) if l.num_layers <= 2 && l.routes_per_layer.iter().any(|&n| n > 0) => (l.num_layers <= m).then_some(l),
        Err(VlError::TooFewVls { .. }) => None,
        _ => fewest_within(fabric, lids, lfts, m),
    }
}

/// The layering of [`fewest`] if it needs at most `max` (≥ 1) layers, and DFSSSP's result
/// when it was computed. The first fit runs once: within two layers (kept when it fits);
/// when it needs more, DFSSSP's cycle breaking runs, and unless it needs at most three
/// layers (it wins ties) the same first fit goes on from the route that needed the third
/// layer, within one layer fewer than DFSSSP's (until 28 Nov 2026 it started again
/// from the first route: the same result).
fn fewest_of(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    max: u8,
) -> (Option<VlLayering>, Option<Result<VlLayering, VlError>>) {
    let tried = max.min(2);
    let mut dfsssp: Option<Result<VlLayering, VlError>> = None;
    let ff = first_fit_with(fabric, lids, lfts, tried, |cap| {
        if cap != tried || max <= 1 {
            // More than `max` layers: DFSSSP's too when one is not enough (a cycle).
            return 0;
        }
        let a = dfsssp.insert(vl::layer_base_fewest(fabric, lids, lfts, IB_MAX_DATA_VLS));
        match a {
            Ok(a) if a.num_layers <= 3 => 0,
            Ok(a) => max.min(a.num_layers - 1),
            Err(_) => max,
        }
    });
    let ff = match ff {
        Ok(l) if dfsssp.is_none() && l.routes_per_layer.iter().all(|&n| n == 0) => {
            // No route: DFSSSP's layering (of no layer) is the answer.
            let a = vl::layer_base_fewest(fabric, lids, lfts, IB_MAX_DATA_VLS);
            let kept = a.as_ref().ok().filter(|a| a.num_layers <= max).cloned();
            return (kept, Some(a));
        }
        Ok(l) => Some(l),
        Err(VlError::TooFewVls { .. }) => None,
        Err(_) => {
            // A route loops or the tables are too small: DFSSSP's answer (its error).
            let a = dfsssp.get_or_insert_with(|| vl::layer_base_fewest(fabric, lids, lfts, IB_MAX_DATA_VLS));
            let kept = a.as_ref().ok().filter(|a| a.num_layers <= max).cloned();
            return (kept, dfsssp);
        }
    };
    let a = dfsssp.as_ref().and_then(|a| a.as_ref().ok());
    let kept = ff.or_else(|| a.cloned()).filter(|l| l.num_layers <= max);
    (kept, dfsssp)
}

/// First fit of every base-LID route of `lfts` into layers (see the module documentation).
pub fn first_fit(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, max_layers: u8) -> Result<VlLayering, VlError> {
    first_fit_with(fabric, lids, lfts, max_layers, |_| 0)
}

/// [`first_fit`] within `max_layers` that, when a route needs one layer more, asks
/// `raise(current maximum)` for a higher maximum and goes on from that route (the layers so
/// far are those a run with the higher maximum has at that point: the result is the one
/// [`first_fit`] with it gives, without fitting the routes before again); a maximum not
/// above the current one stops it with [`VlError::TooFewVls`].
pub(super) fn first_fit_with(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    mut max_layers: u8,
    mut raise: impl FnMut(u8) -> u8,
) -> Result<VlLayering, VlError> {
    if max_layers == 0 || max_layers > IB_MAX_DATA_VLS {
        return Err(VlError::BadMaximum {
            got: max_layers,
            max: IB_MAX_DATA_VLS,
        });
    }
    let ns = fabric.num_switches();
    let row_len = lfts.row_len();
    let dlids = vl::base_lids(fabric, lids);
    if lfts.num_switches() < ns || dlids.iter().any(|&l| l as usize >= row_len) {
        return Err(VlError::TablesTooSmall {
            have_switches: lfts.num_switches(),
            have_lids: row_len,
            switches: ns,
            lid: dlids.iter().copied().find(|&l| l as usize >= row_len).unwrap_or(0),
        });
    }
    let ch = Channels::new(fabric);
    let mut chan = vec![u32::MAX; ns * 256];
    for s in 0..ns {
        for c in ch.of_switch(s) {
            chan[s * 256 + ch.port[c as usize] as usize] = c;
        }
    }
    // Routes as channel lists. A destination LID whose column forwards to the same channels
    // as the last one walked (the other end ports of a switch, with most routings) has the
    // same paths: its routes
    // are copies of that column's, given their layers at the end.
    // (Sized up front: about one walked column per destination switch, one copied route per
    // other (switch, LID); no re-allocation on the fabrics.)
    let mut routes: Vec<(u32, Lid)> = Vec::with_capacity(ns * ns);
    let mut cstart: Vec<u32> = Vec::with_capacity(ns * ns + 1);
    cstart.push(0);
    let mut chans: Vec<u32> = Vec::with_capacity(3 * ns * ns);
    let mut copies: Vec<(u32, Lid, u32)> = Vec::with_capacity(ns * dlids.len());
    let mut col_route = vec![u32::MAX; ns];
    let mut walked: Option<Lid> = None;
    for &d in &dlids {
        // The channel each switch forwards `d` to (MAX: none; the walk stops there).
        // (Equal ports forward to equal channels: the channel lookup only when they differ.)
        let hop = |s: usize, p: u8| match p {
            0 | NO_ROUTE => u32::MAX,
            p => chan[s * 256 + p as usize],
        };
        let same = |s: usize, w: Lid| {
            let (a, b) = (lfts.get(SwitchId(s as u32), w), lfts.get(SwitchId(s as u32), d));
            a == b || hop(s, a) == hop(s, b)
        };
        if walked.is_some_and(|w| (0..ns).all(|s| same(s, w))) {
            for s in fabric.switch_ids().filter(|&s| fabric.switch(s).up) {
                if col_route[s.idx()] != u32::MAX {
                    copies.push((s.0, d, col_route[s.idx()]));
                }
            }
            continue;
        }
        walked = Some(d);
        col_route.fill(u32::MAX);
        for s in fabric.switch_ids().filter(|&s| fabric.switch(s).up) {
            let mut cur = s.idx();
            let first = chans.len();
            loop {
                let p = lfts.get(SwitchId(cur as u32), d);
                if p == 0 || p == NO_ROUTE {
                    break;
                }
                let c = chan[cur * 256 + p as usize];
                if c == u32::MAX {
                    break;
                }
                chans.push(c);
                if chans.len() - first > ns {
                    return Err(VlError::Loop { switch: s.0, lid: d });
                }
                cur = ch.remote[c as usize] as usize;
            }
            if chans.len() == first {
                continue;
            }
            col_route[s.idx()] = routes.len() as u32;
            routes.push((s.0, d));
            cstart.push(chans.len() as u32);
        }
    }
    let len = |r: usize| cstart[r + 1] - cstart[r];
    // Longest first, then by index (a stable counting sort by length).
    let max_len = (0..routes.len()).map(len).max().unwrap_or(0) as usize;
    let mut first_of = vec![0usize; max_len + 2];
    for r in 0..routes.len() {
        first_of[max_len - len(r) as usize + 1] += 1;
    }
    for i in 1..first_of.len() {
        first_of[i] += first_of[i - 1];
    }
    let mut order = vec![0usize; routes.len()];
    for r in 0..routes.len() {
        let b = &mut first_of[max_len - len(r) as usize];
        order[*b] = r;
        *b += 1;
    }
    let shape = Shape::new(&ch, ns);
    // The layers start from an order in which every dependency of the routes that closes no
    // cycle in their union points forward: the same layering as from any order, with far
    // fewer of the Pearce–Kelly searches (most additions are then forward edges).
    let mut present = vec![false; shape.num_slots()];
    for r in 0..routes.len() {
        for w in chans[cstart[r] as usize..cstart[r + 1] as usize].windows(2) {
            present[shape.slot(w[0], w[1])] = true;
        }
    }
    // Only the dependencies inside a strongly connected component of that union can be on a
    // cycle of a layer: the others go into every layer without a check (a path with none of
    // the former into layer 0) and are not added to the layers' graphs (the same layering,
    // with searches confined to one component; 28 Nov 2026).
    let (start, comp) = shape.components(&present);
    let new_layer = || Cdg::with_order(&shape, &start);
    let mut inner: Vec<(u32, u32)> = Vec::new();
    let mut cdgs: Vec<Cdg> = Vec::new();
    let mut sc = Scratch::default();
    let mut layer_of = vec![0u8; routes.len()];
    // Layers only gain edges, so a path refused by a layer stays refused and a path equal to
    // one already placed goes into the same layer: each distinct path is fitted once.
    // Paths of one dependency (most of them on diameter-2 graphs) by its edge slot (layer + 1,
    // 0: not placed yet), longer ones by hash.
    let mut placed_edge = vec![0u8; shape.num_slots()];
    // Bit `l` of a slot: its edge closes a cycle with layer `l`'s edges, so no path with it
    // fits there (layers only gain edges: a refusal stands).
    let mut refused = vec![0u16; shape.num_slots()];
    // (Sized for every path of two or more dependencies: no re-hashing.)
    let long = (0..routes.len()).filter(|&r| len(r) > 2).count();
    let mut placed: HashMap<&[u32], u8, BuildHasherDefault<PathHasher>> =
        HashMap::with_capacity_and_hasher(long, BuildHasherDefault::default());
    for &r in &order {
        let path = &chans[cstart[r] as usize..cstart[r + 1] as usize];
        if path.len() < 2 {
            if cdgs.is_empty() {
                cdgs.push(new_layer());
            }
            continue;
        }
        let edge = (path.len() == 2).then(|| shape.slot(path[0], path[1]));
        let known = match edge {
            Some(k) => placed_edge[k].checked_sub(1),
            None => placed.get(path).copied(),
        };
        if let Some(l) = known {
            layer_of[r] = l;
            continue;
        }
        inner.clear();
        inner.extend(
            path.windows(2)
                .filter(|w| comp[w[0] as usize] == comp[w[1] as usize])
                .map(|w| (w[0], w[1])),
        );
        let mut l = 0;
        loop {
            if l == cdgs.len() {
                cdgs.push(new_layer());
            }
            if inner.is_empty() {
                break;
            }
            if inner.iter().any(|&(x, y)| refused[shape.slot(x, y)] >> l & 1 != 0) {
                l += 1;
                continue;
            }
            let g = &mut cdgs[l];
            let mut added = 0;
            // Whether an edge added before the refused one is new to the layer: then the
            // refusal may be due to it, and is not remembered.
            let mut grew = false;
            for &(x, y) in &inner {
                let new = !g.has(&shape, x, y);
                if !g.try_add(&shape, &mut sc, x, y) {
                    if !grew {
                        refused[shape.slot(x, y)] |= 1 << l;
                    }
                    break;
                }
                grew |= new;
                added += 1;
            }
            if added == inner.len() {
                break;
            }
            for &(x, y) in inner.iter().take(added) {
                g.remove(&shape, x, y);
            }
            l += 1;
        }
        layer_of[r] = l as u8;
        match edge {
            Some(k) => placed_edge[k] = l as u8 + 1,
            None => {
                placed.insert(path, l as u8);
            }
        }
        if cdgs.len() > max_layers as usize {
            let higher = raise(max_layers).min(IB_MAX_DATA_VLS);
            if higher as usize >= cdgs.len() {
                max_layers = higher;
                continue;
            }
            return Err(VlError::TooFewVls {
                available: max_layers,
                needed: cdgs.len().min(255) as u8,
            });
        }
    }
    let used = cdgs.len().max(1);
    let mut flat = vec![0u8; ns * row_len];
    let mut per = vec![0u64; used];
    for (i, &(s, d)) in routes.iter().enumerate() {
        flat[s as usize * row_len + d as usize] = layer_of[i];
        per[layer_of[i] as usize] += 1;
    }
    for &(s, d, r) in &copies {
        let l = layer_of[r as usize];
        flat[s as usize * row_len + d as usize] = l;
        per[l as usize] += 1;
    }
    Ok(VlLayering {
        num_layers: used as u8,
        needed: used as u8,
        num_tables: 1,
        num_switches: ns,
        row_len,
        layer: flat,
        routes_per_layer: per,
    })
}

/// A multiplicative hash of channel paths (a few `u32`s; the keys are not adversarial).
#[derive(Default)]
struct PathHasher(u64);

impl Hasher for PathHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
