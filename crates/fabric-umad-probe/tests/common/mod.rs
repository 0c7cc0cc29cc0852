//! Shared by the probe's ibsim tests: running `fabric-umad-probe` under the simulator.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use fabric_ibsim_harness::{wait_with_deadline, Ibsim};
use serde_json::Value;

const PROBE: &str = env!("CARGO_BIN_EXE_fabric-umad-probe");

/// Runs the probe to completion on `sim` (60 s deadline, output files in the simulator's
/// directory) and returns its JSON document.
pub fn run_probe(sim: &Ibsim, args: &[&str]) -> Value {
    let dir = sim.dir();
    let out = dir.join(format!("probe-{}.json", args.join("_").replace(['/', ' '], "-")));
    let err = dir.join("probe.err");
    let mut child = sim
        .command(Path::new(PROBE))
        .args(args)
        .stdout(Stdio::from(std::fs::File::create(&out).expect("probe output")))
        .stderr(Stdio::from(std::fs::File::create(&err).expect("probe errors")))
        .spawn()
        .expect("spawn probe");
    let status = wait_with_deadline(&mut child, Duration::from_secs(60), "fabric-umad-probe");
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let errs = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(status.success(), "probe {args:?} failed: {status}\n{text}\n{errs}");
    let first = text
        .lines()
        .next()
        .unwrap_or_else(|| panic!("probe printed nothing:\n{errs}"));
    serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {first}"))
}
