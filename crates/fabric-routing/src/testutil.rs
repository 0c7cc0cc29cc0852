//! Test fabrics built independently of the generator crate: PGFTs from their definition
//! (thesis Def. 26), a BFS ranking (Alg. 3), and helpers.

use fabric_ranking::Ranking;
use fabric_topology::{Fabric, FabricBuilder, NodeType, SwitchId};

use crate::{assign_lids, route_all, EngineKind, Guid2Lid, Lfts, LidPlan, RoutingContext, IB_MAX_UNICAST_LID};

/// A generated PGFT with each switch's address.
pub struct TestPgft {
    pub fabric: Fabric,
    /// Per switch: level (1 = leaf, PGFT numbering), b digits (b_1..b_l), a digits (a_{l+1}..a_h).
    pub addr: Vec<(u32, Vec<u32>, Vec<u32>)>,
}

impl TestPgft {
    /// Leaves sharing their level-2 switches have the same group (digits a_3..a_h).
    pub fn leaf_group(&self, s: SwitchId) -> Vec<u32> {
        self.addr[s.idx()].2[1..].to_vec()
    }
}

/// Number of elements at PGFT level `l` (0 = nodes).
fn count(m: &[u32], w: &[u32], l: usize) -> usize {
    let h = m.len();
    (m[l..h].iter().product::<u32>() * w[..l].iter().product::<u32>()) as usize
}

/// Address digits of element `idx` at level `l`: b digits (least significant first overall:
/// b_1 is the fastest), then a digits.
fn decode(m: &[u32], w: &[u32], l: usize, mut idx: usize) -> (Vec<u32>, Vec<u32>) {
    let h = m.len();
    let mut b = Vec::new();
    for wi in &w[..l] {
        b.push((idx % *wi as usize) as u32);
        idx /= *wi as usize;
    }
    let mut a = Vec::new();
    for mi in &m[l..h] {
        a.push((idx % *mi as usize) as u32);
        idx /= *mi as usize;
    }
    (b, a)
}

fn encode(m: &[u32], w: &[u32], l: usize, b: &[u32], a: &[u32]) -> usize {
    let h = m.len();
    let mut idx = 0usize;
    let mut mul = 1usize;
    for (i, wi) in w[..l].iter().enumerate() {
        idx += b[i] as usize * mul;
        mul *= *wi as usize;
    }
    for (i, mi) in m[l..h].iter().enumerate() {
        idx += a[i] as usize * mul;
        mul *= *mi as usize;
    }
    idx
}

/// `PGFT(h; m; w; p)` with `w[0] == 1`, `p[0] == 1` (single-homed nodes). Switch GUIDs follow
/// the address order (level-major); end ports are created in node-address order (a_1 fastest).
pub fn pgft(m: &[u32], w: &[u32], p: &[u32]) -> TestPgft {
    pgft_with_guids(m, w, p, |lvl, idx| ((lvl as u64 + 1) << 32) | idx as u64)
}

/// Same, with switch GUIDs from `guid(level - 1, index within level)`.
pub fn pgft_with_guids(m: &[u32], w: &[u32], p: &[u32], guid: impl Fn(usize, usize) -> u64) -> TestPgft {
    let h = m.len();
    assert!(w[0] == 1 && p[0] == 1);
    let mut b = FabricBuilder::new();
    let mut ids: Vec<Vec<SwitchId>> = vec![Vec::new()];
    let mut addr = Vec::new();
    for l in 1..=h {
        let nports = m[l - 1] * p[l - 1] + if l < h { w[l] * p[l] } else { 0 };
        let mut v = Vec::new();
        for i in 0..count(m, w, l) {
            let id = b
                .add_switch(guid(l - 1, i), format!("sw-L{l}-{i}"), nports as u8)
                .unwrap();
            let (bd, ad) = decode(m, w, l, i);
            addr.push((l as u32, bd, ad));
            v.push(id);
        }
        ids.push(v);
    }
    // Switch-to-switch links: level l-1 element (b_1..b_{l-1}; a_l..a_h) to level l (b.., b_l; a_{l+1}..).
    for l in 2..=h {
        for ci in 0..count(m, w, l - 1) {
            let (cb, ca) = decode(m, w, l - 1, ci);
            let child = ids[l - 1][ci];
            for bl in 0..w[l - 1] {
                let mut pb = cb.clone();
                pb.push(bl);
                let parent = ids[l][encode(m, w, l, &pb, &ca[1..])];
                for k in 0..p[l - 1] {
                    // Child's up port for (parent b_l, link k); parent's down port for (child a_l, link k).
                    let up = 1 + m[l - 2] * p[l - 2] + k * w[l - 1] + bl;
                    let down = 1 + k * m[l - 1] + ca[0];
                    b.connect_switches(child, up as u8, parent, down as u8).unwrap();
                }
            }
        }
    }
    for ni in 0..count(m, w, 0) {
        let (_, a) = decode(m, w, 0, ni);
        let leaf = ids[1][encode(m, w, 1, &[0], &a[1..])];
        let ep = b
            .add_end_port(
                0xE000_0000 + ni as u64,
                0xD000_0000 + ni as u64,
                format!("n{ni}"),
                1,
                1,
                NodeType::Compute,
            )
            .unwrap();
        b.connect_end_port(ep, leaf, 1 + a[0] as u8).unwrap();
    }
    TestPgft {
        fabric: b.build(),
        addr,
    }
}

