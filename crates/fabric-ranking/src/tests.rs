//! Behaviour tests of [`crate::rank`] on generated and hand-made fabrics.

use std::collections::HashMap;

use fabric_topology::{fmt_guid, Fabric, FabricBuilder, FabricEvent, Guid, NodeType, SwitchId};

use crate::testfab::{first_spare, pgft, pgft_builder, sw_guid, xgft, PgftBuilder};
use crate::{rank, rank_report, statistical_top_switches, DiagKind, RankMethod, RankOptions, Ranking, Role};

/// [`rank`] downward from configured roots.
fn rank_from_roots(f: &Fabric, roots: Vec<Guid>) -> Ranking {
    rank(
        f,
        &RankOptions {
            roots,
            ..Default::default()
        },
    )
}

/// [`rank`] with configured roles.
fn rank_with_roles(f: &Fabric, roles: HashMap<Guid, Role>) -> Ranking {
    rank(
        f,
        &RankOptions {
            roles,
            ..Default::default()
        },
    )
}

fn levels(r: &crate::Ranking) -> Vec<u32> {
    r.level.iter().map(|l| l.expect("every switch ranked")).collect()
}

#[test]
fn complete_xgfts_rank_to_their_generator_levels() {
    for (m, w) in [
        (vec![4, 4], vec![1, 2]),
        (vec![2, 2, 3], vec![1, 2, 2]),
        (vec![4, 4, 2], vec![1, 2, 2]),
        (vec![2, 3, 2, 2], vec![1, 2, 1, 2]),
    ] {
        let t = xgft(&m, &w);
        let rep = rank_report(&t.fabric, &RankOptions::default());
        assert_eq!(levels(&rep.ranking), t.level, "XGFT {m:?} {w:?}");
        assert_eq!(rep.ranking.height, m.len() as u32);
        assert!(rep.ranking.diagnostics.is_empty(), "{:?}", rep.ranking.diagnostics);
        assert_eq!(rep.components.len(), 1);
        assert_eq!(rep.components[0].method, RankMethod::Upward);
        assert_eq!(rep.components[0].inconsistent_links, 0);
    }
}

#[test]
fn configured_roots_rank_downward_to_generator_levels() {
    let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
    let tops: Vec<u64> = (0..4).map(|i| sw_guid(3, i)).collect();
    let rep = rank_report(
        &t.fabric,
        &RankOptions {
            roots: tops.clone(),
            ..Default::default()
        },
    );
    assert_eq!(levels(&rep.ranking), t.level);
    assert!(rep.ranking.diagnostics.is_empty(), "{:?}", rep.ranking.diagnostics);
    assert_eq!(rep.components[0].method, RankMethod::ConfiguredRoots);
    let got: Vec<u64> = rep.components[0]
        .tops
        .iter()
        .map(|&s| t.fabric.switch(s).guid)
        .collect();
    assert_eq!(got, tops);
    // Role root is the same as a root GUID.
    let roles: HashMap<u64, Role> = tops.iter().map(|&g| (g, Role::Root)).collect();
    let r = rank_with_roles(&t.fabric, roles);
    assert_eq!(levels(&r), t.level);
}

/// Takes every end port of one switch down.
fn orphan(t: &crate::testfab::Built, sw: SwitchId) -> fabric_topology::Fabric {
    let ev: Vec<FabricEvent> = t.nodes[sw.idx()]
        .iter()
        .map(|&e| FabricEvent::EndPortDown(t.fabric.end_port(e).port_guid))
        .collect();
    t.fabric.apply(&ev).unwrap()
}

