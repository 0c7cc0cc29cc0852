//! The kernel of [`crate::check::destination_check`]: for a block of destination LIDs (one
//! 64-entry LFT block), which switches deliver to each destination, by memoised walks through
//! the tables from every switch with live sources.
//!
//! Compact data, so that a block's working set stays in the core's cache: the block's entries
//! of every switch are gathered for the block's destinations only (`K` bytes per switch, `K` ≤
//! 64, 32 with LMC 1), and the next hop of every (switch, port) is a `u16` switch id when the
//! fabric has fewer than 65 534 switches ([`NextHops`]; `u32` otherwise). Delivery to an end
//! port is recognised by its (leaf, port) instead of its id, so the table needs no end-port
//! ids: every other end port is a "wrong end port" terminal.

use fabric_topology::{Fabric, Lid, Remote, SwitchId};

use crate::lft::{Lfts, BLOCK_SIZE, NO_ROUTE};

/// A switch id type of [`NextHops`] (`u16` or `u32`).
pub(crate) trait Id: Copy + Send + Sync + Into<u32> {
    /// The largest value (used for "leads nowhere").
    const MAX: Self;
    /// `v` as this type (`v` fits).
    fn of(v: u32) -> Self;
}
impl Id for u16 {
    const MAX: Self = u16::MAX;
    fn of(v: u32) -> Self {
        v as u16
    }
}
impl Id for u32 {
    const MAX: Self = u32::MAX;
    fn of(v: u32) -> Self {
        v
    }
}

/// Next hop of every (switch, port), rows of `stride` entries: a switch id, [`NextHops::dead`]
/// (leads nowhere usable) or [`NextHops::end`] (a live end port).
pub(crate) struct NextHops<T> {
    next: Vec<T>,
    stride: usize,
}

impl<T: Id> NextHops<T> {
    /// "Leads nowhere usable".
    pub fn dead() -> u32 {
        T::MAX.into()
    }
    /// "A live end port".
    pub fn end() -> u32 {
        T::MAX.into() - 1
    }
    /// The table of `fabric` (switch ids must be below [`Self::end`]).
    pub fn new(fabric: &Fabric) -> Self {
        let stride = fabric
            .switch_ids()
            .map(|s| fabric.switch(s).nports as usize + 1)
            .max()
            .unwrap_or(1);
        let mut next = vec![T::MAX; fabric.num_switches() * stride];
        for s in fabric.switch_ids() {
            for (pn, p) in fabric.switch(s).external_ports() {
                let v = match p.remote {
                    Remote::EndPort(ep) if fabric.end_port_live(ep) => Self::end(),
                    Remote::Switch { .. } => fabric.switch_link_live(s, pn).map_or(Self::dead(), |(t, _)| t.0),
                    _ => Self::dead(),
                };
                next[s.idx() * stride + pn as usize] = T::of(v);
            }
        }
        NextHops { next, stride }
    }
    #[inline]
    fn get(&self, s: usize, port: u8) -> u32 {
        let port = port as usize;
        if port >= self.stride {
            return Self::dead();
        }
        self.next[s * self.stride + port].into()
    }
}

/// A destination of a block as the walks see it.
#[derive(Copy, Clone)]
pub(crate) struct Dest {
    /// Its LID.
    pub lid: Lid,
    /// Component of the destination.
    pub comp: u32,
    /// Switch target: its id; end-port target: `u32::MAX`.
    pub switch: u32,
    /// End-port target: (leaf, leaf port) that delivers to it; switch target: `(u32::MAX, 0)`.
    pub leaf: (u32, u8),
}

/// Per-task buffers (reused across blocks).
#[derive(Default)]
pub(crate) struct Scratch {
    /// The block's entries of every switch for its destinations, `gathered[s * k + i]`.
    gathered: Vec<u8>,
    /// Per switch: `stamp << 3 | verdict` (stale stamps mean unknown).
    state: Vec<u32>,
    stamp: u32,
    stack: Vec<usize>,
}

/// What the walks of one destination found.
#[derive(Copy, Clone, Default, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Live source end ports (in the destination's component) that do not arrive.
    pub unreachable: u64,
    /// Of those, the ones whose walk ends in a loop.
    pub loops: u64,
}

