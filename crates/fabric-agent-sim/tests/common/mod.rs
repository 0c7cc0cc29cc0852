//! Test support: start `fabric-agent-sim` as a child process, route a fabric, upload it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use fabric_oob::proto::sim_control_client::SimControlClient;
use fabric_oob::proto::switch_agent_client::SwitchAgentClient;
use fabric_oob::proto::DescribeRequest;
use fabric_oob::{Inventory, OobDriver};
use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all, EngineKind, Guid2Lid, Lfts, LidPlan, RoutingContext};
use fabric_southbound::{LftBlockWrite, SouthboundDriver};
use fabric_topology::{Fabric, Lid};
use tonic::transport::Channel;

/// A running simulator; killed on drop.
pub struct Sim {
    pub child: Child,
    pub inventory: PathBuf,
}

impl Sim {
    /// Starts the simulator with a fresh inventory path named after `tag`.
    pub fn start(args: &[&str], tag: &str, _console: bool) -> Sim {
        let dir = std::env::temp_dir().join(format!("fabric-agent-sim-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self::start_at(args, dir.join("agents.inv"))
    }

    /// Starts the simulator writing (or, with `--reuse-inventory`, reading) `inventory`.
    pub fn start_at(args: &[&str], inventory: PathBuf) -> Sim {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fabric-agent-sim"))
            .args(args)
            .arg("--inventory")
            .arg(&inventory)
            .arg("--no-console")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start fabric-agent-sim");
        let out = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "simulator said {line:?}");
        Sim { child, inventory }
    }

    /// A client of the simulator's control service.
    pub async fn control(&self) -> SimControlClient<Channel> {
        let inv = Inventory::read_file(&self.inventory).unwrap();
        let addr = inv.control.unwrap();
        SimControlClient::connect(format!("http://{addr}"))
            .await
            .unwrap()
            .max_decoding_message_size(64 << 20)
    }

    /// A client of every switch agent with its switch GUID (from the agent's `Describe`).
    pub async fn agents(&self) -> Vec<(u64, SwitchAgentClient<Channel>)> {
        let mut out = Vec::new();
        for e in Inventory::read_file(&self.inventory).unwrap().entries {
            let mut c = SwitchAgentClient::connect(format!("http://{}", e.address))
                .await
                .unwrap();
            let g = c.describe(DescribeRequest {}).await.unwrap().into_inner().guid;
            out.push((g, c));
        }
        out
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rank, assign LIDs (LMC 1) and route with Dmodc.
pub fn route(fabric: &Fabric, max_lid: Lid) -> (LidPlan, Lfts) {
    let ranking = rank(fabric, &RankOptions::default());
    let lids = assign_lids(fabric, &Guid2Lid::new(), 1, max_lid).unwrap();
    let routed = route_all(
        &RoutingContext {
            fabric,
            ranking: &ranking,
            lids: &lids,
        },
        EngineKind::Dmodc,
    )
    .unwrap();
    (lids, routed.lfts)
}

/// Every block of every switch.
pub fn blocks(fabric: &Fabric, lfts: &Lfts) -> Vec<LftBlockWrite> {
    let mut v = Vec::with_capacity(fabric.num_switches() * lfts.num_blocks());
    for sid in fabric.switch_ids() {
        for b in 0..lfts.num_blocks() {
            let mut entries = [0u8; 64];
            entries.copy_from_slice(lfts.block(sid, b));
            v.push(LftBlockWrite {
                switch: fabric.switch(sid).guid,
                block: b as u32,
                entries,
            });
        }
    }
    v
}

/// Uploads every block; returns the number written.
pub async fn upload_all(driver: &OobDriver, fabric: &Fabric, lfts: &Lfts) -> usize {
    driver
        .write_lft_blocks(&blocks(fabric, lfts))
        .await
        .unwrap()
        .blocks_written
}
