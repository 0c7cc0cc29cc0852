//! `kill -9` of the daemon in the middle of a five-phase update, with real processes (issue 5):
//! `fabric-agent-sim` holds the switches' tables (one gRPC agent per switch; they survive the
//! daemon), `fabricd` runs the `oob` driver with LMC 1, the five-phase update and a state
//! directory, and a gRPC subscriber in the test holds the daemon in Unpath or Repath by not
//! acking. For Update the agents write slowly (`write-delay`), so that the kill lands in the
//! middle of the base-stage upload; the test checks through the agents themselves that they
//! really hold a mix of old and new base entries at that moment.
//!
//! The agents run 4 VLs: bring-up must leave SL 1 (escape LIDs) on VL 3 on every switch.
//!
//! A daemon restarted on the same state directory and agents must say that it resumes the
//! interrupted generation (status `last error`, then the log), converge (a committed
//! generation, phase idle, progress file gone), install exactly the routing of the current
//! topology and leave no pair unreachable on the base or the escape LIDs.
//!
//! "The routing of the current topology" is computed in the test from the generator string and
//! the fault (rank + assign_lids + route_all of the libraries, the same steps as `fabricctl
//! route`), not taken from the restarted daemon; its LIDs are checked against the daemon's.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::agent_sim::{oob_config, AgentSim, Agents, SimCtl};
use common::ha::{pad, part, routing};
use common::subscribe;
use common::{lfts, link_req, run_with_deadline, status, switch_links, test_dir, topology, wait_status, Daemon};
use fabric_proto::v1 as pb;
use fabric_routing::{assign_lids, Guid2Lid};
use fabric_topology::{gen, FabricEvent};
use tonic::Streaming;

/// 8 leaves x 4 nodes = 32 end ports, 4 spines: 12 agents.
const SPEC: &str = "PGFT(2;4,8;1,4;1,1)";
/// Highest address of the `oob` driver (its default `max_lid`).
const MAX_LID: u32 = 0xFF_FFFF;
/// Per `WriteLftBlocks` call during the base stage of the Update test.
const WRITE_DELAY_MS: u64 = 150;
/// Per agent request while the restarted daemon reads the tables back (keeps the "resuming"
/// status visible long enough to be seen).
const RESTART_DELAY_MS: u64 = 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `InjectFault` (virtual: the daemon excludes the cable; only the progress file knows it
    /// when the daemon dies before the commit).
    Virtual,
    /// The cable is pulled in the simulator (the restarted daemon rediscovers it down).
    Cable,
}

fn config(inventory: &Path) -> String {
    // One agent request at a time: the base stage goes switch after switch.
    oob_config(
        inventory,
        "max_connections = 1",
        r#"
[routing]
lmc = 1

[fault_injection]
enabled = true

[update]
five_phase = true
unpath_deadline_ms = 60000
repath_deadline_ms = 60000
coalesce_ms = 20
coalesce_max_ms = 200
failed_generation_backoff_ms = 200
"#,
    )
}

fn idle(s: &pb::Status) -> bool {
    s.generation >= 1 && s.phase == pb::Phase::Idle as i32 && s.pending_faults == 0
}

async fn notice(stream: &mut Streaming<pb::UpdateNotice>) -> pb::UpdateNotice {
    tokio::time::timeout(Duration::from_secs(15), stream.message())
        .await
        .expect("an update notice within 15 s")
        .expect("subscription stream")
        .expect("stream open")
}

fn progress_file(d: &Daemon) -> std::path::PathBuf {
    d.state.join("update-progress.json")
}

/// Number of 64-entry blocks where two LFT sets differ.
fn differing_blocks(a: &HashMap<u64, Vec<u8>>, b: &HashMap<u64, Vec<u8>>) -> u64 {
    let mut n = 0;
    for (g, ra) in a {
        let rb = &b[g];
        n += ra.chunks(64).zip(rb.chunks(64)).filter(|(x, y)| x != y).count() as u64;
    }
    n
}

