//! Remote subcommands: talk gRPC to a running fabricd over its Unix socket (`--socket`), print
//! tables for people and `--json` for tools.
//!
//! JSON contracts (stable): GUIDs are strings `0x` + 16 hex digits; `status --json` has
//! `generation`, `phase` (`idle` when no update runs), `engine`, `switches`, `nodes`,
//! `links_up`, `last_reroute {routed_ms, committed_ms, blocks_written, ..}`; `topo --json` lists
//! `switches` with `guid`, `name`, `level`, `ports [{port, remote_guid, remote_port, state}]`;
//! `metrics --json` has the keys of `analyze --json`.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use fabric_proto::v1 as pb;
use serde_json::{json, Value};

/// `fabricctl inject`.
#[derive(Args, Debug)]
pub struct InjectArgs {
    /// What to do: link-down, link-up, switch-down, switch-up, node-down, node-up.
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
    #[arg(long)]
    pub json: bool,
}

/// `fabricctl jobs`.
#[derive(Args, Debug)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub cmd: Option<JobsCmd>,
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum JobsCmd {
    /// List job mappings (default).
    List,
    /// Create or replace a job mapping: JOB_ID then end ports (GUIDs or names).
    Set {
        job_id: String,
        #[arg(required = true)]
        end_ports: Vec<String>,
    },
    /// Remove a job mapping.
    Clear { job_id: String },
}

/// The remote subcommands (added to fabricctl's command enum).
#[derive(Subcommand, Debug)]
pub enum RemoteCmd {
    /// Daemon status: generation, phase, counts, timings of the last reroute.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Installed LFTs (OpenSM dump format; --json: raw port bytes).
    Lft {
        /// One switch (GUID or name); default all.
        #[arg(long)]
        switch: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Congestion metrics of the installed routing, and per-job metrics.
    Metrics {
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
        #[arg(long)]
        json: bool,
    },
    /// Check every pair of end ports through the simulated fabric's LFTs (mock driver).
    Verify {
        /// The escape LIDs instead of the base LIDs.
        #[arg(long)]
        escape: bool,
        #[arg(long)]
        json: bool,
    },
}

/// Writes to stdout; a closed stdout (`fabricctl ... | head`) ends the program quietly instead
/// of panicking like `println!`.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout().lock(), $($t)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            eprintln!("fabricctl: cannot write to stdout: {e}");
            std::process::exit(1);
        }
    }};
}

macro_rules! outln {
    ($($t:tt)*) => {{
        out!($($t)*);
        out!("\n");
    }};
}

mod whatif;
pub use whatif::WhatIfArgs;

fn guid(g: u64) -> String {
    format!("0x{g:016x}")
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

/// A gRPC error as a one-line message (`InvalidArgument: unknown switch ...`); a transport
/// failure carries its cause and, for TLS, what to check.
fn status_err(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{}", fabric_proto::describe_status(&s))
}

fn print_json(v: &Value) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn phase_name(p: i32) -> &'static str {
    match pb::Phase::try_from(p).unwrap_or(pb::Phase::Unspecified) {
        pb::Phase::Idle => "idle",
        pb::Phase::Prepare => "prepare",
        pb::Phase::Unpath => "unpath",
        pb::Phase::Update => "update",
        pb::Phase::Repath => "repath",
        pb::Phase::Commit => "commit",
        pb::Phase::Unspecified => "unknown",
    }
}

fn timings_json(t: &pb::RerouteTimings) -> Value {
    json!({
        "generation": t.generation,
        "routed_ms": t.routed_ms,
        "committed_ms": t.committed_ms,
        "coalesce_ms": t.coalesce_ms,
        "compute_ms": t.compute_ms,
        "upload_ms": t.upload_ms,
        "blocks_written": t.blocks_written,
        "retries": t.retries,
        "faults": t.faults,
        "committed_at_unix_ms": t.committed_at_unix_ms,
        "driver_smps_sent": t.driver_smps_sent,
    })
}

