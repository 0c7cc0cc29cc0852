//! High availability, acceptance (issue 20): losing etcd members under a running leader. Real
//! processes: a 3-member etcd cluster, one `fabric-agent-sim`, two `fabricd` with `[ha]` on the
//! oob driver, auto-acking subscribers.
//!
//! * One member of three killed: nothing changes. For twice the lease TTL the same manager
//!   leads with the same epoch, the standby stays standby, nobody is fenced; a cable fault
//!   still commits, on the same epoch.
//! * A second member killed (no quorum): the leader cannot renew its lease. It keeps the
//!   tables it installed (the agents are unchanged), says so (status `ha.fenced`, a message),
//!   and a cable fault pulled meanwhile is NOT written: for twice the TTL the agents' tables,
//!   the generation and the epoch do not move, and the standby does not take over.
//! * The members restarted: the leader resumes with the same epoch (etcd extends every lease
//!   when a new raft leader is elected), and the fault's generation commits: the agents hold a
//!   fresh routing of the fabric with both cables down, every pair reachable.

mod common;

use std::time::Duration;

use common::agent_sim::{Agents, SimCtl};
use common::ha::{
    auto_ack, epoch_stats, ha_of, hold_ha, serial, verify_all_pairs, wait_agents, wait_ha, Expect, HaRig, Role,
    LEASE_TTL_S,
};
use common::{run_with_deadline, status, switch_links, topology};
use fabric_proto::v1 as pb;

/// 8 leaves x 4 nodes = 32 end ports, 4 spines: 12 agents.
const SPEC: &str = "PGFT(2;4,8;1,4;1,1)";

const EXTRA: &str = r#"
[routing]
lmc = 1

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

#[test]
fn ha_etcd_member_loss_changes_nothing_quorum_loss_fences_then_resumes() {
    let _serial = serial();
    let mut rig = HaRig::new("ha-etcd-loss", 3, SPEC, &["--vls", "4"], "", EXTRA);
    run_with_deadline(150, async {
        let (s0, _) = rig.start_pair(Duration::from_secs(30)).await;
        let epoch = ha_of(&s0).epoch;
        let mut ca = rig.nodes[0].client().await;
        let mut cb = rig.nodes[1].client().await;
        let mut ctl: SimCtl = rig.control().await;
        let mut agents: Agents = rig.sim.agents().await;
        let want = Expect::new(SPEC, &mut ca).await;
        let topo = topology(&mut ca).await;
        let links = switch_links(&topo);
        let n = topo.end_ports.len() as u64;
        let acker = auto_ack(&rig.nodes[0].d().socket, "job");
        let ttl2 = Duration::from_secs(2 * LEASE_TTL_S);

        // One member of three: nothing changes.
        rig.etcd.kill(2);
        rig.etcd.wait_healthy(Duration::from_secs(10));
        let steady = |_: &pb::Status, h: &common::ha::HaView| h.role == Role::Leader && h.epoch == epoch && !h.fenced;
        hold_ha(&rig.nodes[0], &mut ca, "leads on 2 of 3 etcd members", ttl2, steady).await;
        let hb = ha_of(&status(&mut cb).await);
        assert_eq!((hb.role, hb.epoch), (Role::Standby, epoch), "the standby: {hb:?}");
        let (l1, p1) = links[0];
        ctl.command(&format!("link-down {l1:#x} {p1}")).await;
        let s1 = wait_ha(
            &rig.nodes[0],
            &mut ca,
            "a fault commits on 2 of 3 members",
            Duration::from_secs(20),
            |s, h| {
                s.generation > s0.generation && s.links_up == s.links - 1 && idle(s) && h.epoch == epoch && !h.fenced
            },
        )
        .await;
        let one_down = want.routing(&[(l1, p1)]);
        wait_agents(
            &mut agents,
            want.blocks,
            &one_down,
            "the first fault",
            Duration::from_secs(10),
        )
        .await;

        // Quorum lost: the leader keeps its tables, stops changing them and says so.
        rig.etcd.kill(1);
        let fenced = wait_ha(
            &rig.nodes[0],
            &mut ca,
            "fenced without quorum",
            Duration::from_secs(LEASE_TTL_S + 10),
            |_, h| h.fenced,
        )
        .await;
        let hf = ha_of(&fenced);
        println!("ha quorum loss: the leader says {:?} (role {:?})", hf.message, hf.role);
        assert!(!hf.message.is_empty(), "a fenced leader says why: {hf:?}");
        assert_eq!(hf.epoch, epoch);
        let writes = ctl.counters().await.lft_write_calls;
        let (l2, p2) = links[4];
        ctl.command(&format!("link-down {l2:#x} {p2}")).await;
        let held = hold_ha(&rig.nodes[0], &mut ca, "writes nothing without quorum", ttl2, |s, h| {
            h.fenced && h.epoch == epoch && s.generation == s1.generation
        })
        .await;
        println!(
            "ha quorum loss: status during the fault: generation {}, phase {}, pending faults {}, last error {:?}, links up {}/{}",
            held.generation, held.phase, held.pending_faults, held.last_error, held.links_up, held.links
        );
        assert_eq!(
            agents.lfts(want.blocks).await,
            one_down,
            "the agents keep the installed tables"
        );
        assert_eq!(
            ctl.counters().await.lft_write_calls,
            writes,
            "no LFT write while fenced"
        );
        for (g, st) in epoch_stats(&mut ctl).await {
            assert_eq!(
                (st.manager_epoch, st.refused_writes),
                (epoch, 0),
                "switch {g:#x}: {st:?}"
            );
        }
        let hb = ha_of(&status(&mut cb).await);
        assert_ne!(hb.role, Role::Leader, "no takeover without quorum: {hb:?}");
        // Honest: the fault is not reported as routed.
        assert!(
            held.generation == s1.generation && (held.pending_faults > 0 || !held.last_error.is_empty()),
            "the status shows the fault not installed: {held:?}"
        );

        // Quorum back: the same leader, the same epoch, and the fault's generation commits.
        rig.etcd.restart(1);
        rig.etcd.restart(2);
        rig.etcd.wait_healthy(Duration::from_secs(20));
        let s2 = wait_ha(
            &rig.nodes[0],
            &mut ca,
            "resumes with quorum",
            Duration::from_secs(30),
            |s, h| {
                h.role == Role::Leader
                    && h.epoch == epoch
                    && !h.fenced
                    && s.generation > s1.generation
                    && s.links_up == s.links - 2
                    && idle(s)
                    && s.last_error.is_empty()
            },
        )
        .await;
        println!(
            "ha quorum back: generation {} committed on epoch {epoch}",
            s2.generation
        );
        let hb = ha_of(&status(&mut cb).await);
        assert_eq!((hb.role, hb.epoch), (Role::Standby, epoch), "the standby: {hb:?}");
        let two_down = want.routing(&[(l1, p1), (l2, p2)]);
        assert_eq!(want.installed(&mut ca).await, two_down);
        wait_agents(
            &mut agents,
            want.blocks,
            &two_down,
            "after quorum returned",
            Duration::from_secs(10),
        )
        .await;
        want.check_lids(&mut ca, "the leader").await;
        verify_all_pairs(&mut ctl, n, "after quorum returned").await;
        acker.abort();
    });
}
