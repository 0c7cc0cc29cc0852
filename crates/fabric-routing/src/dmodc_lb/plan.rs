//! The static part of load-aware Dmodc: up-link components, the nominal (complete-fabric)
//! choice, rank paths (mirrors) and whether the fabric is intact.
//!
//! **Components.** The up-links between the switches of a fat-tree split into components of
//! the bipartite graph "lower end – upper end" (a switch counts once as a lower end and once as
//! an upper end). On a PGFT (thesis Def. 26) the component of a level-`l` switch is the
//! complete bipartite block of the switches that differ from it only in the digit `a_{l+1}`
//! and the `w_{l+1}` switches above them, so the rank of an upper switch by GUID within its
//! component is the index Dmodc gives it on a complete fabric (eq. 4.5 orders `C` by remote
//! GUID), and `M_K` (the component's number of upper switches) is Dmodc's `#C`.
//!
//! **Nominal choice** (eqs. 4.7–4.8 on the complete fabric): a switch of component `K` sends
//! destination `d` upwards to the upper switch of rank `⌊d/Π_K⌋ mod M_K`, port
//! `⌊d/(Π_K·M_K)⌋ mod #g` of that group, with `Π_K` the largest nominal divider of the lower
//! ends of `K` (Alg. 5 with `#up` replaced by `M`).
//!
//! **Rank paths and mirrors.** A switch's rank path is the list of ranks met going down its
//! canonical chain (first down-neighbour, recursively) to a leaf: on a PGFT it is the switch's
//! digits below its level. The *mirror* of switch `s` for leaf `λ` is the switch reached from
//! `λ` by following the rank path of `s` upwards, component by component: on a PGFT the
//! ancestor of `λ` at the level of `s` in the same position. A route from `s` towards `λ` that
//! takes rank `r` lands on a switch whose mirror is the mirror's upper neighbour of rank `r`;
//! this is how every source follows the destination's own target tree ([`super::targets`]).

use rayon::prelude::*;

use fabric_topology::Fabric;

use crate::fill::Prepared;
use crate::prep::{INF, NONE};

