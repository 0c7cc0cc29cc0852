//! Remote subcommands: talk gRPC to a running fabricd over its Unix socket (`--socket`), print
//! tables for people and `--json` for tools.
//!
//! JSON contracts (stable): GUIDs are strings `0x` + 16 hex digits; `status --json` has
//! `generation`, `phase` (`idle` when no update runs), `engine`, `switches`, `nodes`,
//! `links_up`, `last_reroute {routed_ms, committed_ms, blocks_written, ..}`; `topo --json` lists
//! `switches` with `guid`, `name`, `level`, `ports [{port, remote_guid, remote_port, state}]`;
//! `metrics --json` has the keys of `analyze --json`.

#[macro_use]
mod output;
pub(crate) use self::output::{write_stdout, write_stdout_with};
mod events;
mod health;
mod jobs;
mod lft;
mod mcast;
mod render;
mod sa;
mod whatif;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use fabric_proto::v1 as pb;
use serde_json::json;

pub use self::health::HealthArgs;
use crate::exit::{difference, usage};
use crate::human::{num, pct};

pub use self::jobs::JobsArgs;
pub use self::mcast::{McastArgs, PartitionsArgs};
use self::output::{ask, guid, print_json};
use self::render::{
    driver_smps_text, escape_vl_text, ha_text, installed_text, metrics_json, phase_name, routing_validity_text,
    status_json, topology_json,
};
pub use self::sa::SaArgs;
pub use self::whatif::WhatIfArgs;

