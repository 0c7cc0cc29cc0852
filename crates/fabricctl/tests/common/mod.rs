//! Helpers shared by the fabricctl integration tests (each test binary uses a subset).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `target/<profile>/fabricd`, built on first use.
pub fn fabricd_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf();
    let bin = profile_dir.join("fabricd");
    // Under `cargo test --workspace` the binary is already built from the current sources; a
    // nested build there would resolve features for fabricd alone and rebuild half the
    // dependency tree (minutes in CI). Build only when a source is newer than the binary.
    if bin_is_fresh(&bin) {
        return bin;
    }
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

/// Whether `bin` exists and is newer than every source it is built from (the workspace's crate
/// sources, build scripts, manifests, protos and `Cargo.lock`).
fn bin_is_fresh(bin: &Path) -> bool {
    fn newest(dir: &Path, acc: &mut std::time::SystemTime) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            if name == "target" || name == ".git" || name == "tests" || name == "benches" {
                continue;
            }
            if p.is_dir() {
                newest(&p, acc);
            } else if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
                *acc = (*acc).max(m);
            }
        }
    }
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return false;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut latest = std::time::SystemTime::UNIX_EPOCH;
    for sub in ["crates", "proto"] {
        newest(&root.join(sub), &mut latest);
    }
    for f in ["Cargo.toml", "Cargo.lock"] {
        if let Ok(m) = std::fs::metadata(root.join(f)).and_then(|m| m.modified()) {
            latest = latest.max(m);
        }
    }
    built >= latest
}

/// Runs the fabricctl binary under test.
pub fn fabricctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fabricctl"))
        .args(args)
        .output()
        .expect("run fabricctl")
}

/// Runs fabricctl, asserts success, returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = fabricctl(args);
    assert!(
        out.status.success(),
        "fabricctl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// [`ok`] parsed as JSON.
pub fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).expect("valid JSON")
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);
impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("fabricctl-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
