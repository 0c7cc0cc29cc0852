//! Probe of the `umad` driver (used by the integration tests under the ibsim shim):
//! discover → rank → assign LIDs (LMC 1) → route → configure LIDs → write LFTs, then print one
//! JSON document on stdout. With `--watch SECONDS` it then prints every fabric event as one JSON
//! line until the time is up. With `--capture DIR` it stores raw SMP replies as hex files. With
//! `--tables SEED` it also writes and reads back MFT and P_Key blocks ([`tables`]). `--m-key K`,
//! `--m-key-protect P`, `--m-key-lease S` set the driver's M_Key protection. With `--counters`
//! it then prints the port counters of every switch port and end port (JSON, [`counters`]),
//! again for each line read on stdin; `--perf-window N` sets the PerfMgt window. With
//! `--data-vls N` it then programs the identity data VL plan of N VLs
//! (`SouthboundDriver::program_data_vls`) and reports the capacity and the outcome under
//! `"data_vls"` (a refusal is reported, not fatal).
//!
//! Usage: `fabric-umad-probe [--device PATH] [--retries N] [--timeout-ms N] [--window N]
//! [--sweep-ms N] [--watch SECONDS] [--capture DIR] [--no-program] [--tables SEED]
//! [--m-key K] [--m-key-protect P] [--m-key-lease S] [--counters] [--perf-window N]
//! [--data-vls N]`

mod counters;
mod tables;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all, EngineKind, Guid2Lid, RoutingContext, IB_MAX_UNICAST_LID};
use fabric_southbound::{DataVlPlan, DriverError, LftBlockWrite, SouthboundDriver};
use fabric_topology::{fmt_guid, SwitchId};
use fabric_umad::mad::*;
use fabric_umad::{UmadConfig, UmadDriver};
use serde_json::json;

