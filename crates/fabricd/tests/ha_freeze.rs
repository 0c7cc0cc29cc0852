//! High availability, acceptance (issue 20): a leader frozen (SIGSTOP) until its lease
//! expires must never write again once thawed. Real processes: a 3-member etcd cluster, one
//! `fabric-agent-sim`, two `fabricd` with `[ha]` on the oob driver, auto-acking subscribers.
//!
//! The leader `mgr-a` is stopped; the standby `mgr-b` takes over (a newer epoch, which its
//! discovery carries to every switch), handles a cable pulled in the simulator, and only then
//! is `mgr-a` continued. It wakes up believing it leads, with the cable's port event (and a
//! virtual fault the test gives it) to act on:
//!
//! * normally (`ha_frozen_leader_fences_itself_then_steps_down`) it fences itself: its lease
//!   deadline passed while it slept (the deadline is on the monotonic clock, which runs during
//!   SIGSTOP), so not one of its writes leaves the process: every agent's refused count stays
//!   0, accepted writes do not move, the tables stay `mgr-b`'s routing; it steps down to
//!   standby following `mgr-b`, and its status reports the writes its fence refused;
//! * with the test failpoint `FABRICD_TEST_HA_NO_SELF_FENCE=1`
//!   (`ha_frozen_leader_without_self_fencing_is_refused_by_the_agents`) it ignores its own
//!   lease and writes: every agent it writes to refuses (`GetEpochStats`: refused writes
//!   counted per agent, the last refused epoch is `mgr-a`'s), no table changes, and it steps
//!   down because an agent reported the newer epoch;
//! * with every agent's epoch forgotten while it slept (`epoch-forget all`: agents restarted
//!   without keeping it; `ha_frozen_leader_fences_itself_when_the_agents_forgot_the_epoch`) its
//!   own fence alone keeps every write in: nothing accepted, nothing refused, tables unchanged;
//!   the new leader's next fault is written and accepted everywhere.

mod common;

use std::time::{Duration, Instant};

use common::agent_sim::{Agents, SimCtl};
use common::ha::{
    auto_ack, epoch_stats, ha_of, serial, verify_all_pairs, wait_agents, wait_ha, Expect, HaRig, Role, LEASE_TTL_S,
};
use common::{link_req, run_with_deadline, status, switch_links, topology};
use fabric_proto::v1 as pb;

/// 8 leaves x 4 nodes = 32 end ports, 4 spines: 12 agents.
const SPEC: &str = "PGFT(2;4,8;1,4;1,1)";

const EXTRA: &str = r#"
[routing]
lmc = 1

[fault_injection]
enabled = true

[update]
five_phase = true
unpath_deadline_ms = 10000
repath_deadline_ms = 10000
coalesce_ms = 20
coalesce_max_ms = 200
failed_generation_backoff_ms = 200
"#;

fn idle(s: &pb::Status) -> bool {
    s.phase == pb::Phase::Idle as i32 && s.pending_faults == 0
}

/// What protects the switches from the woken old leader in each test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// Its own lease deadline (and the agents' epoch as well).
    SelfFencing,
    /// Only the agents' epoch check (test failpoint).
    NoSelfFence,
    /// Only its own lease deadline: every agent forgot the epoch while it was stopped.
    AgentsForgot,
}

