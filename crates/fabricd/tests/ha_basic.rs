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
use common::{link_req, run_with_deadline, status, switch_links, test_dir, topology, wait_status, Daemon};
use fabric_etcd_harness::EtcdCluster;
use fabric_proto::v1 as pb;

const SPEC: &str = "PGFT(2;4,8;1,4;1,1)";
// 3 s, not 2: with 2 s a leader lost its lease once in a local run at load ≈ 4 (the standby took
// over before the test had looked at it).
const LEASE_TTL_S: u64 = 3;

fn config(inventory: &Path, endpoints: &[String], node: &str, prometheus_port: u16) -> String {
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

[fault_injection]
enabled = true

[prometheus]
listen = "127.0.0.1:{prometheus_port}"

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

/// A daemon with its own directory (state, socket, log) under `dir/name`, and its Prometheus
/// port.
fn spawn_env(dir: &Path, name: &str, sim: &AgentSim, endpoints: &[String], env: &[(&str, &str)]) -> (Daemon, u16) {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).expect("daemon dir");
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let cfg = d.join("fabricd.toml");
    let port = common::free_port();
    std::fs::write(&cfg, config(&sim.inventory, endpoints, name, port)).expect("write config");
    (Daemon::spawn_with_config(&d, &cfg, env), port)
}

fn spawn(dir: &Path, name: &str, sim: &AgentSim, endpoints: &[String]) -> Daemon {
    spawn_env(dir, name, sim, endpoints, &[]).0
}

/// `GET path` on a Prometheus port (off the runtime's threads).
async fn http(port: u16, path: &'static str) -> String {
    tokio::task::spawn_blocking(move || common::http_get(port, path))
        .await
        .expect("http task")
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
        let (bdaemon, bport) = spawn_env(&dir, "b", &sim, &endpoints, &[]);
        let bd = b.insert(bdaemon);
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
        // The standby's Prometheus endpoint: not ready (naming the leader), the HA metrics.
        let ready = http(bport, "/ready").await;
        assert!(
            ready.starts_with("HTTP/1.1 503")
                && ready.contains(&format!("standby: the leader is a (epoch {})", ha_a.epoch)),
            "{ready}"
        );
        let metrics = http(bport, "/metrics").await;
        for line in [
            "fabricd_ha_leader 0".to_string(),
            format!("fabricd_ha_epoch {}", ha_a.epoch),
            "fabricd_ha_fenced 1".into(),
            "fabricd_ha_etcd_reachable 1".into(),
        ] {
            assert!(metrics.contains(&line), "{line}: {metrics}");
        }
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
        let metrics = http(bport, "/metrics").await;
        assert!(
            metrics.contains("fabricd_ha_leader 1") && metrics.contains(&format!("fabricd_ha_epoch {}", ha_b.epoch)),
            "{metrics}"
        );
        assert!(http(bport, "/ready").await.starts_with("HTTP/1.1 200"));
    });
    drop(etcd);
}

