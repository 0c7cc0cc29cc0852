//! One spanning tree per MLID ([`route_multicast`]): roots balanced over the top switches,
//! every tree link going up from child to parent for the ranking (so every path of a tree is
//! up*-down*), parents spread by MLID, and the port masks of every tree switch.

use rayon::prelude::*;

use fabric_ranking::Ranking;
use fabric_topology::{EndPortId, Fabric, PortNum, SwitchId};

use super::mft::{is_mlid, set_port, Mfts, PortMask, MLID_BASE};
use super::{McastGroup, McastInputError, McastRouting, McastTree, McastTreeLink};
use crate::prep::{Oriented, NONE};

/// Per oriented switch (row position): the set of positions it reaches by down links only
/// (itself included), as a bit set of `words` words.
struct Below {
    words: usize,
    bits: Vec<u64>,
}

impl Below {
    fn new(o: &Oriented) -> Self {
        let words = o.len().div_ceil(64).max(1);
        let mut bits = vec![0u64; o.len() * words];
        // Level order: a switch's down-neighbours are in lower levels, already complete.
        for r in &o.level_ranges {
            let (lower, rest) = bits.split_at_mut(r.start * words);
            let lower: &[u64] = lower;
            rest[..r.len() * words]
                .par_chunks_mut(words)
                .enumerate()
                .for_each(|(i, row)| {
                    let p = r.start + i;
                    row[p / 64] |= 1 << (p % 64);
                    for nb in o.downs(p) {
                        let src = &lower[nb.pos as usize * words..(nb.pos as usize + 1) * words];
                        for (a, b) in row.iter_mut().zip(src) {
                            *a |= b;
                        }
                    }
                });
        }
        Below { words, bits }
    }
    #[inline]
    fn row(&self, p: usize) -> &[u64] {
        &self.bits[p * self.words..(p + 1) * self.words]
    }
    #[inline]
    fn has(&self, p: usize, q: usize) -> bool {
        self.bits[p * self.words + q / 64] & (1 << (q % 64)) != 0
    }
}

/// The live cables of every up-neighbour of every oriented switch, flat: for neighbour entry
/// `k` of [`Oriented::nbr`] (up entries only), `pairs[start[k]..start[k + 1]]` are its
/// (local port, remote port) pairs in port order. Read in the hot loop instead of the fabric's
/// per-switch port records.
struct UpLinks {
    start: Vec<u32>,
    pairs: Vec<(PortNum, PortNum)>,
}

impl UpLinks {
    fn new(fabric: &Fabric, o: &Oriented) -> Self {
        let mut start = Vec::with_capacity(o.nbr.len() + 1);
        let mut pairs = Vec::new();
        for p in 0..o.len() {
            let sw = o.order[p];
            for k in o.start[p] as usize..o.start[p + 1] as usize {
                start.push(pairs.len() as u32);
                if k < o.split[p] as usize {
                    for &lp in &fabric.port_groups(sw)[o.nbr[k].group as usize].ports {
                        if let Some((_, rp)) = fabric.switch_link_live(sw, lp) {
                            pairs.push((lp, rp));
                        }
                    }
                }
            }
        }
        start.push(pairs.len() as u32);
        UpLinks { start, pairs }
    }
    #[inline]
    fn of(&self, k: usize) -> &[(PortNum, PortNum)] {
        &self.pairs[self.start[k] as usize..self.start[k + 1] as usize]
    }
}

/// A validated group: its members split into reachable-by-some-tree and unreachable.
struct Prepared<'g> {
    group: &'g McastGroup,
    slot: usize,
    /// Live receivers on oriented leaves: (end port, leaf position, leaf port).
    receivers: Vec<(EndPortId, u32, PortNum)>,
    /// Live send-only members on oriented leaves: (end port, leaf position).
    senders: Vec<(EndPortId, u32)>,
    /// Distinct member leaf positions, ascending.
    leaves: Vec<u32>,
    /// Members that no tree can reach (dead, unattached or on an unranked leaf).
    unreachable: Vec<EndPortId>,
    /// Root candidates (positions), all at one level.
    candidates: Vec<u32>,
}

