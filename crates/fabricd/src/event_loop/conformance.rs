//! Conformance tests of the event loop as data (holo's pattern): every directory
//! `crates/fabricd/tests/data/loop/NN-name/` holds an `input` script and the `expected` record
//! of what the loop did. The harness runs the script against a real [`EventLoop`] over the
//! `mock` driver ([`MockFabric`]) in paused tokio time and compares its record with `expected`
//! line by line (a mismatch names the case and the first differing line).
//!
//! **Regenerate** the `expected` files after an intended change of behaviour with
//! `FABRICD_REGENERATE=1 cargo test -p fabricd --lib conformance`, then review the diff.
//! `FABRICD_CONFORMANCE_CASE=<part of a name>` runs only the matching cases.
//!
//! # The input script
//!
//! One step per line; `#` starts a comment. Switches are named `L<level>_<i>` (the `i`-th
//! switch of that level in id order; `S<id>` when the description has no level), end ports
//! `N<id>`, switch ports `L0_0[3]`; GUIDs in recorded text are replaced by these names.
//!
//! * `fabric SPEC` — the simulated fabric (generator notation) and a fresh state directory;
//! * `settings key=value ...` — loop settings (`coalesce_ms`, `coalesce_max_ms` (defaults to
//!   `coalesce_ms`), `five_phase`, `unpath_deadline_ms`, `repath_deadline_ms` (defaults to the
//!   unpath one), `missed_ack_policy=proceed|abort`, `failed_generation_backoff_ms`,
//!   `upload_retries`, `fault_injection=on|off`, `job_aware`); after `start` they are sent as a
//!   reload;
//! * `mock latency DURATION` / `mock max-parallel N` / `mock fail-writes all|SWITCH...` /
//!   `mock heal` — behaviour of the simulated switches;
//! * `start`, `crash` (the process dies: the runtime and every task of the loop are dropped,
//!   the switches keep what they hold), `restart` (a new loop on the same state directory and
//!   fabric, after a new discovery), `shutdown`;
//! * `inject EVENT TARGET [wait] [physical]` (EVENT: `link-down`, `link-up`, `switch-down`,
//!   `switch-up`, `node-down`, `node-up`), `reroute [resync] [wait]`, `set-job ID END-PORT...`,
//!   `clear-job ID`, `subscribe NAME`, `ack NAME unpath|repath` (the last notice of that
//!   phase), `unsubscribe NAME` (the stream closes), `driver EVENT TARGET` (a physical change
//!   the mock reports); the loop takes each of them (one tick) before the next step;
//! * `routing hold` / `routing release` — computations stay queued, as behind a busy pool;
//! * `advance DURATION`, `expect-quiet DURATION` (advance; a line recorded meanwhile is flagged
//!   `! not quiet`), `until CONDITION [within DURATION]` (`idle`, `generation N`, `phase P`,
//!   `pending N`, `restarts N`, `replies`, `NAME got unpath|repath` (a notice not waited for
//!   yet), `stopped`; by default at most 120 s of simulated time);
//! * `check` — a summary of the fabric computed from the loop's snapshot, the mock's tables and
//!   the state directory.
//!
//! # The record
//!
//! Each step is echoed (`> step`), followed by what was seen while it ran: `Notice`s of the
//! broadcast, `UpdateNotice`s per subscriber, replies to requests (accepted / error text), and
//! `check` summaries. No wall-clock duration is recorded.
//!
//! # Determinism
//!
//! Time is paused (tokio's `start_paused`) and moved on by the harness only, one 1 ms tick at a
//! time (`tokio::time::advance`). The routing pool is a rayon pool whose only worker is the test
//! thread itself (`use_current_thread`); the loop waits for a computation on a blocking thread
//! (`Tasks::spawn_on_pool`), and the harness runs the queued routing jobs while it waits for the
//! loop's blocking tasks, so a computation ends at the simulated instant it started, never in
//! parallel with the loop (`routing hold` keeps them queued, as a busy pool would, and holds the
//! loop's blocking tasks with them). Uploads, deadlines and backoffs are tokio timers. The
//! state-directory writes run on `spawn_blocking`: tokio does not advance paused time while one
//! runs, and the runtime has one blocking thread, so the harness waits for them (a no-op blocking
//! task queued behind, 30 s of real time at most) before it looks. Each case runs twice; the two
//! records must be equal. Lines seen at one look are recorded in a fixed order (broadcast notices, subscribers by name,
//! replies in request order), so the record does not depend on task scheduling.

