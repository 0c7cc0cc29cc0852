//! End-to-end with real processes: `ibsim` (the OFED fabric simulator, private socket name,
//! console on a pipe) and `fabricd` with `[driver] kind = "umad"` running under the umad2sim
//! preload shim. The daemon discovers, assigns LIDs, activates ports and uploads the LFTs over
//! SMPs; `ibroute` and `ibtracert` (same simulator, same shim) check what the switches really
//! hold, the ibsim console `Route` walks the simulator's own tables, and the three must agree
//! with the daemon's `Trace` (a walk of the LFTs it installed). An `Unlink` in the ibsim console
//! must lead to a new generation avoiding the dead cable, and `ReLink` to the original tables.
//!
//! Fabrics: a generated 2-level fat tree of 512 nodes and ibsim's own example file
//! `net.2sw2path4hca` (`fabric_ibsim_harness::NET_2SW2PATH4HCA`, source noted in its data file).
//!
//! Needs `ibsim` (ibsim-utils) and `ibroute`/`ibtracert` (infiniband-diags); the test fails
//! with an installation hint when they are missing.

mod common;
mod umad_sim;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{changed_blocks, lfts, run_with_deadline, test_dir, topology};
use fabric_ibsim_harness::{ibroute, ibtracert, node_guid, Ibsim, NET_2SW2PATH4HCA};
use fabric_proto::v1 as pb;
use umad_sim::{config, daemon_trace, next_generation};

/// 32 leaves x 16 nodes = 512 end ports, 16 spines (48 switches).
const SPEC: &str = "PGFT(2;16,32;1,16;1,1)";

/// Every switch (or only those in `only`) holds the LFT the daemon reports (`GetLft`), read
/// with `ibroute` over LID routing from the SM's node.
///
/// With a cable cut, a spine may only be reachable by an up-down-up path that fat-tree routing
/// does not provide, so after a fault only the leaves are checked.
async fn check_switches_hold(sim: &Ibsim, c: &mut fabric_proto::Client, only: Option<&[u64]>) -> HashMap<u64, Vec<u8>> {
    let r = c
        .get_lft(pb::GetLftRequest {
            switch: String::new(),
            format: pb::LftFormat::Raw as i32,
        })
        .await
        .expect("GetLft")
        .into_inner();
    for s in &r.switches {
        if only.is_some_and(|o| !o.contains(&s.guid)) {
            continue;
        }
        let want: std::collections::BTreeMap<u64, u64> = s
            .lft
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != 255)
            .map(|(l, &p)| (l as u64, u64::from(p)))
            .collect();
        assert!(!want.is_empty());
        let shown = ibroute(sim, &["-n", &s.lid.to_string()]);
        let diff: Vec<_> = want
            .keys()
            .chain(shown.keys())
            .filter(|l| want.get(l) != shown.get(l))
            .map(|l| (*l, want.get(l), shown.get(l)))
            .take(10)
            .collect();
        assert!(
            diff.is_empty(),
            "switch 0x{:016x} (LID {}) does not hold the daemon's LFT: (LID, daemon, ibroute) {diff:?}",
            s.guid,
            s.lid
        );
    }
    r.switches.into_iter().map(|s| (s.guid, s.lft)).collect()
}

/// Pseudo-random pairs of distinct end ports (fixed seed).
fn pairs(t: &pb::Topology, n: usize) -> Vec<(pb::EndPortInfo, pb::EndPortInfo)> {
    let eps: Vec<&pb::EndPortInfo> = t.end_ports.iter().filter(|e| e.base_lid > 0).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as usize % n
    };
    let mut out = Vec::new();
    while out.len() < n {
        let a = eps[next(eps.len())];
        let b = eps[next(eps.len())];
        if a.guid != b.guid {
            out.push((a.clone(), b.clone()));
        }
    }
    out
}

/// Between pseudo-random pairs of end ports, base LID to base LID and escape LID to escape
/// LID: `ibtracert` reaches the destination node, and its hops, the ibsim console `Route`
/// and the daemon's `Trace` are the same switches and ports.
async fn check_paths_agree(sim: &mut Ibsim, c: &mut fabric_proto::Client, t: &pb::Topology, n: usize) {
    // ibsim node ids: ours encode the GUID (`S-<guid>`, `H-<guid>`); others are the names.
    let by_name: HashMap<&str, u64> = t
        .switches
        .iter()
        .map(|s| (s.name.as_str(), s.guid))
        .chain(t.end_ports.iter().map(|e| (e.name.as_str(), e.node_guid)))
        .collect();
    let guid_of = |id: &str| node_guid(id).or_else(|| by_name.get(id).copied());
    for (a, b) in pairs(t, n) {
        for escape in [false, true] {
            let (sl, dl) = if escape {
                (a.escape_lid, b.escape_lid)
            } else {
                (a.base_lid, b.base_lid)
            };
            assert!(sl > 0 && dl > 0, "pair without LIDs: {a:?} {b:?}");
            let (traced, end) = ibtracert(sim, sl, dl);
            assert_eq!(
                end, b.node_guid,
                "ibtracert {sl} {dl} does not end at node 0x{:016x}",
                b.node_guid
            );
            let lines = sim
                .route(sl, dl)
                .unwrap_or_else(|e| panic!("ibsim Route {sl} {dl} failed:\n{e}"));
            let routed: Vec<(u64, u32, u32)> = lines
                .windows(2)
                .filter(|w| t.switches.iter().any(|s| Some(s.guid) == guid_of(&w[0].0)))
                .map(|w| (guid_of(&w[0].0).expect("switch id"), w[0].1, w[1].2))
                .collect();
            assert_eq!(
                lines.last().and_then(|l| guid_of(&l.0)),
                Some(b.node_guid),
                "ibsim Route {sl} {dl} does not end at 0x{:016x}: {lines:?}",
                b.node_guid
            );
            let daemon = daemon_trace(c, a.guid, b.guid, escape).await;
            assert!(!daemon.is_empty());
            assert_eq!(traced, daemon, "ibtracert {sl} {dl} and the daemon's Trace differ");
            assert_eq!(routed, daemon, "ibsim Route {sl} {dl} and the daemon's Trace differ");
        }
    }
}

