//! The export on the real `ibnetdiscover` dumps of fabric-topology and on generated fat-trees:
//! every live host is written once per leaf it is on, names are valid and unique, the tree is
//! consistent (every child written before it is referenced), and what is left out is reported.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use fabric_ranking::{rank, RankOptions};
use fabric_slurm::hostlist::expand;
use fabric_slurm::{Format, SlurmTopology};
use fabric_topology::gen::generate_str;
use fabric_topology::{ibnet, Fabric, FabricEvent};

fn real(name: &str) -> Fabric {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fabric-topology/tests/data/real")
        .join(name);
    ibnet::read_file(&p).expect("dump").fabric
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Switch name → (nodes, child switches) of a tree file.
type Lines = HashMap<String, (Vec<String>, Vec<String>)>;

/// Checks the structure and reads the tree file back.
fn check(fabric: &Fabric) -> (SlurmTopology, Lines) {
    let ranking = rank(fabric, &RankOptions::default());
    let t = SlurmTopology::build(fabric, &ranking);
    let text = t.render(Format::Tree);
    let mut lines: Lines = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut name = None;
        let mut entry = (Vec::new(), Vec::new());
        for kv in line.split(' ') {
            let (k, v) = kv.split_once('=').expect("key=value");
            match k {
                "SwitchName" => name = Some(v.to_string()),
                "Nodes" => entry.0 = expand(v).unwrap(),
                "Switches" => {
                    entry.1 = expand(v).unwrap();
                    for c in &entry.1 {
                        assert!(lines.contains_key(c), "{c} referenced before it is written:\n{text}");
                    }
                }
                _ => panic!("unexpected key {k} in {line}"),
            }
        }
        let name = name.expect("SwitchName");
        assert!(valid_name(&name), "{name}");
        assert!(entry.0.is_empty() != entry.1.is_empty(), "{line}");
        assert!(lines.insert(name.clone(), entry).is_none(), "{name} written twice");
    }
    let hosts: BTreeSet<String> = lines.values().flat_map(|e| e.0.iter().cloned()).collect();
    assert_eq!(hosts, t.hosts.iter().cloned().collect::<BTreeSet<_>>());
    for h in &hosts {
        assert!(valid_name(h), "{h}");
    }
    // Blocks: every written host exactly once.
    let mut in_blocks = Vec::new();
    for b in &t.blocks {
        in_blocks.extend(b.nodes.iter().cloned());
    }
    let n = in_blocks.len();
    let set: BTreeSet<String> = in_blocks.into_iter().collect();
    assert_eq!(n, set.len(), "a host in two blocks");
    assert_eq!(set, hosts);
    (t, lines)
}

#[test]
fn real_dumps_export_every_live_host() {
    // (file, hosts, tree switches, warnings containing)
    let cases: &[(&str, usize, usize, &[&str])] = &[
        ("switchib-edr-6sw-flat.ibnet", 96, 6, &[]),
        (
            "loginoff-sx6036-fdr10-8sw.ibnet",
            144,
            9,
            &["hosts on switches above the leaves"],
        ),
        ("mlunacek-qdr-3xIS5600-214sw.ibnet", 1356, 214, &[]),
        (
            "psmn-x5-voltaire4036-qdr.ibnet",
            89,
            0,
            &["89 end nodes without a host name"],
        ),
        ("ibtopotool-ufm-lab-degraded.ibnet", 0, 0, &[]),
    ];
    for (file, hosts, switches, warns) in cases {
        let f = real(file);
        let (t, _) = check(&f);
        eprintln!(
            "{file}: {} hosts, {} switches, {} blocks",
            t.hosts.len(),
            t.switches.len(),
            t.blocks.len()
        );
        for w in &t.warnings {
            eprintln!("  warning: {w}");
        }
        if *hosts > 0 {
            assert_eq!(t.hosts.len(), *hosts, "{file}");
        }
        if *switches > 0 {
            assert_eq!(t.switches.len(), *switches, "{file}");
        }
        for w in *warns {
            assert!(
                t.warnings.iter().any(|x| x.contains(w)),
                "{file}: no warning {w:?} in {:?}",
                t.warnings
            );
        }
    }
}