mod process;
mod script;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fabric_mock::{MockConfig, MockFabric};

use process::{Process, World, POOL};
use script::{apply_settings, default_settings, parse_duration, Names};

/// The state of one case run: the world once `fabric` is given, the process once started.
#[derive(Default)]
struct Runner {
    world: Option<World>,
    process: Option<Process>,
}

impl Runner {
    fn world(&mut self) -> Result<&mut World, String> {
        self.world.as_mut().ok_or_else(|| "no `fabric` step yet".to_string())
    }

    fn step(&mut self, line: &str, words: &[&str]) -> Result<(), String> {
        if let Some(w) = self.world.as_mut() {
            w.out.push(format!("> {line}"));
        }
        match words[0] {
            "fabric" => {
                if self.world.is_some() {
                    return Err("one `fabric` per case".into());
                }
                let spec = words[1..].join(" ");
                let fabric = fabric_topology::gen::generate_str(&spec, None).map_err(|e| format!("{spec}: {e}"))?;
                let names = Names::new(&fabric);
                let mut out = vec![format!("> {line}")];
                out.push(format!(
                    "fabric: {} switches ({}), {} end ports",
                    fabric.num_switches(),
                    names.switches.join(" "),
                    fabric.num_end_ports()
                ));
                let mut links = Vec::new();
                for (i, s) in fabric.switches().iter().enumerate() {
                    for (pn, port) in s.external_ports() {
                        if let fabric_topology::Remote::Switch { sw, port: rp } = port.remote {
                            if (i as u32, pn) < (sw.0, rp) {
                                links.push(format!(
                                    "{}[{pn}]={}[{rp}]",
                                    names.switches[i],
                                    names.switches[sw.idx()]
                                ));
                            }
                        }
                    }
                }
                out.push(format!("links: {}", links.join(" ")));
                self.world = Some(World {
                    names,
                    mock: Arc::new(MockFabric::new(fabric)),
                    dir: tempfile::tempdir().map_err(|e| format!("state directory: {e}"))?,
                    settings: default_settings(),
                    pool: POOL.with(Arc::clone),
                    hold: false,
                    out,
                });
            }
            "settings" if self.process.is_none() => apply_settings(&mut self.world()?.settings, &words[1..])?,
            "mock" => {
                let w = self.world()?;
                let mut cfg = w.mock.config();
                match words[1..] {
                    ["latency", d] => cfg.op_latency = parse_duration(d)?,
                    ["max-parallel", n] => cfg.max_parallel = n.parse().map_err(|_| format!("bad number `{n}`"))?,
                    ["fail-writes", "all"] => {
                        cfg.error_rate = 1.0;
                        cfg.max_retries = 0;
                    }
                    ["fail-writes", ref switches @ ..] if !switches.is_empty() => {
                        let f = w.mock.cabling();
                        for s in switches {
                            cfg.unreachable_switches.push(w.names.switch(f, s)?);
                        }
                    }
                    ["heal"] => {
                        let d = MockConfig::default();
                        (cfg.error_rate, cfg.max_retries) = (d.error_rate, d.max_retries);
                        cfg.unreachable_switches.clear();
                    }
                    _ => return Err("mock latency D | max-parallel N | fail-writes all|SWITCH... | heal".into()),
                }
                w.mock.set_config(cfg).map_err(|e| format!("mock: {e}"))?;
            }
            "start" | "restart" => {
                let w = self.world.as_ref().ok_or("no `fabric` step yet")?;
                match self.process.take() {
                    Some(p) if p.stopped() => drop(p),
                    Some(_) => return Err("the loop is running (`crash` or `shutdown` first)".into()),
                    None => {}
                }
                self.process = Some(Process::start(w)?);
            }
            "routing" => {
                let w = self.world()?;
                w.hold = match words[1..] {
                    ["hold"] => true,
                    ["release"] => false,
                    _ => return Err("routing hold|release".into()),
                };
            }
            "crash" => {
                let p = self.process.take().ok_or("no loop to crash")?;
                p.crash(self.world.as_ref().ok_or("no `fabric` step yet")?);
            }
            _ => {
                let w = self.world.as_mut().ok_or("no `fabric` step yet")?;
                let p = self.process.as_mut().ok_or("the loop is not started")?;
                p.exec(w, line, words)?;
            }
        }
        Ok(())
    }
}

