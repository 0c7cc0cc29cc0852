//! `fabricd --check-config` catches what a start would fail on (issue #12, defect 7): each bad
//! configuration is run through the real binary, which must exit 2 naming the key and the
//! reason — and a start with it must fail the same way instead of serving generation 0.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const SMALL: &str = "PGFT(2;4,4;1,2;1,1)";

/// `fabricd --config FILE --check-config`: (exit code, stderr + stdout).
fn check_config(config: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fabricd"))
        .arg("--config")
        .arg(config)
        .arg("--check-config")
        .output()
        .expect("run fabricd");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    (out.status.code(), text)
}

fn rejected(dir: &Path, name: &str, text: &str, needles: &[&str]) {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, text).expect("write config");
    let (code, out) = check_config(&cfg);
    assert_eq!(code, Some(2), "{name}: --check-config must reject it:\n{out}");
    assert!(!out.contains("panicked"), "{name}: {out}");
    for n in needles {
        assert!(out.contains(n), "{name}: {n:?} not in:\n{out}");
    }
}

fn mock(extra: &str) -> String {
    format!("[driver.mock]\ngenerator = \"{SMALL}\"\n{extra}")
}

#[test]
fn check_config_rejects_a_missing_roots_file() {
    let dir = test_dir("cc-roots");
    let missing = dir.join("no-such-roots");
    rejected(
        &dir,
        "roots",
        &format!("{}[routing]\nroots_file = \"{}\"\n", mock(""), missing.display()),
        &["routing.roots_file", &missing.display().to_string()],
    );
}

#[test]
fn check_config_rejects_a_max_lid_the_fabric_does_not_fit() {
    let dir = test_dir("cc-maxlid");
    rejected(
        &dir,
        "maxlid",
        &format!("{}[routing]\nmax_lid = 10\n", mock("")),
        &["routing.max_lid = 10", "address space ends at 10"],
    );
}

#[test]
fn check_config_rejects_dmodk_on_a_degraded_fabric() {
    let dir = test_dir("cc-dmodk");
    rejected(
        &dir,
        "dmodk",
        &format!("{}[routing]\nengine = \"dmodk\"\n", mock("remove_links = 3\n")),
        &["routing.engine = \"dmodk\"", "complete PGFT", "engine = \"dmodc\""],
    );
    // The complete fabric is fine with dmodk.
    let ok = dir.join("ok.toml");
    std::fs::write(&ok, format!("{}[routing]\nengine = \"dmodk\"\n", mock(""))).unwrap();
    let (code, out) = check_config(&ok);
    assert_eq!(code, Some(0), "{out}");
}

/// Every engine is checked against the fabric: smodk cannot be written into LFTs at all; pqft
/// needs a quasi fat-tree (a PGFT without parallel cables is the QFT without cross-connections,
/// one with parallel cables is refused); the other engines route any fabric.
#[test]
fn check_config_checks_every_engine_against_the_fabric() {
    let dir = test_dir("cc-engines");
    rejected(
        &dir,
        "smodk",
        &format!("{}[routing]\nengine = \"smodk\"\n", mock("")),
        &["routing.engine = \"smodk\"", "input port", "engine = \"dmodc\""],
    );
    for engine in ["ftree", "ftree2", "sssp", "randsp:3", "dmodc-lb", "bfs-ftree2", "pqft"] {
        let ok = dir.join(format!("{}.toml", engine.replace(':', "-")));
        std::fs::write(&ok, format!("{}[routing]\nengine = \"{engine}\"\n", mock(""))).unwrap();
        let (code, out) = check_config(&ok);
        assert_eq!(code, Some(0), "{engine}: {out}");
    }
    rejected(
        &dir,
        "pqft-parallel",
        "[driver.mock]\ngenerator = \"PGFT(2;4,4;1,2;1,2)\"\n[routing]\nengine = \"pqft\"\n",
        &["routing.engine = \"pqft\"", "parallel", "engine = \"dmodc\""],
    );
    rejected(
        &dir,
        "unknown",
        &format!("{}[routing]\nengine = \"fttree\"\n", mock("")),
        &["routing.engine", "fttree", "ftree2"],
    );
}

#[test]
fn check_config_rejects_absurd_routing_threads() {
    let dir = test_dir("cc-threads");
    rejected(
        &dir,
        "threads",
        &format!("{}[routing]\nthreads = 100000\n", mock("")),
        &["routing.threads", "at most 1024"],
    );
}

#[test]
fn check_config_rejects_an_empty_topology_file() {
    let dir = test_dir("cc-empty");
    let topo = dir.join("empty.topo");
    std::fs::write(&topo, "").unwrap();
    rejected(
        &dir,
        "empty",
        &format!("[driver.mock]\ntopology_file = \"{}\"\n", topo.display()),
        &["driver.mock.topology_file", "no switches"],
    );
}

#[test]
fn check_config_refuses_to_read_dev_zero_as_a_topology() {
    let dir = test_dir("cc-zero");
    // Was: read until the machine ran out of memory. Now refused before reading a byte.
    rejected(
        &dir,
        "zero",
        "[driver.mock]\ntopology_file = \"/dev/zero\"\n",
        &["/dev/zero", "not a regular file"],
    );
    // The oob inventory too.
    rejected(
        &dir,
        "zero-inventory",
        "[driver]\nkind = \"oob\"\n[driver.oob]\ninventory = \"/dev/zero\"\n",
        &["driver.oob.inventory", "/dev/zero", "not a regular file"],
    );
    // The configuration file itself is read bounded too.
    let out = Command::new(env!("CARGO_BIN_EXE_fabricd"))
        .args(["--config", "/dev/zero", "--check-config"])
        .output()
        .expect("run fabricd");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/dev/zero") && err.contains("not a regular file"), "{err}");
}

