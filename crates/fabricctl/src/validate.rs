//! `fabricctl validate --expected FILE|NOTATION [--actual FILE] [--json]`: compares the cabling of
//! a fabric with the expected one (a topology file, or a generator notation such as
//! `SLIMFLY(5;4)` generated on the spot: the Slim Fly paper's §3.4 check against the generated
//! port-to-port descriptions) (`fabric_topology::validate::compare`) and lists missing, extra
//! and miswired cables, links that are down and missing/extra switches, naming switches and
//! ports. Without `--actual` the live topology of the running daemon (`GetTopology`) is the
//! actual fabric. Exit code 0 = clean, 1 = differences; errors have the codes of [`crate::exit`].

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use clap::Args;
use fabric_proto::v1 as pb;
use fabric_topology::validate::{compare, Cable, CablingReport, Endpoint, NodeRef};
use fabric_topology::{ibnet, Fabric, FabricBuilder, FabricEvent, NodeType, PortNum};
use serde_json::{json, Value};

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Expected cabling: an ibnetdiscover / ibsim topology file, or a generator notation
    /// (`SLIMFLY(5;4)`, `DRAGONFLY(4,2,2)`, `HYPERX(4,4;2)`, `PGFT(2;4,4;1,4;1,1)`, ...; an
    /// existing file of that name wins).
    #[arg(long)]
    expected: String,
    /// Actual cabling as a topology file; default: the live topology of the running daemon.
    #[arg(long)]
    actual: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

fn read_topology(path: &Path) -> Result<Fabric> {
    let parsed = ibnet::read_file(path).with_context(|| format!("cannot read the topology {}", path.display()))?;
    for w in &parsed.warnings {
        eprintln!("fabricctl: {}: {w}", path.display());
    }
    Ok(parsed.fabric)
}

fn port(p: u32, what: &str, guid: u64) -> Result<PortNum> {
    PortNum::try_from(p).map_err(|_| anyhow!("{what} 0x{guid:016x}: port {p} is out of range"))
}

/// Rebuilds a [`Fabric`] from the daemon's `GetTopology` answer: every cabled port, links that
/// are physically down (not those only excluded by a virtual fault) and dead switches.
pub fn fabric_from_topology(t: &pb::Topology) -> Result<Fabric> {
    let mut b = FabricBuilder::new();
    for s in &t.switches {
        let nports = port(s.nports, "switch", s.guid)?;
        b.add_switch(s.guid, s.name.clone(), nports)
            .with_context(|| format!("switch 0x{:016x}", s.guid))?;
    }
    for e in &t.end_ports {
        let pn = port(e.port_num, "end port", e.guid)?;
        let id = b
            .add_end_port(e.guid, e.node_guid, e.name.clone(), pn, pn.max(1), NodeType::Compute)
            .with_context(|| format!("end port 0x{:016x}", e.guid))?;
        if e.switch_guid != 0 {
            let sw = b.switch_by_guid(e.switch_guid).ok_or_else(|| {
                anyhow!(
                    "end port 0x{:016x} is on unknown switch 0x{:016x}",
                    e.guid,
                    e.switch_guid
                )
            })?;
            b.connect_end_port(id, sw, port(e.switch_port, "switch", e.switch_guid)?)
                .with_context(|| format!("end port 0x{:016x}", e.guid))?;
        }
    }
    let mut events = Vec::new();
    for s in &t.switches {
        let a = b
            .switch_by_guid(s.guid)
            .ok_or_else(|| anyhow!("switch 0x{:016x} vanished", s.guid))?;
        for p in &s.ports {
            let pa = port(p.port, "switch", s.guid)?;
            if p.state == pb::PortState::Down as i32 && !p.excluded && p.remote_kind != pb::RemoteKind::None as i32 {
                events.push(FabricEvent::LinkDown {
                    switch: s.guid,
                    port: pa,
                });
            }
            if p.remote_kind != pb::RemoteKind::Switch as i32 {
                continue;
            }
            let other = b.switch_by_guid(p.remote_guid).ok_or_else(|| {
                anyhow!(
                    "switch 0x{:016x} port {} goes to unknown switch 0x{:016x}",
                    s.guid,
                    p.port,
                    p.remote_guid
                )
            })?;
            // Each cable is listed from both ends: connect it once, from its lower end.
            if (s.guid, p.port) > (p.remote_guid, p.remote_port) {
                continue;
            }
            b.connect_switches(a, pa, other, port(p.remote_port, "switch", p.remote_guid)?)
                .with_context(|| format!("switch 0x{:016x} port {}", s.guid, p.port))?;
        }
        if !s.up {
            events.push(FabricEvent::SwitchDown(s.guid));
        }
    }
    let f = b.build();
    if events.is_empty() {
        Ok(f)
    } else {
        f.apply(&events).context("link and switch states of the live topology")
    }
}

