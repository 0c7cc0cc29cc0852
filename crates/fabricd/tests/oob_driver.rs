//! End-to-end with real processes: `fabric-agent-sim` (one gRPC management agent per switch)
//! and `fabricd` with `[driver] kind = "oob"`. The daemon discovers the fabric through the
//! agents, routes it and uploads the LFTs; the simulator traces every pair of end ports through
//! the agents' own LFT bytes. Faults made in the simulator (a cable, a killed agent) come back
//! to the daemon as driver events and must lead to a new generation that the simulator again
//! finds complete.
//!
//! # Locating `fabric-agent-sim`
//!
//! `CARGO_BIN_EXE_*` only names binaries of the package under test, and binaries of
//! dependencies are not built for tests. The simulator is therefore looked up in the target
//! directory of this test executable (`target/<profile>/deps/oob_driver-*` →
//! `target/<profile>/fabric-agent-sim`, which also honours `CARGO_TARGET_DIR`). Before using it
//! the test runs `$CARGO build -p fabric-agent-sim --bin fabric-agent-sim` once (a no-op when
//! it is fresh; `cargo test` does not hold the build lock while tests run), so a clean clone's
//! `cargo test -p fabricd` works; if that build fails (e.g. offline) an existing binary is used.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::agent_sim::sim_binary;
use common::{changed_blocks, lfts, run_with_deadline, status, test_dir, topology, Daemon};
use fabric_oob::proto::sim_control_client::SimControlClient;
use fabric_oob::proto::{CommandRequest, VerifyAllPairsRequest};
use fabric_proto::v1 as pb;
use tonic::transport::Channel;

/// 16 leaves x 8 nodes = 128 end ports, 8 spines: 24 agents.
const SPEC: &str = "PGFT(2;8,16;1,8;1,1)";

/// The simulator process; killed on drop.
struct Sim {
    child: Child,
    inventory: PathBuf,
}

impl Sim {
    fn start(dir: &Path, spec: &str) -> Sim {
        let inventory = dir.join("agents.inv");
        let mut child = Command::new(sim_binary())
            .args(["--generate", spec, "--no-console", "--inventory"])
            .arg(&inventory)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start fabric-agent-sim");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).expect("read sim stdout");
        assert!(line.starts_with("ready"), "simulator said {line:?}");
        Sim { child, inventory }
    }

