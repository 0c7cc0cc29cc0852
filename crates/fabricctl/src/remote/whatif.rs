//! `fabricctl what-if`: maintenance planning against the running daemon (gRPC `WhatIf`).
//!
//! JSON contract (stable): `generation`, `events`, `end_ports_before`, `end_ports_after`,
//! `components`, `disconnected_pairs`, `valid`, `unreachable_pairs`, `deadlock_free`,
//! `lft_blocks`, `switches_rewritten`, `route_ms`, `compute_ms`, and `before` / `after` with
//! `mu_sp`, `mu_rp {median, q1, q39}`, `mu_rp_floor {median, p_above_median,
//! measured_p_above_median}`, `mu_a2a`.

use anyhow::Result;
use clap::Args;
use fabric_proto::v1 as pb;
use serde_json::{json, Value};

use super::output::{ask, print_json};
use super::render::rp_floor_json;
use crate::human::num;

/// `fabricctl what-if`.
#[derive(Args, Debug)]
pub struct WhatIfArgs {
    /// A cable to take down: SWITCH:PORT (switch GUID or name); repeatable.
    #[arg(long = "link", value_name = "SWITCH:PORT")]
    pub links: Vec<String>,
    /// A switch to take down (GUID or name); repeatable.
    #[arg(long = "switch", value_name = "SWITCH")]
    pub switches: Vec<String>,
    /// An end node to take down (end port GUID, node GUID or name); repeatable.
    #[arg(long = "node", value_name = "NODE")]
    pub nodes: Vec<String>,
    /// JSON output (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The changes of `a` as a request (names are resolved by the daemon).
fn request(a: &WhatIfArgs) -> Result<pb::WhatIfRequest> {
    let mut down = Vec::new();
    for l in &a.links {
        let Some((sw, port)) = l.rsplit_once(':') else {
            return Err(crate::exit::usage(format!("--link {l:?}: expected SWITCH:PORT")));
        };
        let port: u32 = port
            .parse()
            .map_err(|_| crate::exit::usage(format!("--link {l:?}: port {port:?} is not a number")))?;
        down.push(pb::WhatIfChange {
            kind: pb::FaultKind::Link as i32,
            switch: sw.to_string(),
            port,
            node: String::new(),
        });
    }
    for s in &a.switches {
        down.push(pb::WhatIfChange {
            kind: pb::FaultKind::Switch as i32,
            switch: s.clone(),
            port: 0,
            node: String::new(),
        });
    }
    for n in &a.nodes {
        down.push(pb::WhatIfChange {
            kind: pb::FaultKind::Node as i32,
            switch: String::new(),
            port: 0,
            node: n.clone(),
        });
    }
    if down.is_empty() {
        return Err(crate::exit::usage(
            "name what to take down: --link SWITCH:PORT, --switch SWITCH or --node NODE (repeatable)",
        ));
    }
    Ok(pb::WhatIfRequest { down })
}

fn summary_json(m: Option<pb::MetricsSummary>) -> Value {
    let m = m.unwrap_or_default();
    let rp = m.mu_rp.unwrap_or_default();
    json!({
        "mu_sp": m.mu_sp,
        "mu_rp": { "median": rp.median, "q1": rp.q1, "q39": rp.q39 },
        "mu_rp_floor": rp_floor_json(m.mu_rp_floor),
        "mu_a2a": m.mu_a2a,
    })
}

/// JSON of a plan (see the module documentation).
pub fn report_json(r: &pb::WhatIfReport) -> Value {
    json!({
        "generation": r.generation,
        "events": r.events,
        "end_ports_before": r.end_ports_before,
        "end_ports_after": r.end_ports_after,
        "components": r.components,
        "disconnected_pairs": r.disconnected_pairs,
        "valid": r.valid,
        "unreachable_pairs": r.unreachable_pairs,
        "deadlock_free": r.deadlock_free,
        "lft_blocks": r.lft_blocks,
        "switches_rewritten": r.switches_rewritten,
        "route_ms": r.route_ms,
        "compute_ms": r.compute_ms,
        "before": summary_json(r.before),
        "after": summary_json(r.after),
    })
}

/// Runs `fabricctl what-if`.
pub async fn run(c: &mut fabric_proto::Client, a: WhatIfArgs) -> Result<()> {
    let r = ask(c.what_if(request(&a)?)).await?;
    if a.json {
        return print_json(&report_json(&r));
    }
    outln!("plan against generation {}:", r.generation);
    for e in &r.events {
        outln!("  {e}");
    }
    let lost = r.end_ports_before.saturating_sub(r.end_ports_after);
    outln!(
        "end ports          {} -> {}{}",
        r.end_ports_before,
        r.end_ports_after,
        if lost > 0 {
            format!(" ({lost} lost)")
        } else {
            String::new()
        }
    );
    if r.components > 1 {
        outln!(
            "connectivity       SPLIT into {} pieces: {} pairs of end ports could no longer reach each other",
            r.components,
            r.disconnected_pairs
        );
    } else {
        outln!("connectivity       one fabric");
    }
    outln!(
        "routing            valid {} (unreachable pairs {}), deadlock-free {}",
        r.valid,
        r.unreachable_pairs,
        r.deadlock_free
    );
    outln!(
        "upload             {} LFT blocks on {} switches (routed in {} ms)",
        r.lft_blocks,
        r.switches_rewritten,
        num(r.route_ms)
    );
    let (b, f) = (r.before.unwrap_or_default(), r.after.unwrap_or_default());
    let (brp, frp) = (b.mu_rp.unwrap_or_default(), f.mu_rp.unwrap_or_default());
    outln!("                   {:>10}  {:>10}", "now", "planned");
    outln!("mu_sp              {:>10}  {:>10}", b.mu_sp, f.mu_sp);
    outln!("mu_rp median       {:>10}  {:>10}", num(brp.median), num(frp.median));
    outln!("mu_rp q39          {:>10}  {:>10}", num(brp.q39), num(frp.q39));
    if let (Some(bf), Some(ff)) = (b.mu_rp_floor, f.mu_rp_floor) {
        outln!("mu_rp floor median {:>10}  {:>10}", bf.median, ff.median);
    }
    outln!("mu_a2a             {:>10}  {:>10}", b.mu_a2a, f.mu_a2a);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(links: &[&str], switches: &[&str], nodes: &[&str]) -> WhatIfArgs {
        let v = |x: &[&str]| x.iter().map(std::string::ToString::to_string).collect();
        WhatIfArgs {
            links: v(links),
            switches: v(switches),
            nodes: v(nodes),
            json: false,
        }
    }

    #[test]
    fn request_lists_every_change_in_order_of_kind() {
        let r = request(&args(&["S-1:3", "spine:12"], &["0x10"], &["n1"])).unwrap();
        let got: Vec<(i32, &str, u32, &str)> = r
            .down
            .iter()
            .map(|c| (c.kind, c.switch.as_str(), c.port, c.node.as_str()))
            .collect();
        let (l, s, n) = (
            pb::FaultKind::Link as i32,
            pb::FaultKind::Switch as i32,
            pb::FaultKind::Node as i32,
        );
        assert_eq!(
            got,
            vec![
                (l, "S-1", 3, ""),
                (l, "spine", 12, ""),
                (s, "0x10", 0, ""),
                (n, "", 0, "n1")
            ]
        );
    }

    #[test]
    fn bad_changes_are_named() {
        let e = request(&args(&["S-1"], &[], &[])).unwrap_err().to_string();
        assert!(e.contains("\"S-1\"") && e.contains("SWITCH:PORT"), "{e}");
        let e = request(&args(&["S-1:x"], &[], &[])).unwrap_err().to_string();
        assert!(e.contains("\"x\" is not a number"), "{e}");
        let e = request(&args(&[], &[], &[])).unwrap_err().to_string();
        assert!(e.contains("--link"), "{e}");
    }

    #[test]
    fn report_json_has_the_contract_keys() {
        let v = report_json(&pb::WhatIfReport {
            components: 2,
            disconnected_pairs: 10,
            after: Some(pb::MetricsSummary {
                mu_sp: 3,
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(v["components"], 2);
        assert_eq!(v["disconnected_pairs"], 10);
        assert_eq!(v["after"]["mu_sp"], 3);
        assert!(v["before"]["mu_rp"]["median"].is_number());
    }
}