/// The step-down path in one process: a leader frozen (SIGSTOP) past its lease is replaced;
/// thawed, it learns it lost the lease, stops its loop and stands by behind the new leader
/// (same process, its socket answering). A clean stop (SIGTERM) of the new leader resigns:
/// the old one is elected again before the lease would have run out.
#[test]
fn a_thawed_leader_stands_by_in_the_same_process_and_a_clean_stop_hands_over_at_once() {
    common::fabricctl_binary();
    let dir = test_dir("ha-stepdown");
    let etcd = EtcdCluster::start(1);
    etcd.wait_healthy(Duration::from_secs(20));
    let endpoints = etcd.endpoints();
    let sim = AgentSim::start(&dir, SPEC, &[]);
    let a = spawn(&dir, "a", &sim, &endpoints);
    let mut b: Option<Daemon> = None;
    run_with_deadline(90, async {
        let mut ca = a.client().await;
        let sa = wait_status(&a, &mut ca, "a leads", Duration::from_secs(30), |s| {
            is_leader(s) && s.generation >= 1
        })
        .await;
        let epoch_a = ha(&sa).epoch;
        let bd = b.insert(spawn(&dir, "b", &sim, &endpoints));
        let mut cb = bd.client().await;
        wait_status(bd, &mut cb, "b stands by", Duration::from_secs(20), |s| {
            s.ha.as_ref()
                .is_some_and(|h| h.role == pb::HaRole::Standby as i32 && h.epoch == epoch_a)
        })
        .await;

        // Frozen past its lease: b takes over.
        a.signal(libc::SIGSTOP);
        let sb = wait_status(
            bd,
            &mut cb,
            "b takes over from the frozen a",
            Duration::from_secs(30),
            |s| is_leader(s) && s.generation >= 1 && s.phase == pb::Phase::Idle as i32,
        )
        .await;
        let epoch_b = ha(&sb).epoch;
        assert!(epoch_b > epoch_a);
        // Thawed: a steps down and stands by behind b, in the same process.
        let pid = a.pid();
        a.signal(libc::SIGCONT);
        let sa = wait_status(&a, &mut ca, "a stands by behind b", Duration::from_secs(30), |s| {
            s.ha.as_ref()
                .is_some_and(|h| h.role == pb::HaRole::Standby as i32 && h.leader_node == "b" && h.epoch == epoch_b)
        })
        .await;
        assert_eq!(a.pid(), pid);
        assert!(!sa.ready && ha(&sa).fenced, "{sa:?}");
        assert!(a.log_text().contains("leadership lost"), "{}", a.log_text());
        let refused = ca
            .list_jobs(pb::ListJobsRequest {})
            .await
            .expect_err("a standby again refuses ListJobs");
        assert_eq!(refused.code(), tonic::Code::Unavailable);

        // A clean stop of b resigns: a is elected at once, not after the lease TTL.
        bd.signal(libc::SIGTERM);
        let stopped = Instant::now();
        let sa = wait_status(&a, &mut ca, "a leads again", Duration::from_secs(30), is_leader).await;
        let elected = stopped.elapsed();
        eprintln!("clean stop of the leader → the standby elected: {elected:?}");
        assert!(ha(&sa).epoch > epoch_b);
        assert!(
            elected < Duration::from_secs(LEASE_TTL_S),
            "a was elected {elected:?} after b's SIGTERM: a resigned lease hands over before its TTL ({LEASE_TTL_S} s)"
        );
        assert_eq!(bd.wait_exit(Duration::from_secs(20)), Some(0));
        wait_status(&a, &mut ca, "a routes again", Duration::from_secs(30), |s| {
            is_leader(s) && s.generation >= 1 && s.ready
        })
        .await;
    });
    drop(etcd);
}

/// etcd stops answering (its one member frozen) past the lease: the leader fences itself and
/// says so (Status not ready, "fenced"; the HA status fenced), a fault meanwhile is not
/// installed (no table written), and when etcd answers again the manager leads again (the same
/// lease renewed, or a new election in the same process) and installs the fault's generation.
#[test]
fn a_leader_without_etcd_says_fenced_writes_nothing_and_resumes_when_etcd_returns() {
    let dir = test_dir("ha-fenced");
    let mut etcd = EtcdCluster::start(1);
    etcd.wait_healthy(Duration::from_secs(20));
    let endpoints = etcd.endpoints();
    let sim = AgentSim::start(&dir, SPEC, &[]);
    let a = spawn(&dir, "a", &sim, &endpoints);
    run_with_deadline(90, async {
        let mut c = a.client().await;
        let s1 = wait_status(&a, &mut c, "a leads", Duration::from_secs(30), |s| {
            is_leader(s) && s.generation >= 1 && s.ready
        })
        .await;
        let mut ctl = sim.control().await;
        let writes_before = ctl.counters().await;
        etcd.freeze(0);
        let frozen = Instant::now();
        let s = wait_status(&a, &mut c, "a says it is fenced", Duration::from_secs(20), |s| {
            s.ha.as_ref().is_some_and(|h| h.fenced) && !s.ready
        })
        .await;
        assert!(s.not_ready_reason.starts_with("fenced: the lease of epoch"), "{s:?}");
        assert!(ha(&s).message.contains("fenced"), "{s:?}");
        eprintln!("etcd frozen → fenced reported: {:?}", frozen.elapsed());
        // A fault while fenced: not installed, and the switches keep their tables.
        let topo = topology(&mut c).await;
        let (sw, port) = switch_links(&topo)[0];
        c.inject_fault(link_req(sw, port, false, false, false))
            .await
            .expect("InjectFault");
        let s = wait_status(
            &a,
            &mut c,
            "the fenced generation fails",
            Duration::from_secs(20),
            |s| !s.last_error.is_empty() || !s.persistence_error.is_empty(),
        )
        .await;
        assert_eq!(s.generation, s1.generation, "nothing committed while fenced: {s:?}");
        let writes = ctl.counters().await;
        assert_eq!(
            writes.lft_blocks_written, writes_before.lft_blocks_written,
            "no LFT block written while fenced"
        );
        etcd.thaw(0);
        let thawed = Instant::now();
        let s = wait_status(&a, &mut c, "a leads again", Duration::from_secs(30), |s| {
            is_leader(s) && s.ha.as_ref().is_some_and(|h| !h.fenced)
        })
        .await;
        eprintln!(
            "etcd back → leading again: {:?} (epoch {} → {})",
            thawed.elapsed(),
            ha(&s1).epoch,
            ha(&s).epoch
        );
        assert!(ha(&s).fenced_writes > 0, "the fence refused the fault's writes: {s:?}");
        if s.virtual_faults == 0 {
            // The lease ran out at the server while etcd was frozen: a new term, loaded from
            // etcd, where the uncommitted fault never was (only committed state is shared).
            assert!(
                ha(&s).epoch > ha(&s1).epoch,
                "an uncommitted change is lost only with the term: {s:?}"
            );
            c.inject_fault(link_req(sw, port, false, false, true))
                .await
                .expect("InjectFault in the new term");
        }
        wait_status(
            &a,
            &mut c,
            "the fault's generation is installed",
            Duration::from_secs(30),
            |s| is_leader(s) && s.generation > s1.generation && s.virtual_faults == 1 && s.ready,
        )
        .await;
        eprintln!("etcd back → the fault's generation committed: {:?}", thawed.elapsed());
    });
    drop(etcd);
}