#[test]
fn the_six_switch_fabric_reads_as_four_leaves_under_two_spines() {
    let f = real("switchib-edr-6sw-flat.ibnet");
    let (t, lines) = check(&f);
    // Every switch has the same description: GUID names.
    assert!(t.switches.iter().all(|s| s.name.starts_with("sw-")));
    let leaves: Vec<_> = t.switches.iter().filter(|s| s.level == 0).collect();
    assert_eq!(leaves.len(), 4);
    assert!(leaves.iter().all(|l| l.nodes.len() == 24));
    let spines: Vec<_> = t.switches.iter().filter(|s| s.level == 1).collect();
    assert_eq!(spines.len(), 2);
    assert!(spines.iter().all(|s| lines[&s.name].1.len() == 4));
    let text = t.render(Format::Tree);
    assert!(text.contains(",node[021-040]\n"), "{text}");
    assert_eq!(t.block_size(), Some(24));
}

#[test]
fn generated_fat_trees_and_faults_are_reported_not_dropped() {
    let f = generate_str("PGFT(3;4,4,4;1,2,2;1,2,1)", None).unwrap();
    let (t, _) = check(&f);
    assert_eq!(t.hosts.len(), 64);
    assert_eq!(t.blocks.len(), 16);
    assert_eq!(t.block_size(), Some(4));
    // GUID names, said once.
    assert!(
        t.warnings[0].contains("64 end nodes without a host name"),
        "{:?}",
        t.warnings
    );
    // A leaf down: its hosts and the leaf are reported.
    let leaf = f.switch_ids().find(|&s| f.is_leaf(s)).unwrap();
    let g = f.switch(leaf).guid;
    let down = f.apply(&[FabricEvent::SwitchDown(g)]).unwrap();
    let (t2, _) = check(&down);
    assert_eq!(t2.hosts.len(), 60);
    assert!(
        t2.warnings
            .iter()
            .any(|w| w.contains("4 hosts without a live end port")),
        "{:?}",
        t2.warnings
    );
    assert!(
        t2.warnings
            .iter()
            .any(|w| w.contains("switch(es) down, left out: PGFT_L0")),
        "{:?}",
        t2.warnings
    );
    assert_ne!(t.render(Format::Tree), t2.render(Format::Tree));
    // Same topology, same bytes.
    assert_eq!(t.render(Format::Yaml), check(&f).0.render(Format::Yaml));
}

#[test]
fn block_and_yaml_follow_the_documented_grammar() {
    let f = generate_str("PGFT(2;4,4;1,2;1,2)", None).unwrap();
    let ranking = rank(&f, &RankOptions::default());
    let t = SlurmTopology::build(&f, &ranking);
    let block = t.render(Format::Block);
    let body: Vec<&str> = block.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(body.len(), 5, "{block}");
    for l in &body[..4] {
        assert!(
            l.starts_with("BlockName=b-PGFT_L0_") && l.contains(" Nodes=guid-"),
            "{l}"
        );
    }
    assert_eq!(body[4], "BlockSizes=4");
    let yaml = t.render(Format::Yaml);
    assert!(yaml.contains("- topology: \"fabric-tree\"\n  cluster_default: true\n  tree:\n    switches:\n      - switch: \"PGFT_L0_S_0_0\"\n        nodes: \"guid-"), "{yaml}");
    assert!(yaml.contains("        children: \"PGFT_L0_S_0_[0-3]\""), "{yaml}");
    assert!(
        yaml.contains("  block:\n    block_sizes:\n      - 4\n    blocks:\n      - block: \"b-PGFT_L0_S_0_0\""),
        "{yaml}"
    );
}
