//! High availability, acceptance (issue 20): `kill -9` of the leader, idle and in the middle of
//! a five-phase update, with real processes: a 3-member etcd cluster, one `fabric-agent-sim`
//! (the switches' tables live there and survive every manager), two `fabricd` with `[ha]` on the
//! oob driver (LMC 1, five-phase), and a gRPC subscriber holding the leader in a phase.
//!
//! The generalisation of `crash_kill9.rs` to two machines: there the same daemon restarts on
//! its state directory; here the *standby*, whose state directory is empty, must take over
//! from the state the leader shared in etcd. For each case:
//!
//! * the standby is leader within `lease_ttl_s` + 1 s of the kill (measured from the kill to
//!   the standby's `GetStatus` saying leader; printed, and asserted);
//! * its epoch is newer, every switch has seen it (`GetEpochStats`), every LID is unchanged;
//! * its generation numbers continue after the interrupted generation (whose UNPATH notice
//!   the subscriber saw), never reusing it;
//! * the interrupted update is finished as a restart finishes it (the log says so);
//! * the agents' tables converge to a fresh routing of the current topology, computed here
//!   from the generator string and the fault (not taken from the daemon), and every pair of
//!   end ports is reachable on the base and the escape LIDs (`SimControl.VerifyAllPairs`).
//!
//! Phases reached: Idle, Prepare (killed in the middle of the escape-stage upload, the agents
//! writing slowly), Unpath and Repath (held by the subscriber), Update (killed in the middle of
//! the base-stage upload, checked through the agents) and Commit (the leader runs with the test
//! failpoint `FABRICD_TEST_COMMIT_DELAY_MS`: its commit waits before writing the state files,
//! after the progress says Commit; nothing else can hold a daemon there).

mod common;

use std::time::{Duration, Instant};

use common::agent_sim::{Agents, SimCtl};
use common::ha::{
    auto_ack, epoch_stats, ha_of, interrupted_in_log, serial, verify_all_pairs, wait_agents, wait_ha, Expect, HaRig,
    Role, LEASE_TTL_S,
};
use common::{link_req, run_with_deadline, status, subscribe, switch_links, topology};
use fabric_proto::v1 as pb;
use tonic::Streaming;

/// 8 leaves x 4 nodes = 32 end ports, 4 spines: 12 agents.
const SPEC: &str = "PGFT(2;4,8;1,4;1,1)";
/// Per `WriteLftBlocks` call while the kill is aimed at an upload.
const WRITE_DELAY_MS: u64 = 150;
/// How long the Commit test's leader holds each commit (the failpoint).
const COMMIT_HOLD_MS: u64 = 4000;

const EXTRA: &str = r#"
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
"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `InjectFault` (virtual: only the shared update progress knows it when the leader dies
    /// before the commit).
    Virtual,
    /// The cable is pulled in the simulator (the new leader discovers it down).
    Cable,
}

async fn notice(stream: &mut Streaming<pb::UpdateNotice>) -> pb::UpdateNotice {
    tokio::time::timeout(Duration::from_secs(15), stream.message())
        .await
        .expect("an update notice within 15 s")
        .expect("subscription stream")
        .expect("stream open")
}

