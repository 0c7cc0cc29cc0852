//! Generated fat-trees against the closed formulas of the thesis (§1.3.3) and the connection
//! rules of the thesis (PGFT) and of the QFT paper (eqs. 6–8), checked on the generated
//! fabric's structure, read back from the switch names and the cabling only.

use std::collections::BTreeMap;

use fabric_topology::gen::{generate, PgftLayout, PgftSpec, SpecKind};
use fabric_topology::{Fabric, Remote, SwitchId};
use proptest::collection::vec;
use proptest::prelude::*;

/// Level and digits from a generated switch name `"<KIND> L<level> S(<d1>,..)"` (parsed here
/// independently of the library).
fn addr_of(desc: &str) -> (usize, Vec<u32>) {
    let (_, rest) = desc.split_once(" L").expect("generated switch name");
    let (level, tuple) = rest.split_once(" S(").expect("generated switch name");
    let digits = tuple
        .trim_end_matches(')')
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    (level.parse().unwrap(), digits)
}

/// Digits of a generated end-node name `"n(a1,..,ah)"`.
fn node_digits(desc: &str) -> Vec<u32> {
    desc.trim_start_matches("n(")
        .trim_end_matches(')')
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect()
}

fn product(v: impl IntoIterator<Item = u32>) -> u64 {
    v.into_iter().map(u64::from).product()
}

/// Thesis/QFT paper eq. 1: switches at 0-based level `l` = Π_{i≤l} w_i · Π_{i>l} m_i.
fn switches_at(s: &PgftSpec, l: usize) -> u64 {
    product(s.w[..=l].iter().copied()) * product(s.m[l + 1..].iter().copied())
}

