//! The static part of load-aware Dmodc: up-link components and the nominal (complete-fabric)
//! choice of every switch, the closer sets in nominal-rank space, and which (switch, leaf)
//! pairs are intact.
//!
//! **Components.** The up-links between the switches of a fat-tree split into components of
//! the bipartite graph "lower end – upper end" (a switch counts once as a lower end and once as
//! an upper end). On a PGFT (thesis Def. 26) the component of a level-`l` switch is the
//! complete bipartite block of the switches that differ from it only in the digit `a_{l+1}`
//! and the `w_{l+1}` switches above them, so the rank of an upper switch by GUID within its
//! component is the index Dmodc gives it on a complete fabric (eq. 4.5 orders `C` by remote
//! GUID), and `M_K` (the component's number of upper switches) is Dmodc's `#C`.
//!
//! **Nominal choice** (eqs. 4.7–4.8 on the complete fabric): a switch `s` of component `K`
//! sends destination `d` upwards to the upper switch of rank `⌊d/Π_K⌋ mod M_K`, port
//! `⌊d/(Π_K·M_K)⌋ mod #g` of that group, with `Π_K` the largest nominal divider of the lower
//! ends of `K` (Alg. 5 with `#up` replaced by `M`). These depend only on `d` and the component,
//! so every switch of a component agrees on them even when some of its own links are dead: on
//! a complete PGFT they are Dmodc's choices, on a degraded one they are what the complete
//! fabric would do.

use rayon::prelude::*;

use fabric_topology::Fabric;

use crate::fill::{closer_masks, Prepared};
use crate::prep::{INF, NONE};

/// The nominal structure of one oriented fabric (see the module doc).
pub(super) struct Plan {
    /// Per position: the component where the switch is a lower end ([`NONE`] without up-links).
    pub klow: Vec<u32>,
    /// Per position: the component where the switch is an upper end ([`NONE`] without down-links).
    pub kup: Vec<u32>,
    /// Per component: upper ends by GUID, `members[kstart[k]..kstart[k + 1]]` (positions).
    pub kstart: Vec<u32>,
    pub members: Vec<u32>,
    /// Per component: `Π_K`.
    pub kpi: Vec<u64>,
    /// Per position: the switch's rank among the upper ends of `kup`.
    pub rank: Vec<u32>,
    /// Per position with up-links: for every rank of `klow`, the index in `ups(p)` of the
    /// neighbour of that rank ([`u8::MAX`]: no live link to it). Row `p` starts at `rstart[p]`.
    pub rstart: Vec<u32>,
    pub up_of_rank: Vec<u8>,
    /// Per position: row in `umask` ([`NONE`] without up-links).
    pub urow: Vec<u32>,
    /// `umask[urow[p] * nl + leaf]`: bit `r` set when the upper switch of rank `r` is a live
    /// neighbour of `p` with a smaller cost to the leaf (0 when `p` has a downward path to it).
    pub umask: Vec<u64>,
    /// Per position, `words` words: bit `leaf` set when every route from `p` to the leaf is
    /// nominal (downward path, or every nominal upper switch linked, closer and itself intact).
    pub full: Vec<u64>,
    pub words: usize,
    /// Per position: the end ports whose nominal routes may cross the switch (own end ports
    /// plus those of every down-neighbour), a flow estimate in sources.
    pub flow: Vec<u64>,
    /// Per position: its own live end ports.
    pub own: Vec<u64>,
    pub nl: usize,
    /// Per component: its depth (0 for the components above the leaves, then +1 per level).
    pub kdepth: Vec<u8>,
    /// Per destination NID, `depth` target ranks: the rank to take in a component of each
    /// depth (see [`Plan::targets`]).
    pub tgt: Vec<u8>,
    pub depth: usize,
    /// Whether every switch with a route to a leaf routes it nominally and the nominal
    /// dividers and ranks are Dmodc's: Dmodc's kernel then writes the same bytes.
    pub intact: bool,
}

/// Why a fabric cannot be planned (the engine then routes it with Dmodc).
#[derive(Debug)]
pub(super) struct TooWide;

fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        let p = parent[x as usize];
        parent[x as usize] = parent[p as usize];
        x = p;
    }
    x
}

