//! End-to-end with real processes: `ibsim` (the OFED fabric simulator, private socket name,
//! console on a pipe) and `fabricd` with `[driver] kind = "umad"` running under the umad2sim
//! preload shim. The daemon discovers, assigns LIDs, activates ports and uploads the LFTs over
//! SMPs; `ibroute` and `ibtracert` (same simulator, same shim) check what the switches really
//! hold. An `Unlink` in the ibsim console must lead to a new generation avoiding the dead cable,
//! and `ReLink` to the original tables.
//!
//! Needs `ibsim` (ibsim-utils) and `ibroute`/`ibtracert` (infiniband-diags); the test fails
//! with an installation hint when they are missing.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use common::{changed_blocks, lfts, run_with_deadline, status, test_dir, topology, Daemon};
use fabric_proto::v1 as pb;

const SHIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";
/// 16 leaves x 8 nodes = 128 end ports, 8 spines.
const SPEC: &str = "PGFT(2;8,16;1,8;1,1)";

fn find_tool(name: &str) -> PathBuf {
    for d in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(d).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` is not installed (apt-get install ibsim-utils infiniband-diags)");
}

/// A running ibsim with its console; killed on drop.
struct Ibsim {
    child: Child,
    console: Option<ChildStdin>,
    sock: String,
    host: String,
    dir: PathBuf,
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        drop(self.console.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ibsim {
    fn start(dir: &Path, net_text: &str, host: String) -> Ibsim {
        let net = dir.join("fabric.net");
        std::fs::write(&net, net_text).expect("write net");
        let log_path = dir.join("ibsim.log");
        let log = std::fs::File::create(&log_path).expect("log");
        let sock = format!("fabricd-umad-{}", std::process::id());
        let mut child = Command::new(find_tool("ibsim"))
            .arg("-s")
            .arg(&net)
            .env("IBSIM_SOCKNAME", &sock)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .spawn()
            .expect("start ibsim");
        let console = child.stdin.take();
        let mut sim = Ibsim {
            child,
            console,
            sock,
            host,
            dir: dir.to_path_buf(),
        };
        let t0 = Instant::now();
        loop {
            let out = std::fs::read_to_string(&log_path).unwrap_or_default();
            if out.contains("Network simulator ready.") {
                return sim;
            }
            if let Ok(Some(s)) = sim.child.try_wait() {
                panic!("ibsim exited ({s}):\n{out}");
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "ibsim not ready:\n{out}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn console(&mut self, cmd: &str) {
        let c = self.console.as_mut().expect("console");
        writeln!(c, "{cmd}").expect("write console");
        c.flush().expect("flush console");
    }

    /// The environment that puts a process on this simulator.
    fn env(&self) -> [(&str, &str); 3] {
        [
            ("IBSIM_SOCKNAME", self.sock.as_str()),
            ("SIM_HOST", self.host.as_str()),
            ("LD_PRELOAD", SHIM),
        ]
    }

    /// Runs a diagnostic tool under the shim with a deadline; returns (success, output).
    fn tool(&self, name: &str, args: &[&str]) -> (bool, String) {
        let out = self.dir.join(format!("{name}.out"));
        let f = std::fs::File::create(&out).expect("out");
        let mut cmd = Command::new(find_tool(name));
        cmd.args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(f.try_clone().expect("dup"))
            .stderr(f);
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn tool");
        let t0 = Instant::now();
        let ok = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s.success();
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{name} {args:?} did not finish within 20 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        (ok, std::fs::read_to_string(&out).unwrap_or_default())
    }
}

/// `ibroute <lid>` as LID -> port (entries shown by the switch).
fn ibroute(sim: &Ibsim, lid: u32) -> BTreeMap<u64, u64> {
    let (ok, text) = sim.tool("ibroute", &[&lid.to_string()]);
    assert!(ok, "ibroute {lid} failed:\n{text}");
    let mut shown = BTreeMap::new();
    for l in text.lines() {
        let mut w = l.split_whitespace();
        let (Some(a), Some(b)) = (w.next(), w.next()) else {
            continue;
        };
        if let (Some(a), Ok(p)) = (a.strip_prefix("0x"), b.parse::<u64>()) {
            if let Ok(l) = u64::from_str_radix(a, 16) {
                shown.insert(l, p);
            }
        }
    }
    shown
}

/// Every switch (or only those in `only`) holds the LFT the daemon reports (`GetLft`).
///
/// `ibroute` reaches a switch by LID routing from the SM's port; with a cable cut, a spine may
/// only be reachable by an up-down-up path that fat-tree routing does not provide, so after a
/// fault only the leaves are checked.
async fn check_switches_hold(sim: &Ibsim, c: &mut fabric_proto::Client, only: Option<&[u64]>) -> HashMap<u64, Vec<u8>> {
    let r = c
        .get_lft(pb::GetLftRequest {
            switch: String::new(),
            format: pb::LftFormat::Raw as i32,
        })
        .await
        .expect("GetLft")
        .into_inner();
    for s in &r.switches {
        if only.is_some_and(|o| !o.contains(&s.guid)) {
            continue;
        }
        let want: BTreeMap<u64, u64> = s
            .lft
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != 255)
            .map(|(l, &p)| (l as u64, u64::from(p)))
            .collect();
        assert!(!want.is_empty());
        assert_eq!(
            ibroute(sim, s.lid),
            want,
            "switch 0x{:016x} (LID {}) does not hold the daemon's LFT",
            s.guid,
            s.lid
        );
    }
    r.switches.into_iter().map(|s| (s.guid, s.lft)).collect()
}

/// `ibtracert` between pseudo-random pairs of end ports, base and escape LIDs, reaches the
/// destination node.
fn check_tracert(sim: &Ibsim, t: &pb::Topology, pairs: usize) {
    let eps: Vec<&pb::EndPortInfo> = t.end_ports.iter().collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as usize % n
    };
    for _ in 0..pairs {
        let a = eps[next(eps.len())];
        let b = eps[next(eps.len())];
        if a.guid == b.guid {
            continue;
        }
        for (sl, dl) in [(a.base_lid, b.base_lid), (a.escape_lid, b.escape_lid)] {
            let (ok, text) = sim.tool("ibtracert", &[&sl.to_string(), &dl.to_string()]);
            assert!(ok, "ibtracert {sl} {dl} failed:\n{text}");
            assert!(
                text.lines()
                    .last()
                    .unwrap_or("")
                    .contains(&format!("{:016x}", b.node_guid)),
                "ibtracert {sl} {dl} does not end at node 0x{:016x}:\n{text}",
                b.node_guid
            );
        }
    }
}

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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn umad_daemon_programs_ibsim_and_reroutes_around_an_unlinked_cable() {
    let dir = test_dir("umad");
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let host = format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid);
    let mut sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host);
    let config = dir.join("fabricd.toml");
    std::fs::write(
        &config,
        r#"
[log]
level = "info"
timestamps = false

[driver]
kind = "umad"

[driver.umad]
timeout_ms = 200
retries = 3
window = 16
sweep_interval_ms = 100

[update]
coalesce_ms = 20
coalesce_max_ms = 200

[metrics]
random_perms = 2
"#,
    )
    .expect("write config");
    let env = sim.env();
    let d = Daemon::spawn_with_config(&dir, &config, &env);
    run_with_deadline(55, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(20)).await;
        assert_eq!(s.driver, "umad");
        let topo = topology(&mut c).await;
        assert_eq!(topo.switches.len(), f.num_switches());
        assert_eq!(topo.end_ports.len(), f.num_end_ports());
        assert!(topo.end_ports.iter().all(|e| e.base_lid > 0 && e.base_lid <= 0xBFFF));
        let original = check_switches_hold(&sim, &mut c, None).await;
        check_tracert(&sim, &topo, 6);

        // Unlink a leaf uplink in the simulator: the daemon reroutes around it.
        let leaf = topo.switches.iter().find(|s| s.level == Some(0)).expect("a leaf");
        let up = leaf
            .ports
            .iter()
            .find(|p| p.remote_kind == pb::RemoteKind::Switch as i32)
            .expect("an uplink");
        let (lg, lp) = (leaf.guid, up.port);
        sim.console(&format!("Unlink \"S-{lg:016x}\"[{lp}]"));
        let s1 = next_generation(&d, &mut c, s.generation, Duration::from_secs(15)).await;
        let leaves: Vec<u64> = topo
            .switches
            .iter()
            .filter(|s| s.level == Some(0))
            .map(|s| s.guid)
            .collect();
        let around = check_switches_hold(&sim, &mut c, Some(&leaves)).await;
        assert!(
            !around[&lg].iter().any(|&p| u32::from(p) == lp),
            "leaf 0x{lg:016x} still forwards to its unlinked port {lp}"
        );
        check_tracert(&sim, &topology(&mut c).await, 4);

        // ReLink: the original tables come back (same LIDs, deterministic routing).
        sim.console(&format!("ReLink \"S-{lg:016x}\"[{lp}]"));
        next_generation(&d, &mut c, s1.generation, Duration::from_secs(15)).await;
        let back = check_switches_hold(&sim, &mut c, None).await;
        assert_eq!(changed_blocks(&original, &back), 0);
        assert_eq!(changed_blocks(&original, &lfts(&mut c).await.1), 0);
    });
}
