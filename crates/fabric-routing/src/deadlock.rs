//! Deadlock freedom of a routing: the channel-dependency graph of each LID set is acyclic
//! (thesis Def. 11 and §1.3.2), and up*-down* conformance to a ranking. Re-exported by
//! [`crate::check`].

use rayon::prelude::*;

use fabric_ranking::Ranking;
use fabric_topology::{Fabric, Lid, SwitchId};

use crate::engine::LidSet;
use crate::hops::{Hops, DEAD, END};
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;

/// Destination LIDs of a set: end-port LIDs of every offset of the set (every layer offset for
/// the base set, whose layers share one VL unless VL-layered) + switch LIDs for the base set.
fn set_lids(fabric: &Fabric, lids: &LidPlan, set: LidSet) -> Vec<Lid> {
    let mut v: Vec<Lid> = fabric
        .end_port_ids()
        .map(|e| lids.base_lid(e))
        .filter(|&l| l != 0)
        .flat_map(|l| set.offsets(lids).map(move |o| l + o))
        .collect();
    if set == LidSet::Base {
        v.extend(fabric.switch_ids().map(|s| lids.switch_lid(s)).filter(|&l| l != 0));
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether the channel-dependency graph of `set` is acyclic (thesis Def. 11): channels are the
/// directed live switch-to-switch ports; `(s→t) → (t→u)` is a dependency when some destination
/// LID of the set is forwarded by `s` to `t` and by `t` to `u`. Every live switch counts as a
/// source (switches originate LID-routed traffic too), so every LFT entry of the set is used.
pub fn cdg_acyclic(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, set: LidSet) -> bool {
    if set == LidSet::Escape && lids.lmc == 0 {
        return true;
    }
    let cdg = unicast_cdg(fabric, lids, lfts, set);
    edges_acyclic(cdg.nchan, &cdg.edges)
}

/// A channel-dependency graph: dense ids of the directed live switch-to-switch channels and
/// the dependency edges between them. Shared by the unicast check and the multicast one
/// ([`crate::mcast::mcast_deadlock_free`]), which adds its own edges.
pub(crate) struct Cdg {
    /// Number of switches covered (`chan` has `ns * 256` entries).
    pub ns: usize,
    /// `chan[s * 256 + p]`: channel id of switch `s` port `p`, or `u32::MAX`.
    pub chan: Vec<u32>,
    /// Number of channels.
    pub nchan: usize,
    /// Dependencies `(from, to)` between channel ids (may repeat).
    pub edges: Vec<(u32, u32)>,
}

impl Cdg {
    /// Channel id of switch `s` port `p` (`None` when not a live switch-to-switch port).
    pub fn channel(&self, s: usize, p: u8) -> Option<u32> {
        if s >= self.ns {
            return None;
        }
        let c = self.chan[s * 256 + p as usize];
        (c != u32::MAX).then_some(c)
    }
}

/// The channel-dependency graph of the destination LIDs of `set` (see [`cdg_acyclic`]).
pub(crate) fn unicast_cdg(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, set: LidSet) -> Cdg {
    use std::sync::atomic::{AtomicU64, Ordering};
    let ns = fabric.num_switches().min(lfts.num_switches());
    let hops = Hops::new(fabric);
    let dl: Vec<Lid> = set_lids(fabric, lids, set)
        .into_iter()
        .filter(|&l| lfts.covers(l))
        .collect();
    // Per switch t: a bit matrix over (input port i, output port q), (nports+1)² bits.
    let width = |t: usize| fabric.switch(SwitchId(t as u32)).nports as usize + 1;
    let mut off = Vec::with_capacity(ns + 1);
    let mut total = 0usize;
    for t in 0..ns {
        off.push(total);
        total += (width(t) * width(t)).div_ceil(64);
    }
    off.push(total);
    let deps: Vec<AtomicU64> = (0..total).map(|_| AtomicU64::new(0)).collect();
    // in_port[s*256+p] = port of the remote switch where (s, p) arrives.
    let mut in_port = vec![0u8; ns * 256];
    for s in 0..ns {
        for pn in 1..=fabric.switch(SwitchId(s as u32)).nports {
            if let Some((_, rp)) = fabric.switch_link_live(SwitchId(s as u32), pn) {
                in_port[s * 256 + pn as usize] = rp;
            }
        }
    }
    // Per switch s: the (output port p, next output port q) pairs seen, deduplicated locally in
    // a 256 × 256 bit matrix, then published to t's matrix (one atomic OR per distinct pair).
    (0..ns).into_par_iter().for_each_init(
        || vec![0u64; 256 * 256 / 64],
        |seen, s| {
            let row = lfts.row(SwitchId(s as u32));
            let mut any = false;
            for &d in &dl {
                let p = row[d as usize];
                if p == NO_ROUTE || p == 0 {
                    continue;
                }
                let t = hops.get(s, p);
                if t & END != 0 || t as usize >= ns {
                    continue;
                }
                let q = lfts.get(SwitchId(t), d);
                if q == NO_ROUTE || q == 0 {
                    continue;
                }
                let bit = p as usize * 256 + q as usize;
                seen[bit / 64] |= 1 << (bit % 64);
                any = true;
            }
            if !any {
                return;
            }
            for (wi, word) in seen.iter_mut().enumerate() {
                let mut bits = std::mem::take(word);
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let bit = wi * 64 + b;
                    let (p, q) = (bit / 256, bit % 256);
                    let t = hops.get(s, p as u8) as usize;
                    let tq = hops.get(t, q as u8);
                    if tq & END != 0 || tq as usize >= ns {
                        continue;
                    }
                    let tb = in_port[s * 256 + p] as usize * width(t) + q;
                    deps[off[t] + tb / 64].fetch_or(1 << (tb % 64), Ordering::Relaxed);
                }
            }
        },
    );
    // Dense channel ids for live switch-to-switch ports; edges; Kahn's algorithm.
    let mut chan = vec![u32::MAX; ns * 256];
    let mut nchan = 0u32;
    for s in 0..ns {
        for pn in 1..=fabric.switch(SwitchId(s as u32)).nports {
            if hops.get(s, pn) & END == 0 && (hops.get(s, pn) as usize) < ns {
                chan[s * 256 + pn as usize] = nchan;
                nchan += 1;
            }
        }
    }
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for t in 0..ns {
        let wt = width(t);
        for (wi, word) in deps.iter().enumerate().take(off[t + 1]).skip(off[t]) {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let bit = (wi - off[t]) * 64 + b;
                let (i, q) = (bit / wt, bit % wt);
                // The channel into t through t's port i is (remote switch, remote port).
                let Some((s, sp)) = fabric.switch_link_live(SwitchId(t as u32), i as u8) else {
                    continue;
                };
                let (from, to) = (chan[s.idx() * 256 + sp as usize], chan[t * 256 + q]);
                if from != u32::MAX && to != u32::MAX {
                    edges.push((from, to));
                }
            }
        }
    }
    Cdg {
        ns,
        chan,
        nchan: nchan as usize,
        edges,
    }
}