/// The test failpoint is announced: `FABRICD_TEST_HA_NO_SELF_FENCE=1` logs a warning at start
/// (the behaviour itself, a leader ignoring its own lease, is the acceptance suite's).
#[test]
fn the_no_self_fence_failpoint_is_logged_at_start() {
    let dir = test_dir("ha-failpoint");
    let etcd = EtcdCluster::start(1);
    etcd.wait_healthy(Duration::from_secs(20));
    let sim = AgentSim::start(&dir, SPEC, &[]);
    let (a, _) = spawn_env(
        &dir,
        "a",
        &sim,
        &etcd.endpoints(),
        &[(fabricd::daemon::NO_SELF_FENCE_ENV, "1")],
    );
    run_with_deadline(60, async {
        let mut c = a.client().await;
        wait_status(&a, &mut c, "a leads", Duration::from_secs(30), is_leader).await;
        let log = a.log_text();
        assert!(
            log.contains("WARN") && log.contains("FABRICD_TEST_HA_NO_SELF_FENCE=1: TEST FAILPOINT"),
            "{log}"
        );
    });
    drop(etcd);
}

/// etcd down when fabricd starts: the socket answers at once (standby, etcd unreachable, no
/// leader known; every other call UNAVAILABLE), and the manager leads once etcd is back.
#[test]
fn with_etcd_down_at_start_the_status_says_so_and_the_manager_leads_when_it_returns() {
    let dir = test_dir("ha-etcd-down");
    let mut etcd = EtcdCluster::start(1);
    etcd.wait_healthy(Duration::from_secs(20));
    let endpoints = etcd.endpoints();
    etcd.kill(0);
    let sim = AgentSim::start(&dir, SPEC, &[]);
    let a = spawn(&dir, "a", &sim, &endpoints);
    run_with_deadline(60, async {
        let mut c = a.client().await;
        let s = wait_status(&a, &mut c, "standby, etcd unreachable", Duration::from_secs(20), |s| {
            s.ha.as_ref().is_some_and(|h| {
                h.role == pb::HaRole::Standby as i32 && !h.etcd_reachable && h.message.contains("etcd unreachable")
            })
        })
        .await;
        assert!(
            !s.ready && s.not_ready_reason.contains("no leader known (etcd unreachable)"),
            "{s:?}"
        );
        let refused = c.get_topology(pb::GetTopologyRequest {}).await.expect_err("standby");
        assert_eq!(refused.code(), tonic::Code::Unavailable);
        etcd.restart(0);
        wait_status(&a, &mut c, "a leads once etcd is back", Duration::from_secs(30), |s| {
            is_leader(s) && s.generation >= 1 && s.ready
        })
        .await;
    });
    drop(etcd);
}