fn node_json(n: &NodeRef) -> Value {
    match n {
        NodeRef::Switch { guid, name } => json!({"kind": "switch", "guid": format!("0x{guid:016x}"), "name": name}),
        NodeRef::EndPort { guid, name } => {
            json!({"kind": "end_port", "guid": format!("0x{guid:016x}"), "name": name})
        }
    }
}

fn endpoint_json(e: &Endpoint) -> Value {
    let mut v = node_json(&e.node);
    v["port"] = json!(e.port);
    v
}

fn cable_json(c: &Cable) -> Value {
    json!({"a": endpoint_json(&c.a), "b": endpoint_json(&c.b)})
}

/// The report as JSON: `clean` and one array per kind of difference.
pub fn report_json(r: &CablingReport) -> Value {
    json!({
        "clean": r.is_clean(),
        "missing": r.missing.iter().map(cable_json).collect::<Vec<_>>(),
        "extra": r.extra.iter().map(cable_json).collect::<Vec<_>>(),
        "miswired": r.miswired.iter().map(|m| json!({
            "at": endpoint_json(&m.at),
            "expected": m.expected.as_ref().map(endpoint_json),
            "actual": endpoint_json(&m.actual),
        })).collect::<Vec<_>>(),
        "down": r.down.iter().map(cable_json).collect::<Vec<_>>(),
        "missing_switches": r.missing_switches.iter().map(node_json).collect::<Vec<_>>(),
        "extra_switches": r.extra_switches.iter().map(node_json).collect::<Vec<_>>(),
    })
}

/// The report as text lines (`missing: A port 3 <-> B port 7`, ...).
pub fn report_text(r: &CablingReport) -> String {
    let mut out = String::new();
    for c in &r.missing {
        out += &format!("missing: {c}\n");
    }
    for c in &r.extra {
        out += &format!("extra: {c}\n");
    }
    for m in &r.miswired {
        match &m.expected {
            Some(e) => out += &format!("miswired: {} goes to {} (expected {e})\n", m.at, m.actual),
            None => out += &format!("miswired: {} goes to {} (expected uncabled)\n", m.at, m.actual),
        }
    }
    for c in &r.down {
        out += &format!("down: {c}\n");
    }
    for n in &r.missing_switches {
        out += &format!("missing switch: {n}\n");
    }
    for n in &r.extra_switches {
        out += &format!("extra switch: {n}\n");
    }
    out += &format!(
        "{} missing, {} extra, {} miswired, {} down, {} missing switches, {} extra switches: {}\n",
        r.missing.len(),
        r.extra.len(),
        r.miswired.len(),
        r.down.len(),
        r.missing_switches.len(),
        r.extra_switches.len(),
        if r.is_clean() { "clean" } else { "NOT clean" }
    );
    out
}

async fn live_fabric(target: &crate::remote::Target) -> Result<Fabric> {
    let mut c = target.connect().await?;
    let t = c
        .get_topology(pb::GetTopologyRequest {})
        .await
        .map_err(|s| anyhow::Error::new(crate::exit::DaemonError(s)).context("GetTopology"))?
        .into_inner();
    fabric_from_topology(&t)
}