#[test]
fn flipped_leaf_is_fixed_by_the_leaf_role() {
    // Two levels: the orphaned leaf is ranked above the spines, with nothing inconsistent.
    let t = xgft(&[4, 4], &[1, 2]);
    let leaf = SwitchId(1);
    let f = orphan(&t, leaf);
    let r = rank(&f, &RankOptions::default());
    assert_eq!(r.level_of(leaf), Some(2), "upward ranking flips the orphaned leaf");
    assert_eq!(r.height, 3);
    assert!(r.diagnostics.is_empty());
    let roles = HashMap::from([(f.switch(leaf).guid, Role::Leaf)]);
    let r = rank_with_roles(&f, roles);
    assert_eq!(levels(&r), t.level);
    assert_eq!(r.height, 2);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);

    // Three levels: the orphan would sit with the tops.
    let t = xgft(&[2, 2, 3], &[1, 2, 2]);
    let leaf = SwitchId(4);
    let f = orphan(&t, leaf);
    assert_eq!(rank(&f, &RankOptions::default()).level_of(leaf), Some(2));
    let roles = HashMap::from([(f.switch(leaf).guid, Role::Leaf)]);
    let r = rank_with_roles(&f, roles);
    assert_eq!(levels(&r), t.level);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    // Downward ranking from configured roots places it correctly too.
    let roots = (0..4).map(|i| sw_guid(3, i)).collect();
    let r = rank_from_roots(&f, roots);
    assert_eq!(levels(&r), t.level);
}

/// `XGFT(3; 4,4,4; 1,2,2)` plus two leaves of 4 nodes cabled straight to every top switch
/// (leaves at two heights). Returns the fabric, expected levels, and the extra leaves.
fn two_heights() -> (fabric_topology::Fabric, Vec<u32>, Vec<SwitchId>, Vec<SwitchId>) {
    let (m, w, p) = ([4, 4, 4], [1, 2, 2], [1, 1, 1]);
    let PgftBuilder {
        builder: mut b,
        mut level,
        ids,
        ..
    } = pgft_builder(&m, &w, &p, 2);
    let tops = ids[3].clone();
    let spare = first_spare(&m, &w, &p, 3);
    let mut high = Vec::new();
    for h in 0..2u8 {
        let s = b
            .add_switch(0x0003_0000_0000_0000 | u64::from(h), format!("high-{h}"), 8)
            .unwrap();
        level.push(1);
        for (k, &t) in tops.iter().enumerate() {
            b.connect_switches(s, 5 + k as u8, t, spare + h).unwrap();
        }
        for n in 0..4u8 {
            let g = 0x0009_0000_0000_0000 | (u64::from(h) << 8) | u64::from(n);
            let ep = b
                .add_end_port(g + 1, g, format!("hnode-{h}-{n}"), 1, 1, NodeType::Compute)
                .unwrap();
            b.connect_end_port(ep, s, n + 1).unwrap();
        }
        high.push(s);
    }
    (b.build(), level, tops, high)
}

#[test]
fn statistical_criterion_finds_the_tops_when_leaves_sit_at_two_heights() {
    let (f, expect, tops, high) = two_heights();
    assert_eq!(statistical_top_switches(&f), tops);
    let rep = rank_report(&f, &RankOptions::default());
    let r = &rep.ranking;
    assert_eq!(levels(r), expect);
    assert_eq!(r.height, 3);
    assert_eq!(rep.components[0].method, RankMethod::Statistical);
    assert_eq!(rep.components[0].tops, tops);
    assert_eq!(r.diagnostics_of(DiagKind::SameLevelLink).count(), 0);
    assert_eq!(r.diagnostics_of(DiagKind::SkipLevelLink).count(), 0);
    // One note for the component, one per high leaf.
    let irregular: Vec<_> = r.diagnostics_of(DiagKind::Irregular).collect();
    assert_eq!(irregular.len(), 3, "{irregular:?}");
    for h in high {
        let g = f.switch(h).guid;
        assert!(
            irregular
                .iter()
                .any(|d| d.switch == Some(g) && d.message.contains("level 1")),
            "{irregular:?}"
        );
    }
}

