//! Slurm: `[slurm]` keeps the topology file in step with the fabric (rewritten when the
//! topology changes, not on a reroute; the command run after each rewrite; a command that hangs
//! is killed and logged), and `deploy/slurm/prolog.sh` / `epilog.sh` set and clear the job
//! mapping from a fake Slurm environment against a real fabricd (mock driver on a real
//! ibnetdiscover dump, host names `node001`, `gpu001`, ...), failing soft when fabricd is down.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;

fn dump() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fabric-topology/tests/data/real/switchib-edr-6sw-flat.ibnet")
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/slurm")
        .join(name)
}

fn config(dir: &Path, slurm: &str) -> PathBuf {
    let text = format!(
        r#"
[log]
level = "info"
timestamps = false

[driver.mock]
topology_file = "{}"

[fault_injection]
enabled = true

[update]
coalesce_ms = 20
coalesce_max_ms = 200
{slurm}
"#,
        dump().display()
    );
    let p = dir.join("fabricd.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn fabricctl(d: &Daemon, args: &[&str]) -> Output {
    Command::new(fabricctl_binary())
        .arg("--socket")
        .arg(&d.socket)
        .args(args)
        .output()
        .expect("run fabricctl")
}

fn ok(d: &Daemon, args: &[&str]) -> String {
    let out = fabricctl(d, args);
    assert!(
        out.status.success(),
        "fabricctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |s| s.lines().count())
}

/// Waits until `cond` holds (polling every 20 ms, at most 30 s).
fn wait_for(what: &str, d: &Daemon, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(30), "{what}; log:\n{}", d.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every host of the `Nodes=` of a tree file.
fn hosts(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.split_whitespace())
        .filter_map(|kv| kv.strip_prefix("Nodes="))
        .flat_map(|v| fabric_slurm::hostlist::expand(v).unwrap())
        .collect()
}

#[test]
fn the_topology_file_follows_topology_changes_only_and_the_command_runs_after_each_rewrite() {
    let dir = test_dir("slurm-file");
    let file = dir.join("topology.conf");
    let ran = dir.join("ran.log");
    let cfg = config(
        &dir,
        &format!(
            "[slurm]\ntopology_file = \"{}\"\nformat = \"tree\"\ncommand = [\"sh\", \"-c\", \"echo ran >> {}\"]\ncommand_timeout_s = 5\n",
            file.display(),
            ran.display()
        ),
    );
    let d = Daemon::spawn_with_config(&dir, &cfg, &[]);
    run_with_deadline(120, async {
        let mut c = d.ready().await;
        wait_for("first topology file and command", &d, || lines(&ran) == 1);
        let first = std::fs::read_to_string(&file).unwrap();
        assert_eq!(hosts(&first).len(), 96, "{first}");
        // The daemon writes what `fabricctl export slurm` prints for the live fabric.
        assert_eq!(ok(&d, &["export", "slurm", "--format", "tree"]), first);

        // An end node down: rewritten without it, the warning in the file, the command run again.
        ok(&d, &["inject", "node-down", "--node", "node001 HCA-1", "--wait"]);
        wait_for("rewrite after node-down", &d, || lines(&ran) == 2);
        let second = std::fs::read_to_string(&file).unwrap();
        assert!(
            !hosts(&second).contains("node001") && hosts(&second).len() == 95,
            "{second}"
        );
        assert!(
            second.contains("# warning: 1 host without a live end port (node, link or switch down), left out: node001"),
            "{second}"
        );
        assert_eq!(ok(&d, &["export", "slurm", "--format", "tree"]), second);

        // A reroute without a topology change: neither file nor command.
        let g = status(&mut c).await.generation;
        ok(&d, &["reroute", "--wait"]);
        assert!(status(&mut c).await.generation > g);
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(lines(&ran), 2);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), second);

        // Back up: the first text again.
        ok(&d, &["inject", "node-up", "--node", "node001 HCA-1", "--wait"]);
        wait_for("rewrite after node-up", &d, || lines(&ran) == 3);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
        // No temporary file left beside it.
        let names: Vec<String> = std::fs::read_dir(&*dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("topology.conf"))
            .collect();
        assert_eq!(names, ["topology.conf"]);
    });
}

