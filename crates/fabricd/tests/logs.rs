//! The daemon's log lines as a real `fabricd` run writes them: JSON objects with typed fields
//! (`log.format = "json"`), and the journald priority prefix when stderr is the journal's
//! stream (`$JOURNAL_STREAM` naming stderr's device and inode).

mod common;

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use common::*;

const SMALL: &str = "PGFT(2;4,4;1,2;1,1)";

/// The config of `Opts` with `[log]` replaced by `log`.
fn config_with_log(dir: &std::path::Path, log: &str) -> std::path::PathBuf {
    let text = Opts::new(SMALL).config_text();
    let text = text.replace("[log]\nlevel = \"info\"\ntimestamps = false\n", log);
    assert!(text.contains(log), "the [log] section was not replaced:\n{text}");
    let p = dir.join("fabricd.toml");
    std::fs::write(&p, text).expect("write config");
    p
}

/// Waits until the log has a line containing `needle`.
fn wait_for_line(d: &Daemon, needle: &str) -> String {
    let t = Instant::now();
    loop {
        let log = d.log_text();
        if let Some(l) = log.lines().find(|l| l.contains(needle)) {
            return l.to_string();
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no {needle:?} in the log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn json_log_lines_keep_numbers_and_arrays_typed() {
    let dir = test_dir("log-json");
    let config = config_with_log(&dir, "[log]\nlevel = \"info\"\nformat = \"json\"\ntimestamps = true\n");
    let d = Daemon::spawn_with_config(&dir, &config, &[]);
    run_with_deadline(60, async {
        d.ready().await;
    });
    let ready = wait_for_line(&d, "fabricd ready");
    let v: serde_json::Value = serde_json::from_str(&ready).expect("a JSON line");
    assert_eq!(v["level"], "INFO", "{ready}");
    assert!(v["target"].as_str().unwrap().starts_with("fabricd"), "{ready}");
    assert!(v["timestamp"].is_string(), "{ready}");
    assert_eq!(v["fields"]["message"], "fabricd ready");
    assert!(
        v["fields"]["generation"].is_u64(),
        "generation is not a number: {ready}"
    );
    let commit = wait_for_line(&d, "generation committed");
    let v: serde_json::Value = serde_json::from_str(&commit).expect("a JSON line");
    assert!(v["fields"]["routed_ms"].is_f64(), "routed_ms is not a number: {commit}");
    assert!(v["fields"]["committed_ms"].is_f64(), "{commit}");
    assert!(v["fields"]["blocks_written"].is_u64(), "{commit}");
    assert!(v["fields"]["faults"].is_u64(), "{commit}");
    // The computation's wall time and the computing thread's CPU and run-queue share of it
    // (compute::sched; -1 only where the kernel has no counters, never on Linux).
    let f = |k: &str| {
        v["fields"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} is not a number: {commit}"))
    };
    let (wall, cpu, queue) = (f("compute_ms"), f("compute_cpu_ms"), f("compute_runqueue_ms"));
    assert!(wall > 0.0 && cpu > 0.0 && queue >= 0.0, "{commit}");
    // Taken just around the computation: the thread's share fits in its span (+ rounding and
    // the two readings).
    assert!(cpu + queue <= wall + 1.0, "{commit}");
    // A reload: log.level applies, log.timestamps needs a restart; both lists are arrays.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("level = \"info\"", "level = \"info,fabricd=info\"")
            .replace("timestamps = true", "timestamps = false"),
    )
    .unwrap();
    d.signal(libc::SIGHUP);
    let restart = wait_for_line(&d, "need a restart");
    let v: serde_json::Value = serde_json::from_str(&restart).expect("a JSON line");
    assert_eq!(v["level"], "WARN", "{restart}");
    assert_eq!(v["fields"]["keys"], serde_json::json!(["log.timestamps"]), "{restart}");
    let applied = wait_for_line(&d, "configuration reloaded");
    let v: serde_json::Value = serde_json::from_str(&applied).expect("a JSON line");
    assert_eq!(v["fields"]["applied"], serde_json::json!(["log.level"]), "{applied}");
    // Every line of the run is one JSON object.
    for l in d.log_text().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["fields"]["message"].is_string(), "{l}");
    }
}

#[test]
fn journal_stream_lines_carry_sd_daemon_priorities() {
    let dir = test_dir("log-journal");
    let config = config_with_log(&dir, "[log]\nlevel = \"info\"\ntimestamps = true\n");
    // The log file is the daemon's stderr: JOURNAL_STREAM names it as systemd names the
    // journal's socket.
    let log = dir.join("fabricd.log");
    std::fs::write(&log, "").unwrap();
    let m = std::fs::metadata(&log).unwrap();
    let stream = format!("{}:{}", m.dev(), m.ino());
    let d = Daemon::spawn_with_config(&dir, &config, &[("JOURNAL_STREAM", &stream)]);
    run_with_deadline(60, async {
        d.ready().await;
    });
    let ready = wait_for_line(&d, "fabricd ready");
    assert!(ready.starts_with("<6>"), "{ready}");
    // No timestamp (the journal adds its own): the level follows the prefix.
    assert!(ready.starts_with("<6> INFO") || ready.starts_with("<6>INFO"), "{ready}");
    // A warning: a reload with a key that needs a restart.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("timestamps = true", "timestamps = false")).unwrap();
    d.signal(libc::SIGHUP);
    let warn = wait_for_line(&d, "need a restart");
    assert!(warn.starts_with("<4>"), "{warn}");
    for l in d.log_text().lines() {
        assert!(
            ["<3>", "<4>", "<6>", "<7>"].iter().any(|p| l.starts_with(p)),
            "line without priority: {l}"
        );
    }
}

#[test]
fn an_inherited_journal_stream_of_another_file_adds_no_prefix() {
    let dir = test_dir("log-nojournal");
    let config = config_with_log(&dir, "[log]\nlevel = \"info\"\ntimestamps = false\n");
    let d = Daemon::spawn_with_config(&dir, &config, &[("JOURNAL_STREAM", "1:1")]);
    run_with_deadline(60, async {
        d.ready().await;
    });
    let ready = wait_for_line(&d, "fabricd ready");
    assert!(!ready.starts_with('<'), "{ready}");
}