/// Walks every destination of `block` (sorted LIDs, all in one LFT block), pushing one
/// [`Outcome`] per destination into `out`. `per_switch[s]` live end ports are attached to
/// switch `s`; `sources` lists the switches with any; `comp` is every switch's component.
#[allow(clippy::too_many_arguments)]
pub(crate) fn walk_block<T: Id>(
    lfts: &Lfts,
    next: &NextHops<T>,
    comp: &[u32],
    per_switch: &[u64],
    sources: &[usize],
    block: &[Dest],
    scr: &mut Scratch,
    out: &mut Vec<Outcome>,
) {
    let ns = per_switch.len();
    let k = block.len();
    let b0 = block[0].lid as usize / BLOCK_SIZE;
    scr.state.resize(ns, 0);
    scr.gathered.clear();
    scr.gathered.resize(ns * k, NO_ROUTE);
    if k == BLOCK_SIZE {
        for s in 0..ns {
            scr.gathered[s * k..(s + 1) * k].copy_from_slice(lfts.block(SwitchId(s as u32), b0));
        }
    } else {
        let js: Vec<usize> = block.iter().map(|d| d.lid as usize % BLOCK_SIZE).collect();
        for s in 0..ns {
            let e = lfts.block(SwitchId(s as u32), b0);
            for (g, &j) in scr.gathered[s * k..(s + 1) * k].iter_mut().zip(&js) {
                *g = e[j];
            }
        }
    }
    let (dead, end) = (NextHops::<T>::dead(), NextHops::<T>::end());
    for (i, d) in block.iter().enumerate() {
        let mut o = Outcome::default();
        let own = d.leaf.0 as usize;
        // A new stamp per destination forgets every verdict of the previous one (the counter
        // wraps after 2^29 destinations: clear then).
        scr.stamp = (scr.stamp + 1) & (u32::MAX >> 3);
        if scr.stamp == 0 {
            scr.state.iter_mut().for_each(|x| *x = 0);
            scr.stamp = 1;
        }
        let stamp = scr.stamp << 3;
        // Verdict: 1 delivers, 2 fails, 3 on the current walk, 4 fails by loop.
        for &s0 in sources {
            if comp[s0] != d.comp {
                continue;
            }
            let mut s = s0;
            let verdict = loop {
                let st = scr.state[s];
                if st & !7 == stamp {
                    match st & 7 {
                        3 => break 4,
                        v => break v,
                    }
                }
                scr.state[s] = stamp | 3;
                scr.stack.push(s);
                let port = scr.gathered[s * k + i];
                if port == 0 {
                    // Delivered to this switch: right only for a switch destination.
                    break if s as u32 == d.switch { 1 } else { 2 };
                }
                if s == own && port == d.leaf.1 {
                    break 1;
                }
                if port == NO_ROUTE {
                    break 2;
                }
                let n = next.get(s, port);
                if n == dead || n == end {
                    break 2;
                }
                s = n as usize;
            };
            for &x in &scr.stack {
                scr.state[x] = stamp | verdict;
            }
            scr.stack.clear();
            // Sources on s0 that do not arrive (the destination itself is not a source of its
            // own LID).
            if verdict != 1 {
                let n = per_switch[s0] - u64::from(s0 == own);
                o.unreachable += n;
                if verdict == 4 {
                    o.loops += n;
                }
            }
        }
        out.push(o);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::{Rng, SeedableRng};

    use crate::check::{
        destination_check, destination_check_both, destination_check_ids, trace, DestinationCheck, TraceEnd, TraceError,
    };
    use crate::hops::components;
    use crate::testutil::*;
    use crate::{EngineKind, LidSet, NO_ROUTE};
    use fabric_topology::{EndPortId, Fabric, SwitchId};

    /// Every ordered pair walked with [`trace`]: (per destination LID: unreachable sources and
    /// loops; unreachable (end port, switch) pairs), connected pairs only.
    fn brute(f: &Fabric, lids: &crate::LidPlan, lfts: &crate::Lfts, set: LidSet) -> (BTreeMap<u32, (u64, u64)>, u64) {
        let comp = components(f);
        let at = |e: EndPortId| f.end_port(e).attach.unwrap().0.idx();
        let live: Vec<EndPortId> = f.end_port_ids().filter(|&e| f.end_port_live(e)).collect();
        let mut hops = Vec::new();
        let mut per_dest = BTreeMap::new();
        for &dst in &live {
            let lid = lids.base_lid(dst) + set.offset(lids);
            for &src in live.iter().filter(|&&s| s != dst && comp[at(s)] == comp[at(dst)]) {
                match trace(f, lfts, src, lid, &mut hops) {
                    Ok(TraceEnd::EndPort(x)) if x == dst => {}
                    r => {
                        let e = per_dest.entry(lid).or_insert((0u64, 0u64));
                        e.0 += 1;
                        e.1 += u64::from(matches!(r, Err(TraceError::Loop { .. })));
                    }
                }
            }
        }
        let mut sw_bad = 0;
        if set == LidSet::Base {
            for t in f.switch_ids().filter(|&t| f.switch(t).up) {
                for &src in live.iter().filter(|&&s| comp[at(s)] == comp[t.idx()]) {
                    if trace(f, lfts, src, lids.switch_lid(t), &mut hops) != Ok(TraceEnd::Switch(t)) {
                        sw_bad += 1;
                    }
                }
            }
        }
        (per_dest, sw_bad)
    }

    fn summary(d: &DestinationCheck) -> (BTreeMap<u32, u64>, u64, u64, u64) {
        (
            d.failing.iter().map(|x| (x.lid, x.unreachable_sources)).collect(),
            d.unreachable_pairs,
            d.loop_pairs,
            d.switch_unreachable_pairs,
        )
    }

    /// On degraded PGFTs whose tables are then damaged at random (wrong ports, holes, ports
    /// back down — loops), the walks with `u16` and `u32` next hops agree with each other and
    /// with a [`trace`] of every pair, for both LID sets.
    #[test]
    fn compact_and_wide_walks_agree_with_pair_traces_on_damaged_tables() {
        let t = pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]);
        let (mut invalid, mut looped) = (0, 0);
        for seed in 0..8u64 {
            let f = if seed == 0 {
                t.fabric.clone()
            } else {
                degrade(&t.fabric, 2 + seed as usize * 3, (seed % 2) as usize, seed)
            };
            let (_, lids, mut lfts) = routed(&f, EngineKind::Dmodc, 1);
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let damage = if seed == 0 { 0 } else { 40 * seed as usize };
            for _ in 0..damage {
                let s = SwitchId(rng.gen_range(0..f.num_switches() as u32));
                let lid = rng.gen_range(1..=lids.top());
                let port = match rng.gen_range(0..4) {
                    0 => NO_ROUTE,
                    1 => 0,
                    _ => rng.gen_range(1..=f.switch(s).nports),
                };
                lfts.set(s, lid, port);
            }
            // Both sets in one pass give what each set alone gives.
            let both = destination_check_both(&f, &lids, &lfts);
            assert_eq!(
                both,
                (
                    destination_check(&f, &lids, &lfts, LidSet::Base),
                    destination_check(&f, &lids, &lfts, LidSet::Escape)
                ),
                "seed {seed}"
            );
            for set in [LidSet::Base, LidSet::Escape] {
                let narrow = destination_check(&f, &lids, &lfts, set);
                let wide = destination_check_ids(&f, &lids, &lfts, set, true);
                assert_eq!(narrow, wide, "seed {seed} {set:?}");
                let (per_dest, sw_bad) = brute(&f, &lids, &lfts, set);
                let (failing, bad, loops, sw) = summary(&narrow);
                assert_eq!(
                    failing,
                    per_dest.iter().map(|(&l, &(n, _))| (l, n)).collect(),
                    "seed {seed} {set:?}"
                );
                assert_eq!(bad, per_dest.values().map(|x| x.0).sum::<u64>());
                assert_eq!(
                    loops,
                    per_dest.values().map(|x| x.1).sum::<u64>(),
                    "seed {seed} {set:?}"
                );
                assert_eq!(sw, sw_bad, "seed {seed} {set:?}");
                if seed == 0 {
                    assert!(narrow.valid(), "an undamaged routing is valid: {narrow:?}");
                }
                invalid += usize::from(!narrow.valid());
                looped += usize::from(narrow.loop_pairs > 0);
            }
        }
        assert!(
            invalid >= 4 && looped >= 1,
            "the damage shows: {invalid} invalid, {looped} with loops"
        );
    }
}
