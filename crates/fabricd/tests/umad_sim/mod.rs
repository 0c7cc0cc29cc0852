//! fabricd's part of the harness of the `umad_*` integration tests: the daemon configuration for
//! the umad driver under ibsim, the daemon started in the simulator's directory, and waits and
//! traces over gRPC. The simulator, the infiniband-diags tools run under the umad2sim shim and
//! the parsers of their output are the shared `fabric-ibsim-harness` crate.
//!
//! Needs `ibsim` (ibsim-utils) and infiniband-diags; a missing tool fails the test with an
//! installation hint.

#![allow(dead_code)]

pub mod tables;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fabric_proto::v1 as pb;

use crate::common::{status, Daemon};

/// The fabric file `fabricctl topo gen SPEC` writes into `dir` (as a site would): its text, the
/// parsed fabric, and the ibsim host name of its first end port's node (where the SM runs).
pub fn generated_fabric(dir: &Path, spec: &str) -> (String, fabric_topology::Fabric, String) {
    let file = dir.join("fabric.ibnet");
    let out = Command::new(crate::common::fabricctl_binary())
        .args(["topo", "gen", spec, "-o"])
        .arg(&file)
        .output()
        .expect("run fabricctl topo gen");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&file).expect("read the generated file");
    let f = fabric_topology::ibnet::parse(&text, spec).expect("parse").fabric;
    let host = format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid);
    (text, f, host)
}

/// Waits for a generation after `after` with nothing pending and the daemon idle.
pub async fn next_generation(d: &Daemon, c: &mut fabric_proto::Client, after: u64, within: Duration) -> pb::Status {
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A daemon configuration for the umad driver under ibsim (`extra` is appended).
pub fn config(extra: &str) -> String {
    format!(
        r#"
[log]
# The driver's per-change SMP counter lines are at debug level (the tests read them).
level = "info,fabricd::daemon::driver=debug"
timestamps = false

[driver]
kind = "umad"

[driver.umad]
timeout_ms = 200
retries = 3
window = 16
sweep_interval_ms = 100
# ibsim does not simulate link training: re-enable ports straight to LinkUp.
enable_phys_state = 5

[update]
coalesce_ms = 20
coalesce_max_ms = 200

[metrics]
random_perms = 2
{extra}
"#
    )
}

/// The daemon's trace (gRPC Trace) as switch hops (GUID, in port, out port).
pub async fn daemon_trace(c: &mut fabric_proto::Client, src: u64, dst: u64, escape: bool) -> Vec<(u64, u32, u32)> {
    let r = c
        .trace(pb::TraceRequest {
            src: format!("0x{src:016x}"),
            dst: format!("0x{dst:016x}"),
            escape,
        })
        .await
        .expect("Trace")
        .into_inner();
    assert!(r.reached, "daemon trace 0x{src:016x} -> 0x{dst:016x}: {}", r.error);
    r.hops.iter().map(|h| (h.switch_guid, h.in_port, h.out_port)).collect()
}

/// Starts `fabricd` on `config` like [`Daemon::spawn_with_config`], but with the test
/// directory as its working directory: the umad2sim shim emulates sysfs under `./sys-<pid>/`
/// there (left behind when the daemon is killed), which then goes away with the directory.
pub fn spawn_daemon(dir: &Path, config: &Path, env: &[(&str, &str)]) -> Daemon {
    let socket = dir.join("s.sock");
    let state = dir.join("state");
    let log = dir.join("fabricd.log");
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .expect("log file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fabricd"));
    cmd.arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(&state)
        .arg("--socket")
        .arg(&socket)
        .current_dir(dir)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(logf);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Daemon {
        child: Some(cmd.spawn().expect("start fabricd")),
        dir: dir.to_path_buf(),
        socket,
        state,
        config: config.to_path_buf(),
        log,
    }
}
