//! PQFT recognises a complete quasi fat-tree from its structure (QFT paper Sec. III, eqs. 6–8),
//! not from the names fabricctl's generator writes (issue #16): a generated QFT with other names,
//! GUIDs, port numbers and record order (`common::disguise`, the Dmodk test's helper), written
//! as an `ibnetdiscover` dump and read back, gets tuples that make it the generated QFT (a cable
//! by cable isomorphism), is routed to the same tables up to that renaming, and keeps
//! `mu_sp = 1` in the order of its tuples' end-node indices; a degraded disguised QFT is refused
//! with a reason.

mod common;

use std::collections::HashMap;

use common::disguise::disguise;
use common::*;
use proptest::prelude::*;
use rayon::prelude::*;

use fabric_routing::{check, EngineKind, Pqft, QftTuples, RoutingError};
use fabric_topology::gen::{generate, Generated, PgftLayout};
use fabric_topology::{EndPortId, Fabric, Remote, SwitchId};

/// The generated switch with each switch's tuple, checked to be a bijection and a cable-by-cable
/// isomorphism of `f` onto the generated QFT (end ports onto the end node of their index).
fn isomorphism(f: &Fabric, t: &QftTuples, g: &Generated) -> Vec<SwitchId> {
    let gf = &g.fabric;
    assert_eq!(f.num_switches(), gf.num_switches());
    assert_eq!(f.num_end_ports(), gf.num_end_ports());
    let phi: Vec<SwitchId> = f
        .switch_ids()
        .map(|s| {
            g.layout
                .switch_of(&t.switch_addr[s.idx()])
                .expect("a tuple of the spec")
        })
        .collect();
    let mut hit = vec![false; gf.num_switches()];
    for &x in &phi {
        assert!(
            !std::mem::replace(&mut hit[x.idx()], true),
            "two switches share a tuple"
        );
    }
    let mut seen = vec![false; gf.num_end_ports()];
    for e in f.end_port_ids() {
        let d = t.end_port_index[e.idx()] as usize;
        assert!(!std::mem::replace(&mut seen[d], true), "two end ports share index {d}");
        let (leaf, _) = f.end_port(e).attach.unwrap();
        let (gleaf, _) = gf.end_port(EndPortId(d as u32)).attach.unwrap();
        assert_eq!(phi[leaf.idx()], gleaf, "end port {e:?} on the wrong leaf");
    }
    for s in f.switch_ids() {
        let mut mine: Vec<u32> = f.port_groups(s).iter().map(|g| phi[g.remote.idx()].0).collect();
        let mut theirs: Vec<u32> = gf.port_groups(phi[s.idx()]).iter().map(|g| g.remote.0).collect();
        mine.sort_unstable();
        theirs.sort_unstable();
        assert_eq!(mine, theirs, "switch {s:?}: not the neighbours of its tuple's switch");
    }
    phi
}

/// What a table entry leads to, in the generated fabric's terms: a switch or an end node index.
fn behind(f: &Fabric, s: SwitchId, port: u8, phi: &[SwitchId], t: Option<&QftTuples>) -> (bool, u32) {
    match f.switch(s).ports[port as usize].remote {
        Remote::Switch { sw, .. } => (true, phi[sw.idx()].0),
        Remote::EndPort(e) => (false, t.map_or(e.0, |t| t.end_port_index[e.idx()] as u32)),
        Remote::None => panic!("switch {s:?} port {port} is not cabled"),
    }
}

/// `mu^SP` with the end ports in the order of their end-node indices (the paper's shifts).
fn mu_sp_by_index(r: &Routed, t: &QftTuples) -> u32 {
    let mut live = live(&r.fabric);
    live.sort_by_key(|e| t.end_port_index[e.idx()]);
    let n = live.len();
    (1..n)
        .into_par_iter()
        .map_init(Vec::new, |c, k| mu_of(r, &live, |i| (i + k) % n, c))
        .max()
        .unwrap_or(0)
}