/// JSON of a status reply.
pub fn status_json(s: &pb::Status) -> Value {
    json!({
        "generation": s.generation,
        "phase": phase_name(s.phase),
        "engine": s.engine,
        "job_aware": s.job_aware,
        "driver": s.driver,
        "switches": s.switches,
        "switches_up": s.switches_up,
        "nodes": s.nodes,
        "nodes_up": s.nodes_up,
        "links": s.links,
        "links_up": s.links_up,
        "levels": s.levels,
        "lmc": s.lmc,
        "top_lid": s.top_lid,
        "pending_faults": s.pending_faults,
        "virtual_faults": s.virtual_faults,
        "discarded_generations": s.discarded_generations,
        "ranking_diagnostics": s.ranking_diagnostics,
        "last_error": s.last_error,
        "uptime_s": s.uptime_s,
        "last_reroute": s.last_reroute.as_ref().map(timings_json),
        "dual_lids": s.dual_lids,
        "subscribers": s.subscribers,
        "missed_acks": s.missed_acks,
        "update_restarts": s.update_restarts,
        "escape_vl_ready": s.escape_vl_ready,
        "escape_vl_pending": s.escape_vl_pending,
        "escape_vl_error": s.escape_vl_error,
        "escape_vl_ready_at_unix_ms": s.escape_vl_ready_at_unix_ms,
        "driver_smps_sent": s.driver_smps_sent,
        "driver_smp_retries": s.driver_smp_retries,
        "driver_smp_failures": s.driver_smp_failures,
        "ready": s.ready,
        "not_ready_reason": s.not_ready_reason,
        "tables_installed": s.tables_installed,
        "blocks_pending": s.blocks_pending,
        "unprogrammed_switch_count": s.unprogrammed_switch_count,
        "unprogrammed_switches": unprogrammed_json(s),
        "persistence_error": s.persistence_error,
        "topology_incomplete": s.topology_incomplete,
        "routing_valid": s.routing_valid,
        "fallback_destinations": s.fallback_destinations,
        "routing_fallback_reason": s.routing_fallback_reason,
        "unreachable_pairs": s.unreachable_pairs,
        "disconnected_pairs": s.disconnected_pairs,
    })
}

/// JSON of the unprogrammed switches of a status reply.
fn unprogrammed_json(s: &pb::Status) -> Vec<Value> {
    s.unprogrammed_switches
        .iter()
        .map(|u| {
            json!({
                "guid": guid(u.guid),
                "name": u.name,
                "blocks_pending": u.blocks_pending,
                "last_error": u.last_error,
            })
        })
        .collect()
}

/// The `installed` line of `fabricctl status`: whether the committed generation is on every
/// switch (idle with every table installed, or blocks pending).
pub fn installed_text(s: &pb::Status) -> String {
    if s.generation == 0 {
        "no generation installed".into()
    } else if s.tables_installed {
        format!("every table of generation {} on every live switch", s.generation)
    } else {
        format!(
            "incomplete: unprogrammed switches {}, LFT blocks pending {}",
            s.unprogrammed_switch_count, s.blocks_pending
        )
    }
}

/// The `routing` line of `fabricctl status`: validity of the installed routing and the
/// fallback the engine's routing needed (`None` before the first generation).
pub fn routing_validity_text(s: &pb::Status) -> Option<String> {
    if s.generation == 0 {
        return None;
    }
    let mut t = if s.routing_valid {
        "valid".to_string()
    } else {
        format!("INVALID: {} connected pairs unreachable", s.unreachable_pairs)
    };
    if s.fallback_destinations > 0 {
        t.push_str(&format!(
            ", {} destinations routed by the Up*/Down* fallback",
            s.fallback_destinations
        ));
    }
    if s.disconnected_pairs > 0 {
        t.push_str(&format!(
            " ({} pairs disconnected: no path in the fabric)",
            s.disconnected_pairs
        ));
    }
    Some(t)
}