#[test]
fn statistical_criterion_on_complete_fat_trees_selects_the_top_level() {
    for (m, w) in [
        (vec![4, 4], vec![1, 2]),
        (vec![4, 4, 4], vec![1, 2, 2]),
        (vec![2, 3, 3, 3], vec![1, 2, 2, 2]),
    ] {
        let t = xgft(&m, &w);
        let top = m.len() as u32 - 1;
        let expect: Vec<SwitchId> = t.fabric.switch_ids().filter(|s| t.level[s.idx()] == top).collect();
        assert_eq!(statistical_top_switches(&t.fabric), expect, "XGFT {m:?} {w:?}");
    }
    // Two top-level subtrees: a middle switch's histogram ties (16 nodes at 1 hop, 16 at 3) and
    // ties go to the smaller distance, so Alg. 14 elects the middle level (documented limit).
    let t = xgft(&[4, 4, 2], &[1, 2, 2]);
    let mid: Vec<SwitchId> = t.fabric.switch_ids().filter(|s| t.level[s.idx()] == 1).collect();
    assert_eq!(statistical_top_switches(&t.fabric), mid);
}

#[test]
fn leaf_to_leaf_link_is_reported_once_with_guid_and_port() {
    let (m, w, p) = ([4, 4], [1, 2], [1, 1]);
    let PgftBuilder {
        builder: mut b,
        level,
        ids,
        ..
    } = pgft_builder(&m, &w, &p, 1);
    let spare = first_spare(&m, &w, &p, 1);
    let (a, c) = (ids[1][0], ids[1][2]);
    b.connect_switches(c, spare, a, spare).unwrap();
    let f = b.build();
    let rep = rank_report(&f, &RankOptions::default());
    assert_eq!(levels(&rep.ranking), level);
    assert_eq!(rep.components[0].method, RankMethod::Upward);
    let d = &rep.ranking.diagnostics;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].kind, DiagKind::SameLevelLink);
    // Reported at the end with the smaller GUID, naming the other end.
    assert_eq!((d[0].switch, d[0].port), (Some(f.switch(a).guid), Some(spare)));
    assert!(
        d[0].message
            .contains(&format!("{}[{spare}]", fmt_guid(f.switch(c).guid))),
        "{}",
        d[0]
    );
    assert!(d[0]
        .to_string()
        .starts_with(&format!("{}[{spare}]: ", fmt_guid(f.switch(a).guid))));
    assert_eq!(
        d[0].message,
        format!("link to {}[{spare}]: both at level 0", fmt_guid(f.switch(c).guid))
    );
}

#[test]
fn level_skipping_link_is_reported_with_guid_and_port() {
    // A leaf of a 3-level XGFT cabled straight to a top switch.
    let (m, w, p) = ([4, 4, 4], [1, 2, 2], [1, 1, 1]);
    let PgftBuilder {
        builder: mut b,
        level,
        ids,
        ..
    } = pgft_builder(&m, &w, &p, 1);
    let (leaf, top) = (ids[1][5], ids[3][2]);
    let (lp, tp) = (first_spare(&m, &w, &p, 1), first_spare(&m, &w, &p, 3));
    b.connect_switches(top, tp, leaf, lp).unwrap();
    let f = b.build();
    let rep = rank_report(&f, &RankOptions::default());
    assert_eq!(levels(&rep.ranking), level, "the shortcut must not move any switch");
    assert_eq!(rep.components[0].method, RankMethod::Upward);
    assert_eq!(rep.components[0].inconsistent_links, 1);
    let skip: Vec<_> = rep.ranking.diagnostics_of(DiagKind::SkipLevelLink).collect();
    assert_eq!(skip.len(), 1, "{:?}", rep.ranking.diagnostics);
    assert_eq!((skip[0].switch, skip[0].port), (Some(f.switch(leaf).guid), Some(lp)));
    assert!(
        skip[0]
            .message
            .contains(&format!("{}[{tp}]", fmt_guid(f.switch(top).guid))),
        "{}",
        skip[0]
    );
    assert!(skip[0].message.contains("level 0 to level 2"), "{}", skip[0]);
    // The whole message, in `fmt_guid`'s notation (built by one `format!` per cable).
    assert_eq!(
        skip[0].message,
        format!(
            "link to {}[{tp}]: level 0 to level 2, skipping 1 level(s)",
            fmt_guid(f.switch(top).guid)
        )
    );
    assert_eq!(rep.ranking.diagnostics_of(DiagKind::SameLevelLink).count(), 0);
    // The top switch, pulled to level 1 by the BFS, is reported as moved.
    let moved: Vec<_> = rep.ranking.diagnostics_of(DiagKind::Irregular).collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0].switch, Some(f.switch(top).guid));
}