/// Disguises `spec`'s QFT (GUIDs in generator order or random) and checks the recognition, the
/// renaming-equality of the tables and `mu_sp = 1`.
fn check_disguised(spec: &str, seed: u64) {
    let g = generate(&spec.parse().unwrap()).unwrap();
    let named = route_with(&g.fabric, EngineKind::Pqft, 1);
    for keep_order in [true, false] {
        let f = disguise(&g.fabric, seed, keep_order);
        assert!(PgftLayout::recognize(&f).is_err(), "{spec}: still recognisable by name");
        let t = Pqft::recognize(&f).unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
        // Without cross-connections the structure cannot tell an XGFT from a PGFT with p = 1.
        let (a, b) = (&t.spec, &g.layout.spec);
        assert_eq!((&a.m, &a.w, &a.p), (&b.m, &b.w, &b.p), "{spec}");
        if b.p.iter().any(|&p| p > 1) {
            assert_eq!(a.kind, b.kind, "{spec}");
        }
        let phi = isomorphism(&f, &t, &g);
        if keep_order {
            // GUIDs in generator order: the generator's tuples.
            let mut mine: Vec<SwitchId> = f.switch_ids().collect();
            mine.sort_by_key(|&s| f.switch(s).guid);
            let mut theirs: Vec<SwitchId> = g.fabric.switch_ids().collect();
            theirs.sort_by_key(|&s| g.fabric.switch(s).guid);
            for (a, b) in mine.iter().zip(&theirs) {
                assert_eq!(t.switch_addr[a.idx()], g.layout.switch_addr[b.idx()], "{spec}");
            }
        }
        Pqft::check_fabric(&f).unwrap();
        let r = route_with(&f, EngineKind::Pqft, 1);
        // Identical tables up to the renaming: every (switch, destination) entry leads to the
        // switch / end node of the named fabric's entry.
        let by_index: HashMap<u64, EndPortId> = f.end_port_ids().map(|e| (t.end_port_index[e.idx()], e)).collect();
        let ident: Vec<SwitchId> = g.fabric.switch_ids().collect();
        for s in f.switch_ids() {
            let gs = phi[s.idx()];
            for d in 0..g.fabric.num_end_ports() as u64 {
                let e = by_index[&d];
                let mine = r.lfts.get(s, r.lids.base_lid(e));
                let theirs = named.lfts.get(gs, named.lids.base_lid(EndPortId(d as u32)));
                assert_eq!(
                    behind(&f, s, mine, &phi, Some(&t)),
                    behind(&g.fabric, gs, theirs, &ident, None),
                    "{spec} seed {seed} keep_order {keep_order}: switch {s:?}, end node {d}"
                );
            }
        }
        assert!(check::validity(&f, &r.lids, &r.lfts).valid, "{spec}");
        assert!(check::deadlock_free(&f, &r.ranking, &r.lids, &r.lfts), "{spec}");
        // The named fabric's mu_sp (its end ports are in index order): 1 on the constant-bisection
        // QFTs, the oversubscribed XGFT's own value otherwise.
        let want = if spec.starts_with("QFT") { 1 } else { mu_sp(&named) };
        assert_eq!(
            mu_sp_by_index(&r, &t),
            want,
            "{spec} seed {seed} keep_order {keep_order}"
        );
    }
}

#[test]
fn disguised_qfts_read_from_a_dump_are_routed_like_the_named_ones() {
    for (spec, seed) in [
        ("QFT(3;4,2,4;1,2,4;1,2,1)", 1),
        ("QFT(3;6,3,6;1,2,9;1,3,1)", 2),
        ("QFT(3;6,2,6;1,3,4;1,2,1)", 3),
        ("QFT(4;4,2,4,4;1,2,4,4;1,2,1,1)", 4),
        ("QFT(3;4,2,6;1,2,4;1,2,1)", 5),
        ("XGFT(3;4,3,4;1,3,2)", 6),
    ] {
        check_disguised(spec, seed);
    }
}

/// The 3 888-node QFT (36-port switches), disguised: mu_sp 1 as on the named fabric.
#[test]
fn the_disguised_3888_node_qft_has_mu_sp_1() {
    check_disguised("QFT(3;18,6,36;1,6,18;1,3,1)", 11);
}

#[test]
fn disguised_degraded_qfts_and_pgfts_with_parallel_cables_are_refused_with_a_reason() {
    let g = generate(&"QFT(3;4,2,4;1,2,4;1,2,1)".parse().unwrap()).unwrap();
    let d = common::degraded("QFT(3;4,2,4;1,2,4;1,2,1)", 2, 0, 5);
    for f in [disguise(&d, 3, true), disguise(&d, 3, false)] {
        match Pqft::recognize(&f) {
            Err(RoutingError::Unsupported { engine: "pqft", reason }) => {
                assert!(reason.contains("no QFT tuples"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
    // The complete one is recognised; a PGFT with parallel cables is not a QFT.
    assert!(Pqft::recognize(&disguise(&g.fabric, 1, true)).is_ok());
    let p = generate(&"PGFT(3;4,2,4;1,2,2;1,2,1)".parse().unwrap()).unwrap();
    match Pqft::recognize(&disguise(&p.fabric, 2, false)) {
        Err(RoutingError::Unsupported { engine: "pqft", reason }) => {
            assert!(reason.contains("parallel cables"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Any disguise of a complete cross-connected QFT: tuples of an isomorphism, the named
    /// fabric's tables up to renaming, mu_sp = 1.
    #[test]
    fn any_disguise_of_a_complete_qft_is_routed_contention_free(
        shape in prop::sample::select(vec![
            "QFT(3;4,2,4;1,2,4;1,2,1)",
            "QFT(3;6,3,6;1,2,9;1,3,1)",
            "QFT(3;4,2,6;1,2,4;1,2,1)",
        ]),
        seed in any::<u64>(),
    ) {
        check_disguised(shape, seed);
    }
}

/// Real captures (none of them a QFT, one a 214-switch 3-level fat-tree): a clear refusal, never
/// a panic.
#[test]
fn real_dumps_that_are_not_qfts_are_refused_with_a_reason() {
    for (name, text) in [
        (
            "janus",
            include_str!("../../fabric-topology/tests/data/real/mlunacek-qdr-3xIS5600-214sw.ibnet"),
        ),
        ("loginoff", include_str!("data/loginoff-sx6036-fdr10-8sw.ibnet")),
        ("psmn", include_str!("data/psmn-x5-voltaire4036-qdr.ibnet")),
        ("switchib", include_str!("data/switchib-edr-6sw-flat.ibnet")),
        ("ibtopotool", include_str!("data/ibtopotool-ufm-lab-degraded.ibnet")),
    ] {
        let f = fabric_topology::ibnet::parse(text, name).unwrap().fabric;
        match Pqft::recognize(&f) {
            Err(RoutingError::Unsupported { engine: "pqft", reason }) => {
                // switchib is a 2-level PGFT with parallel cables, the others no fat-tree at all.
                let why = if name == "switchib" {
                    "parallel cables"
                } else {
                    "not a quasi fat-tree"
                };
                assert!(reason.contains(why), "{name}: {reason}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}
