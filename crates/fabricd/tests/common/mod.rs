//! Harness of the integration tests: starts the real `fabricd` binary with a temporary config,
//! state directory and socket, talks gRPC to it, and kills it on drop (printing its log when the
//! test failed).

#![allow(dead_code)]

pub mod agent_sim;
pub mod ha;
pub mod installed;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fabric_proto::v1 as pb;
use fabric_proto::Client;

/// Options of one daemon.
#[derive(Clone, Debug)]
pub struct Opts {
    pub generator: String,
    pub coalesce_ms: u64,
    pub coalesce_max_ms: u64,
    pub fault_injection: bool,
    /// Extra TOML appended to the config.
    pub extra: String,
}

impl Opts {
    pub fn new(generator: &str) -> Opts {
        Opts {
            generator: generator.into(),
            coalesce_ms: 20,
            coalesce_max_ms: 200,
            fault_injection: true,
            extra: String::new(),
        }
    }

    pub fn config_text(&self) -> String {
        format!(
            r#"
[log]
level = "info"
timestamps = false

[driver.mock]
generator = "{}"

[fault_injection]
enabled = {}
allow_physical = true

[update]
coalesce_ms = {}
coalesce_max_ms = {}

[metrics]
random_perms = 4
{}
"#,
            self.generator, self.fault_injection, self.coalesce_ms, self.coalesce_max_ms, self.extra
        )
    }
}

/// A running `fabricd` child process.
pub struct Daemon {
    pub child: Option<Child>,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
}