#[test]
fn a_hanging_command_is_killed_and_logged_and_the_daemon_goes_on() {
    let dir = test_dir("slurm-timeout");
    let file = dir.join("topology.yaml");
    let cfg = config(
        &dir,
        &format!(
            "[slurm]\ntopology_file = \"{}\"\nformat = \"yaml\"\ncommand = [\"sleep\", \"30\"]\ncommand_timeout_s = 1\n",
            file.display()
        ),
    );
    let d = Daemon::spawn_with_config(&dir, &cfg, &[]);
    run_with_deadline(120, async {
        let mut c = d.ready().await;
        wait_for("timeout logged", &d, || {
            d.log_text().contains("slurm: command timed out, killed")
        });
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains("- topology: \"fabric-tree\"") && text.contains("- topology: \"fabric-block\""),
            "{text}"
        );
        // Still serving and routing.
        ok(&d, &["inject", "node-down", "--node", "gpu001 HCA-1", "--wait"]);
        assert!(status(&mut c).await.generation >= 2);
    });
}

fn run_script(name: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(script(name));
    cmd.env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_JOB_NODELIST")
        .env_remove("FABRICD_SOCKET")
        .env("FABRICCTL", fabricctl_binary());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the script")
}

async fn jobs(c: &mut fabric_proto::Client) -> Vec<pb::Job> {
    c.list_jobs(pb::ListJobsRequest {})
        .await
        .expect("ListJobs")
        .into_inner()
        .jobs
}

#[test]
fn prolog_and_epilog_set_and_clear_the_job_mapping_and_fail_soft() {
    let dir = test_dir("slurm-prolog");
    let cfg = config(&dir, "");
    let d = Daemon::spawn_with_config(&dir, &cfg, &[]);
    let sock = d.socket.to_str().unwrap().to_string();
    run_with_deadline(120, async {
        let mut c = d.ready().await;
        let env = [
            ("SLURM_JOB_ID", "4242"),
            ("SLURM_JOB_NODELIST", "node[001-003],gpu001,nosuchhost"),
            ("FABRICD_SOCKET", sock.as_str()),
        ];
        let out = run_script("prolog.sh", &env);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        assert!(err.contains("nosuchhost"), "{err}");
        let j = jobs(&mut c).await;
        assert_eq!(j.len(), 1, "{err}");
        assert_eq!(j[0].job_id, "4242");
        let names: BTreeSet<&str> = j[0].end_ports.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            BTreeSet::from(["node001 HCA-1", "node002 HCA-1", "node003 HCA-1", "gpu001 HCA-1"])
        );

        let out = run_script("epilog.sh", &env);
        assert!(out.status.success());
        assert!(jobs(&mut c).await.is_empty());
        // Again: no such mapping any more, logged, exit 0.
        let out = run_script("epilog.sh", &env);
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("jobs clear failed"));

        // fabricd unreachable, a bad node list, no Slurm environment: all exit 0 with a reason.
        let gone = dir.join("nothing.sock");
        let down = [
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "node001"),
            ("FABRICD_SOCKET", gone.to_str().unwrap()),
        ];
        for (name, env, says) in [
            ("prolog.sh", &down[..], "job not mapped"),
            ("epilog.sh", &down[..], "jobs clear failed"),
            (
                "prolog.sh",
                &[
                    ("SLURM_JOB_ID", "8"),
                    ("SLURM_JOB_NODELIST", "node[1-"),
                    ("FABRICD_SOCKET", sock.as_str()),
                ][..],
                "cannot expand",
            ),
            ("prolog.sh", &[][..], "not set"),
        ] {
            let out = run_script(name, env);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{name} {env:?}: {err}");
            assert!(err.contains(says), "{name} {env:?}: {err}");
        }
        assert!(jobs(&mut c).await.is_empty());
    });
}
