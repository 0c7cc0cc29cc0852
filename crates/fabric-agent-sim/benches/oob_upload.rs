//! LFT upload through the agents of an 8640-end-port fat-tree.
//!
//! The fabric is `XGFT(3;24,18,20;1,6,18)` (360 leaves of 24 end ports with 6 up-links, 120 + 108
//! upper switches: 588 agents, one tonic server and one TCP connection each). The simulator runs
//! as a separate process; the `oob` driver discovers it, the fabric is routed (Dmodc, LMC 1),
//! and we time:
//!
//! 1. the **full upload** (every block of every switch) and the all-pairs verification in the
//!    simulator;
//! 2. a **single-fault diff upload**: one spine link fails, the fabric is rerouted, and only the
//!    blocks that changed are uploaded.
//!
//! Run: `cargo bench -p fabric-agent-sim --bench oob_upload` (optionally `-- SPEC MAX_CONNECTIONS`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fabric_oob::proto::sim_control_client::SimControlClient;
use fabric_oob::proto::VerifyAllPairsRequest;
use fabric_oob::{Inventory, OobConfig, OobDriver};
use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all, EngineKind, Guid2Lid, LidPlan, RoutingContext};
use fabric_southbound::{LftBlockWrite, SouthboundDriver};
use fabric_topology::{Fabric, FabricEvent, Remote};

fn route(fabric: &Fabric, previous: &Guid2Lid) -> (LidPlan, fabric_routing::Lfts) {
    let ranking = rank(fabric, &RankOptions::default());
    let lids = assign_lids(fabric, previous, 1, 0xFF_FFFF).expect("LIDs");
    let routed = route_all(
        &RoutingContext {
            fabric,
            ranking: &ranking,
            lids: &lids,
        },
        EngineKind::Dmodc,
    )
    .expect("routing");
    (lids, routed.lfts)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let spec = args
        .first()
        .cloned()
        .unwrap_or_else(|| "XGFT(3;24,18,20;1,6,18)".into());
    let max_conn: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64);
    let dir = std::env::temp_dir().join(format!("oob-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let inv = dir.join("agents.inv");
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fabric-agent-sim"))
        .args(["--generate", &spec, "--no-console", "--inventory"])
        .arg(&inv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start simulator");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    assert!(line.starts_with("ready"), "{line}");
    println!("{spec}: simulator up in {:.2} s", t.elapsed().as_secs_f64());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut cfg = OobConfig::new(&inv);
        cfg.max_connections = max_conn;
        cfg.request_timeout = Duration::from_secs(30);
        let driver = OobDriver::open(cfg).expect("driver");
        let t = Instant::now();
        let fabric = driver.discover().await.expect("discover");
        println!(
            "discovery: {} switches, {} end ports in {:.3} s",
            fabric.num_switches(),
            fabric.num_end_ports(),
            t.elapsed().as_secs_f64()
        );
        let (lids, lfts) = route(&fabric, &Guid2Lid::new());
        driver.configure_lids(&fabric, &lids).await.expect("LIDs");
        let mut all = Vec::new();
        for sid in fabric.switch_ids() {
            for b in 0..lfts.num_blocks() {
                let mut entries = [0u8; 64];
                entries.copy_from_slice(lfts.block(sid, b));
                all.push(LftBlockWrite {
                    switch: fabric.switch(sid).guid,
                    block: b as u32,
                    entries,
                });
            }
        }
        let t = Instant::now();
        let rep = driver.write_lft_blocks(&all).await.expect("upload");
        let s = t.elapsed().as_secs_f64();
        println!(
            "full upload (max_connections {max_conn}): {} blocks in {:.3} s = {:.0} blocks/s",
            rep.blocks_written,
            s,
            rep.blocks_written as f64 / s
        );
        let inv = Inventory::read_file(&inv).expect("inventory");
        let mut ctl = SimControlClient::connect(format!("http://{}", inv.control.expect("control")))
            .await
            .expect("control")
            .max_decoding_message_size(64 << 20);
        let t = Instant::now();
        let r = ctl
            .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
            .await
            .expect("verify")
            .into_inner();
        println!(
            "verify all pairs in the simulator: {} pairs, {} unreachable, {:.2} s",
            r.pairs_checked,
            r.unreachable_count,
            t.elapsed().as_secs_f64()
        );
        assert_eq!(r.unreachable_count, 0);

        // Single fault: the first up-link of the first leaf.
        let leaf = fabric.switch(fabric_topology::SwitchId(0));
        let port = leaf
            .external_ports()
            .find(|(_, p)| matches!(p.remote, Remote::Switch { .. }))
            .map(|(n, _)| n)
            .expect("up-link");
        let degraded = fabric
            .apply(&[FabricEvent::LinkDown {
                switch: leaf.guid,
                port,
            }])
            .expect("event");
        let t = Instant::now();
        let (lids2, lfts2) = route(&degraded, &Guid2Lid::from_plan(&fabric, &lids));
        let route_s = t.elapsed().as_secs_f64();
        assert_eq!(lids2, lids);
        let diff: Vec<LftBlockWrite> = lfts
            .diff(&lfts2)
            .into_iter()
            .map(|d| LftBlockWrite {
                switch: degraded.switch(d.switch).guid,
                block: d.block,
                entries: d.entries,
            })
            .collect();
        driver.set_port_state(leaf.guid, port, false).await.expect("link down");
        let t = Instant::now();
        let rep = driver.write_lft_blocks(&diff).await.expect("diff upload");
        let s = t.elapsed().as_secs_f64();
        println!(
            "single-fault reroute {:.3} s; diff upload: {} blocks on {} switches in {:.4} s = {:.0} blocks/s",
            route_s,
            rep.blocks_written,
            diff.iter()
                .map(|d| d.switch)
                .collect::<std::collections::HashSet<_>>()
                .len(),
            s,
            rep.blocks_written as f64 / s
        );
        let r = ctl
            .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
            .await
            .expect("verify")
            .into_inner();
        println!(
            "after the fault: {} pairs, {} unreachable",
            r.pairs_checked, r.unreachable_count
        );
        assert_eq!(r.unreachable_count, 0);
    });
    let _ = child.kill();
    let _ = child.wait();
}
