//! High availability, the basic path (issue #20), with real processes: one etcd member, one
//! `fabric-agent-sim`, two `fabricd` with `[ha]` on the same agents and the same etcd key
//! prefix. One is elected leader and routes the fabric; the other stands by (its Status names
//! the leader and the epoch; every other call is `UNAVAILABLE`); `fabricctl status` shows both
//! roles. `kill -9` of the leader: the standby takes over within the lease TTL plus one
//! generation, with a higher epoch, the same LIDs (the LID plan came from etcd) and the agents'
//! tables routing every pair.
//!
//! One etcd member: this test is about the managers, not about etcd's own fault tolerance (the
//! acceptance suite runs three members and takes quorum away).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::agent_sim::{oob_config, AgentSim};
use common::{run_with_deadline, status, test_dir, topology, wait_status, Daemon};
use fabric_etcd_harness::EtcdCluster;
use fabric_proto::v1 as pb;

const SPEC: &str = "PGFT(2;4,8;1,4;1,1)";
const LEASE_TTL_S: u64 = 2;

fn config(inventory: &Path, endpoints: &[String], node: &str) -> String {
    let endpoints: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
    oob_config(
        inventory,
        "",
        &format!(
            r#"
[update]
coalesce_ms = 20
coalesce_max_ms = 200
failed_generation_backoff_ms = 200

[ha]
etcd_endpoints = [{}]
key_prefix = "/fabricd/ha-basic"
lease_ttl_s = {LEASE_TTL_S}
node_name = "{node}"
advertise = "{node}.example:50051"
request_timeout_ms = 500
"#,
            endpoints.join(", ")
        ),
    )
}

fn ha(s: &pb::Status) -> pb::HaStatus {
    s.ha.clone().expect("Status.ha is set under [ha]")
}

fn is_leader(s: &pb::Status) -> bool {
    s.ha.as_ref().is_some_and(|h| h.role == pb::HaRole::Leader as i32)
}

/// A daemon with its own directory (state, socket, log) under `dir/name`.
fn spawn(dir: &Path, name: &str, sim: &AgentSim, endpoints: &[String]) -> Daemon {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).expect("daemon dir");
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let cfg = d.join("fabricd.toml");
    std::fs::write(&cfg, config(&sim.inventory, endpoints, name)).expect("write config");
    Daemon::spawn_with_config(&d, &cfg, &[])
}

/// `fabricctl --socket S status` (off the runtime's threads).
async fn fabricctl_status(d: &Daemon) -> String {
    let socket = d.socket.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(common::fabricctl_binary())
            .arg("--socket")
            .arg(&socket)
            .arg("status")
            .output()
            .expect("run fabricctl")
    })
    .await
    .expect("fabricctl task");
    assert!(out.status.success(), "fabricctl status: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn lids(t: &pb::Topology) -> Vec<(u64, u32, u32)> {
    let mut v: Vec<_> = t.end_ports.iter().map(|e| (e.guid, e.base_lid, e.escape_lid)).collect();
    v.sort_unstable();
    v
}