/// Alg. 3: leaves (live switches with live end ports) at 0, then BFS upward.
pub fn bfs_rank(f: &Fabric) -> Vec<Option<u32>> {
    let mut level = vec![None; f.num_switches()];
    let mut cur: Vec<SwitchId> = f.switch_ids().filter(|&s| f.switch(s).up && f.is_leaf(s)).collect();
    for &s in &cur {
        level[s.idx()] = Some(0);
    }
    let mut l = 0;
    while !cur.is_empty() {
        l += 1;
        let mut next = Vec::new();
        for &s in &cur {
            for g in f.port_groups(s) {
                if level[g.remote.idx()].is_none() {
                    level[g.remote.idx()] = Some(l);
                    next.push(g.remote);
                }
            }
        }
        cur = next;
    }
    level
}

/// A [`Ranking`] from [`bfs_rank`].
pub fn ranking(f: &Fabric) -> Ranking {
    let level = bfs_rank(f);
    let height = level.iter().flatten().max().map_or(0, |m| m + 1);
    Ranking {
        level,
        height,
        diagnostics: Vec::new(),
    }
}

/// Removes `links` random live switch-to-switch cables and `switches` random non-leaf switches.
pub fn degrade(f: &Fabric, links: usize, switches: usize, seed: u64) -> Fabric {
    use fabric_topology::{FabricEvent, Remote};
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut cables = Vec::new();
    for s in f.switch_ids() {
        for (pn, port) in f.switch(s).external_ports() {
            if let Remote::Switch { sw, port: rp } = port.remote {
                if (sw, rp) > (s, pn) {
                    cables.push(FabricEvent::LinkDown {
                        switch: f.switch(s).guid,
                        port: pn,
                    });
                }
            }
        }
    }
    cables.shuffle(&mut rng);
    cables.truncate(links);
    let mut inner: Vec<SwitchId> = f.switch_ids().filter(|&s| !f.is_leaf(s)).collect();
    inner.shuffle(&mut rng);
    inner.truncate(switches);
    cables.extend(inner.into_iter().map(|s| FabricEvent::SwitchDown(f.switch(s).guid)));
    f.apply(&cables).unwrap()
}

/// A fabric with its [`ranking`] and LIDs of LMC 1, for tests that need a [`RoutingContext`].
pub struct Routable {
    pub fabric: Fabric,
    pub ranking: Ranking,
    pub lids: LidPlan,
}

impl Routable {
    pub fn new(fabric: Fabric) -> Self {
        let lids = assign_lids(&fabric, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let ranking = ranking(&fabric);
        Routable { fabric, ranking, lids }
    }

    pub fn ctx(&self) -> RoutingContext<'_> {
        RoutingContext {
            fabric: &self.fabric,
            ranking: &self.ranking,
            lids: &self.lids,
        }
    }
}

/// `route_all(kind)` of `f` with the [`ranking`] and LIDs of LMC `lmc`: (ranking, LIDs, tables).
pub fn routed(f: &Fabric, kind: EngineKind, lmc: u8) -> (Ranking, LidPlan, Lfts) {
    let r = ranking(f);
    let lids = assign_lids(f, &Guid2Lid::default(), lmc, IB_MAX_UNICAST_LID).unwrap();
    let ctx = RoutingContext {
        fabric: f,
        ranking: &r,
        lids: &lids,
    };
    let lfts = route_all(&ctx, kind).unwrap().lfts;
    (r, lids, lfts)
}

/// A ring of `n` switches (ports 1/2) with a chord (port 3, switch 0 to switch n/2), one end port
/// on port 5 of each: same-level links everywhere, not a fat-tree at all.
pub fn ring(n: u32) -> Fabric {
    let mut b = FabricBuilder::new();
    let s: Vec<_> = (0..n)
        .map(|i| b.add_switch(0x100 + u64::from(i), format!("r{i}"), 8).unwrap())
        .collect();
    for i in 0..n as usize {
        b.connect_switches(s[i], 1, s[(i + 1) % n as usize], 2).unwrap();
    }
    b.connect_switches(s[0], 3, s[n as usize / 2], 3).unwrap();
    for (i, &sw) in s.iter().enumerate() {
        let e = b
            .add_end_port(
                0x1000 + i as u64,
                0x2000 + i as u64,
                format!("n{i}"),
                1,
                1,
                NodeType::Compute,
            )
            .unwrap();
        b.connect_end_port(e, sw, 5).unwrap();
    }
    b.build()
}
