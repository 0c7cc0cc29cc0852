//! Issue #19: `fabric-agent-sim --generate SLIMFLY(5;4)` (and a Dragonfly, a HyperX) serves the
//! generated direct topology: the `oob` driver discovers exactly the generated cabling, tables
//! routed by Up*/Down* (valid on any connected graph) reach every pair through the agents' own
//! LFT bytes; and a miswired Slim Fly served from a file (two cables swapped, one missing) is
//! reported exactly by the cabling validation against the notation (Slim Fly paper §3.4).

mod common;

use std::time::Duration;

use common::{upload_all, Sim};
use fabric_oob::proto::VerifyAllPairsRequest;
use fabric_oob::{OobConfig, OobDriver};
use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all, EngineKind, Guid2Lid, RoutingContext};
use fabric_southbound::SouthboundDriver;
use fabric_topology::{gen, ibnet, validate, PortNum, Remote};

fn cfg(sim: &Sim) -> OobConfig {
    let mut c = OobConfig::new(&sim.inventory);
    c.connect_timeout = Duration::from_millis(500);
    c.request_timeout = Duration::from_secs(5);
    c.max_connections = 4;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_direct_topologies_are_discovered_routed_and_reach_every_pair() {
    for (spec, tag) in [("SLIMFLY(5;4)", "sf"), ("DRAGONFLY(2)", "df"), ("HYPERX(4,4;2)", "hx")] {
        let sim = Sim::start(&["--generate", spec], &format!("direct-{tag}"), false);
        let driver = OobDriver::open(cfg(&sim)).unwrap();
        let fabric = driver.discover().await.unwrap();
        let expected = gen::generate_str(spec, None).unwrap();
        let report = validate::compare(&expected, &fabric);
        assert!(report.is_clean(), "{spec}: {report}");
        assert_eq!(fabric.num_switches(), expected.num_switches());

        let ranking = rank(&fabric, &RankOptions::default());
        let lids = assign_lids(&fabric, &Guid2Lid::new(), 1, 0xBFFF).unwrap();
        let routed = route_all(
            &RoutingContext {
                fabric: &fabric,
                ranking: &ranking,
                lids: &lids,
            },
            EngineKind::UpDown,
        )
        .unwrap();
        driver.configure_lids(&fabric, &lids).await.unwrap();
        let written = upload_all(&driver, &fabric, &routed.lfts).await;
        assert_eq!(written, fabric.num_switches() * routed.lfts.num_blocks());
        let mut ctl = sim.control().await;
        let n = fabric.num_end_ports() as u64;
        for escape in [false, true] {
            let r = ctl
                .verify_all_pairs(VerifyAllPairsRequest { use_escape: escape })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(r.pairs_checked, n * (n - 1), "{spec}");
            assert_eq!(r.unreachable_count, 0, "{spec}: {:?}", r.unreachable.first());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn miswired_slim_fly_is_reported_exactly_against_the_notation() {
    let spec = "SLIMFLY(5;4)";
    let full = gen::generate_str(spec, None).unwrap();
    let bad = fabric_topology::gen::recable(
        &full,
        [("SLIMFLY S(0,1,1)", 6), ("SLIMFLY S(1,3,2)", 7)],
        Some(("SLIMFLY S(1,0,4)", 5)),
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("fabric-agent-sim-{}-direct-bad", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.topo");
    std::fs::write(&file, ibnet::write(&bad)).unwrap();
    let sim = Sim::start(&["--topology", file.to_str().unwrap()], "direct-bad-run", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let fabric = driver.discover().await.unwrap();
    let report = validate::compare(&full, &fabric);
    // Exactly the four wrong cable ends of the swap and the one missing cable, named by switch
    // and port.
    let name = |e: &validate::Endpoint| format!("{}:{}", e.node.name(), e.port);
    let mut miswired: Vec<(String, String, String)> = report
        .miswired
        .iter()
        .map(|m| {
            (
                name(&m.at),
                name(&m.actual),
                m.expected.as_ref().map(name).unwrap_or_default(),
            )
        })
        .collect();
    miswired.sort();
    let peer = |n: &str, p: PortNum| match full.switch(full.find_switch(n).unwrap()).ports[p as usize].remote {
        Remote::Switch { sw, port } => format!("{}:{port}", full.switch(sw).desc),
        r => panic!("{r:?}"),
    };
    let (a, c) = ("SLIMFLY S(0,1,1):6".to_string(), "SLIMFLY S(1,3,2):7".to_string());
    let (b, d) = (peer("SLIMFLY S(0,1,1)", 6), peer("SLIMFLY S(1,3,2)", 7));
    let mut want = vec![
        (a.clone(), d.clone(), b.clone()),
        (d.clone(), a.clone(), c.clone()),
        (c.clone(), b.clone(), d.clone()),
        (b.clone(), c.clone(), a.clone()),
    ];
    want.sort();
    assert_eq!(miswired, want, "{report}");
    assert_eq!(report.missing.len(), 1, "{report}");
    let m = &report.missing[0];
    let mut ends = [name(&m.a), name(&m.b)];
    ends.sort();
    let mut want_cut = ["SLIMFLY S(1,0,4):5".to_string(), peer("SLIMFLY S(1,0,4)", 5)];
    want_cut.sort();
    assert_eq!(ends, want_cut);
    assert!(report.extra.is_empty() && report.down.is_empty(), "{report}");
    assert!(report.missing_switches.is_empty() && report.extra_switches.is_empty());
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}