impl Plan {
    pub fn new(fabric: &Fabric, p: &Prepared) -> Result<Plan, TooWide> {
        let o = &p.o;
        let np = o.len();
        let nl = o.num_leaves();
        // Components: node `q` = lower end of position q, `np + q` = upper end.
        let mut parent: Vec<u32> = (0..2 * np as u32).collect();
        for q in 0..np {
            for nb in o.ups(q) {
                let (a, b) = (find(&mut parent, q as u32), find(&mut parent, np as u32 + nb.pos));
                if a != b {
                    parent[a.max(b) as usize] = a.min(b);
                }
            }
        }
        let mut comp_of_root = vec![NONE; 2 * np];
        let mut ncomp = 0u32;
        let mut klow = vec![NONE; np];
        let mut kup = vec![NONE; np];
        for q in 0..np {
            for (side, has) in [(0, !o.ups(q).is_empty()), (1, !o.downs(q).is_empty())] {
                if !has {
                    continue;
                }
                let root = find(&mut parent, (side * np + q) as u32) as usize;
                if comp_of_root[root] == NONE {
                    comp_of_root[root] = ncomp;
                    ncomp += 1;
                }
                if side == 0 {
                    klow[q] = comp_of_root[root];
                } else {
                    kup[q] = comp_of_root[root];
                }
            }
        }
        let nc = ncomp as usize;
        let guid = |q: u32| fabric.switch(o.order[q as usize]).guid;
        let mut uppers: Vec<Vec<u32>> = vec![Vec::new(); nc];
        for q in 0..np {
            if kup[q] != NONE {
                uppers[kup[q] as usize].push(q as u32);
            }
        }
        let mut kstart = Vec::with_capacity(nc + 1);
        let mut members = Vec::with_capacity(np);
        let mut rank = vec![NONE; np];
        for u in &mut uppers {
            u.sort_by_key(|&q| guid(q));
            if u.len() > 64 {
                return Err(TooWide);
            }
            kstart.push(members.len() as u32);
            for (r, &q) in u.iter().enumerate() {
                rank[q as usize] = r as u32;
            }
            members.extend_from_slice(u);
        }
        kstart.push(members.len() as u32);
        let m_of = |k: u32| u64::from(kstart[k as usize + 1] - kstart[k as usize]);
        // Nominal dividers: Π(q) = max(1, max over down-neighbours c of Π(c)·M(klow(c))), then
        // Π_K = max over the lower ends of K.
        let mut pi = vec![1u64; np];
        for q in 0..np {
            let mut m = 1u64;
            for nb in o.downs(q) {
                let c = nb.pos as usize;
                m = m.max(pi[c].saturating_mul(m_of(klow[c])));
            }
            pi[q] = m;
        }
        let mut kpi = vec![1u64; nc];
        for q in 0..np {
            if klow[q] != NONE {
                let k = klow[q] as usize;
                kpi[k] = kpi[k].max(pi[q]);
            }
        }
        // Rank → up index, and the masks.
        let mut rstart = vec![0u32; np + 1];
        let mut up_of_rank = Vec::new();
        let mut urow = vec![NONE; np];
        let mut nrows = 0u32;
        for q in 0..np {
            rstart[q] = up_of_rank.len() as u32;
            if klow[q] == NONE {
                continue;
            }
            if o.ups(q).len() > 64 || o.downs(q).len() > 64 {
                return Err(TooWide);
            }
            urow[q] = nrows;
            nrows += 1;
            let k = klow[q];
            let base = up_of_rank.len();
            up_of_rank.resize(base + m_of(k) as usize, u8::MAX);
            for (j, nb) in o.ups(q).iter().enumerate() {
                up_of_rank[base + rank[nb.pos as usize] as usize] = j as u8;
            }
        }
        rstart[np] = up_of_rank.len() as u32;
        let c = &p.costs;
        let mut umask = vec![0u64; nrows as usize * nl];
        if nl > 0 {
            let rows: Vec<usize> = (0..np).filter(|&q| urow[q] != NONE).collect();
            umask.par_chunks_mut(nl).zip(rows.par_iter()).for_each_init(
                || (Vec::new(), Vec::new()),
                |(mask, tmp), (out, &q)| {
                    let ups = o.ups(q);
                    closer_masks(
                        mask,
                        tmp,
                        ups.iter().map(|nb| c.full_row(nb.pos as usize)),
                        c.full_row(q),
                    );
                    let down = c.down_row(q);
                    let identity = ups.iter().enumerate().all(|(j, nb)| rank[nb.pos as usize] == j as u32);
                    for (li, (o_, &m)) in out.iter_mut().zip(mask.iter()).enumerate() {
                        if down[li] != INF {
                            continue;
                        }
                        *o_ = if identity {
                            m
                        } else {
                            let mut bits = m;
                            let mut r = 0u64;
                            while bits != 0 {
                                let j = bits.trailing_zeros() as usize;
                                r |= 1 << rank[ups[j].pos as usize];
                                bits &= bits - 1;
                            }
                            r
                        };
                    }
                },
            );
        }
        // Intact bits, top-down.
        let words = nl.div_ceil(64).max(1);
        let mut full = vec![0u64; np * words];
        for r in o.level_ranges.iter().rev() {
            let (head, upper) = full.split_at_mut(r.end * words);
            let upper: &[u64] = upper;
            head[r.start * words..]
                .par_chunks_mut(words)
                .enumerate()
                .for_each_init(Vec::new, |and, (i, row)| {
                    let q = r.start + i;
                    let down = c.down_row(q);
                    for (li, &v) in down.iter().enumerate() {
                        if v != INF {
                            row[li / 64] |= 1 << (li % 64);
                        }
                    }
                    if urow[q] == NONE {
                        return;
                    }
                    let k = klow[q];
                    let mk = m_of(k);
                    let all = if mk == 64 { u64::MAX } else { (1u64 << mk) - 1 };
                    let um = &umask[urow[q] as usize * nl..(urow[q] as usize + 1) * nl];
                    // AND of the members' intact rows (only needed when all of them are
                    // neighbours, hence at higher levels).
                    if (0..mk as usize).any(|rr| up_of_rank[rstart[q] as usize + rr] == u8::MAX) {
                        return;
                    }
                    and.clear();
                    and.resize(words, u64::MAX);
                    for &mpos in &members[kstart[k as usize] as usize..kstart[k as usize + 1] as usize] {
                        let off = (mpos as usize - r.end) * words;
                        for (a, b) in and.iter_mut().zip(&upper[off..off + words]) {
                            *a &= b;
                        }
                    }
                    for (li, &m) in um.iter().enumerate() {
                        if m == all && and[li / 64] & (1 << (li % 64)) != 0 {
                            row[li / 64] |= 1 << (li % 64);
                        }
                    }
                });
        }
        // Flows.
        let own: Vec<u64> = (0..np)
            .map(|q| fabric.attached_end_ports(o.order[q]).len() as u64)
            .collect();
        let mut flow = own.clone();
        for q in 0..np {
            for nb in o.downs(q) {
                flow[q] = flow[q].saturating_add(flow[nb.pos as usize]);
            }
        }
        // Intact fabric: every (switch, leaf) with a route is nominal, and the nominal
        // dividers/ranks are Dmodc's.
        let mut intact = (0..np).all(|q| {
            let row = c.full_row(q);
            let f = &full[q * words..(q + 1) * words];
            row.iter()
                .enumerate()
                .all(|(li, &v)| v == INF || f[li / 64] & (1 << (li % 64)) != 0)
        });
        if intact {
            intact = (0..np).all(|q| {
                klow[q] == NONE || (kpi[klow[q] as usize] == p.div[q] && o.ups(q).len() as u64 == m_of(klow[q]))
            });
        }
        // Component depths, breadth-first from the leaves.
        let mut kdepth = vec![u8::MAX; nc];
        let mut frontier: Vec<u32> = o
            .leaves
            .iter()
            .map(|&q| klow[q as usize])
            .filter(|&k| k != NONE)
            .collect();
        let mut dpt = 0u8;
        while !frontier.is_empty() && dpt < u8::MAX {
            let mut next = Vec::new();
            for k in frontier {
                if kdepth[k as usize] != u8::MAX {
                    continue;
                }
                kdepth[k as usize] = dpt;
                for &u in &members[kstart[k as usize] as usize..kstart[k as usize + 1] as usize] {
                    let k2 = klow[u as usize];
                    if k2 != NONE && kdepth[k2 as usize] == u8::MAX {
                        next.push(k2);
                    }
                }
            }
            frontier = next;
            dpt += 1;
        }
        let depth = kdepth
            .iter()
            .filter(|&&d| d != u8::MAX)
            .map(|&d| d as usize + 1)
            .max()
            .unwrap_or(0);
        let mut plan = Plan {
            klow,
            kup,
            kstart,
            members,
            kpi,
            rank,
            rstart,
            up_of_rank,
            urow,
            umask,
            full,
            words,
            flow,
            own,
            nl,
            kdepth,
            tgt: Vec::new(),
            depth,
            intact,
        };
        plan.members.shrink_to_fit();
        plan.targets(fabric, p);
        Ok(plan)
    }

