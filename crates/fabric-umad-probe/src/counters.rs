//! `--counters`: the counters of every switch port and end port of the discovered fabric,
//! read through [`SouthboundDriver::read_port_counters`] (the driver's PerfMgt lane), printed
//! as one JSON line `{"counters": {"<port>": {...}}, "errors": {"<port>": "..."}, "ms": ...}`
//! where `<port>` is `0x<switch GUID>[<port>]` or `0x<end-port GUID>` and each reading maps
//! the counter names of [`Counter::name`] to their values. A reading is printed at once, then
//! again for every line read on stdin, until stdin closes.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::time::Instant;

use anyhow::Result;
use fabric_southbound::{Counter, CounterPort, SouthboundDriver};
use fabric_topology::Fabric;
use fabric_umad::UmadDriver;
use serde_json::{json, Value};

/// Every external port of every switch, then every end port.
pub fn all_ports(fabric: &Fabric) -> Vec<CounterPort> {
    let mut ports: Vec<CounterPort> = fabric
        .switches()
        .iter()
        .flat_map(|s| {
            s.external_ports()
                .map(move |(port, _)| CounterPort::Switch { switch: s.guid, port })
        })
        .collect();
    ports.extend(fabric.end_ports().iter().map(|e| CounterPort::EndPort(e.port_guid)));
    ports
}

/// One reading of `ports` as the JSON line described above.
pub async fn reading(drv: &UmadDriver, ports: &[CounterPort]) -> Result<Value> {
    let t = Instant::now();
    let got = drv.read_port_counters(ports).await?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let mut counters = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for r in got {
        match r.counters {
            Ok(c) => {
                let m: BTreeMap<&str, u64> = Counter::ALL.iter().map(|&k| (k.name(), c.get(k))).collect();
                counters.insert(r.port.to_string(), m);
            }
            Err(e) => {
                errors.insert(r.port.to_string(), e.to_string());
            }
        }
    }
    let st = drv.stats();
    Ok(json!({
        "counters": counters,
        "errors": errors,
        "ms": ms,
        "perf_sent": st.perf_sent,
        "perf_retries": st.perf_retries,
        "perf_failures": st.perf_failures,
    }))
}

/// Prints a reading now and one per stdin line until stdin closes.
pub async fn run(drv: &UmadDriver, fabric: &Fabric) -> Result<()> {
    let ports = all_ports(fabric);
    println!("{}", reading(drv, &ports).await?);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for _ in std::io::stdin().lock().lines().map_while(std::result::Result::ok) {
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    while rx.recv().await.is_some() {
        println!("{}", reading(drv, &ports).await?);
    }
    Ok(())
}