/// Checks a generated fabric against the closed formulas and the connection rule of its kind.
fn check_structure(s: &PgftSpec, f: &Fabric) -> Result<(), TestCaseError> {
    let h = s.h;
    let addrs: Vec<(usize, Vec<u32>)> = f.switches().iter().map(|sw| addr_of(&sw.desc)).collect();
    let qft = s.kind == SpecKind::Qft;

    // Counts: end nodes, switches per level, ports per switch.
    prop_assert_eq!(f.num_end_ports() as u64, product(s.m.iter().copied()));
    for l in 0..h {
        let n = addrs.iter().filter(|a| a.0 == l).count() as u64;
        prop_assert_eq!(n, switches_at(s, l), "switches at level {}", l);
    }
    prop_assert_eq!(addrs.iter().filter(|a| a.0 >= h).count(), 0);

    let mut cables_above = vec![0u64; h];
    for (i, sw) in f.switches().iter().enumerate() {
        let (l, ref q) = addrs[i];
        let down = s.m[l] * s.p[l];
        let up = if l + 1 < h { s.w[l + 1] * s.p[l + 1] } else { 0 };
        prop_assert_eq!(u32::from(sw.nports), down + up, "ports of {}", sw.desc);
        prop_assert!(sw.up);
        let mut parents: BTreeMap<Vec<u32>, u32> = BTreeMap::new();
        for (pn, port) in sw.external_ports() {
            let pn = u32::from(pn);
            match port.remote {
                Remote::None => prop_assert!(false, "{} port {} not plugged", sw.desc, pn),
                Remote::EndPort(ep) => {
                    // End node (a1, a2..ah) hangs on port a1 + 1 of leaf (0, a2..ah).
                    let a = node_digits(&f.end_port(ep).desc);
                    prop_assert_eq!(l, 0);
                    prop_assert_eq!(a[0] + 1, pn);
                    prop_assert_eq!(&a[1..], &q[1..]);
                    prop_assert_eq!(f.end_port(ep).attach, Some((SwitchId(i as u32), pn as u8)));
                }
                Remote::Switch { sw: r, port: rp } => {
                    let (rl, ref r_digits) = addrs[r.idx()];
                    prop_assert!(
                        rl + 1 == l || rl == l + 1,
                        "{} port {} skips or stays in a level",
                        sw.desc,
                        pn
                    );
                    let rp = u32::from(rp);
                    if rl != l + 1 {
                        continue; // checked from the lower end
                    }
                    cables_above[l] += 1;
                    *parents.entry(r_digits.clone()).or_default() += 1;
                    let (u, pl) = (l + 1, s.p[l + 1]);
                    let (g, f_idx) = (pn - 1 - down, rp - 1); // 0-based up index on Q, down index on S
                    if !qft {
                        // Same digits but index u; child-major / parent-major port numbers.
                        for i in 0..h {
                            prop_assert!(i == u || r_digits[i] == q[i], "{} -> {}", sw.desc, f.switch(r).desc);
                        }
                        prop_assert_eq!(g / pl, r_digits[u], "up port of {} to parent digit", sw.desc);
                        prop_assert_eq!(f_idx / pl, q[u], "down port of the parent to child digit");
                        prop_assert_eq!(g % pl, f_idx % pl, "same parallel cable number at both ends");
                    } else {
                        // QFT paper eq. 6 with S (paper level ls = l + 2) above Q (level ls - 1);
                        // paper digit x_i is digits[i - 1].
                        let ls = l + 2;
                        let (sd, qd) = (|i: usize| r_digits[i - 1], |i: usize| q[i - 1]);
                        let (equal, grouped): (Vec<usize>, usize) = if ls < h {
                            ((1..ls).chain(ls + 2..=h).collect(), ls + 1)
                        } else {
                            ((1..=h - 2).collect(), h - 1)
                        };
                        for i in equal {
                            prop_assert_eq!(sd(i), qd(i), "eq. 6 digit {} of {} -> {}", i, sw.desc, f.switch(r).desc);
                        }
                        prop_assert_eq!(sd(grouped) / pl, qd(grouped) / pl, "eq. 6 group");
                        // Eqs. 7 and 8 (f on S, g on Q).
                        prop_assert_eq!(f_idx, qd(ls) + s.m[ls - 1] * (qd(grouped) % pl), "eq. 7");
                        prop_assert_eq!(g, sd(ls) + s.w[ls - 1] * (sd(grouped) % pl), "eq. 8");
                    }
                }
            }
        }
        if l + 1 < h {
            // PGFT: w parents with p cables each. QFT: w·p distinct parents, one cable each.
            let (n_parents, mult) = if qft {
                (s.w[l + 1] * s.p[l + 1], 1)
            } else {
                (s.w[l + 1], s.p[l + 1])
            };
            prop_assert_eq!(parents.len() as u32, n_parents, "parents of {}", sw.desc);
            prop_assert!(parents.values().all(|&c| c == mult), "cables per parent of {}", sw.desc);
        }
    }
    for (l, &n) in cables_above.iter().enumerate().take(h - 1) {
        prop_assert_eq!(
            n,
            switches_at(s, l) * u64::from(s.w[l + 1] * s.p[l + 1]),
            "cables above level {}",
            l
        );
    }
    prop_assert_eq!(f.count_links().0 as u64, cables_above.iter().sum::<u64>());

    // End-port order: leaf by leaf in leaf order, then port order; id = d (QFT paper eq. 4).
    let mut last = None;
    for ep in f.end_port_ids() {
        let e = f.end_port(ep);
        let a = node_digits(&e.desc);
        let mut d = 0u64;
        for (i, &x) in a.iter().enumerate().rev() {
            d = d * u64::from(s.m[i]) + u64::from(x);
        }
        prop_assert_eq!(d, u64::from(ep.0), "{} is not at its generator index", e.desc);
        prop_assert!(e.attach > last, "end ports not in leaf then port order");
        last = e.attach;
    }

    // GUID order of port groups = digit order (parents by the digit at index l+1; PGFT children
    // by the digit at index l).
    for id in f.switch_ids() {
        let (l, _) = addrs[id.idx()];
        let groups = f.port_groups(id);
        let ups: Vec<&Vec<u32>> = groups
            .iter()
            .map(|g| &addrs[g.remote.idx()])
            .filter(|a| a.0 == l + 1)
            .map(|a| &a.1)
            .collect();
        if !qft {
            prop_assert!(
                ups.windows(2).all(|p| p[0][l + 1] < p[1][l + 1]),
                "parents of {} out of digit order",
                f.switch(id).desc
            );
            let downs: Vec<u32> = groups
                .iter()
                .map(|g| &addrs[g.remote.idx()])
                .filter(|a| a.0 + 1 == l)
                .map(|a| a.1[l])
                .collect();
            prop_assert!(
                downs.windows(2).all(|p| p[0] < p[1]),
                "children of {} out of digit order",
                f.switch(id).desc
            );
            prop_assert!(
                groups.iter().all(|g| g.ports.windows(2).all(|p| p[0] + 1 == p[1])),
                "parallel ports not adjacent"
            );
        }
    }
    Ok(())
}