    /// The target ranks of every destination, from its own side (top-down balance of the
    /// down-links): from the destination's leaf `μ` upwards, at each component the nominal
    /// rank when that upper switch has a downward path to `μ`, else the rank with a downward
    /// path that the fewest destinations of `μ` (resp. of the switch below) use so far (ties:
    /// the nearest rank after the nominal one). Every source then aims at the same upper
    /// switches for `d`, whose down-links to `μ` exist and share the displaced destinations
    /// evenly. On a complete fabric the targets are the nominal ranks.
    fn targets(&mut self, fabric: &Fabric, p: &Prepared) {
        let o = &p.o;
        let depth = self.depth;
        let n = p.tn.of_end_port.iter().filter(|&&t| t != NONE).count();
        let mut tgt = vec![u8::MAX; n * depth];
        let mut count = vec![0u32; self.up_of_rank.len()];
        let mut order: Vec<u32> = (0..self.nl as u32).collect();
        order.sort_by_key(|&li| p.tn.leaf_start[li as usize]);
        // Pass 0 counts the nominal uses (every served nominal rank along the nominal chain),
        // pass 1 places the others.
        for pass in 0..2 {
            for &li in &order {
                let leaf = o.leaves[li as usize] as usize;
                let t0 = p.tn.leaf_start[li as usize];
                let k_ports = fabric.attached_end_ports(o.order[leaf]).len() as u32;
                for d in t0..t0 + k_ports {
                    let mut on_nominal = true;
                    let row = &mut tgt[d as usize * depth..(d as usize + 1) * depth];
                    let mut x = leaf;
                    let mut step = 0usize;
                    while step < depth {
                        let k = self.klow[x];
                        if k == NONE {
                            break;
                        }
                        let kd = self.kdepth[k as usize] as usize;
                        let m = self.m(k);
                        let q = u64::from(d) / self.kpi[k as usize];
                        let nom = (q % u64::from(m)) as u32;
                        if kd >= depth {
                            break;
                        }
                        let serves = |r: u32| {
                            let u = self.member(k, r) as usize;
                            p.costs.down_row(u)[li as usize] != INF
                        };
                        if pass == 0 && !serves(nom) {
                            break;
                        }
                        let t = if serves(nom) {
                            nom
                        } else {
                            on_nominal = false;
                            let base = self.rstart[x] as usize;
                            (0..m)
                                .map(|i| (nom + i) % m)
                                .filter(|&r| serves(r))
                                .min_by_key(|&r| (count[base + r as usize], (r + m - nom) % m))
                                .unwrap_or(nom)
                        };
                        if pass == 0 || !on_nominal {
                            count[self.rstart[x] as usize + t as usize] += 1;
                        }
                        row[kd] = t as u8;
                        x = self.member(k, t) as usize;
                        step = kd + 1;
                    }
                }
            }
        }
        self.tgt = tgt;
    }

