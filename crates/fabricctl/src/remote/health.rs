//! `fabricctl health`: the daemon's port-health monitor (table, `--json`, the fabric report,
//! clear) and the `inject port-errors` drill.
//!
//! JSON contract (stable): `health --json` has `enabled`, `driver`, `generation`, `policy`,
//! `counters_note`, `summary {switches_up, ...}`, `isolated [{link, cause, value, threshold,
//! reason, at_unix_ms}]`, `refused`, `ports [{port, name, remote, state, reason, max_error_rate,
//! flaps, read_error, counters {name: {value, rate|null, saturated}}}]`.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use fabric_proto::v1 as pb;
use serde_json::{json, Map, Value};

use super::output::{ask, guid, print_json};

/// `fabricctl health`.
#[derive(Args, Debug)]
pub struct HealthArgs {
    #[command(subcommand)]
    pub cmd: Option<HealthCmd>,
    /// Every port read, not only those with something to show.
    #[arg(long)]
    pub all: bool,
    /// At most this many ports (worst first; 0: no limit).
    #[arg(long, default_value_t = 40)]
    pub limit: u32,
    /// Print JSON (the contract in the module documentation) instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum HealthCmd {
    /// The whole fabric at a glance: switches, links and end ports up/down, ports read, with
    /// errors, warning, isolated and flapping; the policy and the isolated links.
    Report,
    /// Clear the monitor's isolation and warnings of one port (its link comes back through a
    /// new generation; its rates and flaps start over), or of every port with --all.
    Clear {
        /// SWITCH:PORT (switch GUID or name, port number) or an end port (GUID or name).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        port: Option<String>,
        /// Every isolated link and every port's rates and flaps.
        #[arg(long)]
        all: bool,
    },
}

/// `SWITCH:PORT` → (switch, port, ""), anything else → ("", 0, end port).
fn split_port(s: &str) -> (String, u32, String) {
    if let Some((sw, p)) = s.rsplit_once(':') {
        if let Ok(n) = p.trim().parse::<u32>() {
            return (sw.to_string(), n, String::new());
        }
    }
    (String::new(), 0, s.to_string())
}

fn state_name(s: i32) -> &'static str {
    match pb::PortHealthState::try_from(s).unwrap_or(pb::PortHealthState::Unspecified) {
        pb::PortHealthState::Ok => "ok",
        pb::PortHealthState::Warning => "warning",
        pb::PortHealthState::Isolated => "isolated",
        pb::PortHealthState::Unspecified => "unknown",
    }
}

