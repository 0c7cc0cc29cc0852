//! `fabric-saquery bench`: K client threads, sharing the client's one agent, send single
//! PathRecord Get queries between random pairs of CA LIDs (or whole PathRecord tables) and
//! the latency of each is recorded. The LIDs come from the NodeRecord table; when the table
//! arrives cut to its first MAD (an SA behind the simulator shim, see
//! [`fabric_umad::client`]), CA LIDs are found by NodeRecord Gets instead.
//!
//! Under the shim every process talks to the simulator through one descriptor per class, so
//! the K threads share one agent (one I/O thread, TIDs kept apart); on a real HCA that is what
//! a multi-threaded client library does too. Clients with an agent each are processes:
//! `--processes P` runs P copies of the bench (optionally on other simulated nodes,
//! `--hosts`) and [`merge`]s what they print.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use fabric_sa::wire::{attr, status, METHOD_GET};
use fabric_umad::client::{SaClient, SaQuery};
use serde_json::{json, Value};

use super::templates::{self, size};

/// What `bench` measures.
#[derive(Clone, Copy, Debug)]
pub struct BenchOptions {
    pub queries: usize,
    pub clients: usize,
    pub pr_table: bool,
    /// Highest LID probed when the NodeRecord table is cut.
    pub max_probe_lid: u16,
    pub seed: u64,
    /// Also print every latency (µs), for a parent merging processes ([`merge`]).
    pub latencies: bool,
}

/// NodeRecord: LID @0, reserved @2, NodeInfo @4 (NodeType @6), NodeDescription @44.
fn is_ca(rec: &[u8]) -> bool {
    rec.get(6) == Some(&1)
}

fn lid_of(rec: &[u8]) -> u16 {
    u16::from_be_bytes([rec[0], rec[1]])
}

/// The CA LIDs the SA knows.
pub fn ca_lids(c: &SaClient, max_probe: u16) -> Result<Vec<u16>> {
    let a = c.query(templates::node_records(None))?;
    let mut lids: Vec<u16> = a
        .records()
        .into_iter()
        .filter(|r| r.len() >= size::NODE_RECORD && is_ca(r))
        .map(lid_of)
        .collect();
    if a.unsegmented {
        lids.clear();
        for l in 1..=max_probe {
            let a = c.query(templates::node_records(Some(l)))?;
            if a.status() == status::OK && a.records().first().is_some_and(|r| is_ca(r)) {
                lids.push(l);
            }
        }
    }
    lids.sort_unstable();
    lids.dedup();
    Ok(lids)
}

fn percentile(sorted: &[Duration], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_micros() as u64
}

/// Runs the bench; the JSON document of its results.
pub fn run(c: &SaClient, o: BenchOptions) -> Result<Value> {
    let lids = ca_lids(c, o.max_probe_lid)?;
    if lids.len() < 2 && !o.pr_table {
        bail!("the SA knows {} CA LID(s); a PathRecord bench needs two", lids.len());
    }
    let clients = o.clients.max(1);
    let per = o.queries.div_ceil(clients);
    let t0 = Instant::now();
    let results: Vec<(Vec<Duration>, u64, u64, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|k| {
                let lids = &lids;
                s.spawn(move || {
                    let mut x = o.seed ^ (k as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                    let mut next = move || {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x
                    };
                    let n = per.min(o.queries.saturating_sub(k * per));
                    let mut lat = Vec::with_capacity(n);
                    let (mut errors, mut records, mut cut) = (0u64, 0u64, 0u64);
                    for _ in 0..n {
                        let q = if o.pr_table {
                            templates::table(attr::PATH_RECORD, size::PATH_RECORD)
                        } else {
                            let a = lids[(next() % lids.len() as u64) as usize];
                            let mut b = lids[(next() % lids.len() as u64) as usize];
                            if a == b {
                                b = lids[(lids.iter().position(|&l| l == a).unwrap_or(0) + 1) % lids.len()];
                            }
                            SaQuery {
                                method: METHOD_GET,
                                ..templates::path_records(Some(a), Some(b), None, None, None)
                            }
                        };
                        let t = Instant::now();
                        match c.query(q) {
                            Ok(a) if a.status() == status::OK => {
                                lat.push(t.elapsed());
                                records += a.records().len() as u64;
                                cut += u64::from(a.unsegmented);
                            }
                            _ => errors += 1,
                        }
                    }
                    (lat, errors, records, cut)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut lat: Vec<Duration> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    lat.sort_unstable();
    let errors: u64 = results.iter().map(|r| r.1).sum();
    let records: u64 = results.iter().map(|r| r.2).sum();
    let cut: u64 = results.iter().map(|r| r.3).sum();
    let done = lat.len() as u64 + errors;
    Ok(json!({
        "kind": if o.pr_table { "pr-table" } else { "pr" },
        "clients": clients,
        "ca_lids": lids.len(),
        "queries": done,
        "answered": lat.len(),
        "errors": errors,
        "records": records,
        // Tables that arrived as their first MAD only (an SA behind the simulator shim).
        "unsegmented_answers": cut,
        "seconds": secs,
        "queries_per_s": if secs > 0.0 { done as f64 / secs } else { 0.0 },
        "p50_us": percentile(&lat, 0.50),
        "p99_us": percentile(&lat, 0.99),
        "latencies_us": if o.latencies {
            json!(lat.iter().map(|d| d.as_micros() as u64).collect::<Vec<_>>())
        } else {
            Value::Null
        },
        "client": {
            "sent": c.stats().sent,
            "retries": c.stats().retries,
            "acks_sent": c.stats().acks_sent,
        },
    }))
}

/// Merges the results of bench processes run at the same time (each printed with
/// `latencies`): queries and errors summed, the rate as the sum of each process' rate (they
/// overlap), percentiles over every latency, and the wall time of the whole run.
pub fn merge(children: &[Value], wall: Duration) -> Value {
    let sum = |k: &str| children.iter().filter_map(|c| c[k].as_u64()).sum::<u64>();
    let mut lat: Vec<Duration> = children
        .iter()
        .filter_map(|c| c["latencies_us"].as_array())
        .flatten()
        .filter_map(Value::as_u64)
        .map(Duration::from_micros)
        .collect();
    lat.sort_unstable();
    let rate: f64 = children.iter().filter_map(|c| c["queries_per_s"].as_f64()).sum();
    json!({
        "kind": children.first().map_or(Value::Null, |c| c["kind"].clone()),
        "processes": children.len(),
        "clients_per_process": children.first().map_or(Value::Null, |c| c["clients"].clone()),
        "queries": sum("queries"),
        "answered": sum("answered"),
        "errors": sum("errors"),
        "records": sum("records"),
        "unsegmented_answers": sum("unsegmented_answers"),
        "queries_per_s": rate,
        "wall_seconds": wall.as_secs_f64(),
        "p50_us": percentile(&lat, 0.50),
        "p99_us": percentile(&lat, 0.99),
    })
}