    /// `M_K`.
    #[inline]
    pub fn m(&self, k: u32) -> u32 {
        self.kstart[k as usize + 1] - self.kstart[k as usize]
    }

    /// The upper end of rank `r` in component `k`.
    #[inline]
    pub fn member(&self, k: u32, r: u32) -> u32 {
        self.members[(self.kstart[k as usize] + r) as usize]
    }

    /// The closer mask of `q` towards leaf `li`, in rank bits of `klow(q)`.
    #[inline]
    pub fn umask(&self, q: usize, li: usize) -> u64 {
        let r = self.urow[q];
        if r == NONE {
            0
        } else {
            self.umask[r as usize * self.nl + li]
        }
    }

    /// Whether every route from `q` to leaf `li` is nominal.
    #[inline]
    pub fn is_full(&self, q: usize, li: usize) -> bool {
        self.full[q * self.words + li / 64] & (1 << (li % 64)) != 0
    }

    /// Index in `ups(q)` of the neighbour of rank `r` (`u8::MAX`: not a live neighbour).
    #[inline]
    pub fn up_of(&self, q: usize, r: u32) -> u8 {
        self.up_of_rank[(self.rstart[q] + r) as usize]
    }

    /// The nominal rank of destination `d` in component `k`: `⌊d/Π_K⌋ mod M_K`, and `⌊d/(Π_K·M_K)⌋`.
    #[inline]
    pub fn nominal(&self, k: u32, d: u32) -> (u32, u64) {
        let q = u64::from(d) / self.kpi[k as usize];
        let m = u64::from(self.m(k));
        let kd = self.kdepth[k as usize] as usize;
        let r = if kd < self.depth {
            let t = self.tgt[d as usize * self.depth + kd];
            if u64::from(t) < m {
                u32::from(t)
            } else {
                (q % m) as u32
            }
        } else {
            (q % m) as u32
        };
        (r, q / m)
    }

    /// Whether the nominal route of `d` (on leaf `li`) from `q` exists: a downward path, or
    /// the nominal upper switch is a closer neighbour from which the nominal route exists.
    pub fn nominal_ok(&self, p: &Prepared, mut q: usize, li: usize, d: u32) -> bool {
        loop {
            if self.is_full(q, li) || p.costs.down_row(q)[li] != INF {
                return true;
            }
            let k = self.klow[q];
            if k == NONE {
                return false;
            }
            let (r, _) = self.nominal(k, d);
            if self.umask(q, li) & (1 << r) == 0 {
                return false;
            }
            q = self.member(k, r) as usize;
        }
    }

    /// Capacity of upper switch `u` for leaf `li`: 1 when it goes down, else its number of
    /// closer upper neighbours.
    #[inline]
    pub fn capacity(&self, p: &Prepared, u: usize, li: usize) -> u64 {
        if p.costs.down_row(u)[li] != INF {
            1
        } else {
            u64::from(self.umask(u, li).count_ones()).max(1)
        }
    }
}