/// The `escape VL` line of `fabricctl status`: whether the escape VL (SL-to-VL tables) is
/// programmed, which the five-phase update waits for.
pub fn escape_vl_text(s: &pb::Status) -> String {
    if !s.dual_lids {
        "not used (one LID per end port)".to_string()
    } else if s.escape_vl_ready {
        "ready".to_string()
    } else if !s.escape_vl_error.is_empty() {
        format!(
            "not ready: {} table(s) unwritten, first: {}",
            s.escape_vl_pending, s.escape_vl_error
        )
    } else if s.escape_vl_pending > 0 {
        format!("not ready: {} SL-to-VL table(s) being programmed", s.escape_vl_pending)
    } else {
        "not ready (programmed in the background after the first generation)".to_string()
    }
}

/// The `driver SMPs` line of `fabricctl status`, for drivers that send SMPs.
pub fn driver_smps_text(s: &pb::Status) -> Option<String> {
    (s.driver_smps_sent > 0).then(|| {
        format!(
            "{} sent, {} retries, {} failures",
            s.driver_smps_sent, s.driver_smp_retries, s.driver_smp_failures
        )
    })
}

/// JSON of a topology reply.
pub fn topology_json(t: &pb::Topology) -> Value {
    let switches: Vec<Value> = t
        .switches
        .iter()
        .map(|s| {
            let ports: Vec<Value> = s
                .ports
                .iter()
                .filter(|p| p.remote_kind != pb::RemoteKind::None as i32)
                .map(|p| {
                    json!({
                        "port": p.port,
                        "remote_kind": if p.remote_kind == pb::RemoteKind::Switch as i32 { "switch" } else { "end_port" },
                        "remote_guid": guid(p.remote_guid),
                        "remote_port": p.remote_port,
                        "state": if p.state == pb::PortState::Up as i32 { "up" } else { "down" },
                        "excluded": p.excluded,
                    })
                })
                .collect();
            json!({
                "guid": guid(s.guid),
                "name": s.name,
                "level": s.level,
                "lid": s.lid,
                "up": s.up,
                "ports": ports,
            })
        })
        .collect();
    let end_ports: Vec<Value> = t
        .end_ports
        .iter()
        .map(|e| {
            json!({
                "guid": guid(e.guid),
                "node_guid": guid(e.node_guid),
                "name": e.name,
                "port": e.port_num,
                "base_lid": e.base_lid,
                "escape_lid": e.escape_lid,
                "switch_guid": guid(e.switch_guid),
                "switch_port": e.switch_port,
                "up": e.up,
                "live": e.live,
            })
        })
        .collect();
    json!({ "generation": t.generation, "switches": switches, "end_ports": end_ports, "diagnostics": t.diagnostics })
}

/// JSON of an `mu_rp` floor (null when absent).
fn rp_floor_json(f: Option<pb::RpFloor>) -> Value {
    f.map_or(Value::Null, |f| {
        json!({
            "median": f.median,
            "p_above_median": f.p_above_median,
            "measured_p_above_median": f.measured_p_above_median,
        })
    })
}

/// JSON of a metrics reply (the keys of `fabricctl analyze --json`, plus generation and jobs).
pub fn metrics_json(m: &pb::MetricsReport) -> Value {
    let rp = m.mu_rp.unwrap_or_default();
    json!({
        "generation": m.generation,
        "valid": m.valid,
        "unreachable_pairs": m.unreachable_pairs,
        "deadlock_free": m.deadlock_free,
        "mu_sp": m.mu_sp,
        "mu_rp": { "median": rp.median, "q1": rp.q1, "q39": rp.q39 },
        "mu_rp_floor": rp_floor_json(m.mu_rp_floor),
        "mu_a2a": m.mu_a2a,
        "xi": m.xi,
        "nu": m.nu,
        "route_ms": m.route_ms,
        "jobs": m.jobs.iter().map(|j| json!({
            "job_id": j.job_id,
            "end_ports": j.end_ports,
            "effective_xi": j.effective_xi,
            "dark_share": j.dark_share,
            "mu_sp": j.mu_sp,
            "worst_shift": j.worst_shift,
        })).collect::<Vec<_>>(),
    })
}