#[test]
fn a_standby_names_the_leader_and_takes_over_after_kill9_with_the_same_lids() {
    // Built before the clock starts (a first build takes longer than the test).
    common::fabricctl_binary();
    let dir = test_dir("ha-basic");
    let etcd = EtcdCluster::start(1);
    etcd.wait_healthy(Duration::from_secs(20));
    let endpoints = etcd.endpoints();
    let sim = AgentSim::start(&dir, SPEC, &[]);
    let mut a = spawn(&dir, "a", &sim, &endpoints);
    let mut b: Option<Daemon> = None;
    run_with_deadline(90, async {
        // The first one elected routes the fabric.
        let mut ca = a.client().await;
        let sa = wait_status(&a, &mut ca, "a leads and routes", Duration::from_secs(30), |s| {
            is_leader(s) && s.generation >= 1 && s.phase == pb::Phase::Idle as i32
        })
        .await;
        let ha_a = ha(&sa);
        assert_eq!((ha_a.node_name.as_str(), ha_a.leader_node.as_str()), ("a", "a"));
        assert!(
            ha_a.epoch > 0 && ha_a.lease_id != 0 && !ha_a.fenced && ha_a.etcd_reachable,
            "{ha_a:?}"
        );
        assert_eq!(ha_a.lease_ttl_s, LEASE_TTL_S);
        let lids_before = lids(&topology(&mut ca).await);
        assert!(!lids_before.is_empty());

        // The second stands by: Status names the leader and its epoch, the rest is refused.
        let bd = b.insert(spawn(&dir, "b", &sim, &endpoints));
        let mut cb = bd.client().await;
        let sb = wait_status(bd, &mut cb, "b stands by behind a", Duration::from_secs(20), |s| {
            s.ha.as_ref()
                .is_some_and(|h| h.role == pb::HaRole::Standby as i32 && h.leader_node == "a" && h.epoch == ha_a.epoch)
        })
        .await;
        let ha_b = ha(&sb);
        assert_eq!(ha_b.leader_advertise, "a.example:50051");
        assert!(ha_b.fenced && !sb.ready && sb.generation == 0, "{sb:?}");
        assert!(sb.not_ready_reason.contains("standby"), "{sb:?}");
        let refused = cb
            .get_topology(pb::GetTopologyRequest {})
            .await
            .expect_err("a standby refuses GetTopology");
        assert_eq!(refused.code(), tonic::Code::Unavailable);
        assert_eq!(
            refused.message(),
            format!("standby: the leader is a (epoch {})", ha_a.epoch)
        );
        // fabricctl status shows both roles and the same leader and epoch.
        let ta = fabricctl_status(&a).await;
        let tb = fabricctl_status(bd).await;
        let epoch = format!("epoch {}", ha_a.epoch);
        assert!(
            ta.contains("HA:") && ta.contains("leader on a, leader a (a.example:50051)") && ta.contains(&epoch),
            "{ta}"
        );
        assert!(
            tb.contains("HA:") && tb.contains("standby on b, leader a (a.example:50051)") && tb.contains(&epoch),
            "{tb}"
        );

        // kill -9 of the leader: b is elected once the lease runs out, and commits a generation.
        a.kill9();
        let killed = Instant::now();
        let sb = wait_status(bd, &mut cb, "b takes over", Duration::from_secs(30), |s| {
            is_leader(s) && s.generation >= 1 && s.phase == pb::Phase::Idle as i32
        })
        .await;
        let takeover = killed.elapsed();
        let ha_b = ha(&sb);
        assert!(
            ha_b.epoch > ha_a.epoch,
            "a new election has a higher epoch: {ha_b:?} after {ha_a:?}"
        );
        assert_eq!(ha_b.leader_node, "b");
        // The issue's bound: within the lease TTL + 1 s (election and first generation).
        assert!(
            takeover < Duration::from_secs(LEASE_TTL_S + 1),
            "takeover took {takeover:?} (bound: lease TTL {LEASE_TTL_S} s + 1 s)"
        );
        eprintln!("takeover (kill -9 → standby's first committed generation): {takeover:?}");
        // The same LIDs: the plan came from etcd.
        assert_eq!(
            lids(&topology(&mut cb).await),
            lids_before,
            "LIDs unchanged by the takeover"
        );
        // The agents' tables route every pair, on base and escape LIDs.
        let mut ctl = sim.control().await;
        let n = lids_before.len() as u64;
        for escape in [false, true] {
            let r = ctl.verify(escape).await;
            assert_eq!(
                (r.pairs_checked, r.unreachable_count),
                (n * (n - 1), 0),
                "escape {escape}: {:?}",
                r.unreachable.first()
            );
        }
        // And the new leader serves everything.
        let s = status(&mut cb).await;
        assert!(s.ready, "{s:?}");
        let tb = fabricctl_status(bd).await;
        assert!(tb.contains("leader on b, leader b"), "{tb}");
    });
    drop(etcd);
}