fn freeze_leader(case: Case) {
    let _serial = serial();
    let self_fencing = case != Case::NoSelfFence;
    let name = match case {
        Case::SelfFencing => "ha-freeze",
        Case::NoSelfFence => "ha-freeze-nofence",
        Case::AgentsForgot => "ha-freeze-forgot",
    };
    let mut rig = HaRig::new(name, 3, SPEC, &["--vls", "4"], "", EXTRA);
    if !self_fencing {
        rig.nodes[0]
            .env
            .push(("FABRICD_TEST_HA_NO_SELF_FENCE".into(), "1".into()));
    }
    run_with_deadline(120, async {
        let (s0, _) = rig.start_pair(Duration::from_secs(30)).await;
        let epoch0 = ha_of(&s0).epoch;
        let mut ca = rig.nodes[0].client().await;
        let mut cb = rig.nodes[1].client().await;
        let mut ctl: SimCtl = rig.control().await;
        let mut agents: Agents = rig.sim.agents().await;
        let want = Expect::new(SPEC, &mut ca).await;
        let topo = topology(&mut ca).await;
        let links = switch_links(&topo);
        let acker_a = auto_ack(&rig.nodes[0].d().socket, "job-on-a");

        // Freeze the leader; the standby takes over once the lease expires.
        rig.nodes[0].freeze();
        let frozen_at = Instant::now();
        let sb = wait_ha(
            &rig.nodes[1],
            &mut cb,
            "takeover from the frozen leader",
            Duration::from_secs(LEASE_TTL_S + 10),
            |_, h| h.role == Role::Leader,
        )
        .await;
        println!(
            "{name}: mgr-b leader {:.0} ms after SIGSTOP of mgr-a (lease TTL {LEASE_TTL_S} s)",
            frozen_at.elapsed().as_secs_f64() * 1e3
        );
        let epoch1 = ha_of(&sb).epoch;
        assert!(epoch1 > epoch0, "new epoch {epoch1} after {epoch0}");
        let acker_b = auto_ack(&rig.nodes[1].d().socket, "job-on-b");
        let sb = wait_ha(
            &rig.nodes[1],
            &mut cb,
            "first generation of mgr-b",
            Duration::from_secs(20),
            |s, h| h.role == Role::Leader && s.generation > s0.generation && idle(s) && s.last_error.is_empty(),
        )
        .await;

        // A cable fault, handled by the new leader.
        let (leaf, port) = links[0];
        ctl.command(&format!("link-down {leaf:#x} {port}")).await;
        let sb = wait_ha(
            &rig.nodes[1],
            &mut cb,
            "the cable fault committed",
            Duration::from_secs(20),
            |s, _| s.generation > sb.generation && s.links_up == s.links - 1 && idle(s),
        )
        .await;
        let tables = want.routing(&[(leaf, port)]);
        assert_eq!(
            want.installed(&mut cb).await,
            tables,
            "mgr-b routes the degraded fabric"
        );
        wait_agents(
            &mut agents,
            want.blocks,
            &tables,
            "mgr-b's routing",
            Duration::from_secs(10),
        )
        .await;
        let before = epoch_stats(&mut ctl).await;
        for (g, st) in &before {
            assert_eq!(
                (st.manager_epoch, st.refused_writes),
                (epoch1, 0),
                "switch {g:#x}: {st:?}"
            );
        }

        if case == Case::AgentsForgot {
            // Agents restarted without keeping the epoch: only mgr-a's own fence is left.
            ctl.command("epoch-forget all").await;
            for (g, st) in epoch_stats(&mut ctl).await {
                assert_eq!(st.manager_epoch, 0, "switch {g:#x} forgot the epoch: {st:?}");
            }
        }

        // Thaw the old leader and give it something to write.
        rig.nodes[0].thaw();
        let (leaf2, port2) = links[4];
        // Refused or accepted, depending on whether it already stepped down: either is fine.
        let injected = ca.inject_fault(link_req(leaf2, port2, false, false, false)).await;
        println!(
            "{name}: InjectFault on the thawed mgr-a: {:?}",
            injected
                .as_ref()
                .map(|_| "accepted")
                .map_err(|e| e.message().to_string())
        );

        // It steps down and follows the new leader.
        let sa = wait_ha(
            &rig.nodes[0],
            &mut ca,
            "step-down after SIGCONT",
            Duration::from_secs(20),
            |_, h| h.role == Role::Standby && h.leader == "mgr-b" && h.epoch == epoch1,
        )
        .await;
        let ha_a = ha_of(&sa);
        println!(
            "{name}: mgr-a standby again, fenced writes {}, message {:?}",
            ha_a.fenced_writes, ha_a.message
        );

        // None of its writes landed: the tables are mgr-b's routing.
        let held = agents.lfts(want.blocks).await;
        assert_eq!(held, tables, "the switches still hold mgr-b's routing");
        let after = epoch_stats(&mut ctl).await;
        let mut refused_by = Vec::new();
        for (g, st) in &after {
            let b = &before[g];
            if case != Case::AgentsForgot {
                assert_eq!(st.manager_epoch, epoch1, "switch {g:#x} still follows mgr-b: {st:?}");
            }
            assert_eq!(
                st.accepted_writes, b.accepted_writes,
                "switch {g:#x}: no write accepted: {st:?}"
            );
            let refused = st.refused_writes - b.refused_writes;
            if self_fencing {
                assert_eq!(refused, 0, "switch {g:#x}: the fenced manager sent nothing: {st:?}");
            } else if refused > 0 {
                assert_eq!(
                    st.last_refused_epoch, epoch0,
                    "switch {g:#x} refused mgr-a's epoch: {st:?}"
                );
                refused_by.push((*g, refused));
            }
        }
        if !self_fencing {
            println!("{name}: writes refused per agent: {refused_by:x?}");
            assert!(
                !refused_by.is_empty(),
                "mgr-a wrote and some agent refused it: {after:?}"
            );
            let log = rig.nodes[0].log_text();
            assert!(
                log.contains(&format!("newer epoch {epoch1}")),
                "mgr-a steps down because a switch has seen epoch {epoch1}:\n{}",
                common::ha::tail(&log, 60)
            );
        }

        // The new leader is undisturbed.
        let s = status(&mut cb).await;
        let h = ha_of(&s);
        assert_eq!(
            (h.role, h.epoch, s.generation),
            (Role::Leader, epoch1, sb.generation),
            "{s:?}"
        );
        verify_all_pairs(&mut ctl, topo.end_ports.len() as u64, "after the old leader woke").await;
        if case == Case::AgentsForgot {
            // The agents that forgot follow mgr-b again from its next request: a cable fault.
            let (leaf3, port3) = links[8];
            ctl.command(&format!("link-down {leaf3:#x} {port3}")).await;
            wait_ha(
                &rig.nodes[1],
                &mut cb,
                "the second cable fault committed",
                Duration::from_secs(20),
                |s, _| s.generation > sb.generation && s.links_up == s.links - 2 && idle(s),
            )
            .await;
            let tables = want.routing(&[(leaf, port), (leaf3, port3)]);
            wait_agents(
                &mut agents,
                want.blocks,
                &tables,
                "mgr-b's routing after the agents forgot",
                Duration::from_secs(10),
            )
            .await;
            for (g, st) in epoch_stats(&mut ctl).await {
                assert_eq!(st.refused_writes, 0, "switch {g:#x} refused nothing of mgr-b: {st:?}");
            }
            verify_all_pairs(&mut ctl, topo.end_ports.len() as u64, "after the second fault").await;
        }
        acker_a.abort();
        acker_b.abort();
    });
}

#[test]
fn ha_frozen_leader_fences_itself_then_steps_down() {
    freeze_leader(Case::SelfFencing);
}

#[test]
fn ha_frozen_leader_without_self_fencing_is_refused_by_the_agents() {
    freeze_leader(Case::NoSelfFence);
}

#[test]
fn ha_frozen_leader_fences_itself_when_the_agents_forgot_the_epoch() {
    freeze_leader(Case::AgentsForgot);
}
