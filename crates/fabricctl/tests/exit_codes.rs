//! The documented exit codes, `FABRICD_SOCKET`, the connection options' placement, shell
//! completions and man pages, run on the real `fabricctl` binary: without a daemon and against
//! a running mock `fabricd` (fault injection disabled).

mod common;

use common::fabricd_binary;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn fabricctl_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fabricctl"));
    c.args(args).env_remove("FABRICD_SOCKET").stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run fabricctl")
}

fn fabricctl(args: &[&str]) -> Output {
    fabricctl_env(args, &[])
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[track_caller]
fn code(o: &Output, want: i32) {
    assert_eq!(o.status.code(), Some(want), "{}", text(o));
}

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("fabricctl-x-{tag}-{}", std::process::id()));
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

#[test]
fn no_daemon_is_exit_code_3_and_fabricd_socket_is_the_default() {
    let d = TempDir::new("nod");
    let sock = d.file("none.sock");
    let o = fabricctl(&["status", "--socket", &sock]);
    code(&o, 3);
    assert!(text(&o).contains(&sock), "{}", text(&o));
    // The old form, before the subcommand, still works.
    code(&fabricctl(&["--socket", &sock, "status"]), 3);
    // FABRICD_SOCKET when --socket is not given; --socket wins over it.
    let o = fabricctl_env(&["status"], &[("FABRICD_SOCKET", &sock)]);
    code(&o, 3);
    assert!(text(&o).contains(&sock), "{}", text(&o));
    let other = d.file("other.sock");
    let o = fabricctl_env(&["status", "--socket", &other], &[("FABRICD_SOCKET", &sock)]);
    assert!(text(&o).contains(&other) && !text(&o).contains(&sock), "{}", text(&o));
    // A TCP target nobody listens on.
    code(&fabricctl(&["status", "--socket", "http://127.0.0.1:9"]), 3);
}

#[test]
fn usage_errors_are_exit_code_2() {
    code(&fabricctl(&["status", "--no-such-option"]), 2);
    code(&fabricctl(&["no-such-command"]), 2);
    code(&fabricctl(&["analyze"]), 2);
    // TLS options on a plaintext target.
    code(
        &fabricctl(&[
            "status",
            "--socket",
            "http://127.0.0.1:9",
            "--tls-ca",
            "/nonexistent-ca.pem",
        ]),
        2,
    );
    // Offline commands have no connection options.
    code(&fabricctl(&["topo", "gen", "KARY(2,2)", "--socket", "/x.sock"]), 2);
    code(&fabricctl(&["route", "x.topo", "--socket", "/x.sock"]), 2);
    // A failure that is none of the above: an unreadable input file.
    code(&fabricctl(&["topo", "info", "/nonexistent/x.topo"]), 6);
}

#[test]
fn connection_options_show_only_in_daemon_commands_help() {
    for cmd in [
        &["analyze", "--help"][..],
        &["route", "--help"],
        &["topo", "gen", "--help"],
        &["topo", "info", "--help"],
    ] {
        let o = fabricctl(cmd);
        code(&o, 0);
        let t = text(&o);
        assert!(!t.contains("--socket") && !t.contains("--tls-ca"), "{cmd:?}:\n{t}");
    }
    for cmd in [
        &["status", "--help"][..],
        &["topo", "--help"],
        &["validate", "--help"],
        &["jobs", "set", "--help"],
    ] {
        let o = fabricctl(cmd);
        code(&o, 0);
        let t = text(&o);
        assert!(t.contains("--socket") && t.contains("FABRICD_SOCKET"), "{cmd:?}:\n{t}");
    }
    // The top-level help documents the exit codes.
    let t = text(&fabricctl(&["--help"]));
    assert!(t.contains("Exit codes:") && t.contains("daemon unreachable"), "{t}");
}

#[test]
fn completions_and_man_pages() {
    let d = TempDir::new("cm");
    for shell in ["bash", "zsh", "fish"] {
        let o = fabricctl(&["completions", shell]);
        code(&o, 0);
        let script = String::from_utf8(o.stdout).unwrap();
        assert!(script.contains("what-if") && script.contains("fabricctl"), "{shell}");
        if shell == "bash" {
            let f = d.file("fabricctl.bash");
            std::fs::write(&f, &script).unwrap();
            let o = Command::new("bash").args(["-n", &f]).output().expect("run bash");
            assert!(o.status.success(), "bash -n: {}", text(&o));
        }
    }
    code(&fabricctl(&["completions", "tcsh"]), 2);
    let dir = d.file("man");
    let o = fabricctl(&["man", "--out-dir", &dir]);
    code(&o, 0);
    let listed = String::from_utf8(o.stdout).unwrap();
    for page in [
        "fabricctl.1",
        "fabricctl-status.1",
        "fabricctl-analyze.1",
        "fabricctl-topo-gen.1",
    ] {
        let p = std::path::Path::new(&dir).join(page);
        let body = std::fs::read_to_string(&p).unwrap_or_else(|_| panic!("{page} missing:\n{listed}"));
        assert!(body.starts_with(".ie") || body.contains(".TH"), "{page}: {body}");
        assert!(body.contains("EXIT STATUS"), "{page}");
    }
    let status = std::fs::read_to_string(std::path::Path::new(&dir).join("fabricctl-status.1")).unwrap();
    assert!(status.contains("socket"), "{status}");
}