fn kill9_in(phase: pb::Phase, fault: Fault) {
    let name = phase.as_str_name().trim_start_matches("PHASE_").to_ascii_lowercase();
    let dir = test_dir(&format!("kill9-{name}"));
    let sim = AgentSim::start(&dir, SPEC, &["--vls", "4"]);
    let cfg_path = dir.join("fabricd.toml");
    std::fs::write(&cfg_path, config(&sim.inventory)).expect("write config");
    let mut d = Daemon::spawn_with_config(&dir, &cfg_path, &[]);
    let mut restarted: Option<Daemon> = None;
    run_with_deadline(40, async {
        let mut c = d.ready().await;
        let mut ctl: SimCtl = sim.control().await;
        let mut agents: Agents = sim.agents().await;
        let s1 = wait_status(&d, &mut c, "first generation", Duration::from_secs(15), idle).await;
        assert_eq!((s1.driver.as_str(), s1.lmc, s1.dual_lids), ("oob", 1, true));
        // With the addresses, the driver put SL 1 on the escape VL (4 VLs: VL 3) everywhere.
        let sl2vl = agents.sl_to_vl().await;
        assert_eq!(sl2vl.len(), 12);
        for (g, t) in &sl2vl {
            assert_eq!(
                t,
                &[0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                "SL-to-VL of {g:#x}"
            );
        }

        // The routing before and after the fault, computed independently of the daemon.
        let intact = gen::generate_str(SPEC, None).expect("generate");
        let lids = assign_lids(&intact, &Guid2Lid::default(), 1, MAX_LID).expect("LIDs");
        let topo = topology(&mut c).await;
        for e in &topo.end_ports {
            let ep = intact
                .end_port_by_guid(e.guid)
                .expect("end port of the generated fabric");
            assert_eq!(
                (e.base_lid, e.escape_lid),
                (lids.base_lid(ep), lids.escape_lid(ep).unwrap_or(0)),
                "LIDs of {}",
                e.name
            );
        }
        let (_, installed) = lfts(&mut c).await;
        let len = installed.values().map(Vec::len).max().unwrap_or(0).div_ceil(64) * 64;
        let blocks = (len / 64) as u32;
        let installed: HashMap<u64, Vec<u8>> = installed.into_iter().map(|(g, r)| (g, pad(&r, len))).collect();
        let old = routing(&intact, &lids, len);
        assert_eq!(installed, old, "generation 1 is the routing of the intact fabric");
        assert_eq!(agents.lfts(blocks).await, old, "the agents hold generation 1");
        let (leaf, port) = switch_links(&topo)[0];
        let degraded = intact
            .apply(&[FabricEvent::LinkDown {
                switch: leaf,
                port: u8::try_from(port).expect("port number"),
            }])
            .expect("degrade");
        let new = routing(&degraded, &lids, len);
        let mut mask = vec![false; len];
        for ep in intact.end_port_ids() {
            if let Some(l) = lids.escape_lid(ep) {
                mask[l as usize] = true;
            }
        }
        let base_changed: Vec<u64> = old
            .keys()
            .copied()
            .filter(|g| part(&old[g], &mask, false) != part(&new[g], &mask, false))
            .collect();
        let escape_changed = old
            .keys()
            .filter(|g| part(&old[g], &mask, true) != part(&new[g], &mask, true))
            .count();
        assert!(
            base_changed.len() >= 3 && escape_changed >= 1,
            "the fault changes base entries on {} switches and escape entries on {escape_changed}",
            base_changed.len()
        );

        // A subscriber that acks only what the test wants.
        let mut sc = d.client().await;
        let (mut stream, first) = subscribe(&mut sc, "crash-job", &topo.end_ports[0].name).await;
        assert_eq!(first.phase, pb::Phase::Idle as i32);
        let id = first.subscriber_id;
        let ack = |n: &pb::UpdateNotice| pb::AckRequest {
            subscriber_id: id,
            generation: n.generation,
            phase: n.phase,
        };

        match fault {
            Fault::Virtual => {
                c.inject_fault(link_req(leaf, port, false, false, false))
                    .await
                    .expect("InjectFault");
            }
            Fault::Cable => {
                ctl.command(&format!("link-down {leaf:#x} {port}")).await;
            }
        }
        let unpath = notice(&mut stream).await;
        assert_eq!(
            (unpath.generation, unpath.phase),
            (s1.generation + 1, pb::Phase::Unpath as i32)
        );
        let generation = unpath.generation;

        // Bring the daemon to `phase` and look at what the switches hold there.
        let at_kill = match phase {
            pb::Phase::Unpath => {
                wait_status(&d, &mut c, "unpath", Duration::from_secs(5), |s| {
                    s.phase == pb::Phase::Unpath as i32
                })
                .await;
                let held = agents.lfts(blocks).await;
                for (g, row) in &held {
                    assert_eq!(
                        part(row, &mask, false),
                        part(&old[g], &mask, false),
                        "{g:#x}: base entries untouched before Update"
                    );
                    assert_eq!(
                        part(row, &mask, true),
                        part(&new[g], &mask, true),
                        "{g:#x}: escape stage installed before Unpath"
                    );
                }
                d.kill9();
                held
            }
            pb::Phase::Update => {
                ctl.command(&format!("write-delay all {WRITE_DELAY_MS}")).await;
                let before = ctl.counters().await.lft_write_calls;
                sc.ack(ack(&unpath)).await.expect("ack unpath");
                let t = Instant::now();
                loop {
                    let s = status(&mut c).await;
                    let calls = ctl.counters().await.lft_write_calls - before;
                    if s.phase == pb::Phase::Update as i32 && calls >= 2 {
                        break;
                    }
                    assert!(
                        t.elapsed() < Duration::from_secs(10),
                        "base stage not under way (status {s:?}, {calls} writes)"
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                d.kill9();
                // A write the agent had already started lands (or not) within its delay.
                tokio::time::sleep(Duration::from_millis(3 * WRITE_DELAY_MS)).await;
                ctl.command("write-delay all 0").await;
                let held = agents.lfts(blocks).await;
                let (mut new_base, mut not_new) = (0, 0);
                for g in &base_changed {
                    if part(&held[g], &mask, false) == part(&new[g], &mask, false) {
                        new_base += 1;
                    } else {
                        not_new += 1;
                    }
                }
                assert!(
                    new_base >= 1 && not_new >= 1,
                    "killed mid-upload: of {} switches to change, {new_base} hold the new base \
                     entries and {not_new} do not",
                    base_changed.len()
                );
                for (g, row) in &held {
                    assert_eq!(part(row, &mask, true), part(&new[g], &mask, true), "{g:#x} escape");
                }
                held
            }
            pb::Phase::Repath => {
                sc.ack(ack(&unpath)).await.expect("ack unpath");
                let repath = notice(&mut stream).await;
                assert_eq!(
                    (repath.generation, repath.phase),
                    (generation, pb::Phase::Repath as i32)
                );
                wait_status(&d, &mut c, "repath", Duration::from_secs(5), |s| {
                    s.phase == pb::Phase::Repath as i32
                })
                .await;
                let held = agents.lfts(blocks).await;
                assert_eq!(held, new, "everything is installed before Repath");
                d.kill9();
                held
            }
            other => unreachable!("no kill test in {other:?}"),
        };
        drop(stream);
        let progress: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(progress_file(&d)).expect("progress file at the kill"))
                .expect("progress JSON");
        assert_eq!(progress["generation"], generation, "{progress}");
        assert_eq!(
            progress["phase"].as_str().map(str::to_ascii_lowercase).as_deref(),
            Some(name.as_str()),
            "{progress}"
        );

        // Restart on the same state directory and agents.
        ctl.command(&format!("delay all {RESTART_DELAY_MS}")).await;
        let writes_before = ctl.counters().await.lft_blocks_written;
        let d2 = restarted.insert(Daemon::spawn_with_config(&dir, &cfg_path, &[]));
        let mut c2 = d2.client().await;
        let want = format!("generation {generation} was interrupted in phase {name}");
        wait_status(d2, &mut c2, "resuming status", Duration::from_secs(10), |s| {
            s.last_error.contains(&want)
        })
        .await;
        ctl.command("delay all 0").await;
        let s2 = wait_status(d2, &mut c2, "convergence", Duration::from_secs(15), |s| {
            idle(s) && s.last_error.is_empty()
        })
        .await;
        let log = d2.log_text();
        assert!(log.contains(&want), "{log}");
        assert!(log.contains("the interrupted update is finished"), "{log}");
        assert!(!progress_file(d2).exists(), "progress file removed at the commit");
        // Numbering continues: the recovery generation comes after the interrupted one (whose
        // UNPATH notice subscribers saw), never reusing its number or going back to 1.
        assert!(
            s2.generation > generation,
            "recovery generation {} after the interrupted {generation}",
            s2.generation
        );
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d2.state.join("generation.json")).expect("generation file"))
                .expect("generation JSON");
        assert_eq!(saved["generation"], s2.generation, "{saved}");
        match fault {
            Fault::Virtual => assert_eq!(s2.virtual_faults, 1, "the interrupted generation's fault is kept"),
            Fault::Cable => assert_eq!((s2.virtual_faults, s2.links_up), (0, s2.links - 1)),
        }

        // The routing of the current topology, on the daemon and on every switch.
        let (_, now) = lfts(&mut c2).await;
        let now: HashMap<u64, Vec<u8>> = now.into_iter().map(|(g, r)| (g, pad(&r, len))).collect();
        assert_eq!(
            now, new,
            "the restarted daemon installs the routing of the degraded fabric"
        );
        let held = agents.lfts(blocks).await;
        assert_eq!(held, new, "every agent holds the routing of the degraded fabric");
        assert_eq!(agents.sl_to_vl().await, sl2vl, "SL-to-VL tables after the restart");
        assert_eq!(
            ctl.counters().await.lft_blocks_written - writes_before,
            differing_blocks(&at_kill, &new),
            "read back: exactly the blocks that differ are written"
        );
        let n = topo.end_ports.len() as u64;
        for escape in [false, true] {
            let r = ctl.verify(escape).await;
            assert_eq!(
                (r.pairs_checked, r.unreachable_count),
                (n * (n - 1), 0),
                "escape {escape}: {:?}",
                r.unreachable.first()
            );
        }
    });
}

#[test]
fn kill9_in_unpath_then_restart_converges() {
    kill9_in(pb::Phase::Unpath, Fault::Virtual);
}

#[test]
fn kill9_in_update_mid_upload_then_restart_converges() {
    kill9_in(pb::Phase::Update, Fault::Cable);
}

#[test]
fn kill9_in_repath_then_restart_converges() {
    kill9_in(pb::Phase::Repath, Fault::Cable);
}