/// Waits until the leader is in `phase` with at least `min` LFT writes of this upload applied.
async fn wait_upload(c: &mut fabric_proto::Client, ctl: &mut SimCtl, phase: pb::Phase, before: u64, min: u64) {
    let t = Instant::now();
    loop {
        let s = status(c).await;
        let calls = ctl.counters().await.lft_write_calls - before;
        if s.phase == phase as i32 && calls >= min {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "upload in {phase:?} not under way (status {s:?}, {calls} writes)"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn kill9_leader_in(phase: pb::Phase, fault: Fault) {
    let _serial = serial();
    let name = phase.as_str_name().trim_start_matches("PHASE_").to_ascii_lowercase();
    let mut rig = HaRig::new(
        &format!("ha-kill9-{name}"),
        3,
        SPEC,
        &["--vls", "4"],
        "max_connections = 1",
        EXTRA,
    );
    if phase == pb::Phase::Commit {
        rig.nodes[0].env.push((
            fabricd::event_loop::COMMIT_DELAY_ENV.to_string(),
            COMMIT_HOLD_MS.to_string(),
        ));
    }
    run_with_deadline(120, async {
        let (s0, _) = rig.start_pair(Duration::from_secs(30)).await;
        let epoch0 = ha_of(&s0).epoch;
        assert!(epoch0 > 0, "the leader has an epoch: {s0:?}");
        let mut c = rig.nodes[0].client().await;
        let mut cb = rig.nodes[1].client().await;
        let mut ctl: SimCtl = rig.control().await;
        let mut agents: Agents = rig.sim.agents().await;
        let want = Expect::new(SPEC, &mut c).await;
        let old = want.routing(&[]);
        assert_eq!(agents.lfts(want.blocks).await, old, "the agents hold generation 1");
        let stats = epoch_stats(&mut ctl).await;
        assert_eq!(stats.len(), 12, "one entry per switch");
        for (g, st) in &stats {
            assert_eq!(
                (st.manager_epoch, st.refused_writes),
                (epoch0, 0),
                "switch {g:#x}: {st:?}"
            );
        }
        // The standby writes nothing and knows the leader.
        let hb = ha_of(&status(&mut cb).await);
        assert_eq!(
            (hb.role, hb.epoch, hb.leader.as_str()),
            (Role::Standby, epoch0, "mgr-a"),
            "{hb:?}"
        );

        let topo = topology(&mut c).await;
        let (leaf, port) = switch_links(&topo)[0];
        let mask = &want.escape_mask;
        let part = common::ha::part;
        let new = want.routing(&[(leaf, port)]);
        let base_changed: Vec<u64> = old
            .keys()
            .copied()
            .filter(|g| part(&old[g], mask, false) != part(&new[g], mask, false))
            .collect();
        assert!(
            base_changed.len() >= 3,
            "the fault changes base entries on {} switches",
            base_changed.len()
        );

        // A subscriber that acks only what the test wants.
        let mut sc = c.clone();
        let (mut stream, first) = subscribe(&mut sc, "ha-job", &topo.end_ports[0].name).await;
        assert_eq!(first.phase, pb::Phase::Idle as i32);
        let id = first.subscriber_id;
        let ack = |n: &pb::UpdateNotice| pb::AckRequest {
            subscriber_id: id,
            generation: n.generation,
            phase: n.phase,
        };
        let before = ctl.counters().await.lft_write_calls;
        if phase == pb::Phase::Prepare {
            ctl.command(&format!("write-delay all {WRITE_DELAY_MS}")).await;
        }
        let faulted = phase != pb::Phase::Idle;
        if faulted {
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
        }

        // Bring the leader to `phase`, then kill it there.
        let mut interrupted = s0.generation;
        let killed_at = match phase {
            pb::Phase::Idle => {
                let t = Instant::now();
                rig.nodes[0].kill9();
                t
            }
            pb::Phase::Prepare => {
                wait_upload(&mut c, &mut ctl, pb::Phase::Prepare, before, 1).await;
                let t = Instant::now();
                rig.nodes[0].kill9();
                t
            }
            pb::Phase::Unpath => {
                let unpath = notice(&mut stream).await;
                assert_eq!(
                    (unpath.generation, unpath.phase),
                    (s0.generation + 1, pb::Phase::Unpath as i32)
                );
                interrupted = unpath.generation;
                common::wait_status(rig.nodes[0].d(), &mut c, "unpath", Duration::from_secs(5), |s| {
                    s.phase == pb::Phase::Unpath as i32
                })
                .await;
                let held = agents.lfts(want.blocks).await;
                for (g, row) in &held {
                    assert_eq!(
                        part(row, mask, false),
                        part(&old[g], mask, false),
                        "{g:#x}: base untouched before Update"
                    );
                    assert_eq!(
                        part(row, mask, true),
                        part(&new[g], mask, true),
                        "{g:#x}: escape stage installed"
                    );
                }
                let t = Instant::now();
                rig.nodes[0].kill9();
                t
            }
            pb::Phase::Update => {
                let unpath = notice(&mut stream).await;
                interrupted = unpath.generation;
                ctl.command(&format!("write-delay all {WRITE_DELAY_MS}")).await;
                let before = ctl.counters().await.lft_write_calls;
                sc.ack(ack(&unpath)).await.expect("ack unpath");
                wait_upload(&mut c, &mut ctl, pb::Phase::Update, before, 2).await;
                let t = Instant::now();
                rig.nodes[0].kill9();
                // A write the agent had already started lands (or not) within its delay; then
                // the switches hold a mix of old and new base entries.
                tokio::time::sleep(Duration::from_millis(3 * WRITE_DELAY_MS)).await;
                let held = agents.lfts(want.blocks).await;
                let new_base = base_changed
                    .iter()
                    .filter(|g| part(&held[g], mask, false) == part(&new[g], mask, false))
                    .count();
                assert!(
                    new_base >= 1 && new_base < base_changed.len(),
                    "killed mid-upload: {new_base} of {} switches to change hold the new base entries",
                    base_changed.len()
                );
                t
            }
            pb::Phase::Repath => {
                let unpath = notice(&mut stream).await;
                interrupted = unpath.generation;
                sc.ack(ack(&unpath)).await.expect("ack unpath");
                let repath = notice(&mut stream).await;
                assert_eq!(
                    (repath.generation, repath.phase),
                    (interrupted, pb::Phase::Repath as i32)
                );
                common::wait_status(rig.nodes[0].d(), &mut c, "repath", Duration::from_secs(5), |s| {
                    s.phase == pb::Phase::Repath as i32
                })
                .await;
                assert_eq!(
                    agents.lfts(want.blocks).await,
                    new,
                    "everything is installed before Repath"
                );
                let t = Instant::now();
                rig.nodes[0].kill9();
                t
            }
            pb::Phase::Commit => {
                // The leader was started with the commit failpoint: it holds the Commit phase
                // (progress persisted, state files not yet written) long enough to be killed there.
                let unpath = notice(&mut stream).await;
                interrupted = unpath.generation;
                sc.ack(ack(&unpath)).await.expect("ack unpath");
                let repath = notice(&mut stream).await;
                assert_eq!(
                    (repath.generation, repath.phase),
                    (interrupted, pb::Phase::Repath as i32)
                );
                sc.ack(ack(&repath)).await.expect("ack repath");
                common::wait_status(rig.nodes[0].d(), &mut c, "commit", Duration::from_secs(5), |s| {
                    s.phase == pb::Phase::Commit as i32
                })
                .await;
                assert_eq!(agents.lfts(want.blocks).await, new, "everything is installed in Commit");
                let t = Instant::now();
                rig.nodes[0].kill9();
                t
            }
            other => unreachable!("no kill test in {other:?}"),
        };
        drop(stream);
        if matches!(phase, pb::Phase::Update | pb::Phase::Prepare) {
            ctl.command("write-delay all 0").await;
        }

        // The standby takes over: measured from the kill to its status saying leader (its
        // status-only server stops when it is elected; the leader's answers on the same socket).
        let sb = wait_ha(
            &rig.nodes[1],
            &mut cb,
            "takeover after kill -9 of the leader",
            Duration::from_secs(LEASE_TTL_S + 10),
            |_, h| h.role == Role::Leader,
        )
        .await;
        let last = ha_of(&sb);
        let takeover = killed_at.elapsed();
        println!(
            "ha kill -9 in {name}: standby leader {:.0} ms after the kill (lease TTL {LEASE_TTL_S} s)",
            takeover.as_secs_f64() * 1e3
        );
        assert!(
            takeover <= Duration::from_secs(LEASE_TTL_S + 1),
            "takeover took {takeover:?} (bound: lease TTL {LEASE_TTL_S} s + 1 s)"
        );
        let epoch1 = last.epoch;
        assert!(epoch1 > epoch0, "new epoch {epoch1} after {epoch0}");
        assert_eq!(last.node, "mgr-b");

        // A subscriber of the new leader acks its updates (the five-phase protocol goes on).
        let acker = auto_ack(&rig.nodes[1].d().socket, "ha-job-b");
        let s1 = wait_ha(
            &rig.nodes[1],
            &mut cb,
            "convergence",
            Duration::from_secs(30),
            |s, h| {
                h.role == Role::Leader
                    && s.generation > interrupted
                    && s.phase == pb::Phase::Idle as i32
                    && s.pending_faults == 0
                    && s.last_error.is_empty()
            },
        )
        .await;
        println!(
            "ha kill -9 in {name}: new leader committed generation {} ({:.0} ms after the kill)",
            s1.generation,
            killed_at.elapsed().as_secs_f64() * 1e3
        );
        if phase != pb::Phase::Idle {
            // The new leader finishes the interrupted update from the shared progress, as a
            // restart does, and numbers after it.
            let log = rig.nodes[1].log_text();
            let said = interrupted_in_log(&log, &name);
            println!("ha kill -9 in {name}: the new leader says generation {said:?} was interrupted in phase {name}");
            let n = said.unwrap_or_else(|| {
                panic!(
                    "the new leader's log names the update interrupted in {name}:\n{}",
                    common::ha::tail(&log, 60)
                )
            });
            if phase != pb::Phase::Prepare {
                assert_eq!(
                    n, interrupted,
                    "the interrupted generation is the one the subscriber saw"
                );
            }
            assert!(
                s1.generation > n,
                "generation {} after the interrupted {n}",
                s1.generation
            );
        }
        match (faulted, fault) {
            (false, _) => assert_eq!((s1.virtual_faults, s1.links_up), (0, s1.links)),
            (true, Fault::Virtual) => assert_eq!(s1.virtual_faults, 1, "the interrupted generation's fault is kept"),
            (true, Fault::Cable) => assert_eq!((s1.virtual_faults, s1.links_up), (0, s1.links - 1)),
        }

        // LIDs unchanged; the routing of the current topology on the new leader and every switch.
        want.check_lids(&mut cb, "the new leader").await;
        let expected = if faulted { &new } else { &old };
        assert_eq!(
            &want.installed(&mut cb).await,
            expected,
            "the new leader installs a fresh routing of the current topology"
        );
        wait_agents(
            &mut agents,
            want.blocks,
            expected,
            "the agents after the takeover",
            Duration::from_secs(10),
        )
        .await;
        let n = topo.end_ports.len() as u64;
        verify_all_pairs(&mut ctl, n, "after the takeover").await;
        for (g, st) in epoch_stats(&mut ctl).await {
            assert_eq!(st.manager_epoch, epoch1, "switch {g:#x} follows the new leader: {st:?}");
            assert_eq!(
                st.refused_writes, 0,
                "switch {g:#x}: nothing was written with a stale epoch: {st:?}"
            );
        }
        acker.abort();
    });
}

#[test]
fn ha_kill9_leader_idle() {
    kill9_leader_in(pb::Phase::Idle, Fault::Cable);
}

#[test]
fn ha_kill9_leader_in_prepare_mid_escape_upload() {
    kill9_leader_in(pb::Phase::Prepare, Fault::Cable);
}

#[test]
fn ha_kill9_leader_in_unpath() {
    kill9_leader_in(pb::Phase::Unpath, Fault::Virtual);
}

#[test]
fn ha_kill9_leader_in_update_mid_upload() {
    kill9_leader_in(pb::Phase::Update, Fault::Cable);
}

#[test]
fn ha_kill9_leader_in_repath() {
    kill9_leader_in(pb::Phase::Repath, Fault::Cable);
}

#[test]
fn ha_kill9_leader_in_commit() {
    kill9_leader_in(pb::Phase::Commit, Fault::Cable);
}
