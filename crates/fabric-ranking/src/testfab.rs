//! Test fabrics: PGFT/XGFT builders with known switch levels, and small hand-made fabrics.
//!
//! The PGFT construction follows the thesis §1.3.3 (Öhring et al.): `PGFT(h; m_1..m_h;
//! w_1..w_h; p_1..p_h)`, nodes at level 0, switches at levels 1..=h; a level-`l` switch has the
//! address `(x_{l+1}..x_h ; y_1..y_l)` with `x_i < m_i`, `y_i < w_i`, and is cabled with
//! `p_{l+1}` parallel links to every level-`l+1` switch sharing its `x_{l+2}..x_h` and `y_1..y_l`
//! digits. Ranking levels are switch levels minus one (leaves at 0).

use fabric_topology::{EndPortId, Fabric, FabricBuilder, NodeType, SwitchId};

/// A generated fabric with the generator level of every switch (leaves at 0).
pub(crate) struct Built {
    pub fabric: Fabric,
    pub level: Vec<u32>,
    /// For each switch, the end ports cabled to it.
    pub nodes: Vec<Vec<EndPortId>>,
}

/// Switch GUID of the `idx`-th switch of switch level `l` (1-based level).
pub(crate) fn sw_guid(l: usize, idx: usize) -> u64 {
    0x0002_c900_0000_0000 | ((l as u64) << 24) | idx as u64
}

/// Builds `PGFT(h; m; w; p)` (`w[0]` and `p[0]` must be 1: one port per node).
pub(crate) fn pgft(m: &[usize], w: &[usize], p: &[usize]) -> Built {
    let g = pgft_builder(m, w, p, 0);
    Built {
        fabric: g.builder.build(),
        level: g.level,
        nodes: g.nodes,
    }
}

/// Ports of a level-`l` switch (1-based switch level) in [`pgft_builder`]: down ports first, then
/// up ports, then `spare` unused ports; returns the first spare port.
pub(crate) fn first_spare(m: &[usize], w: &[usize], p: &[usize], l: usize) -> u8 {
    let up = if l < m.len() { w[l] * p[l] } else { 0 };
    (m[l - 1] * p[l - 1] + up + 1) as u8
}

/// A PGFT still under construction (tests add miscabling before building).
pub(crate) struct PgftBuilder {
    pub builder: FabricBuilder,
    /// Generator level of each switch (leaves at 0).
    pub level: Vec<u32>,
    /// End ports cabled to each switch.
    pub nodes: Vec<Vec<EndPortId>>,
    /// Switch ids by 1-based switch level (`ids[0]` is empty).
    pub ids: Vec<Vec<SwitchId>>,
}

/// The builder of `PGFT(h; m; w; p)` with `spare` unused ports on every switch.
pub(crate) fn pgft_builder(m: &[usize], w: &[usize], p: &[usize], spare: usize) -> PgftBuilder {
    let h = m.len();
    assert!(h >= 1 && w.len() == h && p.len() == h && w[0] == 1 && p[0] == 1);
    // Digits of a level-l switch: x_{l+1..=h} (radix m) then y_{1..=l} (radix w), mixed radix.
    let radices = |l: usize| -> Vec<usize> { (l + 1..=h).map(|i| m[i - 1]).chain((1..=l).map(|i| w[i - 1])).collect() };
    let count = |l: usize| radices(l).iter().product::<usize>();
    let encode = |l: usize, digits: &[usize]| -> usize {
        let r = radices(l);
        digits.iter().zip(&r).fold(0, |acc, (&d, &rad)| acc * rad + d)
    };
    let decode = |l: usize, mut idx: usize| -> Vec<usize> {
        let r = radices(l);
        let mut d = vec![0; r.len()];
        for i in (0..r.len()).rev() {
            d[i] = idx % r[i];
            idx /= r[i];
        }
        d
    };
    let down = |l: usize| m[l - 1] * p[l - 1];
    let mut b = FabricBuilder::new();
    let mut ids: Vec<Vec<SwitchId>> = vec![Vec::new(); h + 1];
    let mut level = Vec::new();
    for (l, ids_l) in ids.iter_mut().enumerate().skip(1) {
        for i in 0..count(l) {
            let nports = first_spare(m, w, p, l) as usize - 1 + spare;
            ids_l.push(b.add_switch(sw_guid(l, i), format!("L{l}-{i}"), nports as u8).unwrap());
            level.push(l as u32 - 1);
        }
    }
    for l in 1..h {
        for i in 0..count(l) {
            // a = (x_{l+1}, x_{l+2..h}, y_1..y_l)
            let a = decode(l, i);
            let x_next = a[0];
            for y in 0..w[l] {
                // b = (x_{l+2..h}, y_1..y_l, y_{l+1} = y)
                let mut bd: Vec<usize> = a[1..].to_vec();
                bd.push(y);
                let j = encode(l + 1, &bd);
                for k in 0..p[l] {
                    let pa = (down(l) + y * p[l] + k + 1) as u8;
                    let pb = (x_next * p[l] + k + 1) as u8;
                    b.connect_switches(ids[l][i], pa, ids[l + 1][j], pb).unwrap();
                }
            }
        }
    }
    let mut nodes = vec![Vec::new(); level.len()];
    for (i, &sw) in ids[1].iter().enumerate() {
        for n in 0..m[0] {
            let g = 0x0008_0000_0000_0000 | ((i as u64) << 16) | n as u64;
            let ep = b
                .add_end_port(g + 1, g, format!("node-{i}-{n}"), 1, 1, NodeType::Compute)
                .unwrap();
            b.connect_end_port(ep, sw, (n + 1) as u8).unwrap();
            nodes[sw.idx()].push(ep);
        }
    }
    PgftBuilder {
        builder: b,
        level,
        nodes,
        ids,
    }
}

/// `XGFT(h; m; w)`: a PGFT without parallel links.
pub(crate) fn xgft(m: &[usize], w: &[usize]) -> Built {
    pgft(m, w, &vec![1; m.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgft_shape_matches_the_formula() {
        // PGFT(3; 2,2,3; 1,2,2; 1,2,1) (thesis Fig. 4.1): 6 leaves, 6 mid, 4 tops.
        let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
        let f = &t.fabric;
        let per_level = |l| t.level.iter().filter(|&&x| x == l).count();
        assert_eq!((per_level(0), per_level(1), per_level(2)), (6, 6, 4));
        assert_eq!(f.num_end_ports(), 12);
        // Every leaf: 2 up groups of 2 cables; every top: 3 down groups.
        for s in f.switch_ids() {
            let g = f.port_groups(s);
            match t.level[s.idx()] {
                0 => assert!(g.len() == 2 && g.iter().all(|g| g.ports.len() == 2)),
                1 => assert_eq!(g.len(), 2 + 2),
                _ => assert_eq!(g.len(), 3),
            }
            for pg in g {
                assert_eq!(t.level[pg.remote.idx()].abs_diff(t.level[s.idx()]), 1);
            }
        }
        assert_eq!(f.count_links(), (6 * 2 * 2 + 6 * 2, 36));
    }
}