fn notice_json(n: &pb::FabricNotice) -> Value {
    use pb::fabric_notice::Notice as N;
    match &n.notice {
        Some(N::TopologyChange(c)) => json!({
            "type": "topology_change", "event": c.event, "up": c.up, "guid": guid(c.guid), "port": c.port,
            "physical": c.physical,
        }),
        Some(N::PhaseChanged(p)) => {
            json!({ "type": "phase", "generation": p.generation, "phase": phase_name(p.phase) })
        }
        Some(N::GenerationCommitted(g)) => json!({
            "type": "commit", "generation": g.generation, "timings": g.timings.as_ref().map(timings_json),
        }),
        Some(N::Lagged(k)) => json!({ "type": "lagged", "dropped": k }),
        Some(N::AcksMissed(m)) => json!({
            "type": "acks_missed", "generation": m.generation, "subscribers": m.subscribers,
        }),
        Some(N::UpdateAborted(a)) => json!({
            "type": "update_aborted", "generation": a.generation, "reason": a.reason,
        }),
        Some(N::UpdateRestarted(r)) => json!({
            "type": "update_restarted", "generation": r.generation, "attempt": r.attempt, "reason": r.reason,
        }),
        None => json!({ "type": "unknown" }),
    }
}

fn notice_line(n: &pb::FabricNotice) -> String {
    use pb::fabric_notice::Notice as N;
    match &n.notice {
        Some(N::TopologyChange(c)) => {
            format!(
                "change     {} ({})",
                c.event,
                if c.physical { "physical" } else { "virtual" }
            )
        }
        Some(N::PhaseChanged(p)) => format!("phase      generation {} {}", p.generation, phase_name(p.phase)),
        Some(N::GenerationCommitted(g)) => {
            let t = g.timings.unwrap_or_default();
            format!(
                "commit     generation {} faults {} routed {:.1} ms committed {:.1} ms blocks {}",
                g.generation, t.faults, t.routed_ms, t.committed_ms, t.blocks_written
            )
        }
        Some(N::Lagged(k)) => format!("lagged     {k} notices dropped"),
        Some(N::AcksMissed(m)) => format!(
            "missed     generation {} no ack from {}",
            m.generation,
            m.subscribers.join(", ")
        ),
        Some(N::UpdateAborted(a)) => format!("aborted    generation {}: {}", a.generation, a.reason),
        Some(N::UpdateRestarted(r)) => format!(
            "restarted  generation {} attempt {}: {}",
            r.generation, r.attempt, r.reason
        ),
        None => "unknown notice".into(),
    }
}