/// Starts the real fabricd on `cfg` with its state directory in `dir` and waits (at most 30 s)
/// for it to exit: (exit code, stderr). Panics when it keeps running.
fn start_and_wait_exit(tag: &str, dir: &Path, cfg: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fabricd"))
        .arg("--config")
        .arg(cfg)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--socket")
        .arg(dir.join("s.sock"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start fabricd");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{tag}: fabricd kept running instead of failing its start");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    use std::io::Read;
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.code(), err)
}

/// The start fails clearly on what --check-config rejects once the fabric is known (here
/// dmodk on a degraded fabric and a LID space too small): exit status 1 and the reason, never
/// a daemon serving generation 0.
#[test]
fn start_fails_clearly_where_it_would_serve_generation_0_forever() {
    for (tag, extra, needle) in [
        (
            "dmodk",
            "remove_links = 3\n[routing]\nengine = \"dmodk\"\n",
            "routing.engine = \"dmodk\"",
        ),
        ("maxlid", "[routing]\nmax_lid = 10\n", "routing.max_lid = 10"),
    ] {
        let dir = test_dir(&format!("start-{tag}"));
        let cfg = dir.join("fabricd.toml");
        let mut text = Opts::new(SMALL).config_text();
        // [driver.mock] is the table of the generator line: keys appended there belong to it.
        text = text.replace(
            &format!("generator = \"{SMALL}\"\n"),
            &format!("generator = \"{SMALL}\"\n{}", extra.split("[routing]").next().unwrap()),
        );
        if let Some(r) = extra.split_once("[routing]") {
            text.push_str(&format!("[routing]{}", r.1));
        }
        std::fs::write(&cfg, text).unwrap();
        let (code, err) = start_and_wait_exit(tag, &dir, &cfg);
        assert_eq!(code, Some(1), "{tag}: {err}");
        assert!(err.contains(needle), "{tag}: {err}");
    }
}

/// An update-progress.json with generation u64::MAX (issue #12, defect 9) is refused at start,
/// naming the file and the field (was: accepted, and the next generation number overflowed).
#[test]
fn start_refuses_an_update_progress_file_with_generation_u64_max() {
    let dir = test_dir("start-progress");
    let state = fabricd::persist::StateDir::open(&dir.join("state")).unwrap();
    state
        .write_atomic(
            fabricd::persist::UPDATE_PROGRESS_FILE,
            format!(
                r#"{{"version": 1, "generation": {}, "attempt": 0, "phase": "update", "virtual_faults": []}}"#,
                u64::MAX
            )
            .as_bytes(),
        )
        .unwrap();
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, Opts::new(SMALL).config_text()).unwrap();
    let (code, err) = start_and_wait_exit("progress", &dir, &cfg);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("update-progress.json") && err.contains(&format!("generation: {} is out of range", u64::MAX)),
        "{err}"
    );
}

/// A reload to dmodk on a fabric that is not a complete PGFT is refused (the running engine
/// stays), instead of failing every generation from then on.
#[test]
fn reload_to_dmodk_on_a_degraded_fabric_is_refused() {
    let dir = test_dir("reload-dmodk");
    let base = Opts::new(SMALL).config_text().replace(
        &format!("generator = \"{SMALL}\"\n"),
        &format!("generator = \"{SMALL}\"\nremove_links = 3\n"),
    );
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, &base).unwrap();
    let d = Daemon::spawn_with_config(&dir, &cfg, &[]);
    run_with_deadline(60, async {
        let mut c = d.ready().await;
        std::fs::write(&cfg, format!("{base}[routing]\nengine = \"dmodk\"\n")).unwrap();
        d.signal(libc::SIGHUP);
        let t = std::time::Instant::now();
        while !d.log_text().contains("reload refused") {
            assert!(t.elapsed() < Duration::from_secs(20), "no refusal:\n{}", d.log_text());
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(d.log_text().contains("routing.engine = \"dmodk\""), "{}", d.log_text());
        assert_eq!(status(&mut c).await.engine, "dmodc");
    });
}

/// A guid2lid record above the highest LID stops the start naming the GUID (issue #12, defect
/// 9; was: dropped, its port renumbered and the file rewritten without a word).
#[test]
fn start_refuses_a_guid2lid_record_above_the_highest_lid() {
    let dir = test_dir("start-g2l");
    let state = fabricd::persist::StateDir::open(&dir.join("state")).unwrap();
    let text = "0x00000000deadbeef 0xc000 0xc001\n";
    state
        .write_atomic(fabricd::persist::GUID2LID_FILE, text.as_bytes())
        .unwrap();
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, Opts::new(SMALL).config_text()).unwrap();
    let (code, err) = start_and_wait_exit("guid2lid", &dir, &cfg);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("guid2lid: 0x00000000deadbeef holds LIDs 0xc000..0xc001, above the highest LID 0xbfff"),
        "{err}"
    );
    let kept = std::fs::read_to_string(dir.join("state").join(fabricd::persist::GUID2LID_FILE)).unwrap();
    assert_eq!(kept, text, "the record is not rewritten");
}
