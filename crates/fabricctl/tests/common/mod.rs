//! Helpers shared by the fabricctl integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/fabricd`, built on first use.
pub fn fabricd_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf();
    let bin = profile_dir.join("fabricd");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", "fabricd", "--bin", "fabricd"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    // The profile the test binaries were built with, so that under `cargo test` the binary
    // built alongside this test is up to date and the nested build is a no-op.
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    } else {
        cmd.args(["--profile", "test"]);
    }
    if let Some(target) = profile_dir.parent() {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    if !matches!(cmd.status(), Ok(s) if s.success()) {
        eprintln!("building fabricd failed; using {}", bin.display());
    }
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build -p fabricd`",
        bin.display()
    );
    bin
}