/// Temporary directory of a test: removed when the test passes, kept (and named in the output)
/// when it fails.
pub struct TestDir(PathBuf);

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test files kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn test_dir(name: &str) -> TestDir {
    let base = std::env::temp_dir().join(format!("fabricd-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("create test dir");
    // Whatever the umask: fabricd refuses a socket directory writable by group or others.
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod test dir");
    TestDir(base)
}

impl Daemon {
    /// Writes the config and starts the daemon (does not wait for readiness).
    pub fn spawn(dir: &Path, opts: &Opts, env: &[(&str, &str)]) -> Daemon {
        let config = dir.join("fabricd.toml");
        std::fs::write(&config, opts.config_text()).expect("write config");
        Daemon::spawn_with_config(dir, &config, env)
    }

    pub fn spawn_with_config(dir: &Path, config: &Path, env: &[(&str, &str)]) -> Daemon {
        // Short path: Unix socket paths are limited to ~108 bytes.
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
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logf);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start fabricd");
        Daemon {
            child: Some(child),
            dir: dir.to_path_buf(),
            socket,
            state,
            config: config.to_path_buf(),
            log,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(0)
    }

    /// Sends a signal to the daemon.
    pub fn signal(&self, sig: i32) {
        let pid = rustix::process::Pid::from_raw(self.pid()).expect("the daemon is running");
        let signal = rustix::process::Signal::from_named_raw(sig).expect("a named signal");
        let rc = rustix::process::kill_process(pid, signal);
        assert!(rc.is_ok(), "kill({}, {sig}) failed: {rc:?}", self.pid());
    }

    /// Kills the daemon hard (SIGKILL) and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait_exit(&mut self, deadline: Duration) -> Option<i32> {
        let mut c = self.child.take()?;
        let t = Instant::now();
        loop {
            if let Ok(Some(st)) = c.try_wait() {
                return st.code();
            }
            if t.elapsed() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("fabricd did not exit within {deadline:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Connects, waiting until the socket answers.
    pub async fn client(&self) -> Client {
        let t = Instant::now();
        loop {
            if let Ok(c) = fabric_proto::connect(self.socket.to_str().expect("utf-8 path")).await {
                return c;
            }
            if let Some(c) = &self.child {
                // The process must still be running.
                let _ = c.id();
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "fabricd socket never answered; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Connects and waits until a generation is installed.
    pub async fn ready(&self) -> Client {
        let mut c = self.client().await;
        let t = Instant::now();
        loop {
            if let Ok(s) = c.get_status(pb::GetStatusRequest {}).await {
                if s.get_ref().generation >= 1 {
                    return c;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "no generation installed; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            let log = self.log_text();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("---- fabricd log tail ({}) ----", self.log.display());
            for l in tail.into_iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

/// Runs an async test body with a deadline.
pub fn run_with_deadline<F: std::future::Future<Output = ()>>(secs: u64, f: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        match tokio::time::timeout(Duration::from_secs(secs), f).await {
            Ok(()) => {}
            Err(_) => panic!("test deadline of {secs} s exceeded"),
        }
    });
}

pub async fn status(c: &mut Client) -> pb::Status {
    c.get_status(pb::GetStatusRequest {})
        .await
        .expect("GetStatus")
        .into_inner()
}

/// Installed LFTs by switch GUID (raw bytes).
/// Polls the status until `ok` holds (returns that status) or `within` passes (panics with
/// `what`, the last status and the daemon's log).
pub async fn wait_status(
    d: &Daemon,
    c: &mut Client,
    what: &str,
    within: Duration,
    ok: impl Fn(&pb::Status) -> bool,
) -> pb::Status {
    let t = Instant::now();
    loop {
        let s = status(c).await;
        if ok(&s) {
            return s;
        }
        assert!(
            t.elapsed() < within,
            "{what}: not within {within:?} (status {s:?}); log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn lfts(c: &mut Client) -> (u64, HashMap<u64, Vec<u8>>) {
    let r = c
        .get_lft(pb::GetLftRequest {
            switch: String::new(),
            format: pb::LftFormat::Raw as i32,
        })
        .await
        .expect("GetLft")
        .into_inner();
    (r.generation, r.switches.into_iter().map(|s| (s.guid, s.lft)).collect())
}

/// Number of 64-entry blocks that differ between two LFT sets (shorter rows padded with 255).
pub fn changed_blocks(a: &HashMap<u64, Vec<u8>>, b: &HashMap<u64, Vec<u8>>) -> usize {
    let mut n = 0;
    let mut guids: Vec<_> = a.keys().chain(b.keys()).copied().collect();
    guids.sort_unstable();
    guids.dedup();
    let empty = Vec::new();
    for g in guids {
        let ra = a.get(&g).unwrap_or(&empty);
        let rb = b.get(&g).unwrap_or(&empty);
        let len = ra.len().max(rb.len());
        for blk in 0..len.div_ceil(64) {
            let get = |r: &Vec<u8>, i: usize| r.get(i).copied().unwrap_or(255);
            if (blk * 64..(blk + 1) * 64).any(|i| get(ra, i) != get(rb, i)) {
                n += 1;
            }
        }
    }
    n
}

pub async fn topology(c: &mut Client) -> pb::Topology {
    c.get_topology(pb::GetTopologyRequest {})
        .await
        .expect("GetTopology")
        .into_inner()
}

/// Inter-switch links as (switch GUID, port) from their lower end, leaves' uplinks first.
pub fn switch_links(t: &pb::Topology) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    for s in &t.switches {
        for p in &s.ports {
            if p.remote_kind == pb::RemoteKind::Switch as i32 && (s.guid, p.port) < (p.remote_guid, p.remote_port) {
                out.push((s.level.unwrap_or(99), s.guid, p.port));
            }
        }
    }
    out.sort_unstable();
    out.into_iter().map(|(_, g, p)| (g, p)).collect()
}

pub fn link_req(switch: u64, port: u32, up: bool, physical: bool, wait: bool) -> pb::InjectFaultRequest {
    pb::InjectFaultRequest {
        kind: pb::FaultKind::Link as i32,
        up,
        switch: format!("0x{switch:016x}"),
        port,
        node: String::new(),
        physical,
        wait,
    }
}

pub async fn verify(c: &mut Client) -> pb::VerifyReachabilityResponse {
    c.verify_reachability(pb::VerifyReachabilityRequest { escape: false })
        .await
        .expect("VerifyReachability")
        .into_inner()
}

/// Subscribes to update notices for one end port; returns the stream and its first notice (the
/// subscriber id and the current phase).
pub async fn subscribe(
    c: &mut Client,
    name: &str,
    end_port: &str,
) -> (tonic::Streaming<pb::UpdateNotice>, pb::UpdateNotice) {
    let mut stream = c
        .subscribe(pb::SubscribeRequest {
            name: name.into(),
            end_ports: vec![end_port.into()],
        })
        .await
        .expect("subscribe")
        .into_inner();
    let first = tokio::time::timeout(std::time::Duration::from_secs(15), stream.message())
        .await
        .expect("a first notice within 15 s")
        .expect("stream")
        .expect("first notice");
    (stream, first)
}

/// Acks the UNPATH notice of `generation`, waits for its REPATH notice and acks that too.
pub async fn ack_update(c: &mut Client, stream: &mut tonic::Streaming<pb::UpdateNotice>, id: u64, generation: u64) {
    for phase in [pb::Phase::Unpath, pb::Phase::Repath] {
        c.ack(pb::AckRequest {
            subscriber_id: id,
            generation,
            phase: phase as i32,
        })
        .await
        .expect("ack");
        if phase == pb::Phase::Unpath {
            let n = tokio::time::timeout(std::time::Duration::from_secs(20), stream.message())
                .await
                .expect("a notice")
                .expect("stream")
                .expect("open");
            assert_eq!((n.generation, n.phase), (generation, pb::Phase::Repath as i32));
        }
    }
}

/// A free loopback TCP port (for the Prometheus endpoint of a daemon).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Body and headers of `GET path` on a loopback HTTP endpoint (Prometheus). The daemon opens
/// its endpoint after the first generation's attempt, possibly after `Daemon::ready` returned:
/// a refused connection is retried for up to 15 s.
pub fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let t = Instant::now();
    let mut s = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && t.elapsed() < Duration::from_secs(15) => {
                std::thread::sleep(Duration::from_millis(25));
            }
            Err(e) => panic!("connect to 127.0.0.1:{port}: {e}"),
        }
    };
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

/// `target/<profile>/fabricctl` (another package's binary: `CARGO_BIN_EXE_` does not reach it),
/// built once per test process with the profile of the running test binary.
pub fn fabricctl_binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(build_fabricctl).clone()
}

fn build_fabricctl() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf();
    let bin = profile_dir.join("fabricctl");
    // Under `cargo test --workspace` it is already built from the current sources (a nested
    // build there resolves features for fabricctl alone: over a minute in CI).
    if newer_than_sources(&bin) {
        return bin;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", "fabricctl", "--bin", "fabricctl"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    // The variables `cargo test` sets for this test process describe fabricd's package; build
    // scripts (ring's) watch some of them, so left in place they would make the nested build
    // rerun them, and the next `cargo test` rebuild rustls, tonic and everything above.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_", "CARGO_CRATE_"]
            .iter()
            .any(|p| k.starts_with(p))
            || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&k.as_ref())
        {
            cmd.env_remove(k.as_ref());
        }
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    } else {
        cmd.args(["--profile", "test"]);
    }
    if let Some(target) = profile_dir.parent() {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    if !matches!(cmd.status(), Ok(s) if s.success()) {
        eprintln!("building fabricctl failed; using {}", bin.display());
    }
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build -p fabricctl`",
        bin.display()
    );
    bin
}

/// Whether `bin` exists and is newer than every file under the workspace's `crates/*/src`-style
/// sources, `proto/` and the root manifests (test and bench files excluded).
fn newer_than_sources(bin: &Path) -> bool {
    fn latest(dir: &Path, acc: &mut std::time::SystemTime) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let (p, name) = (e.path(), e.file_name());
            if ["target", ".git", "tests", "benches"].iter().any(|x| name == *x) {
                continue;
            }
            if p.is_dir() {
                latest(&p, acc);
            } else if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
                *acc = (*acc).max(m);
            }
        }
    }
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return false;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut acc = std::time::SystemTime::UNIX_EPOCH;
    latest(&root.join("crates"), &mut acc);
    latest(&root.join("proto"), &mut acc);
    for f in ["Cargo.toml", "Cargo.lock"] {
        if let Ok(m) = std::fs::metadata(root.join(f)).and_then(|m| m.modified()) {
            acc = acc.max(m);
        }
    }
    built >= acc
}