/// `fabricctl topo` (no subcommand): the daemon's live topology.
pub fn topo(target: &Target, json_out: bool) -> Result<()> {
    runtime()?.block_on(async {
        let mut c = client(target).await?;
        let t = c
            .get_topology(pb::GetTopologyRequest {})
            .await
            .map_err(status_err)?
            .into_inner();
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
            let s = c
                .get_status(pb::GetStatusRequest {})
                .await
                .map_err(status_err)?
                .into_inner();
            if j {
                return print_json(&status_json(&s));
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
                    "last reroute     generation {}: {} faults, routed {:.1} ms, committed {:.1} ms, {} blocks written",
                    t.generation,
                    t.faults,
                    t.routed_ms,
                    t.committed_ms,
                    t.blocks_written
                );
            }
            if !s.last_error.is_empty() {
                outln!("last error       {}", s.last_error);
            }
            outln!("uptime           {} s", s.uptime_s);
        }
        RemoteCmd::Lft { switch, json: j } => {
            let format = if j { pb::LftFormat::Raw } else { pb::LftFormat::Opensm };
            let r = c
                .get_lft(pb::GetLftRequest {
                    switch: switch.unwrap_or_default(),
                    format: format as i32,
                })
                .await
                .map_err(status_err)?
                .into_inner();
            if j {
                let switches: Vec<Value> = r
                    .switches
                    .iter()
                    .map(|s| json!({ "guid": guid(s.guid), "name": s.name, "lid": s.lid, "lft": s.lft }))
                    .collect();
                return print_json(&json!({ "generation": r.generation, "switches": switches }));
            }
            out!("{}", r.opensm_dump);
        }
        RemoteCmd::Metrics { json: j } => {
            let m = c
                .get_metrics(pb::GetMetricsRequest {})
                .await
                .map_err(status_err)?
                .into_inner();
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
                "mu_rp              median {:.1} (q1 {:.1}, q39 {:.1})",
                rp.median,
                rp.q1,
                rp.q39
            );
            if let Some(f) = m.mu_rp_floor {
                outln!(
                    "mu_rp_floor        median {}: P(mu > {}) best possible {:.1}%, this routing {:.1}%",
                    f.median,
                    f.median,
                    100.0 * f.p_above_median,
                    100.0 * f.measured_p_above_median
                );
            }
            outln!("mu_a2a             {}", m.mu_a2a);
            outln!("xi                 {}", m.xi);
            outln!("nu                 {:.3}", m.nu);
            outln!("route_ms           {:.1}", m.route_ms);
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
                        "{:<24}  {:>9}  {:>12}  {:>9.1}%  {:>6}",
                        jm.job_id,
                        jm.end_ports,
                        jm.effective_xi,
                        jm.dark_share * 100.0,
                        jm.mu_sp
                    );
                }
            }
        }
        RemoteCmd::Inject(a) => {
            let (kind, up) = match a.action.as_str() {
                "link-down" => (pb::FaultKind::Link, false),
                "link-up" => (pb::FaultKind::Link, true),
                "switch-down" => (pb::FaultKind::Switch, false),
                "switch-up" => (pb::FaultKind::Switch, true),
                "node-down" => (pb::FaultKind::Node, false),
                "node-up" => (pb::FaultKind::Node, true),
                other => {
                    bail!("unknown action {other:?} (link-down, link-up, switch-down, switch-up, node-down, node-up)")
                }
            };
            match kind {
                pb::FaultKind::Link if a.switch.is_none() || a.port.is_none() => {
                    bail!("{} needs --switch GUID|NAME and --port N", a.action)
                }
                pb::FaultKind::Switch if a.switch.is_none() => bail!("{} needs --switch GUID|NAME", a.action),
                pb::FaultKind::Node if a.node.is_none() => bail!("{} needs --node GUID|NAME", a.action),
                _ => {}
            }
            let r = c
                .inject_fault(pb::InjectFaultRequest {
                    kind: kind as i32,
                    up,
                    switch: a.switch.unwrap_or_default(),
                    port: a.port.unwrap_or(0),
                    node: a.node.unwrap_or_default(),
                    physical: a.physical,
                    wait: a.wait,
                })
                .await
                .map_err(status_err)?
                .into_inner();
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
            let r = c
                .reroute(pb::RerouteRequest { wait, resync })
                .await
                .map_err(status_err)?
                .into_inner();
            if j {
                return print_json(&json!({ "generation": r.generation }));
            }
            if wait {
                outln!("rerouted: generation {}", r.generation);
            } else {
                outln!("reroute requested (current generation {})", r.generation);
            }
        }
        RemoteCmd::Jobs(a) => match a.cmd.unwrap_or(JobsCmd::List) {
            JobsCmd::List => {
                let r = c
                    .list_jobs(pb::ListJobsRequest {})
                    .await
                    .map_err(status_err)?
                    .into_inner();
                if a.json {
                    let jobs: Vec<Value> = r
                        .jobs
                        .iter()
                        .map(|j| {
                            json!({
                                "job_id": j.job_id,
                                "end_ports": j.end_ports.iter().map(|e| json!({"guid": guid(e.guid), "name": e.name})).collect::<Vec<_>>(),
                            })
                        })
                        .collect();
                    return print_json(&json!({ "jobs": jobs }));
                }
                outln!("{:<24}  {:>9}  FIRST END PORTS", "JOB", "END PORTS");
                for j in &r.jobs {
                    let first: Vec<&str> = j.end_ports.iter().take(4).map(|e| e.name.as_str()).collect();
                    outln!("{:<24}  {:>9}  {}", j.job_id, j.end_ports.len(), first.join(", "));
                }
            }
            JobsCmd::Set { job_id, end_ports } => {
                let j = c
                    .set_job_mapping(pb::SetJobMappingRequest { job_id, end_ports })
                    .await
                    .map_err(status_err)?
                    .into_inner();
                if a.json {
                    return print_json(&json!({
                        "job_id": j.job_id,
                        "end_ports": j.end_ports.iter().map(|e| json!({"guid": guid(e.guid), "name": e.name})).collect::<Vec<_>>(),
                    }));
                }
                outln!("job {} mapped to {} end ports", j.job_id, j.end_ports.len());
            }
            JobsCmd::Clear { job_id } => {
                c.clear_job(pb::ClearJobRequest { job_id: job_id.clone() })
                    .await
                    .map_err(status_err)?;
                if a.json {
                    return print_json(&json!({ "cleared": job_id }));
                }
                outln!("job {job_id} cleared");
            }
        },
        RemoteCmd::Subscribe {
            name,
            ports,
            auto_ack,
            delay,
            count,
            json: j,
        } => {
            let mut s = c
                .subscribe(pb::SubscribeRequest { name, end_ports: ports })
                .await
                .map_err(status_err)?
                .into_inner();
            let mut seen = 0u64;
            while let Some(n) = s.message().await.map_err(status_err)? {
                let ackable = n.phase == pb::Phase::Unpath as i32 || n.phase == pb::Phase::Repath as i32;
                if j {
                    outln!(
                        "{}",
                        serde_json::to_string(&json!({
                            "subscriber_id": n.subscriber_id, "generation": n.generation,
                            "phase": phase_name(n.phase), "deadline_ms": n.deadline_ms,
                        }))?
                    );
                } else {
                    outln!(
                        "notice     subscriber {} generation {} {} (deadline {} ms)",
                        n.subscriber_id,
                        n.generation,
                        phase_name(n.phase),
                        n.deadline_ms
                    );
                }
                if auto_ack && ackable && seen > 0 {
                    if delay > 0 {
                        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                    }
                    c.ack(pb::AckRequest {
                        subscriber_id: n.subscriber_id,
                        generation: n.generation,
                        phase: n.phase,
                    })
                    .await
                    .map_err(status_err)?;
                    if !j {
                        outln!("ack        generation {} {}", n.generation, phase_name(n.phase));
                    }
                }
                seen += 1;
                if count.is_some_and(|c| seen >= c) {
                    break;
                }
            }
        }
        RemoteCmd::Watch { count, json: j } => {
            let mut s = c
                .watch_events(pb::WatchEventsRequest {})
                .await
                .map_err(status_err)?
                .into_inner();
            let mut seen = 0u64;
            while let Some(n) = s.message().await.map_err(status_err)? {
                if j {
                    outln!("{}", serde_json::to_string(&notice_json(&n))?);
                } else {
                    outln!("{}", notice_line(&n));
                }
                seen += 1;
                if count.is_some_and(|c| seen >= c) {
                    break;
                }
            }
        }
        RemoteCmd::Trace {
            src,
            dst,
            escape,
            json: j,
        } => {
            let r = c
                .trace(pb::TraceRequest { src, dst, escape })
                .await
                .map_err(status_err)?
                .into_inner();
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
                bail!("not reached: {}", r.error);
            }
        }
        RemoteCmd::Verify { escape, json: j } => {
            let r = c
                .verify_reachability(pb::VerifyReachabilityRequest { escape })
                .await
                .map_err(status_err)?
                .into_inner();
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
                bail!("{} pairs unreachable", r.unreachable_count);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_has_the_contract_keys() {
        let s = pb::Status {
            generation: 3,
            phase: pb::Phase::Idle as i32,
            engine: "dmodc".into(),
            switches: 54,
            nodes: 648,
            links_up: 647,
            last_reroute: Some(pb::RerouteTimings {
                routed_ms: 1.5,
                committed_ms: 2.5,
                blocks_written: 7,
                driver_smps_sent: 16472,
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = status_json(&s);
        assert_eq!(v["generation"], 3);
        assert_eq!(v["phase"], "idle");
        assert_eq!(v["engine"], "dmodc");
        assert_eq!(v["switches"], 54);
        assert_eq!(v["nodes"], 648);
        assert_eq!(v["links_up"], 647);
        assert_eq!(v["last_reroute"]["routed_ms"], 1.5);
        assert_eq!(v["last_reroute"]["committed_ms"], 2.5);
        assert_eq!(v["last_reroute"]["blocks_written"], 7);
        assert_eq!(v["last_reroute"]["driver_smps_sent"], 16472);
        let none = status_json(&pb::Status::default());
        assert!(none["last_reroute"].is_null());
        let s = pb::Status {
            phase: pb::Phase::Unpath as i32,
            dual_lids: true,
            subscribers: 64,
            missed_acks: vec!["job-7 (unpath)".into()],
            ..Default::default()
        };
        let v = status_json(&s);
        assert_eq!(v["phase"], "unpath");
        assert_eq!(v["dual_lids"], true);
        assert_eq!(v["subscribers"], 64);
        assert_eq!(v["missed_acks"][0], "job-7 (unpath)");
    }

    #[test]
    fn routing_validity_renders() {
        assert_eq!(routing_validity_text(&pb::Status::default()), None);
        let mut s = pb::Status {
            generation: 2,
            routing_valid: true,
            ..Default::default()
        };
        assert_eq!(routing_validity_text(&s).as_deref(), Some("valid"));
        s.fallback_destinations = 36;
        s.disconnected_pairs = 10;
        s.routing_fallback_reason = "dmodc left 36 destinations unreachable".into();
        assert_eq!(
            routing_validity_text(&s).as_deref(),
            Some("valid, 36 destinations routed by the Up*/Down* fallback (10 pairs disconnected: no path in the fabric)")
        );
        s.routing_valid = false;
        s.unreachable_pairs = 4;
        assert!(routing_validity_text(&s)
            .unwrap()
            .starts_with("INVALID: 4 connected pairs unreachable"));
        let v = status_json(&s);
        assert_eq!(v["routing_valid"], false);
        assert_eq!(v["fallback_destinations"], 36);
        assert_eq!(v["routing_fallback_reason"], "dmodc left 36 destinations unreachable");
        assert_eq!(v["unreachable_pairs"], 4);
        assert_eq!(v["disconnected_pairs"], 10);
    }

    #[test]
    fn escape_vl_and_smp_counters_render() {
        let mut s = pb::Status {
            dual_lids: true,
            escape_vl_ready: true,
            driver_smps_sent: 16472,
            driver_smp_retries: 3,
            driver_smp_failures: 1,
            escape_vl_ready_at_unix_ms: 1_700_000_000_123,
            ..Default::default()
        };
        assert_eq!(escape_vl_text(&s), "ready");
        assert_eq!(
            driver_smps_text(&s).as_deref(),
            Some("16472 sent, 3 retries, 1 failures")
        );
        let v = status_json(&s);
        assert_eq!(v["escape_vl_ready"], true);
        assert_eq!(v["driver_smps_sent"], 16472);
        assert_eq!(v["driver_smp_retries"], 3);
        assert_eq!(v["driver_smp_failures"], 1);
        assert_eq!(v["escape_vl_ready_at_unix_ms"], 1_700_000_000_123u64);
        s.escape_vl_ready = false;
        s.escape_vl_pending = 70;
        assert_eq!(escape_vl_text(&s), "not ready: 70 SL-to-VL table(s) being programmed");
        s.escape_vl_pending = 2;
        s.escape_vl_error = "SLtoVLMappingTable Set on switch 0x0000000000000020 input port 3 output port 5: \
                             no reply after 4 attempt(s)"
            .into();
        let t = escape_vl_text(&s);
        assert!(t.starts_with("not ready: 2 table(s) unwritten, first: SLtoVLMappingTable Set on switch"));
        assert_eq!(status_json(&s)["escape_vl_error"], s.escape_vl_error);
        s.escape_vl_error.clear();
        s.escape_vl_pending = 0;
        assert_eq!(
            escape_vl_text(&s),
            "not ready (programmed in the background after the first generation)"
        );
        s.dual_lids = false;
        assert_eq!(escape_vl_text(&s), "not used (one LID per end port)");
        // Drivers without SMPs (mock, oob) print no counter line.
        assert_eq!(driver_smps_text(&pb::Status::default()), None);
    }

    #[test]
    fn update_notices_render_in_text_and_json() {
        use pb::fabric_notice::Notice as N;
        let missed = pb::FabricNotice {
            notice: Some(N::AcksMissed(pb::AcksMissed {
                generation: 4,
                subscribers: vec!["a (unpath)".into(), "b (repath)".into()],
            })),
        };
        assert_eq!(
            notice_line(&missed),
            "missed     generation 4 no ack from a (unpath), b (repath)"
        );
        assert_eq!(notice_json(&missed)["type"], "acks_missed");
        assert_eq!(notice_json(&missed)["subscribers"][1], "b (repath)");
        let aborted = pb::FabricNotice {
            notice: Some(N::UpdateAborted(pb::UpdateAborted {
                generation: 5,
                reason: "strict".into(),
            })),
        };
        assert_eq!(notice_line(&aborted), "aborted    generation 5: strict");
        assert_eq!(notice_json(&aborted)["reason"], "strict");
        let restarted = pb::FabricNotice {
            notice: Some(N::UpdateRestarted(pb::UpdateRestarted {
                generation: 6,
                attempt: 1,
                reason: "link-down 0x0000000000000010[5]".into(),
            })),
        };
        assert_eq!(
            notice_line(&restarted),
            "restarted  generation 6 attempt 1: link-down 0x0000000000000010[5]"
        );
        assert_eq!(notice_json(&restarted)["type"], "update_restarted");
        assert_eq!(notice_json(&restarted)["attempt"], 1);
    }

    #[test]
    fn topology_json_lists_cabled_ports_with_state() {
        let t = pb::Topology {
            generation: 1,
            switches: vec![pb::SwitchInfo {
                guid: 0x10,
                name: "leaf0".into(),
                level: Some(0),
                ports: vec![
                    pb::SwitchPort {
                        port: 1,
                        remote_kind: pb::RemoteKind::Switch as i32,
                        remote_guid: 0x20,
                        remote_port: 3,
                        state: pb::PortState::Down as i32,
                        ..Default::default()
                    },
                    pb::SwitchPort {
                        port: 2,
                        remote_kind: pb::RemoteKind::None as i32,
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = topology_json(&t);
        let s = &v["switches"][0];
        assert_eq!(s["guid"], "0x0000000000000010");
        assert_eq!(s["name"], "leaf0");
        assert_eq!(s["level"], 0);
        assert_eq!(s["ports"].as_array().map(Vec::len), Some(1));
        assert_eq!(s["ports"][0]["remote_guid"], "0x0000000000000020");
        assert_eq!(s["ports"][0]["remote_port"], 3);
        assert_eq!(s["ports"][0]["state"], "down");
    }

    #[test]
    fn metrics_json_has_the_analyze_keys() {
        let m = pb::MetricsReport {
            mu_rp: Some(pb::RpStats {
                median: 2.0,
                q1: 1.0,
                q39: 3.0,
            }),
            mu_rp_floor: Some(pb::RpFloor {
                median: 2,
                p_above_median: 0.25,
                measured_p_above_median: 0.5,
            }),
            ..Default::default()
        };
        let v = metrics_json(&m);
        assert_eq!(v["mu_rp_floor"]["median"], 2);
        assert_eq!(v["mu_rp_floor"]["p_above_median"], 0.25);
        assert_eq!(v["mu_rp_floor"]["measured_p_above_median"], 0.5);
        for k in [
            "valid",
            "unreachable_pairs",
            "deadlock_free",
            "mu_sp",
            "mu_a2a",
            "xi",
            "nu",
            "route_ms",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["mu_rp"]["median"], 2.0);
        assert_eq!(v["mu_rp"]["q39"], 3.0);
    }
}