#[test]
fn middle_level_skip_in_four_levels() {
    // A level-1 switch cabled to a top switch of a 4-level XGFT: the BFS pulls the top (and
    // through it nothing else) down; the repair restores it.
    let (m, w, p) = ([2, 2, 2, 3], [1, 2, 2, 2], [1, 1, 1, 1]);
    let PgftBuilder {
        builder: mut b,
        level,
        ids,
        ..
    } = pgft_builder(&m, &w, &p, 1);
    let (mid, top) = (ids[2][3], ids[4][1]);
    b.connect_switches(mid, first_spare(&m, &w, &p, 2), top, first_spare(&m, &w, &p, 4))
        .unwrap();
    let rep = rank_report(&b.build(), &RankOptions::default());
    let r = &rep.ranking;
    assert_eq!(levels(r), level);
    let skip: Vec<_> = r.diagnostics_of(DiagKind::SkipLevelLink).collect();
    assert_eq!(skip.len(), 1, "{:?}", r.diagnostics);
    assert!(
        skip[0].message.contains("level 1 to level 3, skipping 1 level(s)"),
        "{}",
        skip[0]
    );
}

#[test]
fn self_loop_is_reported_once() {
    let (m, w, p) = ([4, 4], [1, 2], [1, 1]);
    let PgftBuilder {
        builder: mut b,
        level,
        ids,
        ..
    } = pgft_builder(&m, &w, &p, 2);
    let s = ids[2][1];
    let sp = first_spare(&m, &w, &p, 2);
    b.connect_switches(s, sp + 1, s, sp).unwrap();
    let f = b.build();
    let r = rank(&f, &RankOptions::default());
    assert_eq!(levels(&r), level);
    assert_eq!(r.diagnostics.len(), 1, "{:?}", r.diagnostics);
    let d = &r.diagnostics[0];
    assert_eq!(
        (d.kind, d.switch, d.port),
        (DiagKind::SelfLoop, Some(f.switch(s).guid), Some(sp))
    );
}

#[test]
fn unknown_configured_guids_are_reported() {
    let t = xgft(&[4, 4], &[1, 2]);
    let node_port = t.fabric.end_port(t.nodes[0][0]).port_guid;
    let opts = RankOptions {
        roots: vec![0xdead, node_port],
        roles: HashMap::from([(0xbeef, Role::Leaf), (sw_guid(1, 0), Role::Leaf)]),
    };
    let r = rank(&t.fabric, &opts);
    let unknown: Vec<_> = r
        .diagnostics_of(DiagKind::UnknownGuid)
        .map(|d| (d.switch, d.message.clone()))
        .collect();
    assert_eq!(unknown.len(), 3, "{unknown:?}");
    assert_eq!(unknown[0].0, Some(0xbeef));
    assert_eq!(unknown[1].0, Some(0xdead));
    assert!(unknown[2].1.contains("end port"), "{unknown:?}");
    // No usable root: ranked upward as if none were given.
    assert_eq!(levels(&r), t.level);
    assert_eq!(r.diagnostics.len(), 3);
}

#[test]
fn dead_and_isolated_switches() {
    let (m, w, p) = ([4, 4], [1, 2], [1, 1]);
    let PgftBuilder {
        builder: mut b,
        mut level,
        ids,
        ..
    } = pgft_builder(&m, &w, &p, 0);
    let lonely = b.add_switch(0x77, "lonely", 4).unwrap();
    level.push(u32::MAX);
    let f = b.build();
    let spine = ids[2][0];
    let f = f.apply(&[FabricEvent::SwitchDown(f.switch(spine).guid)]).unwrap();
    let rep = rank_report(&f, &RankOptions::default());
    let r = &rep.ranking;
    assert_eq!(r.level_of(spine), None);
    assert_eq!(r.level_of(lonely), None);
    for s in f.switch_ids().filter(|&s| s != spine && s != lonely) {
        assert_eq!(r.level_of(s), Some(level[s.idx()]));
    }
    assert_eq!(r.diagnostics.len(), 1, "{:?}", r.diagnostics);
    assert_eq!(
        (r.diagnostics[0].kind, r.diagnostics[0].switch),
        (DiagKind::Unranked, Some(0x77))
    );
    assert_eq!(rep.components.len(), 2);
    assert_eq!(rep.components[1].method, RankMethod::Unranked);
    assert_eq!(rep.components[1].switches, vec![lonely]);
}