/// SplitMix64 finaliser: the deterministic spread of parent and port choices.
#[inline]
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Routes the multicast groups: one tree per MLID over the live links and switches (see the
/// module documentation of [`crate::mcast`]). Deterministic: the output depends on the input
/// only (not on the thread count nor on the order of `groups` apart from duplicates).
pub fn route_multicast(fabric: &Fabric, ranking: &Ranking, groups: &[McastGroup]) -> McastRouting {
    let ns = fabric.num_switches();
    let nep = fabric.num_end_ports();
    let mut rejected = Vec::new();
    // Validation; duplicates after the first occurrence (input order) are rejected.
    let mut order: Vec<usize> = Vec::with_capacity(groups.len());
    for (i, g) in groups.iter().enumerate() {
        if !is_mlid(g.mlid) {
            rejected.push(McastInputError::MlidOutOfRange { mlid: g.mlid });
        } else if let Some(&e) = g.receivers.iter().chain(&g.senders).find(|e| e.idx() >= nep) {
            rejected.push(McastInputError::UnknownEndPort {
                mlid: g.mlid,
                end_port: e,
                end_ports: nep,
            });
        } else {
            order.push(i);
        }
    }
    order.sort_by_key(|&i| (groups[i].mlid, i));
    order.dedup_by(|b, a| {
        let dup = groups[*a].mlid == groups[*b].mlid;
        if dup {
            rejected.push(McastInputError::DuplicateMlid { mlid: groups[*b].mlid });
        }
        dup
    });

    let level: Vec<Option<u32>> = (0..ns).map(|i| ranking.level.get(i).copied().flatten()).collect();
    let o = Oriented::new(fabric, &level);
    let below = Below::new(&o);
    let up_links = UpLinks::new(fabric, &o);
    // Per end port: its leaf's position and port, or NONE (down, not cabled, unranked leaf).
    let places: Vec<(u32, PortNum)> = fabric
        .end_port_ids()
        .map(|e| match fabric.end_port(e).attach {
            Some((leaf, port)) if fabric.end_port_live(e) => (o.pos[leaf.idx()], port),
            _ => (NONE, 0),
        })
        .collect();

    let mut prepared: Vec<Prepared<'_>> = order
        .par_iter()
        .map_init(
            || (vec![0u64; nep.div_ceil(64)], vec![0u64; o.len().div_ceil(64)]),
            |marks, &i| prepare(&places, &o, &below, &groups[i], marks),
        )
        .collect();

    // Roots: the least loaded candidate (ties from a rotation by slot), the most constrained
    // groups first (fewest candidates, then MLID order), so that the groups only a few
    // switches can root do not find those already loaded by the others.
    let mut load = vec![0u32; o.len()];
    let mut roots = vec![NONE; prepared.len()];
    let mut by_freedom: Vec<usize> = (0..prepared.len()).collect();
    by_freedom.sort_by_key(|&i| (prepared[i].candidates.len(), prepared[i].slot));
    for i in by_freedom {
        let p = &mut prepared[i];
        let c = std::mem::take(&mut p.candidates);
        if c.is_empty() {
            continue;
        }
        let start = p.slot % c.len();
        let mut best = c[start];
        for k in 1..c.len() {
            let x = c[(start + k) % c.len()];
            if load[x as usize] < load[best as usize] {
                best = x;
            }
        }
        load[best as usize] += 1;
        roots[i] = best;
    }

    let outs: Vec<(McastTree, Vec<(SwitchId, PortMask)>)> = prepared
        .par_iter()
        .zip(roots.par_iter())
        .map_init(
            || (vec![NONE; o.len()], vec![0u32; o.len()], vec![NONE; o.len()]),
            |scratch, (p, &root)| build(&o, &below, &up_links, p, root, scratch),
        )
        .collect();

    // Masks: the rows are written in parallel by blocks of switches (two blocks per worker:
    // each block binary-searches every tree's entries, sorted by switch, for its part). Each
    // (switch, slot) has one writer, so the bytes do not depend on the thread count.
    let slots = prepared.last().map_or(0, |p| p.slot + 1);
    let mut mfts = Mfts::new(ns, slots);
    if slots > 0 && ns > 0 {
        let per = ns.div_ceil(2 * rayon::current_num_threads());
        mfts.masks_mut()
            .par_chunks_mut(per * slots)
            .enumerate()
            .for_each(|(ci, rows)| {
                let (lo, hi) = (ci * per, (ci + 1) * per);
                for ((_, entries), p) in outs.iter().zip(&prepared) {
                    let a = entries.partition_point(|e| e.0.idx() < lo);
                    for &(sw, m) in entries[a..].iter().take_while(|e| e.0.idx() < hi) {
                        rows[(sw.idx() - lo) * slots + p.slot] = m;
                    }
                }
            });
    }
    let trees = outs.into_iter().map(|(t, _)| t).collect();
    McastRouting { mfts, trees, rejected }
}

/// Members, leaves and root candidates of one group.
fn prepare<'g>(
    places: &[(u32, PortNum)],
    o: &Oriented,
    below: &Below,
    g: &'g McastGroup,
    (ep_mark, leaf_mark): &mut (Vec<u64>, Vec<u64>),
) -> Prepared<'g> {
    let mut unreachable = Vec::new();
    let place = |e: EndPortId| -> Option<(u32, PortNum)> {
        let (p, port) = places[e.idx()];
        (p != NONE).then_some((p, port))
    };
    // Duplicates (and senders that are receivers too) are skipped with a bit per end port.
    let mut first = |e: EndPortId| -> bool {
        let (w, b) = (e.idx() / 64, 1u64 << (e.idx() % 64));
        let new = ep_mark[w] & b == 0;
        ep_mark[w] |= b;
        new
    };
    let mut receivers = Vec::with_capacity(g.receivers.len());
    let mut senders = Vec::with_capacity(g.senders.len());
    let mut nleaves = 0usize;
    let mut mark_leaf = |p: u32| {
        let (w, b) = (p as usize / 64, 1u64 << (p % 64));
        nleaves += usize::from(leaf_mark[w] & b == 0);
        leaf_mark[w] |= b;
    };
    for &e in &g.receivers {
        if first(e) {
            match place(e) {
                Some((p, port)) => {
                    receivers.push((e, p, port));
                    mark_leaf(p);
                }
                None => unreachable.push(e),
            }
        }
    }
    for &e in &g.senders {
        if first(e) {
            match place(e) {
                Some((p, _)) => {
                    senders.push((e, p));
                    mark_leaf(p);
                }
                None => unreachable.push(e),
            }
        }
    }
    for &e in g.receivers.iter().chain(&g.senders) {
        ep_mark[e.idx() / 64] = 0;
    }
    // Distinct member leaves, ascending (and the marks cleared).
    let mut leaves = Vec::with_capacity(nleaves);
    for (wi, word) in leaf_mark.iter_mut().enumerate() {
        let mut bits = std::mem::take(word);
        while bits != 0 {
            leaves.push((wi * 64) as u32 + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
    unreachable.sort_unstable();
    let candidates = candidates(o, below, &leaves);
    Prepared {
        group: g,
        slot: (g.mlid - MLID_BASE) as usize,
        receivers,
        senders,
        leaves,
        unreachable,
        candidates,
    }
}

/// Root candidates of a group with member leaves `leaves`: the leaf itself when there is one;
/// else the switches of the highest level that reach every member leaf downwards; else (no
/// switch reaches them all) those reaching the most, highest level first.
fn candidates(o: &Oriented, below: &Below, leaves: &[u32]) -> Vec<u32> {
    match leaves {
        [] => return Vec::new(),
        [l] => return vec![*l],
        _ => {}
    }
    // The member leaves as (word, bits), sparse.
    let mut set: Vec<(usize, u64)> = Vec::new();
    for &l in leaves {
        let w = l as usize / 64;
        match set.last_mut() {
            Some((lw, b)) if *lw == w => *b |= 1 << (l % 64),
            _ => set.push((w, 1 << (l % 64))),
        }
    }
    for r in o.level_ranges.iter().rev() {
        let c: Vec<u32> = r
            .clone()
            .filter(|&p| set.iter().all(|&(w, b)| below.row(p)[w] & b == b))
            .map(|p| p as u32)
            .collect();
        if !c.is_empty() {
            return c;
        }
    }
    let cover = |p: usize| -> u32 { set.iter().map(|&(w, b)| (below.row(p)[w] & b).count_ones()).sum() };
    let best = (0..o.len()).map(cover).max().unwrap_or(0);
    for r in o.level_ranges.iter().rev() {
        let c: Vec<u32> = r.clone().filter(|&p| cover(p) == best).map(|p| p as u32).collect();
        if !c.is_empty() {
            return c;
        }
    }
    Vec::new()
}

/// Builds the tree of one group rooted at position `root` and its port masks. `scratch` holds
/// per-position parent / receiver count / node index, all reset before returning.
fn build(
    o: &Oriented,
    below: &Below,
    up_links: &UpLinks,
    p: &Prepared<'_>,
    root: u32,
    scratch: &mut (Vec<u32>, Vec<u32>, Vec<u32>),
) -> (McastTree, Vec<(SwitchId, PortMask)>) {
    let mlid = p.group.mlid;
    let mut unreachable = p.unreachable.clone();
    if root == NONE {
        unreachable.extend(p.receivers.iter().map(|r| r.0));
        unreachable.extend(p.senders.iter().map(|s| s.0));
        unreachable.sort_unstable();
        let tree = McastTree {
            mlid,
            root: None,
            switches: Vec::new(),
            links: Vec::new(),
            unreachable,
        };
        return (tree, Vec::new());
    }
    let (parent, recv, node) = scratch;
    let r = root as usize;
    const ROOT: u32 = NONE - 1;
    parent[r] = ROOT;
    let mut nodes: Vec<u32> = vec![root];
    // (child pos, child port, parent pos, parent port)
    let mut links: Vec<(u32, PortNum, u32, PortNum)> = Vec::new();
    for &l in &p.leaves {
        if !below.has(r, l as usize) {
            continue;
        }
        let mut cur = l as usize;
        while parent[cur] == NONE {
            // Up-neighbours inside the root's down-closure: one exists since the root reaches
            // `cur` downwards and `cur` is not the root.
            let first = o.start[cur] as usize;
            let ups = o.ups(cur);
            let k = ups.iter().filter(|nb| below.has(r, nb.pos as usize)).count();
            if k == 0 {
                break;
            }
            let h = mix(((p.slot as u64) << 32) | cur as u64);
            let pick = (h % k as u64) as usize;
            let Some((i, nb)) = ups
                .iter()
                .enumerate()
                .filter(|(_, nb)| below.has(r, nb.pos as usize))
                .nth(pick)
            else {
                break;
            };
            let pairs = up_links.of(first + i);
            if pairs.is_empty() {
                break;
            }
            let (cport, pport) = pairs[((h >> 32) % pairs.len() as u64) as usize];
            parent[cur] = nb.pos;
            links.push((cur as u32, cport, nb.pos, pport));
            nodes.push(cur as u32);
            cur = nb.pos as usize;
        }
    }
    for (i, &n) in nodes.iter().enumerate() {
        node[n as usize] = i as u32;
    }
    let mut masks: Vec<PortMask> = vec![[0; 4]; nodes.len()];
    let mut total = 0u32;
    for &(_, leaf, port) in &p.receivers {
        let ni = node[leaf as usize];
        if ni != NONE {
            recv[leaf as usize] += 1;
            total += 1;
            set_port(&mut masks[ni as usize], port);
        }
    }
    unreachable.extend(p.receivers.iter().filter(|x| node[x.1 as usize] == NONE).map(|x| x.0));
    unreachable.extend(p.senders.iter().filter(|x| node[x.1 as usize] == NONE).map(|x| x.0));
    unreachable.sort_unstable();
    // Receivers in each subtree (by node index): every member leaf adds its own count to
    // itself and its ancestors.
    let mut sub = vec![0u32; nodes.len()];
    for &l in &p.leaves {
        let own = recv[l as usize];
        if own == 0 || node[l as usize] == NONE {
            continue;
        }
        let mut cur = l as usize;
        loop {
            sub[node[cur] as usize] += own;
            match parent[cur] {
                ROOT | NONE => break,
                up => cur = up as usize,
            }
        }
    }
    // nodes[i + 1] is the child of links[i].
    for (i, &(_, cport, par, pport)) in links.iter().enumerate() {
        let np = node[par as usize];
        if np == NONE {
            continue;
        }
        let rc = sub[i + 1];
        if rc > 0 {
            set_port(&mut masks[np as usize], pport);
        }
        if rc < total {
            set_port(&mut masks[i + 1], cport);
        }
    }
    for &n in &nodes {
        parent[n as usize] = NONE;
        recv[n as usize] = 0;
        node[n as usize] = NONE;
    }
    // By switch id: the root (no link), then each node with its link to its parent.
    let mut by_id: Vec<(SwitchId, PortMask, Option<McastTreeLink>)> = nodes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let link = i.checked_sub(1).map(|j| {
                let (c, cp, par, pp) = links[j];
                McastTreeLink {
                    child: o.order[c as usize],
                    child_port: cp,
                    parent: o.order[par as usize],
                    parent_port: pp,
                }
            });
            (o.order[n as usize], masks[i], link)
        })
        .collect();
    by_id.sort_unstable_by_key(|e| e.0);
    let tl: Vec<McastTreeLink> = by_id.iter().filter_map(|e| e.2).collect();
    let entries: Vec<(SwitchId, PortMask)> = by_id.iter().map(|e| (e.0, e.1)).collect();
    let tree = McastTree {
        mlid,
        root: Some(o.order[r]),
        switches: entries.iter().map(|e| e.0).collect(),
        links: tl,
        unreachable,
    };
    (tree, entries)
}