/// The nominal structure of one oriented fabric (see the module doc).
pub(super) struct Plan {
    /// Per position: the component where the switch is a lower end ([`NONE`] without up-links).
    pub klow: Vec<u32>,
    /// Per component: upper ends by GUID, `members[kstart[k]..kstart[k + 1]]` (positions).
    pub kstart: Vec<u32>,
    pub members: Vec<u32>,
    /// Per component: `Π_K`.
    pub kpi: Vec<u64>,
    /// Per position with up-links: for every rank of `klow`, the index in `ups(p)` of the
    /// neighbour of that rank ([`u8::MAX`]: no live link to it). Row `p` starts at `rstart[p]`.
    pub rstart: Vec<u32>,
    pub up_of_rank: Vec<u8>,
    /// Rank paths, `rpath[rp_start[p]..rp_start[p + 1]]` bottom-up; `rp_ok[p]` false when the
    /// canonical chain does not reach a leaf through ranked components.
    pub rp_start: Vec<u32>,
    pub rpath: Vec<u32>,
    pub rp_ok: Vec<bool>,
    /// Whether every switch sees every upper neighbour as closer wherever it routes upwards,
    /// in rank order, with Dmodc's dividers: Dmodc's kernel then writes the same bytes.
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
    /// Components, ranks, nominal dividers, rank paths and the intact test. Refuses a switch of
    /// more than 64 up- or down-neighbours (the closer masks are 64-bit) or a component of more
    /// than 65 534 upper switches.
    pub fn new(fabric: &Fabric, p: &Prepared) -> Result<Plan, TooWide> {
        let o = &p.o;
        let np = o.len();
        // Components: node `q` = lower end of position q, `np + q` = upper end.
        let mut parent: Vec<u32> = (0..2 * np as u32).collect();
        for q in 0..np {
            if o.ups(q).len() > 64 || o.downs(q).len() > 64 {
                return Err(TooWide);
            }
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
            if u.len() >= usize::from(u16::MAX) {
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
        // Rank → up index.
        let mut rstart = vec![0u32; np + 1];
        let mut up_of_rank = Vec::new();
        for q in 0..np {
            rstart[q] = up_of_rank.len() as u32;
            if klow[q] == NONE {
                continue;
            }
            let base = up_of_rank.len();
            up_of_rank.resize(base + m_of(klow[q]) as usize, u8::MAX);
            for (j, nb) in o.ups(q).iter().enumerate() {
                up_of_rank[base + rank[nb.pos as usize] as usize] = j as u8;
            }
        }
        rstart[np] = up_of_rank.len() as u32;
        // Rank paths, bottom-up (positions are in level order).
        let mut rp_start = Vec::with_capacity(np + 1);
        let mut rpath = Vec::new();
        let mut rp_ok = vec![false; np];
        for q in 0..np {
            rp_start.push(rpath.len() as u32);
            if o.leaf_idx[q] != NONE && o.downs(q).is_empty() {
                rp_ok[q] = true;
                continue;
            }
            let Some(c) = o.downs(q).iter().map(|nb| nb.pos as usize).find(|&c| rp_ok[c]) else {
                continue;
            };
            if rank[q] == NONE {
                continue;
            }
            let (a, b) = (rp_start[c] as usize, (rp_start[c + 1]) as usize);
            rpath.extend_from_within(a..b);
            rpath.push(rank[q]);
            rp_ok[q] = true;
        }
        rp_start.push(rpath.len() as u32);
        let mut plan = Plan {
            klow,
            kstart,
            members,
            kpi,
            rstart,
            up_of_rank,
            rp_start,
            rpath,
            rp_ok,
            intact: false,
        };
        plan.intact = plan.is_intact(p, &rank, &pi);
        Ok(plan)
    }

    /// Dmodc's choices are the nominal ones everywhere: every up-neighbour of every switch is
    /// closer to every leaf the switch reaches only upwards, the up-neighbours are the whole
    /// component in rank order, and the dividers are the nominal ones.
    fn is_intact(&self, p: &Prepared, rank: &[u32], pi: &[u64]) -> bool {
        let o = &p.o;
        let c = &p.costs;
        // The structural tests first (cheap; they fail at once where a cable is missing), then
        // the cost rows.
        let structural = (0..o.len()).all(|q| {
            let k = self.klow[q];
            if k == NONE {
                return true;
            }
            let ups = o.ups(q);
            ups.len() == self.m(k) as usize
                && p.div[q] == self.kpi[k as usize]
                && pi[q] == self.kpi[k as usize]
                && ups.iter().enumerate().all(|(j, nb)| rank[nb.pos as usize] == j as u32)
        });
        structural
            && (0..o.len()).into_par_iter().all(|q| {
                if self.klow[q] == NONE {
                    return true;
                }
                let ups = o.ups(q);
                let (own, down) = (c.full_row(q), c.down_row(q));
                ups.iter().all(|nb| {
                    let row = c.full_row(nb.pos as usize);
                    own.iter()
                        .zip(down)
                        .zip(row)
                        .all(|((&a, &dn), &b)| dn != INF || a == INF || b < a)
                })
            })
    }

    /// Whether the up-link components are (nearly) complete bipartite blocks, the structure
    /// of a PGFT that the mirrors and nominal ranks rely on: the live up-links number at least
    /// half of `Σ_K lower(K) · M_K` (lower ends times upper ends of every component). A
    /// degraded PGFT keeps most of its blocks' links (0.95 with 5 % of the cables removed; a
    /// removed switch leaves its blocks altogether); a fabric whose lower ends each see a few of
    /// many upper switches of one component (the JANUS dump: a leaf sees 18 of 80) has no
    /// mirror for most (switch, leaf) pairs.
    pub fn mirrored(&self, o: &crate::prep::Oriented) -> bool {
        let (mut links, mut block) = (0u64, 0u64);
        for q in 0..o.len() {
            let k = self.klow[q];
            if k != NONE {
                links += o.ups(q).len() as u64;
                block += u64::from(self.m(k));
            }
        }
        2 * links >= block
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

    /// Index in `ups(q)` of the neighbour of rank `r` (`u8::MAX`: not a live neighbour).
    #[inline]
    pub fn up_of(&self, q: usize, r: u32) -> u8 {
        self.up_of_rank[(self.rstart[q] + r) as usize]
    }

    /// [`Plan::up_of`] for every rank of `q`'s component (empty without up-links).
    #[inline]
    pub fn up_row(&self, q: usize) -> &[u8] {
        &self.up_of_rank[self.rstart[q] as usize..self.rstart[q + 1] as usize]
    }

    /// The nominal rank of destination `d` in component `k`: `⌊d/Π_K⌋ mod M_K`, and
    /// `⌊d/(Π_K·M_K)⌋` (the port within the group, eq. 4.8).
    #[inline]
    pub fn nominal(&self, k: u32, d: u32) -> (u32, u64) {
        let q = u64::from(d) / self.kpi[k as usize];
        let m = u64::from(self.m(k)).max(1);
        ((q % m) as u32, q / m)
    }

    /// Whether components `a` and `b` have the same `Π_K` and `M_K` (the same nominal ranks
    /// and eq. 4.8 phases).
    #[inline]
    pub fn same_nominal(&self, a: u32, b: u32) -> bool {
        a == b || (self.kpi[a as usize] == self.kpi[b as usize] && self.m(a) == self.m(b))
    }

    /// The mirror of position `s` for the leaf at position `leaf` (see the module doc), or
    /// [`NONE`].
    pub fn mirror(&self, s: usize, leaf: usize) -> u32 {
        if !self.rp_ok[s] {
            return NONE;
        }
        let mut x = leaf as u32;
        for &r in &self.rpath[self.rp_start[s] as usize..self.rp_start[s + 1] as usize] {
            let k = self.klow[x as usize];
            if k == NONE || r >= self.m(k) {
                return NONE;
            }
            x = self.member(k, r);
        }
        x
    }
}