#[test]
fn spine_role_ignores_a_host_on_a_spine() {
    let (m, w, p) = ([4, 4], [1, 2], [1, 1]);
    let PgftBuilder {
        builder: mut b,
        level,
        ids,
        ..
    } = pgft_builder(&m, &w, &p, 1);
    let spine = ids[2][1];
    let ep = b.add_end_port(0x5001, 0x5000, "ufm", 1, 1, NodeType::Service).unwrap();
    b.connect_end_port(ep, spine, first_spare(&m, &w, &p, 2)).unwrap();
    let f = b.build();
    // Without a role the spine is first ranked as a leaf cabled to every leaf; the downward
    // ranking from the statistical tops (compute nodes only: the service host does not count)
    // puts it back.
    let rep = rank_report(&f, &RankOptions::default());
    assert_eq!(rep.components[0].method, RankMethod::Statistical);
    assert_eq!(levels(&rep.ranking), level);
    let roles = HashMap::from([(f.switch(spine).guid, Role::Spine)]);
    let r = rank_with_roles(&f, roles);
    assert_eq!(levels(&r), level);
    assert_eq!(r.diagnostics.len(), 1, "{:?}", r.diagnostics);
    assert_eq!(
        (r.diagnostics[0].kind, r.diagnostics[0].switch),
        (DiagKind::Irregular, Some(f.switch(spine).guid))
    );
}

#[test]
fn empty_fabric() {
    let r = rank(&FabricBuilder::new().build(), &RankOptions::default());
    assert_eq!((r.level.len(), r.height, r.diagnostics.len()), (0, 0, 0));
}

#[test]
fn roots_in_one_component_only() {
    // Two disjoint 2-level trees; roots given for the first only.
    let (m, w, p) = ([2, 2], [1, 2], [1, 1]);
    let PgftBuilder {
        builder: mut b, ids, ..
    } = pgft_builder(&m, &w, &p, 0);
    let a = b.add_switch(0x100, "island-leaf", 4).unwrap();
    let ep = b
        .add_end_port(0x201, 0x200, "island-node", 1, 1, NodeType::Compute)
        .unwrap();
    b.connect_end_port(ep, a, 1).unwrap();
    let f = b.build();
    let roots = ids[2].iter().map(|&s| f.switch(s).guid).collect();
    let rep = rank_report(
        &f,
        &RankOptions {
            roots,
            ..Default::default()
        },
    );
    assert_eq!(rep.components.len(), 2);
    assert_eq!(rep.components[0].method, RankMethod::ConfiguredRoots);
    assert_eq!(rep.components[1].method, RankMethod::Upward);
    assert_eq!(rep.ranking.level_of(a), Some(0));
    let notes: Vec<_> = rep.ranking.diagnostics_of(DiagKind::Irregular).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].switch, Some(0x100));
}

/// Every switch of the 35k-end-node 4-level PGFT gets its generator level, read back from its
/// ibnetdiscover text, and the statistical criterion finds exactly the top switches. Large:
/// run with `cargo test --release -p fabric-ranking -- --ignored`; the timing of the same steps
/// is the `parse_rank` criterion bench.
#[test]
#[ignore = "large (35k end nodes, 6 804 switches): run in release with --ignored"]
fn ranks_the_35k_end_node_four_level_pgft() {
    use fabric_topology::{gen, ibnet};
    let spec: gen::PgftSpec = "PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)".parse().unwrap();
    let g = gen::generate(&spec).unwrap();
    let text = ibnet::write(&g.fabric);
    let parsed = ibnet::parse(&text, "pgft4.topo").unwrap();
    let r = rank(&parsed.fabric, &RankOptions::default());
    let tops = statistical_top_switches(&parsed.fabric);
    let f = &parsed.fabric;
    for s in f.switch_ids() {
        let (l, _) = spec.decode_switch_guid(f.switch(s).guid).unwrap();
        assert_eq!(r.level_of(s), Some(l));
    }
    assert!(r.diagnostics.is_empty());
    assert_eq!(tops.len() as u64, spec.switches_at(3));
    assert!(tops.iter().all(|&s| r.level_of(s) == Some(3)));
}

