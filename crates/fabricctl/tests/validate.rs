//! `fabricctl validate`: offline (`--actual FILE`) and against a running mock `fabricd`.
//!
//! The daemon is another package's binary (not built for this package's tests): it is looked
//! up next to this test executable's directory (`target/<profile>/fabricd`) after
//! `$CARGO build -p fabricd --bin fabricd` (a no-op when fresh); see
//! `crates/fabricd/tests/oob_driver.rs` for the same approach.

mod common;

use common::fabricd_binary;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn fabricctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fabricctl"))
        .args(args)
        .output()
        .expect("run fabricctl")
}

fn ok(args: &[&str]) -> String {
    let out = fabricctl(args);
    assert!(
        out.status.success(),
        "fabricctl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("fabricctl-v-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        // Whatever the umask: fabricd refuses a socket directory writable by group or others.
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        TempDir(p)
    }
    fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SPEC: &str = "PGFT(2;4,8;1,4;1,1)";

#[test]
fn offline_degraded_file_lists_missing_cables_and_exits_1() {
    let d = TempDir::new("off");
    let full = d.file("full.topo");
    let deg = d.file("deg.topo");
    ok(&["topo", "gen", SPEC, "-o", &full]);
    ok(&["topo", "gen", SPEC, "-o", &deg, "--remove-links", "3", "--seed", "5"]);
    // Identical: clean, exit 0.
    let out = ok(&["validate", "--expected", &full, "--actual", &full]);
    assert!(out.trim_end().ends_with(": clean"), "{out}");
    // Degraded: three missing switch-to-switch cables named by switch and port.
    let out = fabricctl(&["validate", "--expected", &full, "--actual", &deg]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&str> = text.lines().filter(|l| l.starts_with("missing: ")).collect();
    assert_eq!(missing.len(), 3, "{text}");
    for l in &missing {
        assert!(l.contains(" port ") && l.contains(" <-> "), "{l}");
    }
    assert!(text.contains("3 missing, 0 extra, 0 miswired"), "{text}");
    // The other way round the cables are extra.
    let out = fabricctl(&["validate", "--expected", &deg, "--actual", &full, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["clean"], false);
    assert_eq!(v["extra"].as_array().unwrap().len(), 3);
    assert_eq!(v["missing"].as_array().unwrap().len(), 0);
    let c = &v["extra"][0];
    assert_eq!(c["a"]["kind"], "switch");
    assert!(c["a"]["port"].as_u64().unwrap() >= 1);
    // A missing file is an error naming it: exit code 6 (a failure, not a difference).
    let out = fabricctl(&["validate", "--expected", &d.file("nope.topo"), "--actual", &full]);
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope.topo"));
}

struct Daemon(Child);
impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn live_mock_daemon_is_clean_then_shows_a_down_link() {
    let d = TempDir::new("live");
    let config = d.file("fabricd.toml");
    std::fs::write(
        &config,
        format!(
            "[log]\ntimestamps = false\n[driver.mock]\ngenerator = \"{SPEC}\"\n[fault_injection]\nenabled = true\nallow_physical = true\n[update]\ncoalesce_ms = 10\ncoalesce_max_ms = 100\n[metrics]\nrandom_perms = 2\n"
        ),
    )
    .unwrap();
    let socket = d.file("s.sock");
    let log = std::fs::File::create(d.file("fabricd.log")).unwrap();
    let _daemon = Daemon(
        Command::new(fabricd_binary())
            .args([
                "--config",
                &config,
                "--state-dir",
                &d.file("state"),
                "--socket",
                &socket,
            ])
            .env_remove("NOTIFY_SOCKET")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start fabricd"),
    );
    let t = Instant::now();
    loop {
        let out = fabricctl(&["--socket", &socket, "status", "--json"]);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
            if v["generation"].as_u64().unwrap_or(0) >= 1 {
                break;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "fabricd not ready: {}",
            std::fs::read_to_string(d.file("fabricd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let expected = d.file("expected.topo");
    ok(&["topo", "gen", SPEC, "-o", &expected]);
    let out = ok(&["--socket", &socket, "validate", "--expected", &expected]);
    assert!(out.trim_end().ends_with(": clean"), "{out}");

    // A physical link fault: the cable is in place but down.
    let topo: serde_json::Value = serde_json::from_str(&ok(&["--socket", &socket, "topo", "--json"])).unwrap();
    let leaf = topo["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["level"] == 0)
        .expect("a leaf");
    let uplink = leaf["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["remote_kind"] == "switch")
        .expect("an uplink");
    let sw = leaf["guid"].as_str().unwrap().to_string();
    let port = uplink["port"].to_string();
    ok(&[
        "--socket",
        &socket,
        "inject",
        "link-down",
        "--switch",
        &sw,
        "--port",
        &port,
        "--physical",
        "--wait",
    ]);
    let out = fabricctl(&["--socket", &socket, "validate", "--expected", &expected, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let down = v["down"].as_array().unwrap();
    assert_eq!(down.len(), 1, "{v}");
    let ends = [&down[0]["a"], &down[0]["b"]];
    assert!(
        ends.iter()
            .any(|e| e["guid"] == sw.as_str() && e["port"] == uplink["port"]),
        "{v}"
    );
    assert_eq!(v["missing"].as_array().unwrap().len(), 0);
}