/// Kahn's algorithm: whether the graph of `n` nodes and `edges` is acyclic.
pub(crate) fn edges_acyclic(n: usize, edges: &[(u32, u32)]) -> bool {
    let mut start = vec![0u32; n + 1];
    for &(a, _) in edges {
        start[a as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut adj = vec![0u32; edges.len()];
    let mut indeg = vec![0u32; n];
    for &(a, b) in edges {
        adj[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
        indeg[b as usize] += 1;
    }
    let mut queue: Vec<u32> = (0..n as u32).filter(|&c| indeg[c as usize] == 0).collect();
    let mut seen = 0;
    while let Some(c) = queue.pop() {
        seen += 1;
        for &x in &adj[start[c as usize] as usize..start[c as usize + 1] as usize] {
            indeg[x as usize] -= 1;
            if indeg[x as usize] == 0 {
                queue.push(x);
            }
        }
    }
    seen == n
}

/// Deadlock freedom: the CDG of the base LIDs and (LMC 1) that of the escape LIDs are each
/// acyclic. (`ranking` is accepted for the caller's convenience; the CDG criterion does not
/// need it — see [`updown_violations`] for the ranking-based check.)
pub fn deadlock_free(fabric: &Fabric, ranking: &Ranking, lids: &LidPlan, lfts: &Lfts) -> bool {
    let _ = ranking;
    cdg_acyclic(fabric, lids, lfts, LidSet::Base) && cdg_acyclic(fabric, lids, lfts, LidSet::Escape)
}

/// Number of (switch, destination LID) entries of `set` that break the up*-down* rule for the
/// ranking: the entry sends the packet sideways or up although a packet can arrive at that
/// switch going down or sideways (another switch forwards it there that way). Zero implies
/// every route is up*-down*, hence deadlock-free (thesis Property 1). Entries at unranked
/// switches or towards unranked switches count as violations.
pub fn updown_violations(fabric: &Fabric, ranking: &Ranking, lids: &LidPlan, lfts: &Lfts, set: LidSet) -> u64 {
    if set == LidSet::Escape && lids.lmc == 0 {
        return 0;
    }
    let ns = fabric.num_switches().min(lfts.num_switches());
    let hops = Hops::new(fabric);
    let level = |s: usize| ranking.level.get(s).copied().flatten();
    let dl = set_lids(fabric, lids, set);
    dl.par_iter()
        .map_init(
            || (vec![0u8; ns], vec![0u8; ns]),
            |(arrives_down, dir), &d| {
                if !lfts.covers(d) {
                    return 0;
                }
                // Direction of each switch's hop: 0 none/delivery, 1 up, 2 down, 3 sideways.
                arrives_down.iter_mut().for_each(|x| *x = 0);
                dir.iter_mut().for_each(|x| *x = 0);
                let mut bad = 0;
                for (s, ds) in dir.iter_mut().enumerate() {
                    let p = lfts.get(SwitchId(s as u32), d);
                    if p == NO_ROUTE || p == 0 {
                        continue;
                    }
                    let t = hops.get(s, p);
                    if t & END != 0 || t == DEAD || t as usize >= ns {
                        continue;
                    }
                    let t = t as usize;
                    match (level(s), level(t)) {
                        (Some(a), Some(b)) if b > a => *ds = 1,
                        (Some(a), Some(b)) if b < a => {
                            *ds = 2;
                            arrives_down[t] = 1;
                        }
                        _ => {
                            *ds = 3;
                            arrives_down[t] = 1;
                        }
                    }
                }
                for (&ds, &ad) in dir.iter().zip(arrives_down.iter()) {
                    if ds == 3 || (ad == 1 && ds == 1) {
                        bad += 1;
                    }
                }
                bad
            },
        )
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::EngineKind;
    use fabric_topology::EndPortId;

    #[test]
    fn a_down_up_turn_makes_a_cdg_cycle() {
        // 2-level, 2 leaves × 2 spines: force leaf1's traffic to leaf0 via spine0 and leaf0's
        // traffic to leaf1 via spine1, plus a down-up bounce: spine0 -> leaf1 -> spine1 -> leaf0 ...
        let t = pgft(&[1, 2], &[1, 2], &[1, 1]);
        let f = &t.fabric;
        let (_, lids, lfts) = routed(f, EngineKind::Dmodc, 0);
        assert!(cdg_acyclic(f, &lids, &lfts, LidSet::Base));
        assert!(cdg_acyclic(f, &lids, &lfts, LidSet::Escape));
        let mut l = lfts.clone();
        let (l0, l1, s0, s1) = (SwitchId(0), SwitchId(1), SwitchId(2), SwitchId(3));
        let port = |a: SwitchId, b: SwitchId| f.port_groups(a).iter().find(|g| g.remote == b).unwrap().ports[0];
        let (e0, e1) = (lids.base_lid(EndPortId(0)), lids.base_lid(EndPortId(1)));
        // To e0: l1 -> s0 -> l1?? Build the cycle (l0→s0) → (s0→l1) → (l1→s1) → (s1→l0) → (l0→s0).
        l.set(l0, e1, port(l0, s0));
        l.set(s0, e1, port(s0, l1)); // dependency (l0→s0)→(s0→l1) for e1 (delivered at l1)
        l.set(s0, e0, port(s0, l1)); // e0 bounced down to l1
        l.set(l1, e0, port(l1, s1)); // (s0→l1)→(l1→s1)
        l.set(s1, e0, port(s1, l0)); // (l1→s1)→(s1→l0)
        l.set(s1, e1, port(s1, l0)); // e1 bounced down to l0
        l.set(l0, e1, port(l0, s0)); // (s1→l0)→(l0→s0)
        assert!(!cdg_acyclic(f, &lids, &l, LidSet::Base));
    }
}