#[test]
fn middle_switch_without_down_links_flips_unless_roots_are_given() {
    // A line-board-like level-1 switch whose leaf cables are all gone sits two levels up (seen on
    // a real director: the upward ranking has nothing to contradict it); configured roots place
    // it back at level 1.
    let t = xgft(&[2, 2, 3], &[1, 2, 2]);
    let mid = t.fabric.switch_ids().find(|s| t.level[s.idx()] == 1).unwrap();
    let f = &t.fabric;
    let ev: Vec<FabricEvent> = f
        .port_groups(mid)
        .iter()
        .filter(|g| t.level[g.remote.idx()] == 0)
        .flat_map(|g| {
            g.ports.iter().map(|&p| FabricEvent::LinkDown {
                switch: f.switch(mid).guid,
                port: p,
            })
        })
        .collect();
    assert_eq!(ev.len(), 2);
    let f = f.apply(&ev).unwrap();
    let r = rank(&f, &RankOptions::default());
    assert_eq!(r.level_of(mid), Some(3));
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    let roots = (0..4).map(|i| sw_guid(3, i)).collect();
    let r = rank_from_roots(&f, roots);
    assert_eq!(levels(&r), t.level);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
}

#[test]
fn spine_carrying_hosts_is_found_by_the_statistical_criterion() {
    // Two spines, four leaves; one spine also carries two hosts (seen on a real SX6036 fabric).
    // Upward ranking makes it a leaf cabled to every leaf; the downward ranking from the
    // statistical tops has no inconsistency and wins.
    let (m, w, p) = ([4, 4], [1, 2], [1, 1]);
    let PgftBuilder {
        builder: mut b,
        level,
        ids,
        ..
    } = pgft_builder(&m, &w, &p, 2);
    let spine = ids[2][0];
    for n in 0..2u8 {
        let ep = b
            .add_end_port(
                0x6001 + u64::from(n),
                0x6000 + u64::from(n),
                "host",
                1,
                1,
                NodeType::Compute,
            )
            .unwrap();
        b.connect_end_port(ep, spine, first_spare(&m, &w, &p, 2) + n).unwrap();
    }
    let f = b.build();
    let rep = rank_report(&f, &RankOptions::default());
    assert_eq!(levels(&rep.ranking), level);
    assert_eq!(rep.components[0].method, RankMethod::Statistical);
    assert_eq!(rep.components[0].tops, ids[2]);
    let irregular: Vec<_> = rep.ranking.diagnostics_of(DiagKind::Irregular).collect();
    assert_eq!(rep.ranking.diagnostics.len(), 2, "{:?}", rep.ranking.diagnostics);
    assert!(
        irregular.iter().any(|d| d.switch == Some(f.switch(spine).guid)),
        "{irregular:?}"
    );
}

#[test]
fn all_configured_roots_down_is_reported_once() {
    let t = xgft(&[4, 4], &[1, 2]);
    let tops: Vec<u64> = (0..2).map(|i| sw_guid(2, i)).collect();
    let f = t
        .fabric
        .apply(&[FabricEvent::SwitchDown(tops[0]), FabricEvent::SwitchDown(tops[1])])
        .unwrap();
    let r = rank_from_roots(&f, tops);
    assert_eq!(r.diagnostics.len(), 1, "{:?}", r.diagnostics);
    assert_eq!(
        (r.diagnostics[0].kind, r.diagnostics[0].switch),
        (DiagKind::Irregular, None)
    );
    assert!(r.diagnostics[0]
        .message
        .contains("none of the 2 configured root switches is up"));
    assert_eq!(r.height, 1);
}