#[test]
fn umad_daemon_brings_up_512_nodes_and_reroutes_around_an_unlinked_cable() {
    let dir = test_dir("umad-512");
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    assert_eq!(f.num_end_ports(), 512);
    let host = format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid);
    let mut sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host);
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, config("")).expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &cfg, &env);
    run_with_deadline(58, async {
        let t0 = Instant::now();
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        eprintln!("{SPEC}: first generation installed {:?} after start", t0.elapsed());
        assert_eq!(s.driver, "umad");
        let topo = topology(&mut c).await;
        assert_eq!(topo.switches.len(), f.num_switches());
        assert_eq!(topo.end_ports.len(), f.num_end_ports());
        assert!(topo.end_ports.iter().all(|e| e.base_lid > 0 && e.base_lid <= 0xBFFF));
        let original = check_switches_hold(&sim, &mut c, None).await;
        check_paths_agree(&mut sim, &mut c, &topo, 8).await;

        // Unlink a leaf uplink in the simulator: the daemon reroutes around it.
        let leaf = topo.switches.iter().find(|s| s.level == Some(0)).expect("a leaf");
        let up = leaf
            .ports
            .iter()
            .find(|p| p.remote_kind == pb::RemoteKind::Switch as i32)
            .expect("an uplink");
        let (lg, lp) = (leaf.guid, up.port);
        sim.console(&format!("Unlink \"S-{lg:016x}\"[{lp}]"));
        let s1 = next_generation(&d, &mut c, s.generation, Duration::from_secs(15)).await;
        let leaves: Vec<u64> = topo
            .switches
            .iter()
            .filter(|s| s.level == Some(0))
            .map(|s| s.guid)
            .collect();
        let around = check_switches_hold(&sim, &mut c, Some(&leaves)).await;
        assert!(
            !around[&lg].iter().any(|&p| u32::from(p) == lp),
            "leaf 0x{lg:016x} still forwards to its unlinked port {lp}"
        );
        let topo1 = topology(&mut c).await;
        check_paths_agree(&mut sim, &mut c, &topo1, 4).await;

        // ReLink: the original tables come back (same LIDs, deterministic routing).
        sim.console(&format!("ReLink \"S-{lg:016x}\"[{lp}]"));
        next_generation(&d, &mut c, s1.generation, Duration::from_secs(15)).await;
        let back = check_switches_hold(&sim, &mut c, None).await;
        assert_eq!(changed_blocks(&original, &back), 0);
        assert_eq!(changed_blocks(&original, &lfts(&mut c).await.1), 0);
    });
}

/// ibsim's own example: two switches joined by two parallel cables, two HCAs on each; the SM
/// runs on `Hca1`. Every switch holds the daemon's LFT (read by directed route: the second
/// switch may have no LID route from the SM's side in a fabric that is not a fat tree), and the
/// paths between all HCA pairs agree between `ibtracert`, ibsim's `Route` and the daemon.
#[test]
fn umad_daemon_brings_up_ibsim_example_net() {
    let dir = test_dir("umad-example");
    let net = NET_2SW2PATH4HCA;
    let mut sim = Ibsim::start(&dir, net, "Hca1".into());
    let cfg = dir.join("fabricd.toml");
    // Not a fat tree (the two switches are both leaves): up*/down* routes the base LIDs too.
    std::fs::write(&cfg, config("[routing]\nengine = \"updown\"\n")).expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &cfg, &env);
    run_with_deadline(40, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(20)).await;
        let topo = topology(&mut c).await;
        assert_eq!(topo.switches.len(), 2);
        assert_eq!(topo.end_ports.len(), 4);
        let r = c
            .get_lft(pb::GetLftRequest {
                switch: String::new(),
                format: pb::LftFormat::Raw as i32,
            })
            .await
            .expect("GetLft")
            .into_inner();
        for s in &r.switches {
            let want: std::collections::BTreeMap<u64, u64> = s
                .lft
                .iter()
                .enumerate()
                .filter(|(_, &p)| p != 255)
                .map(|(l, &p)| (l as u64, u64::from(p)))
                .collect();
            assert_eq!(
                ibroute(&sim, &["-n", &s.lid.to_string()]),
                want,
                "switch 0x{:016x}",
                s.guid
            );
        }
        check_paths_agree(&mut sim, &mut c, &topo, 12).await;
    });
}