/// A rate for people: 3 significant digits, no trailing zeros.
pub fn round(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn port_key(p: &pb::PortHealth) -> String {
    if p.end_port_guid != 0 {
        guid(p.end_port_guid)
    } else {
        format!("{}[{}]", guid(p.switch_guid), p.port)
    }
}

fn report_json(r: &pb::HealthReport) -> Value {
    let s = r.summary.unwrap_or_default();
    let ports: Vec<Value> = r
        .ports
        .iter()
        .map(|p| {
            let mut counters = Map::new();
            for c in &p.counters {
                counters.insert(
                    c.counter.clone(),
                    json!({"value": c.value, "rate": c.has_rate.then_some(c.rate), "saturated": c.saturated}),
                );
            }
            json!({
                "port": port_key(p), "name": p.name, "remote": p.remote, "state": state_name(p.state),
                "reason": p.reason, "max_error_rate": p.max_error_rate, "flaps": p.flaps,
                "read_error": p.read_error, "counters": counters,
            })
        })
        .collect();
    json!({
        "enabled": r.enabled, "driver": r.driver, "generation": r.generation, "policy": r.policy,
        "counters_note": r.counters_note, "polls": r.polls, "last_poll_unix_ms": r.last_poll_unix_ms,
        "interval_s": r.interval_s, "ports_total": r.ports_total,
        "summary": {
            "switches_up": s.switches_up, "switches_down": s.switches_down,
            "links_up": s.links_up, "links_down": s.links_down,
            "end_ports_up": s.end_ports_up, "end_ports_down": s.end_ports_down,
            "ports_read": s.ports_read, "ports_unreadable": s.ports_unreadable,
            "ports_with_errors": s.ports_with_errors, "warning_ports": s.warning_ports,
            "isolated_links": s.isolated_links, "flapping_ports": s.flapping_ports,
        },
        "isolated": r.isolated.iter().map(|i| json!({
            "link": format!("{}[{}]", guid(i.switch_guid), i.port), "port_seen": i.port_seen,
            "cause": i.cause, "value": i.value, "threshold": i.threshold, "reason": i.reason,
            "at_unix_ms": i.at_unix_ms,
        })).collect::<Vec<_>>(),
        "refused": r.refused,
        "ports": ports,
    })
}

/// The worst error counter of a port as `name rate/s` (or `-`).
fn worst_counter(p: &pb::PortHealth) -> String {
    p.counters
        .iter()
        .filter(|c| {
            c.has_rate
                && c.rate > 0.0
                && !matches!(
                    c.counter.as_str(),
                    "xmit_wait" | "xmit_data" | "rcv_data" | "xmit_packets" | "rcv_packets"
                )
        })
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
        .map_or_else(|| "-".to_string(), |c| format!("{} {}/s", c.counter, round(c.rate)))
}

fn print_note(r: &pb::HealthReport) {
    if !r.enabled {
        outln!("port health is disabled ([health] enabled = false)");
    }
    if !r.counters_note.is_empty() {
        outln!("note: {}", r.counters_note);
    }
    for x in &r.refused {
        outln!("NOT ISOLATED: {x}");
    }
}

/// Runs `fabricctl health`.
pub async fn run(c: &mut fabric_proto::Client, a: HealthArgs) -> Result<()> {
    match a.cmd {
        None => {
            let r = ask(c.get_health(pb::GetHealthRequest {
                all: a.all,
                limit: a.limit,
            }))
            .await?;
            if a.json {
                return print_json(&report_json(&r));
            }
            outln!(
                "generation {}, driver {}, {} polls every {} s; {}",
                r.generation,
                r.driver,
                r.polls,
                r.interval_s,
                r.policy
            );
            print_note(&r);
            if r.ports.is_empty() {
                outln!("every port is ok ({} ports known)", r.ports_total);
                return Ok(());
            }
            outln!(
                "{:<9}  {:<40}  {:<40}  {:>10}  {:<32}  {:>5}  REASON",
                "STATE",
                "PORT",
                "REMOTE",
                "MAX ERR/S",
                "WORST COUNTER",
                "FLAPS"
            );
            for p in &r.ports {
                let reason = if p.read_error.is_empty() {
                    p.reason.clone()
                } else {
                    format!("read failed: {}", p.read_error)
                };
                outln!(
                    "{:<9}  {:<40}  {:<40}  {:>10}  {:<32}  {:>5}  {}",
                    state_name(p.state),
                    p.name,
                    p.remote,
                    round(p.max_error_rate),
                    worst_counter(p),
                    p.flaps,
                    reason
                );
            }
            if (r.ports.len() as u32) < r.ports_total && !a.all {
                outln!(
                    "({} of {} ports shown; --all for every port)",
                    r.ports.len(),
                    r.ports_total
                );
            }
        }
        Some(HealthCmd::Report) => {
            let r = ask(c.get_health(pb::GetHealthRequest { all: false, limit: 0 })).await?;
            if a.json {
                return print_json(&report_json(&r));
            }
            let s = r.summary.unwrap_or_default();
            outln!(
                "fabric health report (generation {}, driver {})",
                r.generation,
                r.driver
            );
            outln!(
                "  switches           {:>6} up  {:>6} down",
                s.switches_up,
                s.switches_down
            );
            outln!(
                "  links              {:>6} up  {:>6} down (switch to switch; isolated count as down)",
                s.links_up,
                s.links_down
            );
            outln!(
                "  end ports          {:>6} up  {:>6} down",
                s.end_ports_up,
                s.end_ports_down
            );
            outln!(
                "  ports read         {:>6}     {:>6} unreadable",
                s.ports_read,
                s.ports_unreadable
            );
            outln!("  ports with errors  {:>6}", s.ports_with_errors);
            outln!("  warning ports      {:>6}", s.warning_ports);
            outln!("  isolated links     {:>6}", s.isolated_links);
            outln!("  flapping ports     {:>6}", s.flapping_ports);
            outln!("policy: {}", r.policy);
            print_note(&r);
            for i in &r.isolated {
                outln!(
                    "isolated {}[{}]: {} (seen on {}, at {} ms Unix)",
                    guid(i.switch_guid),
                    i.port,
                    i.reason,
                    i.port_seen,
                    i.at_unix_ms
                );
            }
            let worst: Vec<&pb::PortHealth> = r.ports.iter().take(10).collect();
            if !worst.is_empty() {
                outln!("worst ports:");
                for p in worst {
                    outln!(
                        "  {:<9} {:<40} {:>10}/s  {} flaps  {}",
                        state_name(p.state),
                        p.name,
                        round(p.max_error_rate),
                        p.flaps,
                        p.reason
                    );
                }
            }
        }
        Some(HealthCmd::Clear { port, all }) => {
            let req = match (all, port) {
                (true, _) => pb::ClearHealthRequest {
                    all: true,
                    ..Default::default()
                },
                (false, Some(p)) => {
                    let (switch, port, node) = split_port(&p);
                    pb::ClearHealthRequest {
                        all: false,
                        switch,
                        port,
                        node,
                    }
                }
                (false, None) => bail!("give a port (SWITCH:PORT or an end port) or --all"),
            };
            let r = ask(c.clear_health(req)).await?;
            if a.json {
                return print_json(&json!({ "cleared": r.cleared }));
            }
            for l in &r.cleared {
                outln!("{l}");
            }
        }
    }
    Ok(())
}

/// `fabricctl inject port-errors`: adds `--counter NAME=N` to one port's simulated counters.
pub async fn inject_port_errors(
    c: &mut fabric_proto::Client,
    switch: Option<String>,
    port: Option<u32>,
    node: Option<String>,
    counters: &[String],
    json_out: bool,
) -> Result<()> {
    if counters.is_empty() {
        bail!("port-errors needs at least one --counter NAME=COUNT (e.g. --counter symbol_errors=100)");
    }
    let mut map = std::collections::HashMap::new();
    for kv in counters {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--counter {kv:?}: expected NAME=COUNT (e.g. symbol_errors=100)");
        };
        let n: u64 = v
            .trim()
            .parse()
            .map_err(|e| anyhow::anyhow!("--counter {kv:?}: {v:?} is not a count: {e}"))?;
        map.insert(k.trim().to_string(), n);
    }
    let (switch, port, node) = match (switch, port, node) {
        (Some(s), Some(p), None) => (s, p, String::new()),
        (None, None, Some(n)) => (String::new(), 0, n),
        _ => bail!("port-errors needs --switch GUID|NAME --port N, or --node GUID|NAME"),
    };
    let r = ask(c.inject_port_errors(pb::InjectPortErrorsRequest {
        switch,
        port,
        node,
        counters: map.clone(),
    }))
    .await?;
    if json_out {
        return print_json(&json!({ "port": r.port, "counters": map }));
    }
    let mut added: Vec<String> = map.iter().map(|(k, v)| format!("{k} +{v}")).collect();
    added.sort();
    outln!("{}: {} (read at the next poll)", r.port, added.join(", "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_split_into_switch_port_or_end_port() {
        assert_eq!(
            split_port("PGFT L0 S(0,3):20"),
            ("PGFT L0 S(0,3)".into(), 20, String::new())
        );
        assert_eq!(
            split_port("0x0002c90000000001:5"),
            ("0x0002c90000000001".into(), 5, String::new())
        );
        assert_eq!(split_port("node-7"), (String::new(), 0, "node-7".into()));
        assert_eq!(round(8.024999999999999), "8.02");
    }
}