#[test]
fn human_output_is_rounded_json_is_not() {
    let d = TempDir::new("round");
    let f = d.file("p.topo");
    code(
        &fabricctl(&["topo", "gen", "PGFT(2;4,8;1,4;1,1)", "-o", &f, "--remove-links", "5"]),
        0,
    );
    let o = fabricctl(&["analyze", &f, "--rp", "7"]);
    code(&o, 0);
    let out = String::from_utf8(o.stdout).unwrap();
    // Every number in the table has at most two decimals.
    for word in out.split(|c: char| c.is_whitespace() || c == '%' || c == '(' || c == ')' || c == ',') {
        if let Some((_, frac)) = word.split_once('.') {
            if word.parse::<f64>().is_ok() {
                assert!(frac.len() <= 2, "{word:?} in:\n{out}");
            }
        }
    }
    let o = fabricctl(&["analyze", &f, "--rp", "7", "--json"]);
    code(&o, 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["nu"].as_f64().unwrap() > 0.0);
}

struct Daemon(Child);
impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_live_daemon_answers_with_the_documented_codes() {
    let d = TempDir::new("live");
    let config = d.file("fabricd.toml");
    std::fs::write(
        &config,
        "[log]\ntimestamps = false\n[driver.mock]\ngenerator = \"PGFT(2;4,8;1,4;1,1)\"\n[fault_injection]\nenabled = false\n[metrics]\nrandom_perms = 2\n",
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
    let env = [("FABRICD_SOCKET", socket.as_str())];
    let run = |args: &[&str]| fabricctl_env(args, &env);
    let t = Instant::now();
    loop {
        let o = run(&["status", "--json"]);
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
            if v["generation"].as_u64().unwrap_or(0) >= 1 {
                break;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "fabricd not ready: {}",
            std::fs::read_to_string(d.file("fabricd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let topo: serde_json::Value = serde_json::from_slice(&run(&["topo", "--json"]).stdout).unwrap();
    let leaf = topo["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["level"] == 0)
        .expect("a leaf")["name"]
        .as_str()
        .unwrap()
        .to_string();
    code(&run(&["status"]), 0);
    code(&run(&["verify"]), 0);
    // `lft` (StreamLft): one section per switch, a switch's own section is part of the whole
    // dump, `--json` has every switch's raw table.
    let o = run(&["lft"]);
    code(&o, 0);
    let all = String::from_utf8(o.stdout).unwrap();
    let nswitches = topo["switches"].as_array().unwrap().len();
    assert_eq!(all.matches("Unicast lids [0-").count(), nswitches, "{all}");
    let o = run(&["lft", "--switch", &leaf]);
    code(&o, 0);
    let one = String::from_utf8(o.stdout).unwrap();
    assert!(one.starts_with("Unicast lids [0-") && all.contains(&one), "{one}");
    let o = run(&["lft", "--json"]);
    code(&o, 0);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let raw = j["switches"].as_array().unwrap();
    assert_eq!(raw.len(), nswitches);
    assert!(raw.iter().all(|s| s["lft"].as_array().unwrap().len() % 64 == 0), "{j}");
    assert!(j["generation"].as_u64().unwrap() >= 1);
    // 4: unknown switch, end port, job.
    let o = run(&["inject", "link-down", "--switch", "no-such-switch", "--port", "1"]);
    code(&o, 4);
    assert!(text(&o).contains("no-such-switch"), "{}", text(&o));
    code(&run(&["lft", "--switch", "0x99"]), 4);
    code(&run(&["trace", "ghost", "ghost2"]), 4);
    code(&run(&["jobs", "clear", "no-such-job"]), 4);
    code(&run(&["what-if", "--switch", "no-such-switch"]), 4);
    // 5: fault injection is disabled in this daemon's configuration.
    let o = run(&["inject", "link-down", "--switch", &leaf, "--port", "1"]);
    code(&o, 5);
    assert!(text(&o).contains("fault injection is disabled"), "{}", text(&o));
    // 2: arguments fabricctl or the daemon refuses.
    code(&run(&["inject", "sideways", "--switch", &leaf]), 2);
    code(&run(&["inject", "link-down", "--switch", &leaf]), 2);
    code(&run(&["what-if", "--link", "no-port"]), 2);
    code(&run(&["inject", "link-down", "--switch", &leaf, "--port", "99"]), 2);
    // 1: a difference found (validate against another fabric).
    let other = d.file("other.topo");
    code(
        &fabricctl(&[
            "topo",
            "gen",
            "PGFT(2;4,8;1,4;1,1)",
            "-o",
            &other,
            "--remove-links",
            "2",
        ]),
        0,
    );
    code(&run(&["validate", "--expected", &other]), 1);
}
