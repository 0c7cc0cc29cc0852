//! The `fabric-agent-sim` process for the tests that run `fabricd` with the `oob` driver: start
//! it, talk to its control service and to its switch agents directly (what the switches really
//! hold, independently of the daemon).
//!
//! # Locating `fabric-agent-sim`
//!
//! `CARGO_BIN_EXE_*` only names binaries of the package under test, and binaries of
//! dependencies are not built for tests. The simulator is therefore looked up in the target
//! directory of the test executable (`target/<profile>/deps/<test>-*` →
//! `target/<profile>/fabric-agent-sim`, which also honours `CARGO_TARGET_DIR`). Before using it
//! `$CARGO build -p fabric-agent-sim --bin fabric-agent-sim` runs once per test binary (a no-op
//! when it is fresh; `cargo test` does not hold the build lock while tests run), so a clean
//! clone's `cargo test -p fabricd` works; if that build fails (e.g. offline) an existing binary
//! is used.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use fabric_oob::proto::sim_control_client::SimControlClient;
use fabric_oob::proto::switch_agent_client::SwitchAgentClient;
use fabric_oob::proto::{
    CommandRequest, Counters, DescribeRequest, GetCountersRequest, GetSlToVlRequest, ReadLftBlockRequest,
    VerifyAllPairsReply, VerifyAllPairsRequest,
};
use tonic::transport::Channel;

/// Path of the `fabric-agent-sim` binary of this build (built on first use).
pub fn sim_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        // target/<profile>/deps/<test> -> target/<profile>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test executable is in target/<profile>/deps")
            .to_path_buf();
        let bin = profile_dir.join("fabric-agent-sim");
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
        // The profile the test binaries were built with, so that under `cargo test` the binary
        // built alongside the test is up to date and the nested build is a no-op.
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        } else {
            cmd.args(["--profile", "test"]);
        }
        if let Some(target) = profile_dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            other => eprintln!("building fabric-agent-sim failed ({other:?}); using {}", bin.display()),
        }
        assert!(
            bin.is_file(),
            "{} not found: run `cargo build -p fabric-agent-sim` first",
            bin.display()
        );
        bin
    })
}

/// A running simulator (one agent per switch); killed on drop. The switches' state (LFTs,
/// addresses, SL-to-VL tables) lives here and survives any number of daemon restarts.
pub struct AgentSim {
    pub child: Child,
    pub inventory: PathBuf,
}

impl AgentSim {
    /// Starts `fabric-agent-sim --generate SPEC` with extra arguments; the inventory is written
    /// to `dir/agents.inv`. Returns once every agent listens.
    pub fn start(dir: &Path, spec: &str, extra: &[&str]) -> AgentSim {
        let inventory = dir.join("agents.inv");
        let mut child = Command::new(sim_binary())
            .args(["--generate", spec, "--no-console", "--inventory"])
            .arg(&inventory)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start fabric-agent-sim");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).expect("read sim stdout");
        assert!(line.starts_with("ready"), "simulator said {line:?}");
        AgentSim { child, inventory }
    }

    fn inventory(&self) -> fabric_oob::Inventory {
        fabric_oob::Inventory::read_file(&self.inventory).expect("inventory")
    }

    /// A client of the control service.
    pub async fn control(&self) -> SimCtl {
        let addr = self.inventory().control.expect("inventory has a !control line");
        let c = SimControlClient::connect(format!("http://{addr}"))
            .await
            .expect("sim control")
            .max_decoding_message_size(64 << 20);
        SimCtl(c)
    }

    /// One client per switch agent, keyed by switch GUID (from the agent's own `Describe`).
    pub async fn agents(&self) -> Agents {
        let mut out = Vec::new();
        for e in self.inventory().entries {
            let mut c = SwitchAgentClient::connect(format!("http://{}", e.address))
                .await
                .unwrap_or_else(|err| panic!("agent {}: {err}", e.address))
                .max_decoding_message_size(64 << 20);
            let guid = c
                .describe(DescribeRequest {})
                .await
                .expect("Describe")
                .into_inner()
                .guid;
            out.push((guid, c));
        }
        out.sort_by_key(|(g, _)| *g);
        Agents(out)
    }
}

impl Drop for AgentSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The simulator's control service.
pub struct SimCtl(pub SimControlClient<Channel>);

impl SimCtl {
    /// Runs a console command (`link-down SW PORT`, `write-delay all MS`, ...); panics on error.
    pub async fn command(&mut self, line: &str) -> String {
        self.0
            .command(CommandRequest { line: line.into() })
            .await
            .unwrap_or_else(|e| panic!("sim command {line:?}: {e}"))
            .into_inner()
            .output
    }

    /// Traces every connected pair of live end ports through the agents' LFT bytes.
    pub async fn verify(&mut self, escape: bool) -> VerifyAllPairsReply {
        self.0
            .verify_all_pairs(VerifyAllPairsRequest { use_escape: escape })
            .await
            .expect("VerifyAllPairs")
            .into_inner()
    }

    pub async fn counters(&mut self) -> Counters {
        self.0
            .get_counters(GetCountersRequest {})
            .await
            .expect("GetCounters")
            .into_inner()
    }
}

/// Clients of every switch agent, by switch GUID.
pub struct Agents(pub Vec<(u64, SwitchAgentClient<Channel>)>);

impl Agents {
    /// Blocks `0..blocks` of every switch's LFT as the agents hold them.
    pub async fn lfts(&mut self, blocks: u32) -> HashMap<u64, Vec<u8>> {
        let mut out = HashMap::new();
        for (g, c) in &mut self.0 {
            let mut row = Vec::with_capacity(blocks as usize * 64);
            for b in 0..blocks {
                let r = c
                    .read_lft_block(ReadLftBlockRequest { block: b })
                    .await
                    .unwrap_or_else(|e| panic!("ReadLftBlock {g:#x} {b}: {e}"))
                    .into_inner();
                assert_eq!(r.entries.len(), 64, "agent {g:#x} block {b}");
                row.extend_from_slice(&r.entries);
            }
            out.insert(*g, row);
        }
        out
    }
}

impl Agents {
    /// Every switch's SL-to-VL table (VL of SL 0..15) as its agent holds it.
    pub async fn sl_to_vl(&mut self) -> HashMap<u64, Vec<u8>> {
        let mut out = HashMap::new();
        for (g, c) in &mut self.0 {
            let t = c
                .get_sl_to_vl(GetSlToVlRequest {})
                .await
                .unwrap_or_else(|e| panic!("GetSlToVl {g:#x}: {e}"))
                .into_inner();
            out.insert(*g, t.vl_of_sl);
        }
        out
    }
}

/// A `fabricd` config with the `oob` driver on `inventory`, plus `extra` TOML (other tables).
pub fn oob_config(inventory: &Path, oob_extra: &str, extra: &str) -> String {
    format!(
        r#"
[log]
level = "info"
timestamps = false

[driver]
kind = "oob"

[driver.oob]
inventory = "{}"
connect_timeout = "300ms"
request_timeout = "3s"
unreachable_deadline = "5s"
max_retries = 2
{oob_extra}

[metrics]
random_perms = 4
{extra}
"#,
        inventory.display()
    )
}