/// Random valid specs of every kind, small enough to build in milliseconds (h ≤ 4).
fn specs() -> impl Strategy<Value = PgftSpec> {
    (1usize..=4)
        .prop_flat_map(|h| (0u8..4, vec(1u32..=4, h), vec(1u32..=3, h), vec(1u32..=3, h)))
        .prop_map(|(kind, mut m, mut w, mut p)| {
            let h = m.len();
            w[0] = 1;
            p[0] = 1;
            let kind = [SpecKind::Pgft, SpecKind::Xgft, SpecKind::Kary, SpecKind::Qft][kind as usize];
            match kind {
                SpecKind::Pgft => {}
                SpecKind::Xgft => p.iter_mut().for_each(|x| *x = 1),
                SpecKind::Kary => {
                    let k = m[0];
                    m = vec![k; h];
                    w = vec![k; h];
                    w[0] = 1;
                    p = vec![1; h];
                }
                SpecKind::Qft => {
                    // Make every eq. 6 group whole: p_l divides m_{l+1} (or w_{h-1} at the top).
                    for i in 1..h {
                        if p[i] > 1 {
                            if i + 1 < h {
                                m[i + 1] *= p[i];
                            } else if i >= 2 {
                                w[i - 1] *= p[i];
                            } else {
                                p[i] = 1;
                            }
                        }
                    }
                }
            }
            PgftSpec { kind, h, m, w, p }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn generated_fabrics_match_closed_formulas_and_connection_rules(spec in specs()) {
        prop_assert_eq!(spec.validate(), Ok(()));
        // Through the notation string, as users give it.
        let parsed: PgftSpec = spec.to_string().parse().unwrap();
        prop_assert_eq!(&parsed, &spec);
        let g = generate(&spec).unwrap();
        check_structure(&spec, &g.fabric)?;
        prop_assert_eq!(spec.num_end_nodes(), g.fabric.num_end_ports() as u64);
        prop_assert_eq!(spec.num_switches(), g.fabric.num_switches() as u64);
        prop_assert_eq!(spec.num_cables(), g.fabric.count_links().0 as u64);
        // The layout's addresses are those of the names.
        for id in g.fabric.switch_ids() {
            let a = &g.layout.switch_addr[id.idx()];
            prop_assert_eq!((a.level as usize, a.digits.clone()), addr_of(&g.fabric.switch(id).desc));
            prop_assert_eq!(g.layout.switch_at(a.level, g.layout.index(id)), Some(id));
        }
        prop_assert_eq!(PgftLayout::recognize(&g.fabric).unwrap(), g.layout);
    }

    /// Real-life fat-trees (thesis Definition 27): every switch has the same radix K, fully plugged.
    #[test]
    fn rlft_switches_are_fully_plugged(h in 1usize..=3, p_raw in vec(1u32..=3, 3), q in 1u32..=3) {
        let mut p = p_raw[..h].to_vec();
        p[0] = 1;
        let k = 2 * q * p.iter().product::<u32>();
        let spec = PgftSpec::rlft(k, p).unwrap();
        prop_assert!(spec.is_rlft());
        let g = generate(&spec).unwrap();
        check_structure(&spec, &g.fabric)?;
        for sw in g.fabric.switches() {
            prop_assert_eq!(u32::from(sw.nports), k);
            prop_assert!(sw.external_ports().all(|(_, port)| port.remote != Remote::None), "{} not fully plugged", sw.desc);
        }
    }
}

/// Leaves within two switch hops of leaf 0 (leaf → parent → leaf), leaf 0 included.
fn leaves_within_two_hops(f: &Fabric) -> usize {
    let leaf = SwitchId(0);
    let mut seen = std::collections::BTreeSet::new();
    for g in f.port_groups(leaf) {
        for g2 in f.port_groups(g.remote) {
            if f.is_leaf(g2.remote) {
                seen.insert(g2.remote);
            }
        }
    }
    seen.len()
}

#[test]
fn named_examples_have_5832_nodes_and_810_switches() {
    for s in [
        "PGFT(3;18,9,36;1,9,18;1,2,1)",
        "QFT(3;18,9,36;1,9,18;1,2,1)",
        "RLFT(3;36;1,2,1)",
    ] {
        let spec: PgftSpec = s.parse().unwrap();
        let g = generate(&spec).unwrap();
        let f = &g.fabric;
        assert_eq!((f.num_end_ports(), f.num_switches()), (5832, 810), "{s}");
        let per_level: Vec<usize> = (0..3)
            .map(|l| g.layout.switch_addr.iter().filter(|a| a.level == l).count())
            .collect();
        assert_eq!(per_level, [324, 324, 162], "{s}");
        assert_eq!(f.count_links(), (2 * 5832, 2 * 5832), "{s}");
        assert!(f
            .switches()
            .iter()
            .all(|sw| sw.nports == 36 && sw.external_ports().all(|(_, p)| p.remote != Remote::None)));
        check_structure(&spec, f).unwrap();
        assert_eq!(PgftLayout::recognize(f).unwrap(), g.layout, "{s}");
    }
}

/// The QFT paper's motivation (§I-B): cross-connections double the 3-hop host group.
#[test]
fn qft_doubles_the_three_hop_group() {
    // Figure 1 (b)/(c): 64 hosts, 40 switches of 8 ports; QFT leaves reach 4 middle switches
    // instead of 2, and 16 hosts within 3 switches instead of 8.
    let pgft = generate(&"PGFT(3;4,2,8;1,2,4;1,2,1)".parse().unwrap()).unwrap().fabric;
    let qft = generate(&"QFT(3;4,2,8;1,2,4;1,2,1)".parse().unwrap()).unwrap().fabric;
    for f in [&pgft, &qft] {
        assert_eq!((f.num_end_ports(), f.num_switches()), (64, 40));
        assert!(f.switches().iter().all(|s| s.nports == 8));
    }
    assert_eq!(
        (pgft.port_groups(SwitchId(0)).len(), qft.port_groups(SwitchId(0)).len()),
        (2, 4)
    );
    assert_eq!(
        (4 * leaves_within_two_hops(&pgft), 4 * leaves_within_two_hops(&qft)),
        (8, 16)
    );
    // The 36-port example: 162 versus 324 hosts.
    let pgft = generate(&"PGFT(3;18,9,36;1,9,18;1,2,1)".parse().unwrap())
        .unwrap()
        .fabric;
    let qft = generate(&"QFT(3;18,9,36;1,9,18;1,2,1)".parse().unwrap())
        .unwrap()
        .fabric;
    assert_eq!(
        (18 * leaves_within_two_hops(&pgft), 18 * leaves_within_two_hops(&qft)),
        (162, 324)
    );
}

#[test]
fn k_ary_n_trees_are_the_xgft_with_k_pow_n_nodes() {
    for (k, n) in [(2u32, 1usize), (2, 3), (4, 3), (3, 4)] {
        let kary = generate(&PgftSpec::kary(k, n).unwrap()).unwrap().fabric;
        assert_eq!(kary.num_end_ports() as u64, u64::from(k).pow(n as u32));
        assert_eq!(kary.num_switches() as u64, n as u64 * u64::from(k).pow(n as u32 - 1));
        // XGFT(n; k,..,k; 1,k,..,k): same cabling, same GUIDs, only the kind in the names differs.
        let ms = vec![k.to_string(); n].join(",");
        let ws = format!("1{}", format!(",{k}").repeat(n - 1));
        let xgft = generate(&format!("XGFT({n};{ms};{ws})").parse().unwrap())
            .unwrap()
            .fabric;
        assert_eq!(kary.num_switches(), xgft.num_switches());
        for (a, b) in kary.switches().iter().zip(xgft.switches()) {
            assert_eq!((a.guid, &a.ports), (b.guid, &b.ports));
            assert_eq!(a.desc.strip_prefix("KARY"), b.desc.strip_prefix("XGFT"));
        }
    }
}