/// Runs a case script: its record, or what went wrong with the line number.
fn run_case(input: &str) -> Result<Vec<String>, String> {
    let mut r = Runner::default();
    for (i, raw) in input.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        r.step(&words.join(" "), &words)
            .map_err(|e| format!("input line {}: `{line}`: {e}", i + 1))?;
    }
    if let (Some(p), Some(w)) = (r.process.take(), r.world.as_ref()) {
        p.crash(w);
    }
    Ok(r.world.map(|w| w.out).unwrap_or_default())
}

/// Where `got` departs from `want`: the line number (1-based), the step it belongs to and both
/// lines.
fn first_difference(want: &str, got: &str) -> Option<String> {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let i = (0..w.len().max(g.len())).find(|&i| w.get(i) != g.get(i))?;
    let step = g[..i.min(g.len())]
        .iter()
        .rev()
        .find(|l| l.starts_with("> "))
        .copied()
        .unwrap_or("(before the first step)");
    Some(format!(
        "line {} (in step `{}`):\n    expected: {}\n    got:      {}",
        i + 1,
        step.trim_start_matches("> "),
        w.get(i).copied().unwrap_or("(end of file)"),
        g.get(i).copied().unwrap_or("(end of record)")
    ))
}

fn cases(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.join("input").is_file())
        .collect();
    v.sort();
    v
}

/// Every case of `tests/data/loop`, each run twice (the two records must be identical) and
/// compared with its `expected` file (rewritten instead with `FABRICD_REGENERATE=1`).
#[test]
fn loop_conformance_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loop");
    let regenerate = std::env::var("FABRICD_REGENERATE").is_ok_and(|v| v == "1");
    let only = std::env::var("FABRICD_CONFORMANCE_CASE").unwrap_or_default();
    let all = cases(&root);
    assert!(!all.is_empty(), "no case in {}", root.display());
    let mut failures = Vec::new();
    let mut ran = 0;
    for dir in all {
        let name = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if !name.contains(&only) {
            continue;
        }
        ran += 1;
        let input = std::fs::read_to_string(dir.join("input")).expect("readable input");
        let run = || run_case(&input).map(|r| r.join("\n") + "\n");
        let got = match (run(), run()) {
            (Ok(a), Ok(b)) if a == b => a,
            (Ok(a), Ok(b)) => {
                let d = first_difference(&a, &b).unwrap_or_default();
                failures.push(format!("case {name}: two runs differ (not deterministic) at {d}"));
                continue;
            }
            (Err(e), _) | (_, Err(e)) => {
                failures.push(format!("case {name}: {e}"));
                continue;
            }
        };
        let expected = dir.join("expected");
        if regenerate {
            std::fs::write(&expected, &got).expect("writable expected file");
            continue;
        }
        match std::fs::read_to_string(&expected) {
            Ok(want) => {
                if let Some(d) = first_difference(&want, &got) {
                    failures.push(format!(
                        "case {name}: the record differs from {} at {d}\n  (if the change is intended: \
                         FABRICD_REGENERATE=1 cargo test -p fabricd --lib conformance, then review the diff)",
                        expected.display()
                    ));
                }
            }
            Err(e) => failures.push(format!(
                "case {name}: {}: {e} (create it with FABRICD_REGENERATE=1)",
                expected.display()
            )),
        }
    }
    assert!(ran > 0, "no case matches FABRICD_CONFORMANCE_CASE={only}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