struct Args {
    cfg: UmadConfig,
    watch: Option<u64>,
    capture: Option<PathBuf>,
    program: bool,
    tables: Option<u64>,
    counters: bool,
    data_vls: Option<u8>,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        cfg: UmadConfig::default(),
        watch: None,
        capture: None,
        program: true,
        tables: None,
        counters: false,
        data_vls: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().with_context(|| format!("{k} needs a value"));
        match k.as_str() {
            "--device" => a.cfg.device = PathBuf::from(val()?),
            "--retries" => a.cfg.retries = val()?.parse()?,
            "--timeout-ms" => a.cfg.timeout_ms = val()?.parse()?,
            "--window" => a.cfg.window = val()?.parse()?,
            "--sweep-ms" => a.cfg.sweep_interval_ms = val()?.parse()?,
            "--watch" => a.watch = Some(val()?.parse()?),
            "--capture" => a.capture = Some(PathBuf::from(val()?)),
            "--no-program" => a.program = false,
            "--tables" => a.tables = Some(val()?.parse()?),
            "--counters" => a.counters = true,
            "--data-vls" => a.data_vls = Some(val()?.parse()?),
            "--perf-window" => a.cfg.perf_window = val()?.parse()?,
            "--m-key" => {
                let v = val()?;
                a.cfg.m_key = match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16)?,
                    None => v.parse()?,
                };
            }
            "--m-key-protect" => a.cfg.m_key_protect = val()?.parse()?,
            "--m-key-lease" => a.cfg.m_key_lease_s = val()?.parse()?,
            _ => bail!("unknown argument {k}"),
        }
    }
    Ok(a)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let drv = UmadDriver::open(args.cfg.clone())?;
    let mut events = drv.subscribe_events();
    let t0 = Instant::now();
    let fabric = drv.discover().await?;
    let discover_ms = t0.elapsed().as_secs_f64() * 1e3;
    if let Some(dir) = &args.capture {
        capture(&drv, &fabric, dir).await?;
    }
    let mut out = json!({
        "switches": fabric.num_switches(),
        "end_ports": fabric.num_end_ports(),
        "links": fabric.count_links().1,
        "discover_ms": discover_ms,
    });
    if args.program {
        let ranking = rank(&fabric, &RankOptions::default());
        let lids = assign_lids(&fabric, &Guid2Lid::new(), 1, IB_MAX_UNICAST_LID)?;
        let ctx = RoutingContext {
            fabric: &fabric,
            ranking: &ranking,
            lids: &lids,
        };
        let routed = route_all(&ctx, EngineKind::Dmodc)?;
        let t = Instant::now();
        drv.configure_lids(&fabric, &lids).await?;
        let lids_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut blocks = Vec::new();
        for sw in fabric.switch_ids() {
            for b in 0..routed.lfts.num_blocks() {
                let mut entries = [0u8; 64];
                entries.copy_from_slice(routed.lfts.block(sw, b));
                blocks.push(LftBlockWrite {
                    switch: fabric.switch(sw).guid,
                    block: b as u32,
                    entries,
                });
            }
        }
        let t = Instant::now();
        let rep = drv.write_lft_blocks(&blocks).await?;
        let lft_ms = t.elapsed().as_secs_f64() * 1e3;
        // Second write of the same tables: every block is already there.
        let t = Instant::now();
        let rep2 = drv.write_lft_blocks(&blocks).await?;
        let rewrite_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut lfts = BTreeMap::new();
        let mut swlids = BTreeMap::new();
        let mut swpaths = BTreeMap::new();
        let top = lids.top() as usize;
        for sw in fabric.switch_ids() {
            let g = fmt_guid(fabric.switch(sw).guid);
            lfts.insert(g.clone(), routed.lfts.row(sw)[..=top].to_vec());
            let path = drv.switch_route(fabric.switch(sw).guid).unwrap_or_default();
            let dr: Vec<String> = std::iter::once("0".to_string())
                .chain(path.iter().map(std::string::ToString::to_string))
                .collect();
            swpaths.insert(g.clone(), dr.join(","));
            swlids.insert(g, lids.switch_lid(SwitchId(sw.0)));
        }
        let eps: BTreeMap<String, (u32, Option<u32>)> = fabric
            .end_port_ids()
            .map(|e| {
                (
                    fmt_guid(fabric.end_port(e).port_guid),
                    (lids.base_lid(e), lids.escape_lid(e)),
                )
            })
            .collect();
        out["lids_ms"] = json!(lids_ms);
        out["lft_ms"] = json!(lft_ms);
        out["rewrite_ms"] = json!(rewrite_ms);
        out["blocks"] = json!(rep.blocks_written);
        out["rewrite_blocks"] = json!(rep2.blocks_written);
        out["write_retries"] = json!(rep.retries);
        out["top"] = json!(top);
        out["sm_lid"] = json!(drv.sm_lid());
        out["lfts"] = json!(lfts);
        out["switch_lids"] = json!(swlids);
        out["switch_paths"] = json!(swpaths);
        out["end_port_lids"] = json!(eps);
        if let Some(seed) = args.tables {
            out["tables"] = tables::write_tables(&drv, &fabric, seed).await?;
        }
        if let Some(n) = args.data_vls {
            let capacity = drv.data_vl_capacity();
            let t = Instant::now();
            let r = drv.program_data_vls(&DataVlPlan::identity(n)).await;
            out["data_vls"] = match r {
                Ok(()) => json!({"capacity": capacity, "ok": true, "ms": t.elapsed().as_secs_f64() * 1e3}),
                Err(e) => json!({
                    "capacity": capacity,
                    "ok": false,
                    "error": e.to_string(),
                    "guid": match &e {
                        DriverError::DataVls { guid, .. } | DriverError::Protocol { guid: Some(guid), .. } => {
                            Some(fmt_guid(*guid))
                        }
                        _ => None,
                    },
                    "port": match &e {
                        DriverError::DataVls { port, .. } => Some(*port),
                        _ => None,
                    },
                }),
            };
        }
    }
    let st = drv.stats();
    out["smps"] = json!(st.smps_sent);
    out["retries"] = json!(st.retries);
    out["failures"] = json!(st.failures);
    println!("{out}");
    if args.counters {
        counters::run(&drv, &fabric).await?;
    }
    if let Some(secs) = args.watch {
        println!("{}", json!({"ready": true}));
        let end = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(end) => break,
                ev = events.recv() => match ev {
                    Some(ev) => println!("{}", json!({"event": ev.to_string(), "traps": drv.stats().traps})),
                    None => break,
                }
            }
        }
    }
    Ok(())
}

/// Stores raw replies (hex) of each attribute for the codec unit tests.
async fn capture(drv: &UmadDriver, fabric: &fabric_topology::Fabric, dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let sw = fabric.switch(SwitchId(0));
    let path = drv.switch_route(sw.guid).context("route to switch 0")?;
    let rt = Route::Directed(path);
    let z = [0u8; 64];
    for (name, attr, m) in [
        ("node_info_switch", ATTR_NODE_INFO, 0),
        ("node_desc_switch", ATTR_NODE_DESC, 0),
        ("switch_info", ATTR_SWITCH_INFO, 0),
        ("port_info_switch_p0", ATTR_PORT_INFO, 0),
        ("port_info_switch_p1", ATTR_PORT_INFO, 1),
        ("lft_block0", ATTR_LFT, 0),
        ("sl2vl_switch", ATTR_SL2VL, SlToVl::switch_modifier(1, 3)),
    ] {
        let r = drv
            .raw_call(rt.clone(), Smp::request(&rt, METHOD_GET, attr, m, &z)?)
            .await?;
        std::fs::write(dir.join(format!("{name}.hex")), to_hex(&r.bytes[..232]) + "\n")?;
    }
    let local = Route::Directed(vec![]);
    for (name, attr, m) in [("node_info_ca", ATTR_NODE_INFO, 0), ("port_info_ca", ATTR_PORT_INFO, 1)] {
        let r = drv
            .raw_call(local.clone(), Smp::request(&local, METHOD_GET, attr, m, &z)?)
            .await?;
        std::fs::write(dir.join(format!("{name}.hex")), to_hex(&r.bytes[..232]) + "\n")?;
    }
    Ok(())
}