    async fn control(&self) -> SimControlClient<Channel> {
        let inv = fabric_oob::Inventory::read_file(&self.inventory).expect("inventory");
        let addr = inv.control.expect("inventory has a !control line");
        SimControlClient::connect(format!("http://{addr}"))
            .await
            .expect("sim control")
            .max_decoding_message_size(64 << 20)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn oob_config(inventory: &Path) -> String {
    format!(
        r#"
[log]
level = "info"
timestamps = false

[driver]
kind = "oob"

[driver.oob]
inventory = "{}"
connect_timeout = "300ms"
request_timeout = "2s"
unreachable_deadline = "800ms"
max_connections = 16
max_retries = 2

[update]
coalesce_ms = 20
coalesce_max_ms = 200
failed_generation_backoff_ms = 200

[metrics]
random_perms = 4
"#,
        inventory.display()
    )
}

/// Pairs the simulator cannot deliver (through the agents' LFT bytes).
async fn unreachable(ctl: &mut SimControlClient<Channel>, escape: bool) -> (u64, u64) {
    let r = ctl
        .verify_all_pairs(VerifyAllPairsRequest { use_escape: escape })
        .await
        .expect("VerifyAllPairs")
        .into_inner();
    (r.pairs_checked, r.unreachable_count)
}

async fn command(ctl: &mut SimControlClient<Channel>, line: String) {
    ctl.command(CommandRequest { line: line.clone() })
        .await
        .unwrap_or_else(|e| panic!("sim command {line:?}: {e}"));
}

/// Waits until a generation above `after` is installed and the loop is idle.
async fn next_generation(d: &Daemon, c: &mut fabric_proto::Client, after: u64, within: Duration) -> pb::Status {
    let t = Instant::now();
    loop {
        let s = status(c).await;
        if s.generation > after && s.pending_faults == 0 && s.phase == pb::Phase::Idle as i32 {
            return s;
        }
        assert!(
            t.elapsed() < within,
            "no generation after {after} within {within:?} (status {s:?}); log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The leaf ports cabled to `spine`, from the daemon's topology.
fn ports_to(t: &pb::Topology, spine: u64) -> Vec<(u64, u32)> {
    let mut v = Vec::new();
    for s in &t.switches {
        for p in &s.ports {
            if p.remote_kind == pb::RemoteKind::Switch as i32 && p.remote_guid == spine {
                v.push((s.guid, p.port));
            }
        }
    }
    v
}

#[test]
fn oob_daemon_routes_reroutes_and_routes_around_a_dead_agent() {
    let dir = test_dir("oob");
    let sim = Sim::start(&dir, SPEC);
    let config = dir.join("fabricd.toml");
    std::fs::write(&config, oob_config(&sim.inventory)).expect("write config");
    let d = Daemon::spawn_with_config(&dir, &config, &[]);
    run_with_deadline(50, async {
        let mut c = d.ready().await;
        let mut ctl = sim.control().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(20)).await;
        assert_eq!(s.driver, "oob");
        let n = 128u64;
        assert_eq!(unreachable(&mut ctl, false).await, (n * (n - 1), 0));
        assert_eq!(unreachable(&mut ctl, true).await, (n * (n - 1), 0));
        let (_, original) = lfts(&mut c).await;
        assert_eq!(original.len(), 24);

        // Packet-level RPCs need the mock driver.
        let e = c
            .verify_reachability(pb::VerifyReachabilityRequest { escape: false })
            .await
            .expect_err("VerifyReachability on oob");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e}");

        // A cable fails in the simulator: the daemon reroutes around it.
        let topo = topology(&mut c).await;
        let spine = topo
            .switches
            .iter()
            .find(|s| s.level == Some(1))
            .map(|s| s.guid)
            .expect("a spine");
        let to_spine = ports_to(&topo, spine);
        assert_eq!(to_spine.len(), 16);
        let (leaf, leaf_port) = to_spine[0];
        command(&mut ctl, format!("link-down {leaf:#x} {leaf_port}")).await;
        let s1 = next_generation(&d, &mut c, s.generation, Duration::from_secs(10)).await;
        assert_eq!(unreachable(&mut ctl, false).await.1, 0);
        assert_eq!(unreachable(&mut ctl, true).await.1, 0);
        let (_, after_link) = lfts(&mut c).await;
        let row = &after_link[&leaf];
        assert!(
            !row.iter().any(|&p| u32::from(p) == leaf_port),
            "leaf {leaf:#x} still forwards to its dead port {leaf_port}"
        );
        command(&mut ctl, format!("link-up {leaf:#x} {leaf_port}")).await;
        let s2 = next_generation(&d, &mut c, s1.generation, Duration::from_secs(10)).await;
        assert_eq!(changed_blocks(&original, &lfts(&mut c).await.1), 0);

        // An agent dies: after the unreachable deadline its switch is down and routed around.
        command(&mut ctl, format!("kill {spine:#x}")).await;
        let s3 = next_generation(&d, &mut c, s2.generation, Duration::from_secs(15)).await;
        let (_, around) = lfts(&mut c).await;
        for (leaf, port) in &to_spine {
            assert!(
                !around[leaf].iter().any(|&p| u32::from(p) == *port),
                "leaf {leaf:#x} still forwards to the dead switch {spine:#x} on port {port}"
            );
        }
        assert_eq!(unreachable(&mut ctl, false).await.1, 0);
        command(&mut ctl, format!("restore {spine:#x}")).await;
        next_generation(&d, &mut c, s3.generation, Duration::from_secs(15)).await;
        assert_eq!(changed_blocks(&original, &lfts(&mut c).await.1), 0);
        assert_eq!(unreachable(&mut ctl, false).await.1, 0);
        assert_eq!(unreachable(&mut ctl, true).await.1, 0);
    });
}

#[test]
fn unreadable_inventory_exits_with_the_reason() {
    let dir = test_dir("oob-noinv");
    let missing = dir.join("no-such.inv");
    let config = dir.join("fabricd.toml");
    std::fs::write(&config, oob_config(&missing)).expect("write config");
    // --check-config reads the inventory too.
    let out = Command::new(env!("CARGO_BIN_EXE_fabricd"))
        .arg("--config")
        .arg(&config)
        .arg("--check-config")
        .output()
        .expect("run fabricd");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("driver.oob.inventory") && err.contains("no-such.inv"),
        "{err}"
    );
    // The daemon refuses to start with the same reason.
    let mut d = Daemon::spawn_with_config(&dir, &config, &[]);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(1));
    let log = d.log_text();
    assert!(
        log.contains("cannot open the oob driver") && log.contains("no-such.inv"),
        "{log}"
    );
}
