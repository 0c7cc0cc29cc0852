//! Test and bench support: a PGFT builder (thesis §1.3.3–1.3.4) and closed-form Dmodk LFTs
//! (thesis §1.4.2). Shared by the unit tests (`#[path]` include), the reference tests and the
//! criterion bench, so the metrics can be checked on fat-trees before the routing engines of
//! `fabric-routing` exist. Test-only code: it panics on misuse.
#![allow(dead_code)]

use fabric_routing::{Lfts, LidPlan};
use fabric_topology::{Fabric, FabricBuilder, NodeType, SwitchId};

/// A generated `PGFT(h; m; w; p)` with one LID per end port (LMC 0).
pub struct Pgft {
    pub fabric: Fabric,
    pub lids: LidPlan,
    /// Child arities `m_1..m_h` (`m_1` = end ports per leaf).
    pub m: Vec<u32>,
    /// Parent arities `w_1..w_h` (`w_1` = 1: single-homed end ports).
    pub w: Vec<u32>,
    /// Parallel links `p_1..p_h` (`p_1` = 1).
    pub p: Vec<u32>,
    /// Switch ids per level (`levels[0]` = leaves), indexed by `a_part * W_l + b_part`.
    pub levels: Vec<Vec<SwitchId>>,
}

fn prod(v: &[u32]) -> u32 {
    v.iter().product()
}

impl Pgft {
    pub fn num_nodes(&self) -> u32 {
        prod(&self.m)
    }
    /// Down ports of a level-`l` switch (1-based level).
    fn down_ports(&self, l: usize) -> u32 {
        self.m[l - 1] * self.p[l - 1]
    }
}

/// Builds `PGFT(h; m_1..m_h; w_1..w_h; p_1..p_h)` (`w_1 = p_1 = 1`).
///
/// Switch of level `l` = (`a_h..a_{l+1}`, `b_l..b_1`), `a_i < m_i`, `b_i < w_i`. Port numbering
/// follows the thesis convention `q mod m_l = child`: down port `1 + j m_l + a` reaches child `a`
/// through parallel link `j`; up port `1 + m_l p_l + j w_{l+1} + u` reaches parent `u` through
/// parallel link `j`. End port `d` (mixed radix `a_1` least significant) sits on leaf
/// `d / m_1`, port `1 + d mod m_1`; end ports are created in order `d = 0..N`.
pub fn pgft(m: &[u32], w: &[u32], p: &[u32]) -> Pgft {
    let h = m.len();
    assert!(h >= 1 && w.len() == h && p.len() == h && w[0] == 1 && p[0] == 1);
    let mut b = FabricBuilder::new();
    let mut levels = Vec::new();
    let mut guid = 0x1000_0000u64;
    for l in 1..=h {
        let count = prod(&m[l..]) * prod(&w[..l]);
        let up = if l < h { w[l] * p[l] } else { 0 };
        let nports = m[l - 1] * p[l - 1] + up;
        let ids = (0..count)
            .map(|i| {
                guid += 1;
                b.add_switch(guid, format!("L{l}-{i}"), u8::try_from(nports).expect("radix"))
                    .expect("switch")
            })
            .collect::<Vec<_>>();
        levels.push(ids);
    }
    let n = prod(m);
    for d in 0..n {
        let e = b
            .add_end_port(
                0x2000_0000 + u64::from(d),
                0x3000_0000 + u64::from(d),
                format!("n{d}"),
                1,
                1,
                NodeType::Compute,
            )
            .expect("end port");
        let leaf = levels[0][(d / m[0]) as usize];
        b.connect_end_port(e, leaf, (1 + d % m[0]) as u8).expect("attach");
    }
    for l in 2..=h {
        let wl1 = prod(&w[..l - 1]);
        let wl = prod(&w[..l]);
        let a_count = prod(&m[l..]);
        let child_up_base = m[l - 2] * p[l - 2];
        for a_part in 0..a_count {
            for b_part in 0..wl {
                let parent = levels[l - 1][(a_part * wl + b_part) as usize];
                let u = b_part / wl1;
                for a in 0..m[l - 1] {
                    let child = levels[l - 2][((a_part * m[l - 1] + a) * wl1 + b_part % wl1) as usize];
                    for j in 0..p[l - 1] {
                        let down = 1 + j * m[l - 1] + a;
                        let upp = 1 + child_up_base + j * w[l - 1] + u;
                        b.connect_switches(child, upp as u8, parent, down as u8).expect("cable");
                    }
                }
            }
        }
    }
    let fabric = b.build();
    let lids = LidPlan {
        lmc: 0,
        max_lid: 0xBFFF,
        switch_lid: (0..fabric.num_switches() as u32).map(|s| n + 1 + s).collect(),
        end_port_base: (1..=n).collect(),
    };
    Pgft {
        fabric,
        lids,
        m: m.to_vec(),
        w: w.to_vec(),
        p: p.to_vec(),
        levels,
    }
}

/// Dmodk LFTs (thesis §1.4.2) for the end-port LIDs: down when the destination is below
/// (parallel link `d mod p_l`), else up port `⌊d / Π_{k≤l} w_k⌋ mod (w_{l+1} p_{l+1})`.
/// Switch LIDs are routed to port 0 on their own switch only.
pub fn dmodk(t: &Pgft) -> Lfts {
    let h = t.m.len();
    let n = t.num_nodes();
    let mut lfts = Lfts::new(t.fabric.num_switches(), t.lids.top());
    for l in 1..=h {
        let wl = prod(&t.w[..l]);
        let below = prod(&t.m[..l]);
        for (i, &sw) in t.levels[l - 1].iter().enumerate() {
            let a_part = i as u32 / wl;
            for d in 0..n {
                let port = if d / below == a_part {
                    if l == 1 {
                        1 + d % t.m[0]
                    } else {
                        let a = (d / prod(&t.m[..l - 1])) % t.m[l - 1];
                        1 + (d % t.p[l - 1]) * t.m[l - 1] + a
                    }
                } else {
                    1 + t.down_ports(l) + (d / wl) % (t.w[l] * t.p[l])
                };
                lfts.set(sw, t.lids.end_port_base[d as usize], port as u8);
            }
            lfts.set(sw, t.lids.switch_lid[sw.idx()], 0);
        }
    }
    lfts
}