/// The expected fabric: the file `arg` if it exists or `arg` has no `(`, else the fabric of the
/// generator notation `arg`.
fn read_expected(arg: &str) -> Result<Fabric> {
    let path = Path::new(arg);
    if path.exists() || !arg.contains('(') {
        return read_topology(path);
    }
    fabric_topology::gen::generate_str(arg, None)
        .with_context(|| format!("--expected {arg}: no such file, and not a valid generator notation"))
}

/// Runs the subcommand; `Ok(false)` = the cabling differs (exit code 1).
pub fn run(a: ValidateArgs, target: &crate::remote::Target) -> Result<bool> {
    let expected = read_expected(&a.expected)?;
    let actual = match &a.actual {
        Some(p) => read_topology(p)?,
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?
            .block_on(live_fabric(target))?,
    };
    let report = compare(&expected, &actual);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report_json(&report))?);
    } else {
        print!("{}", report_text(&report));
    }
    Ok(report.is_clean())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_topology::gen;

    /// A live topology as the daemon would send it, built from a fabric.
    fn topology_of(f: &Fabric) -> pb::Topology {
        let mut t = pb::Topology::default();
        for s in f.switches() {
            let mut ports = Vec::new();
            for p in 1..=s.nports {
                let (kind, rg, rp) = match s.ports[p as usize].remote {
                    fabric_topology::Remote::None => continue,
                    fabric_topology::Remote::Switch { sw, port } => {
                        (pb::RemoteKind::Switch, f.switch(sw).guid, u32::from(port))
                    }
                    fabric_topology::Remote::EndPort(e) => (pb::RemoteKind::EndPort, f.end_port(e).port_guid, 1),
                };
                ports.push(pb::SwitchPort {
                    port: u32::from(p),
                    remote_kind: kind as i32,
                    remote_guid: rg,
                    remote_port: rp,
                    state: pb::PortState::Up as i32,
                    ..Default::default()
                });
            }
            t.switches.push(pb::SwitchInfo {
                guid: s.guid,
                name: s.desc.clone(),
                up: s.up,
                nports: u32::from(s.nports),
                ports,
                ..Default::default()
            });
        }
        for e in f.end_ports() {
            let (sg, sp) = e.attach.map_or((0, 0), |(s, p)| (f.switch(s).guid, u32::from(p)));
            t.end_ports.push(pb::EndPortInfo {
                guid: e.port_guid,
                node_guid: e.node_guid,
                name: e.desc.clone(),
                port_num: u32::from(e.port_num),
                switch_guid: sg,
                switch_port: sp,
                up: e.up,
                ..Default::default()
            });
        }
        t
    }

    #[test]
    fn live_topology_round_trips_and_states_are_seen() {
        let f = gen::generate_str("PGFT(2;4,4;1,4;1,1)", None).unwrap();
        let mut t = topology_of(&f);
        let back = fabric_from_topology(&t).unwrap();
        assert!(compare(&f, &back).is_clean(), "{}", report_text(&compare(&f, &back)));
        // One uplink physically down (both ends), one only excluded by a virtual fault.
        let leaf = &mut t.switches[0];
        let up = leaf
            .ports
            .iter()
            .position(|p| p.remote_kind == pb::RemoteKind::Switch as i32)
            .unwrap();
        leaf.ports[up].state = pb::PortState::Down as i32;
        let excl = leaf
            .ports
            .iter()
            .rposition(|p| p.remote_kind == pb::RemoteKind::Switch as i32)
            .unwrap();
        assert_ne!(up, excl);
        leaf.ports[excl].state = pb::PortState::Down as i32;
        leaf.ports[excl].excluded = true;
        let r = compare(&f, &fabric_from_topology(&t).unwrap());
        assert_eq!(r.down.len(), 1, "{}", report_text(&r));
        assert!(!r.is_clean());
        let j = report_json(&r);
        assert_eq!(j["clean"], false);
        assert_eq!(j["down"].as_array().unwrap().len(), 1);
        // A cable to an unknown switch is an error, not a panic.
        t.switches[0].ports[up].remote_guid = 0xdead;
        let e = fabric_from_topology(&t).unwrap_err();
        assert!(format!("{e:#}").contains("unknown switch 0x000000000000dead"), "{e:#}");
    }
}