/// `fabricctl inject`.
#[derive(Args, Debug)]
pub struct InjectArgs {
    /// What to do: link-down, link-up, switch-down, switch-up, node-down, node-up, or
    /// port-errors (adds --counter values to a port's simulated counters; mock driver).
    pub action: String,
    /// Switch GUID or name (link and switch faults).
    #[arg(long)]
    pub switch: Option<String>,
    /// Switch port (link faults).
    #[arg(long)]
    pub port: Option<u32>,
    /// End port GUID, node GUID or name (node faults).
    #[arg(long)]
    pub node: Option<String>,
    /// Physical fault (the driver changes the state) instead of virtual (excluded from routing).
    #[arg(long)]
    pub physical: bool,
    /// Return once the fault is part of a committed generation.
    #[arg(long)]
    pub wait: bool,
    /// port-errors: NAME=COUNT to add to the port's counter NAME (symbol_errors,
    /// link_error_recovery, link_downed, rcv_errors, ...); repeatable.
    #[arg(long = "counter", value_name = "NAME=COUNT")]
    pub counters: Vec<String>,
    /// JSON output (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The remote subcommands (added to fabricctl's command enum).
#[derive(Subcommand, Debug)]
pub enum RemoteCmd {
    /// Daemon status: generation, phase, counts, timings of the last reroute.
    Status {
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Installed LFTs (OpenSM dump format; --json: raw port bytes).
    Lft {
        /// One switch (GUID or name); default all.
        #[arg(long)]
        switch: Option<String>,
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Congestion metrics of the installed routing, and per-job metrics.
    Metrics {
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Inject a fault (drill): link-down|link-up --switch X --port N, switch-down|switch-up
    /// --switch X, node-down|node-up --node X; virtual unless --physical.
    Inject(InjectArgs),
    /// Maintenance planning: what taking links (--link SWITCH:PORT), switches (--switch) or end
    /// nodes (--node) down would do (connectivity, routing, LFT upload, congestion); changes nothing.
    WhatIf(WhatIfArgs),
    /// Force a reroute.
    Reroute {
        /// Return once the new generation is committed.
        #[arg(long)]
        wait: bool,
        /// Rewrite every LFT block, not only the changed ones.
        #[arg(long)]
        resync: bool,
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Job mappings (job id -> end ports).
    Jobs(JobsArgs),
    /// Stream topology changes, phase changes and generation commits.
    Watch {
        /// Stop after this many notices.
        #[arg(long)]
        count: Option<u64>,
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Path of a packet through the installed LFTs (the simulated fabric's on the mock driver, the
    /// daemon's installed generation on umad and oob).
    Trace {
        /// Source end port (GUID or name).
        src: String,
        /// Destination end port (GUID or name) or lid:N.
        dst: String,
        /// To the destination's escape LID.
        #[arg(long)]
        escape: bool,
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Reference five-phase update subscriber (drills, tests): prints every Unpath / Repath
    /// notice and, with --auto-ack, acks it after --delay milliseconds.
    Subscribe {
        /// Subscriber name (shown in status and missed-ack reports).
        #[arg(long, default_value = "fabricctl")]
        name: String,
        /// End port it speaks for (GUID or name); repeatable.
        #[arg(long = "port")]
        ports: Vec<String>,
        /// Ack every notice.
        #[arg(long)]
        auto_ack: bool,
        /// Wait this long before acking, ms.
        #[arg(long, default_value_t = 0)]
        delay: u64,
        /// Stop after this many notices (the first one, which names the subscriber, counts).
        #[arg(long)]
        count: Option<u64>,
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Subnet Administration queries answered by the daemon's SA (nr, pir, swir, lr, lftr, gir,
    /// smir, sr, iir, pr, classportinfo), on every driver.
    Sa(SaArgs),
    /// Multicast groups (IPoIB broadcast groups and joined groups), their members and, with
    /// --trees, the spanning tree programmed for each; `mcast verify` floods every group on the
    /// simulated fabric (mock driver).
    Mcast(McastArgs),
    /// The partitions in force (partitions file or OpenSM's default), their members and whether
    /// their P_Key tables are programmed.
    Partitions(PartitionsArgs),
    /// Port health: error counters, rates, flapping links, isolated links (worst ports first);
    /// `health report` for the whole fabric, `health clear` to restore a port.
    Health(HealthArgs),
    /// Check every pair of end ports through the simulated fabric's LFTs (mock driver).
    Verify {
        /// The escape LIDs instead of the base LIDs.
        #[arg(long)]
        escape: bool,
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Where the daemon is (`--socket`) and how to reach it over TLS (`--tls-*`, https:// only).
#[derive(Clone, Debug)]
pub struct Target {
    /// Unix socket path, `http://host:port` or `https://host:port`.
    pub addr: String,
    pub tls: fabric_proto::tls::ClientTlsOptions,
}

impl Target {
    /// A client of the daemon; the error says which option or file to fix, or what the TLS
    /// handshake refused.
    pub async fn connect(&self) -> Result<fabric_proto::Client> {
        fabric_proto::connect_with(&self.addr, &self.tls)
            .await
            .map_err(anyhow::Error::new)
    }
}

async fn client(target: &Target) -> Result<fabric_proto::Client> {
    target.connect().await
}

/// `fabricctl topo` (no subcommand): the daemon's live topology.
pub fn topo(target: &Target, json_out: bool) -> Result<()> {
    runtime()?.block_on(async {
        let mut c = client(target).await?;
        let t = ask(c.get_topology(pb::GetTopologyRequest {})).await?;
        if json_out {
            return print_json(&topology_json(&t));
        }
        outln!("generation {}", t.generation);
        outln!(
            "{:<18}  {:<28}  {:>5}  {:>6}  {:>4}  {:>8}",
            "GUID",
            "NAME",
            "LEVEL",
            "LID",
            "UP",
            "LINKS"
        );
        for s in &t.switches {
            let sw_links: Vec<_> = s
                .ports
                .iter()
                .filter(|p| p.remote_kind == pb::RemoteKind::Switch as i32)
                .collect();
            let up = sw_links.iter().filter(|p| p.state == pb::PortState::Up as i32).count();
            outln!(
                "{:<18}  {:<28}  {:>5}  {:>6}  {:>4}  {:>8}",
                guid(s.guid),
                s.name,
                s.level.map_or("-".to_string(), |l| l.to_string()),
                s.lid,
                if s.up { "yes" } else { "no" },
                format!("{up}/{}", sw_links.len())
            );
        }
        let live = t.end_ports.iter().filter(|e| e.live).count();
        outln!("end ports: {} ({live} live)", t.end_ports.len());
        for d in &t.diagnostics {
            outln!("diagnostic: {d}");
        }
        Ok(())
    })
}

/// Runs one remote subcommand.
pub fn run(cmd: RemoteCmd, target: &Target) -> Result<()> {
    runtime()?.block_on(run_async(cmd, target))
}

async fn run_async(cmd: RemoteCmd, target: &Target) -> Result<()> {
    let mut c = client(target).await?;
    match cmd {
        RemoteCmd::Status { json: j } => {
            let s = ask(c.get_status(pb::GetStatusRequest {})).await?;
            if j {
                return print_json(&status_json(&s));
            }
            if let Some(t) = ha_text(&s) {
                outln!("HA:              {t}");
            }
            outln!("generation       {}", s.generation);
            outln!("phase            {}", phase_name(s.phase));
            outln!(
                "ready            {}",
                if s.ready { "yes" } else { s.not_ready_reason.as_str() }
            );
            outln!("installed        {}", installed_text(&s));
            for u in &s.unprogrammed_switches {
                outln!(
                    "unprogrammed     {} {}: {} blocks pending: {}",
                    guid(u.guid),
                    u.name,
                    u.blocks_pending,
                    u.last_error
                );
            }
            for t in &s.topology_incomplete {
                outln!("topology         INCOMPLETE: {t}; restart fabricd (systemctl restart fabricd) to route them");
            }
            if !s.persistence_error.is_empty() {
                outln!("persistence      FAILING: {}", s.persistence_error);
            }
            outln!(
                "engine           {}{} (driver {}, LMC {})",
                s.engine,
                if s.job_aware { ", job-aware" } else { "" },
                s.driver,
                s.lmc
            );
            outln!(
                "switches         {} ({} up, {} levels)",
                s.switches,
                s.switches_up,
                s.levels
            );
            outln!("nodes            {} ({} up)", s.nodes, s.nodes_up);
            outln!("links            {} ({} up)", s.links, s.links_up);
            outln!("pending faults   {}", s.pending_faults);
            outln!("virtual faults   {}", s.virtual_faults);
            if s.dual_lids {
                outln!("update           five-phase (dual LIDs), {} subscribers", s.subscribers);
            } else {
                outln!("update           direct upload (one LID per end port: no per-flow consistency)");
            }
            outln!("escape VL        {}", escape_vl_text(&s));
            if let Some(t) = routing_validity_text(&s) {
                outln!("routing          {t}");
            }
            if !s.routing_fallback_reason.is_empty() {
                outln!("routing fallback {}", s.routing_fallback_reason);
            }
            if !s.topology_mode.is_empty() {
                outln!(
                    "topology         {} ({}; topology = \"{}\"), routed by {}",
                    s.topology_mode,
                    if s.fat_tree_found {
                        "ranking finds a fat-tree"
                    } else {
                        "ranking finds no fat-tree"
                    },
                    s.topology_setting,
                    s.routed_by
                );
            }
            if s.generation > 0 {
                let cap = if s.data_vl_capacity == 0 {
                    "driver capacity unknown".to_string()
                } else {
                    format!("driver capacity {}", s.data_vl_capacity)
                };
                if s.vl_layers > 0 {
                    outln!(
                        "data VLs         {} ({} VL layers, per-path SLs; {cap})",
                        s.data_vls,
                        s.vl_layers
                    );
                } else {
                    outln!("data VLs         {} ({cap})", s.data_vls);
                }
            }
            if let Some(t) = driver_smps_text(&s) {
                outln!("driver SMPs      {t}");
            }
            if !s.missed_acks.is_empty() {
                outln!("missed acks      {}", s.missed_acks.join(", "));
            }
            for r in &s.update_restarts {
                outln!("update restart   {r}");
            }
            if let Some(t) = &s.last_reroute {
                outln!(
                    "last reroute     generation {}: {} faults, routed {} ms, committed {} ms, {} blocks written",
                    t.generation,
                    t.faults,
                    num(t.routed_ms),
                    num(t.committed_ms),
                    t.blocks_written
                );
            }
            if !s.last_error.is_empty() {
                outln!("last error       {}", s.last_error);
            }
            outln!("uptime           {} s", s.uptime_s);
        }
        RemoteCmd::Lft { switch, json: j } => lft::lft(&mut c, switch, j).await?,
        RemoteCmd::Metrics { json: j } => {
            let m = ask(c.get_metrics(pb::GetMetricsRequest {})).await?;
            if j {
                return print_json(&metrics_json(&m));
            }
            let rp = m.mu_rp.unwrap_or_default();
            outln!("generation         {}", m.generation);
            outln!("valid              {}", m.valid);
            outln!("unreachable_pairs  {}", m.unreachable_pairs);
            outln!("deadlock_free      {}", m.deadlock_free);
            outln!("mu_sp              {}", m.mu_sp);
            outln!(
                "mu_rp              median {} (q1 {}, q39 {})",
                num(rp.median),
                num(rp.q1),
                num(rp.q39)
            );
            if let Some(f) = m.mu_rp_floor {
                outln!(
                    "mu_rp_floor        median {}: P(mu > {}) best possible {}, this routing {}",
                    f.median,
                    f.median,
                    pct(f.p_above_median),
                    pct(f.measured_p_above_median)
                );
            }
            outln!("mu_a2a             {}", m.mu_a2a);
            outln!("xi                 {}", m.xi);
            outln!("nu                 {}", num(m.nu));
            outln!("route_ms           {}", num(m.route_ms));
            if !m.jobs.is_empty() {
                outln!(
                    "{:<24}  {:>9}  {:>12}  {:>10}  {:>6}",
                    "JOB",
                    "END PORTS",
                    "EFFECTIVE XI",
                    "DARK SHARE",
                    "MU_SP"
                );
                for jm in &m.jobs {
                    outln!(
                        "{:<24}  {:>9}  {:>12}  {:>10}  {:>6}",
                        jm.job_id,
                        jm.end_ports,
                        jm.effective_xi,
                        pct(jm.dark_share),
                        jm.mu_sp
                    );
                }
            }
        }
        RemoteCmd::Inject(a) if a.action == "port-errors" => {
            health::inject_port_errors(&mut c, a.switch, a.port, a.node, &a.counters, a.json).await?;
        }
        RemoteCmd::Health(a) => health::run(&mut c, a).await?,
        RemoteCmd::Inject(a) => {
            let (kind, up) = match a.action.as_str() {
                "link-down" => (pb::FaultKind::Link, false),
                "link-up" => (pb::FaultKind::Link, true),
                "switch-down" => (pb::FaultKind::Switch, false),
                "switch-up" => (pb::FaultKind::Switch, true),
                "node-down" => (pb::FaultKind::Node, false),
                "node-up" => (pb::FaultKind::Node, true),
                other => {
                    return Err(usage(format!(
                        "unknown action {other:?} (link-down, link-up, switch-down, switch-up, node-down, node-up, port-errors)"
                    )))
                }
            };
            match kind {
                pb::FaultKind::Link if a.switch.is_none() || a.port.is_none() => {
                    return Err(usage(format!("{} needs --switch GUID|NAME and --port N", a.action)))
                }
                pb::FaultKind::Switch if a.switch.is_none() => {
                    return Err(usage(format!("{} needs --switch GUID|NAME", a.action)))
                }
                pb::FaultKind::Node if a.node.is_none() => {
                    return Err(usage(format!("{} needs --node GUID|NAME", a.action)))
                }
                _ => {}
            }
            let r = ask(c.inject_fault(pb::InjectFaultRequest {
                kind: kind as i32,
                up,
                switch: a.switch.unwrap_or_default(),
                port: a.port.unwrap_or(0),
                node: a.node.unwrap_or_default(),
                physical: a.physical,
                wait: a.wait,
            }))
            .await?;
            if a.json {
                return print_json(&json!({ "event": r.event, "generation": r.generation }));
            }
            if a.wait {
                outln!("{}: committed in generation {}", r.event, r.generation);
            } else {
                outln!("{}: accepted (current generation {})", r.event, r.generation);
            }
        }
        RemoteCmd::WhatIf(a) => whatif::run(&mut c, a).await?,
        RemoteCmd::Reroute { wait, resync, json: j } => {
            let r = ask(c.reroute(pb::RerouteRequest { wait, resync })).await?;
            if j {
                return print_json(&json!({ "generation": r.generation }));
            }
            if wait {
                outln!("rerouted: generation {}", r.generation);
            } else {
                outln!("reroute requested (current generation {})", r.generation);
            }
        }
        RemoteCmd::Jobs(a) => jobs::run(&mut c, a).await?,
        RemoteCmd::Sa(a) => sa::run(&mut c, a).await?,
        RemoteCmd::Mcast(a) => mcast::mcast(&mut c, a).await?,
        RemoteCmd::Partitions(a) => mcast::partitions(&mut c, a).await?,
        RemoteCmd::Subscribe {
            name,
            ports,
            auto_ack,
            delay,
            count,
            json: j,
        } => events::subscribe(&mut c, name, ports, auto_ack, delay, count, j).await?,
        RemoteCmd::Watch { count, json: j } => events::watch(&mut c, count, j).await?,
        RemoteCmd::Trace {
            src,
            dst,
            escape,
            json: j,
        } => {
            let r = ask(c.trace(pb::TraceRequest { src, dst, escape })).await?;
            if j {
                return print_json(&json!({
                    "dlid": r.dlid,
                    "reached": r.reached,
                    "error": r.error,
                    "hops": r.hops.iter().map(|h| json!({
                        "switch_guid": guid(h.switch_guid), "switch_name": h.switch_name,
                        "in_port": h.in_port, "out_port": h.out_port,
                    })).collect::<Vec<_>>(),
                }));
            }
            outln!("to LID {}", r.dlid);
            for h in &r.hops {
                outln!(
                    "  [{:>3}] {} {:<28} [{:>3}]",
                    h.in_port,
                    guid(h.switch_guid),
                    h.switch_name,
                    h.out_port
                );
            }
            if r.reached {
                outln!("reached");
            } else {
                return Err(difference(format!("not reached: {}", r.error)));
            }
        }
        RemoteCmd::Verify { escape, json: j } => {
            let r = ask(c.verify_reachability(pb::VerifyReachabilityRequest { escape })).await?;
            if j {
                return print_json(&json!({
                    "generation": r.generation,
                    "pairs_checked": r.pairs_checked,
                    "unreachable_count": r.unreachable_count,
                    "unreachable": r.unreachable.iter().map(|u| json!({
                        "src": guid(u.src), "dst": guid(u.dst), "reason": u.reason,
                    })).collect::<Vec<_>>(),
                }));
            }
            outln!(
                "generation {}: {} pairs checked, {} unreachable",
                r.generation,
                r.pairs_checked,
                r.unreachable_count
            );
            for u in &r.unreachable {
                outln!("  {} -> {}: {}", guid(u.src), guid(u.dst), u.reason);
            }
            if r.unreachable_count > 0 {
                return Err(difference(format!("{} pairs unreachable", r.unreachable_count)));
            }
        }
    }
    Ok(())
}
