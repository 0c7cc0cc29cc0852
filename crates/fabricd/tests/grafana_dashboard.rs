//! `deploy/grafana/fabricd.json`: the Grafana dashboard is checked structurally (no Grafana can
//! be installed here: no Debian package, no container registry) and every metric its queries
//! use must be one a running fabricd exports on `/metrics` (or a port-health metric of
//! [`HEALTH_METRICS`], exported by the port-health monitor).

mod common;

use std::collections::{BTreeSet, HashSet};

use common::*;
use serde_json::Value;

/// Metric families a panel may query that a daemon on the mock driver may not have exported
/// yet when this test scrapes it: none (the port-health monitor publishes its gauges at start).
const HEALTH_METRICS: &[&str] = &[];

/// Labelled families that have no sample (so no `# TYPE` line) until their first event, which
/// this test does not cause (a subscriber missing a deadline): each must be registered
/// in `crates/fabricd/src/telemetry.rs` (checked there).
const EVENT_FAMILIES: &[&str] = &["update_missed_acks"];

fn dashboard() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/fabricd.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON: {e}"))
}

/// The `fabricd_*` identifiers of a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_string = false;
    for ch in expr.chars().chain(std::iter::once(' ')) {
        if ch == '"' {
            in_string = !in_string;
        }
        if !in_string && (ch.is_ascii_alphanumeric() || ch == '_' || ch == ':') {
            cur.push(ch);
        } else {
            if cur.starts_with("fabricd_") {
                out.push(cur.clone());
            }
            cur.clear();
        }
    }
    out
}

/// Every panel, rows' nested panels included.
fn all_panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels is an array") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

#[test]
fn dashboard_json_is_well_formed() {
    let d = dashboard();
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 30), "schemaVersion");
    assert_eq!(d["uid"], "fabricd");
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(
        d["__inputs"].as_array().is_some_and(|i| i
            .iter()
            .any(|x| x["name"] == "DS_PROMETHEUS" && x["pluginId"] == "prometheus")),
        "a Prometheus input for import"
    );
    assert!(
        d["templating"]["list"].as_array().is_some_and(|l| l
            .iter()
            .any(|v| v["name"] == "DS_PROMETHEUS" && v["type"] == "datasource")),
        "a datasource variable for provisioning"
    );
    let mut ids = HashSet::new();
    let mut rects: Vec<(String, [u64; 4])> = Vec::new();
    let panels = all_panels(&d);
    assert!(panels.len() >= 20, "{} panels", panels.len());
    for p in panels {
        let title = p["title"]
            .as_str()
            .unwrap_or_else(|| panic!("panel without title: {p}"));
        let id = p["id"].as_u64().unwrap_or_else(|| panic!("{title}: no numeric id"));
        assert!(ids.insert(id), "{title}: id {id} used twice");
        let g = &p["gridPos"];
        let [h, w, x, y] =
            ["h", "w", "x", "y"].map(|k| g[k].as_u64().unwrap_or_else(|| panic!("{title}: gridPos.{k}")));
        assert!(
            h >= 1 && w >= 1 && x + w <= 24,
            "{title}: gridPos {g} outside the 24 columns"
        );
        for (other, [oh, ow, ox, oy]) in &rects {
            let overlap = x < ox + ow && *ox < x + w && y < oy + oh && *oy < y + h;
            assert!(!overlap, "{title} overlaps {other}");
        }
        rects.push((title.to_string(), [h, w, x, y]));
        if p["type"] == "row" {
            continue;
        }
        assert!(p["type"].as_str().is_some_and(|t| !t.is_empty()), "{title}: type");
        assert_eq!(p["datasource"]["type"], "prometheus", "{title}: datasource");
        assert!(p["datasource"]["uid"].as_str().is_some(), "{title}: datasource uid");
        let targets = p["targets"].as_array().unwrap_or_else(|| panic!("{title}: no targets"));
        assert!(!targets.is_empty(), "{title}: no targets");
        let mut refs = HashSet::new();
        for t in targets {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: target without expr"));
            assert!(!metric_names(expr).is_empty(), "{title}: {expr} uses no fabricd metric");
            let r = t["refId"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: target without refId"));
            assert!(refs.insert(r.to_string()), "{title}: refId {r} twice");
        }
    }
}

