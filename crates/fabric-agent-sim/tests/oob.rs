//! End-to-end: `fabric-agent-sim` runs as a separate process; the `oob` driver (in process)
//! discovers the fabric, we route it (rank + assign_lids + route_all), upload through the agents,
//! and the simulator traces every pair through the agents' own LFT bytes. Faults injected in the
//! simulator come back as driver events.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{upload_all, Sim};
use fabric_oob::proto::{CommandRequest, GetSlToVlRequest, SlToVlTable, VerifyAllPairsRequest};
use fabric_oob::{OobConfig, OobDriver};
use fabric_southbound::{LftBlockWrite, SouthboundDriver};
use fabric_topology::{gen, validate, FabricEvent};

const SPEC: &str = "XGFT(2;4,4;1,4)";

fn cfg(sim: &Sim) -> OobConfig {
    let mut c = OobConfig::new(&sim.inventory);
    c.connect_timeout = Duration::from_millis(300);
    c.request_timeout = Duration::from_secs(2);
    c.unreachable_deadline = Duration::from_millis(800);
    c.max_connections = 4;
    c.max_retries = 2;
    c
}

async fn next_matching(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<FabricEvent>,
    within: Duration,
    want: impl Fn(&FabricEvent) -> bool,
) -> Option<FabricEvent> {
    let end = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(end, rx.recv()).await {
            Ok(Some(ev)) if want(&ev) => return Some(ev),
            Ok(Some(_)) => continue,
            _ => return None,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_route_upload_verify_and_faults() {
    let sim = Sim::start(&["--generate", SPEC], "e2e", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    assert_eq!(driver.caps().max_lid, 0xFF_FFFF);
    let fabric = driver.discover().await.unwrap();
    assert!(
        driver.discovery_warnings().is_empty(),
        "{:?}",
        driver.discovery_warnings()
    );
    // The discovered cabling is exactly the generated one.
    let expected = gen::generate_str(SPEC, None).unwrap();
    let report = validate::compare(&expected, &fabric);
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        fabric.end_ports().iter().map(|e| e.port_guid).collect::<Vec<_>>(),
        expected.end_ports().iter().map(|e| e.port_guid).collect::<Vec<_>>()
    );

    // Route with LMC 1 and addresses above 16 bits' worth of room, upload, verify in the simulator.
    let (lids, lfts) = common::route(&fabric, 0xFF_FFFF);
    driver.configure_lids(&fabric, &lids).await.unwrap();
    let written = upload_all(&driver, &fabric, &lfts).await;
    assert_eq!(written, fabric.num_switches() * lfts.num_blocks());
    let mut ctl = sim.control().await;
    let n = fabric.num_end_ports() as u64;
    for escape in [false, true] {
        let r = ctl
            .verify_all_pairs(VerifyAllPairsRequest { use_escape: escape })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.pairs_checked, n * (n - 1));
        assert_eq!(r.unreachable_count, 0, "{:?}", r.unreachable.first());
    }
    // Read-back through the agents.
    let s0 = fabric.switch(fabric_topology::SwitchId(0)).guid;
    assert_eq!(
        &driver.read_lft_block(s0, 0).await.unwrap()[..],
        lfts.block(fabric_topology::SwitchId(0), 0)
    );

    // Corrupting one block is seen by the simulator's verification (the check can fail).
    let leaf = fabric.end_ports()[1].attach.unwrap().0;
    let lid = lids.base_lid(fabric_topology::EndPortId(1));
    driver
        .write_lft_blocks(&[LftBlockWrite {
            switch: fabric.switch(leaf).guid,
            block: lid / 64,
            entries: [255; 64],
        }])
        .await
        .unwrap();
    let r = ctl
        .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
        .await
        .unwrap()
        .into_inner();
    assert!(r.unreachable_count > 0);
    upload_all(&driver, &fabric, &lfts).await;

    // A link failed in the simulator produces one LinkDown (not one per cable end).
    let mut rx = driver.subscribe_events();
    let spine = fabric.switches().iter().position(|s| s.desc.contains("L1")).unwrap();
    let spine_guid = fabric.switches()[spine].guid;
    ctl.command(CommandRequest {
        line: format!("link-down {spine_guid:#x} 1"),
    })
    .await
    .unwrap();
    let ev = next_matching(&mut rx, Duration::from_secs(5), |e| {
        matches!(e, FabricEvent::LinkDown { .. })
    })
    .await;
    let Some(FabricEvent::LinkDown { switch, port }) = ev else {
        panic!("no LinkDown event")
    };
    let next = fabric.apply(&[FabricEvent::LinkDown { switch, port }]).unwrap();
    assert_eq!(next.count_links().1, fabric.count_links().1 - 1);
    assert!(next_matching(&mut rx, Duration::from_millis(300), |e| matches!(
        e,
        FabricEvent::LinkDown { .. }
    ))
    .await
    .is_none());
    ctl.command(CommandRequest {
        line: format!("link-up {spine_guid:#x} 1"),
    })
    .await
    .unwrap();
    assert!(next_matching(&mut rx, Duration::from_secs(5), |e| matches!(
        e,
        FabricEvent::LinkUp { .. }
    ))
    .await
    .is_some());

    // A killed agent becomes SwitchDown after the deadline, and SwitchUp once restored.
    ctl.command(CommandRequest {
        line: format!("kill {spine_guid:#x}"),
    })
    .await
    .unwrap();
    let ev = next_matching(&mut rx, Duration::from_secs(10), |e| {
        matches!(e, FabricEvent::SwitchDown(_))
    })
    .await;
    assert_eq!(ev, Some(FabricEvent::SwitchDown(spine_guid)));
    // Uploads to it fail as unreachable; discovery reports it down and routes around it.
    let swept = driver.discover().await.unwrap();
    let sid = swept.switch_by_guid(spine_guid).unwrap();
    assert!(!swept.switch(sid).up);
    let (lids2, lfts2) = common::route(&swept, 0xFF_FFFF);
    driver.configure_lids(&swept, &lids2).await.unwrap();
    let live: Vec<LftBlockWrite> = common::blocks(&swept, &lfts2)
        .into_iter()
        .filter(|b| b.switch != spine_guid)
        .collect();
    driver.write_lft_blocks(&live).await.unwrap();
    let r = ctl
        .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.unreachable_count, 0, "{:?}", r.unreachable.first());
    ctl.command(CommandRequest {
        line: format!("restore {spine_guid:#x}"),
    })
    .await
    .unwrap();
    let ev = next_matching(&mut rx, Duration::from_secs(10), |e| {
        matches!(e, FabricEvent::SwitchUp(_))
    })
    .await;
    assert_eq!(ev, Some(FabricEvent::SwitchUp(spine_guid)));

    // Killing the whole simulator process: every switch goes down; a restarted simulator on the
    // same addresses brings them all back.
    let inventory = sim.inventory.clone();
    drop(ctl);
    drop(sim); // kills the process
    let mut down = HashSet::new();
    while down.len() < fabric.num_switches() {
        match next_matching(&mut rx, Duration::from_secs(10), |e| {
            matches!(e, FabricEvent::SwitchDown(_))
        })
        .await
        {
            Some(FabricEvent::SwitchDown(g)) => {
                down.insert(g);
            }
            _ => panic!(
                "only {} of {} switches reported down",
                down.len(),
                fabric.num_switches()
            ),
        }
    }
    let sim2 = Sim::start_at(&["--generate", SPEC, "--reuse-inventory"], inventory);
    let mut up = HashSet::new();
    while up.len() < fabric.num_switches() {
        match next_matching(&mut rx, Duration::from_secs(15), |e| {
            matches!(e, FabricEvent::SwitchUp(_))
        })
        .await
        {
            Some(FabricEvent::SwitchUp(g)) => {
                up.insert(g);
            }
            _ => panic!("only {} of {} switches came back", up.len(), fabric.num_switches()),
        }
    }
    drop(sim2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_and_dropped_agents_still_discover() {
    // Delayed agents still answer within the request timeout, and dropped connections are
    // re-established by the driver.
    let sim = Sim::start(&["--generate", SPEC], "delay", false);
    let mut ctl = sim.control().await;
    ctl.command(CommandRequest {
        line: "delay all 50".into(),
    })
    .await
    .unwrap();
    ctl.command(CommandRequest {
        line: "drop all".into(),
    })
    .await
    .unwrap();
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let f = driver.discover().await.unwrap();
    assert_eq!(f.num_switches(), 8);
    assert!(ctl.command(CommandRequest { line: "bogus".into() }).await.is_err());
}

/// SL-to-VL on the oob path: with the addresses, every agent gets SL 0 -> data VL 0 and SL 1 ->
/// the escape VL `n - 1` (`n` = the VLs the switches operate, 4 here), readable back from the
/// agent itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_agent_maps_sl1_to_the_escape_vl_after_bring_up() {
    let sim = Sim::start(&["--generate", SPEC, "--vls", "4"], "sl2vl", false);
    let mut agents = sim.agents().await;
    assert_eq!(agents.len(), 8);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    assert_eq!(driver.escape_vl(), None, "unknown before discovery");
    let fabric = driver.discover().await.unwrap();
    assert_eq!(driver.caps().escape_vl, Some(3));
    for (g, c) in &mut agents {
        let t = c.get_sl_to_vl(GetSlToVlRequest {}).await.unwrap().into_inner();
        assert_eq!(t.vl_of_sl, vec![0; 16], "{g:#x}: never set");
    }

    let (lids, lfts) = common::route(&fabric, 0xFF_FFFF);
    driver.configure_lids(&fabric, &lids).await.unwrap();
    upload_all(&driver, &fabric, &lfts).await;
    assert!(
        driver.configuration_warnings().is_empty(),
        "{:?}",
        driver.configuration_warnings()
    );
    let want = vec![0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    for (g, c) in &mut agents {
        let t = c.get_sl_to_vl(GetSlToVlRequest {}).await.unwrap().into_inner();
        assert_eq!(
            t.vl_of_sl, want,
            "switch {g:#x}: SL 1 on the escape VL, the rest on VL 0"
        );
        assert_eq!(driver.read_sl_to_vl(*g).await.unwrap().to_vec(), want);
    }

    // The agent refuses what it cannot apply (a VL at or above its VLCap, 8 by default; a
    // short table), and keeps its table.
    let (g, c) = &mut agents[0];
    for bad in [vec![8u8; 16], vec![0u8; 15]] {
        let e = c
            .set_sl_to_vl(SlToVlTable {
                vl_of_sl: bad.clone(),
                management_key: 0,
            })
            .await
            .expect_err("invalid table");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad:?}: {e}");
    }
    let t = c.get_sl_to_vl(GetSlToVlRequest {}).await.unwrap().into_inner();
    assert_eq!(t.vl_of_sl, want);

    // The table is switch configuration: it survives a restart of the agent.
    let mut ctl = sim.control().await;
    for line in [format!("kill {g:#x}"), format!("restore {g:#x}")] {
        ctl.command(CommandRequest { line }).await.unwrap();
    }
    assert_eq!(driver.read_sl_to_vl(*g).await.unwrap().to_vec(), want);
}

/// Switches with a single VL cannot separate escape traffic: SL 1 stays on VL 0, the driver
/// reports no escape VL and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_vl_switches_keep_every_sl_on_vl0_and_are_reported() {
    let sim = Sim::start(&["--generate", SPEC, "--vls", "1"], "sl2vl-1", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let fabric = driver.discover().await.unwrap();
    assert_eq!(driver.caps().escape_vl, None);
    let (lids, _) = common::route(&fabric, 0xFF_FFFF);
    driver.configure_lids(&fabric, &lids).await.unwrap();
    let w = driver.configuration_warnings();
    assert!(w.len() == 1 && w[0].contains("single VL"), "{w:?}");
    for (g, c) in &mut sim.agents().await {
        let t = c.get_sl_to_vl(GetSlToVlRequest {}).await.unwrap().into_inner();
        assert_eq!(t.vl_of_sl, vec![0; 16], "{g:#x}");
    }
}

/// An agent that predates `SetSlToVl` does not stop the bring-up: each such switch is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_without_sl_to_vl_are_reported_not_fatal() {
    let sim = Sim::start(&["--generate", SPEC, "--without-sl-to-vl"], "sl2vl-none", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let fabric = driver.discover().await.unwrap();
    let (lids, _) = common::route(&fabric, 0xFF_FFFF);
    driver.configure_lids(&fabric, &lids).await.unwrap();
    let w = driver.configuration_warnings();
    assert_eq!(w.len(), fabric.num_switches(), "{w:?}");
    for s in fabric.switches() {
        let g = fabric_topology::fmt_guid(s.guid);
        assert!(
            w.iter().any(|m| m.contains(&g) && m.contains("SetSlToVl")),
            "{g} not reported: {w:?}"
        );
    }
    let e = driver.read_sl_to_vl(fabric.switches()[0].guid).await.unwrap_err();
    assert!(e.to_string().contains("Unimplemented"), "{e}");
}
