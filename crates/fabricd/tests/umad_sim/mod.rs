//! Harness of the `umad_*` integration tests: a private `ibsim` (unique socket name, console on
//! a pipe, output captured per command), the diagnostic tools of infiniband-diags run under the
//! umad2sim shim with a deadline, parsers of their output, and the daemon configuration.
//!
//! Needs `ibsim` (ibsim-utils) and infiniband-diags; a missing tool fails the test with an
//! installation hint.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fabric_proto::v1 as pb;

use crate::common::{status, Daemon};

pub const SHIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

pub fn find_tool(name: &str) -> PathBuf {
    for d in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(d).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` is not installed (apt-get install ibsim-utils infiniband-diags)");
}

/// A running ibsim with its console; killed on drop.
pub struct Ibsim {
    child: Child,
    console: Option<ChildStdin>,
    pub sock: String,
    pub host: String,
    pub dir: PathBuf,
    log: PathBuf,
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        drop(self.console.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ibsim {
    /// Starts ibsim on `net_text` (written into `dir`); clients attach to node `host`. The
    /// socket name is unique per process and call (tests of one binary run in parallel).
    pub fn start(dir: &Path, net_text: &str, host: String) -> Ibsim {
        static N: AtomicUsize = AtomicUsize::new(0);
        let net = dir.join("fabric.net");
        std::fs::write(&net, net_text).expect("write net");
        let log_path = dir.join("ibsim.log");
        let log = std::fs::File::create(&log_path).expect("log");
        let sock = format!(
            "fabricd-umad-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
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
            log: log_path.clone(),
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

    /// Sends one console command.
    pub fn console(&mut self, cmd: &str) {
        let c = self.console.as_mut().expect("console");
        writeln!(c, "{cmd}").expect("write console");
        c.flush().expect("flush console");
    }

    fn log_len(&self) -> usize {
        std::fs::metadata(&self.log).map(|m| m.len() as usize).unwrap_or(0)
    }

    /// Sends a console command and returns what ibsim printed after it, once a line satisfying
    /// `done` appeared (5 s deadline).
    pub fn console_output(&mut self, cmd: &str, done: impl Fn(&str) -> bool) -> String {
        let from = self.log_len();
        self.console(cmd);
        let t0 = Instant::now();
        loop {
            let all = std::fs::read(&self.log).unwrap_or_default();
            let text = String::from_utf8_lossy(&all[from.min(all.len())..]).to_string();
            if text.lines().any(&done) {
                return text;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "ibsim console {cmd:?} printed no final line:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The console `Route <from> <to>` walk, as (node id, in port, out port of the previous
    /// node) lines; `Err` with ibsim's message when the walk fails.
    pub fn route(&mut self, from: u32, to: u32) -> Result<Vec<(String, u32, u32)>, String> {
        let text = self.console_output(&format!("Route {from} {to}"), |l| {
            l.contains("To node") || l.contains("Bad ") || l.contains("no route") || l.contains("unconfigured")
        });
        if !text.contains("To node") {
            return Err(text);
        }
        let mut hops = Vec::new();
        for l in text.lines() {
            let l = l.trim_start_matches("sim> ").trim();
            // [out] -> "node"[in]
            let Some(rest) = l.strip_prefix('[') else { continue };
            let Some((out, rest)) = rest.split_once("] -> \"") else {
                continue;
            };
            let Some((node, rest)) = rest.split_once("\"[") else {
                continue;
            };
            let Some(inp) = rest.strip_suffix(']') else { continue };
            hops.push((
                node.to_string(),
                inp.parse().expect("in port"),
                out.parse().expect("out port"),
            ));
        }
        Ok(hops)
    }

    /// The environment that puts a process on this simulator.
    pub fn env(&self) -> [(&str, &str); 3] {
        [
            ("IBSIM_SOCKNAME", self.sock.as_str()),
            ("SIM_HOST", self.host.as_str()),
            ("LD_PRELOAD", SHIM),
        ]
    }

    /// Runs a diagnostic tool under the shim with a deadline; returns (success, output).
    pub fn tool(&self, name: &str, args: &[&str]) -> (bool, String) {
        self.tool_on(&self.host, name, args)
    }

    /// Like [`Ibsim::tool`], with the tool attached to node `host` (an ibsim node id such as
    /// `H-0002c98000000500`) instead of the daemon's.
    pub fn tool_on(&self, host: &str, name: &str, args: &[&str]) -> (bool, String) {
        static N: AtomicUsize = AtomicUsize::new(0);
        let out = self
            .dir
            .join(format!("{name}-{}.out", N.fetch_add(1, Ordering::Relaxed)));
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
        cmd.env("SIM_HOST", host);
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
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        (ok, text)
    }
}

/// Node GUID in an ibsim node id (`S-0002c90000000000`, `H-...`), if it is one of ours.
pub fn node_guid(id: &str) -> Option<u64> {
    let h = id.strip_prefix("S-").or_else(|| id.strip_prefix("H-"))?;
    u64::from_str_radix(h, 16).ok()
}

/// `ibroute <lid>` (or `ibroute -D <path>`) as LID -> port (the entries the switch shows).
pub fn ibroute(sim: &Ibsim, args: &[&str]) -> BTreeMap<u64, u64> {
    let (ok, text) = sim.tool("ibroute", args);
    assert!(ok, "ibroute {args:?} failed:\n{text}");
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

/// `ibtracert <src> <dst>` as switch hops (node GUID, in port, out port) and the node GUID the
/// trace ends at.
pub fn ibtracert(sim: &Ibsim, src: u32, dst: u32) -> (Vec<(u64, u32, u32)>, u64) {
    let (ok, text) = sim.tool("ibtracert", &[&src.to_string(), &dst.to_string()]);
    assert!(ok, "ibtracert {src} {dst} failed:\n{text}");
    // "[out] -> switch port {0x<guid>}[in] ..." / "[out] -> ca port {0x<port guid>}[in] ...";
    // the out port of a line belongs to the node of the previous line.
    let mut lines: Vec<(u32, bool, u64, u32)> = Vec::new();
    for l in text.lines() {
        let Some(rest) = l.trim().strip_prefix('[') else {
            continue;
        };
        let Some((out, rest)) = rest.split_once("] -> ") else {
            continue;
        };
        let is_switch = rest.starts_with("switch");
        let Some((_, rest)) = rest.split_once("{0x") else {
            continue;
        };
        let Some((guid, rest)) = rest.split_once("}[") else {
            continue;
        };
        let Some((inp, _)) = rest.split_once(']') else { continue };
        lines.push((
            out.parse().expect("out port"),
            is_switch,
            u64::from_str_radix(guid, 16).expect("guid"),
            inp.parse().expect("in port"),
        ));
    }
    let mut hops = Vec::new();
    for w in lines.windows(2) {
        if w[0].1 {
            hops.push((w[0].2, w[0].3, w[1].0));
        }
    }
    let end = text
        .lines()
        .rfind(|l| l.starts_with("To "))
        .and_then(|l| l.split_once("{0x"))
        .and_then(|(_, r)| r.split_once('}'))
        .and_then(|(g, _)| u64::from_str_radix(g, 16).ok())
        .unwrap_or_else(|| panic!("ibtracert {src} {dst}: no destination line:\n{text}"));
    (hops, end)
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
level = "info"
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