#[test]
fn dashboard_queries_only_exported_metrics() {
    let dir = test_dir("grafana");
    let prom = free_port();
    let mut opts = Opts::new("PGFT(2;4,4;1,2;1,1)");
    opts.extra = format!("[prometheus]\nlisten = \"127.0.0.1:{prom}\"\n\n[health]\ninterval_s = 1\n");
    let d = Daemon::spawn(&dir, &opts, &[]);
    run_with_deadline(120, async move {
        let mut c = d.ready().await;
        // The labelled families get their first samples: a topology change, SA answers.
        let links = switch_links(&topology(&mut c).await);
        c.inject_fault(link_req(links[0].0, links[0].1, false, false, true))
            .await
            .expect("inject");
        let t = std::time::Instant::now();
        while c
            .sa_query(fabric_proto::v1::SaQueryRequest {
                method: fabric_proto::v1::SaMethod::GetTable as i32,
                attribute: "NodeRecord".into(),
                ..Default::default()
            })
            .await
            .is_err()
        {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(30),
                "the SA never answered"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // Port errors on one port (the mock's drill), again at every scrape: the per-port
        // error-rate family gets a sample once a health poll saw them rise.
        let t = std::time::Instant::now();
        let text = loop {
            c.inject_port_errors(fabric_proto::v1::InjectPortErrorsRequest {
                switch: format!("{:#018x}", links[1].0),
                port: links[1].1,
                counters: [("symbol_errors".to_string(), 500u64)].into(),
                ..Default::default()
            })
            .await
            .expect("inject port errors");
            let text = http_get(prom, "/metrics");
            assert!(text.starts_with("HTTP/1.1 200"), "{text:.300}");
            if text.contains("fabricd_health_port_error_rate{") {
                // The live dashboard colours the same port from the same reading.
                let page = http_get(prom, "/api/fabric");
                let body = page.split("\r\n\r\n").nth(1).unwrap_or_default();
                let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("/api/fabric: {e}: {page:.300}"));
                let erroring: Vec<&Value> = v["levels"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|l| l["switches"].as_array().into_iter().flatten())
                    .flat_map(|s| s["ports"].as_array().into_iter().flatten())
                    .filter(|p| p["error_rate"].as_f64().is_some_and(|r| r > 0.0))
                    .collect();
                assert!(
                    !erroring.is_empty(),
                    "no port with an error rate on the dashboard: {body:.2000}"
                );
                break text;
            }
            assert!(
                t.elapsed() < std::time::Duration::from_secs(30),
                "the injected port errors never showed as a rate: {text}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        // Sample names from the `# TYPE` lines (families without samples yet included).
        let mut exported = BTreeSet::new();
        for l in text.lines() {
            let Some(rest) = l.strip_prefix("# TYPE ") else {
                continue;
            };
            let mut it = rest.split_whitespace();
            let (Some(name), Some(kind)) = (it.next(), it.next()) else {
                continue;
            };
            match kind {
                "counter" => {
                    exported.insert(format!("{name}_total"));
                }
                "histogram" => {
                    for s in ["_bucket", "_sum", "_count"] {
                        exported.insert(format!("{name}{s}"));
                    }
                }
                _ => {
                    exported.insert(name.to_string());
                }
            }
        }
        assert!(exported.contains("fabricd_generation"), "{exported:?}");
        let source = include_str!("../src/telemetry.rs");
        for f in EVENT_FAMILIES {
            assert!(
                source.contains(&format!("r.register(\n            \"{f}\",")),
                "{f} is not registered in telemetry.rs"
            );
            let name = format!("fabricd_{f}");
            assert!(
                !exported.contains(&format!("{name}_total")) && !exported.contains(&format!("{name}_count")),
                "{name} is scraped now: drop it from EVENT_FAMILIES"
            );
            if f.ends_with("_seconds") {
                for s in ["_bucket", "_sum", "_count"] {
                    exported.insert(format!("{name}{s}"));
                }
            } else {
                exported.insert(format!("{name}_total"));
            }
        }
        let dash = dashboard();
        let mut used = BTreeSet::new();
        let mut unknown = Vec::new();
        let mut exprs: Vec<String> = all_panels(&dash)
            .iter()
            .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t["expr"].as_str().map(String::from))
            .collect();
        exprs.extend(
            dash["annotations"]["list"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["expr"].as_str().map(String::from)),
        );
        for expr in &exprs {
            for m in metric_names(expr) {
                if !exported.contains(&m) && !HEALTH_METRICS.contains(&m.as_str()) {
                    unknown.push(format!("{m} (in {expr})"));
                }
                used.insert(m);
            }
        }
        assert!(
            unknown.is_empty(),
            "metrics the daemon does not export:\n{}",
            unknown.join("\n")
        );
        // Every family the daemon exports is on the dashboard, but for the cumulative SA
        // snapshot counter and histogram parts the panels do not need.
        for m in &exported {
            let base = m
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            let covered = used.iter().any(|u| u.starts_with(base));
            assert!(covered, "{m} is exported but on no panel");
        }
    });
}
