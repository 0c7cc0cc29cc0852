//! What the oob benches share (included by `#[path]`: a bench is one file): the agent
//! simulator's binary, built with the bench's profile, and child processes killed on drop.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, ensure, Context};

/// `target/<profile>/fabric-agent-sim`, built with this bench's profile first (a no-op when
/// fresh): binaries of other packages are not built for benches.
pub fn sim_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the bench executable is in target/<profile>/deps")?
        .to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "fabric-agent-sim",
        "--bin",
        "fabric-agent-sim",
    ])
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    if let Some(target) = profile_dir.parent() {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    let st = cmd.status().context("cargo build -p fabric-agent-sim")?;
    ensure!(st.success(), "building fabric-agent-sim failed");
    Ok(profile_dir.join("fabric-agent-sim"))
}

/// A child process killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the agent simulator on `spec` (24-bit addresses, no console), its inventory written
/// to `inventory`, and waits for its `ready` line (the error carries its stderr).
pub fn start_sim(sim_bin: &Path, spec: &str, inventory: &Path) -> anyhow::Result<Proc> {
    let mut sim = Proc(
        Command::new(sim_bin)
            .args([
                "--generate",
                spec,
                "--address-bits",
                "24",
                "--no-console",
                "--inventory",
            ])
            .arg(inventory)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("start fabric-agent-sim")?,
    );
    let mut line = String::new();
    BufReader::new(sim.0.stdout.take().context("sim stdout")?).read_line(&mut line)?;
    if !line.starts_with("ready") {
        let mut err = String::new();
        if let Some(mut e) = sim.0.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        bail!("simulator did not start: {line:?} {err}");
    }
    Ok(sim)
}
