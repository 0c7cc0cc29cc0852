//! Issue #19, topology-agnostic mode: `fat_tree_shape` says "fat-tree" on complete and degraded
//! fat-trees (PGFT, QFT, the real JANUS dump) and "not a fat-tree" on the direct topologies
//! (Slim Fly, Dragonfly, HyperX, random regular graphs), complete and degraded.

use fabric_ranking::{fat_tree_shape, rank, RankOptions, TopologyShape};
use fabric_topology::gen::{generate_str, Degrade};
use fabric_topology::Fabric;

fn shape(f: &Fabric) -> TopologyShape {
    fat_tree_shape(f, &rank(f, &RankOptions::default()))
}

fn gen(spec: &str, remove_links: usize) -> Fabric {
    let d = Degrade {
        remove_links,
        remove_switches: 0,
        seed: 7,
    };
    generate_str(spec, (remove_links > 0).then_some(&d)).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

#[test]
fn fat_trees_are_fat_trees() {
    for (spec, cut) in [
        ("PGFT(2;16,32;1,16;1,1)", 0),
        ("PGFT(3;4,4,4;1,4,4;1,1,2)", 0),
        ("PGFT(3;4,4,4;1,4,4;1,1,2)", 12),
        ("PGFT(2;16,32;1,16;1,1)", 40),
        ("QFT(3;4,2,6;1,2,4;1,2,1)", 0),
    ] {
        let s = shape(&gen(spec, cut));
        assert!(s.switch_cables > 0, "{spec}: {s:?}");
        assert!(s.fat_tree, "{spec} minus {cut} cables: {s:?}");
        assert_eq!(s.inconsistent_cables, 0, "{spec} minus {cut} cables: {s:?}");
    }
    let janus = fabric_topology::ibnet::parse(
        include_str!("../../fabric-topology/tests/data/real/mlunacek-qdr-3xIS5600-214sw.ibnet"),
        "janus",
    )
    .unwrap()
    .fabric;
    let s = shape(&janus);
    assert!(s.fat_tree && s.switch_cables > 100, "janus: {s:?}");
}

#[test]
fn direct_topologies_are_not_fat_trees() {
    for (spec, cut) in [
        ("SLIMFLY(5;4)", 0),
        ("SLIMFLY(5;4)", 4),
        ("SLIMFLY(7;5)", 0),
        ("DRAGONFLY(2)", 0),
        ("DRAGONFLY(4,2,2)", 3),
        ("HYPERX(4,4;2)", 0),
        ("RRG(32,5,2;3)", 0),
        ("RRG(32,5,2;3)", 4),
    ] {
        let s = shape(&gen(spec, cut));
        assert!(!s.fat_tree, "{spec} minus {cut} cables: {s:?}");
        assert!(2 * s.inconsistent_cables > s.switch_cables, "{spec}: {s:?}");
    }
}
