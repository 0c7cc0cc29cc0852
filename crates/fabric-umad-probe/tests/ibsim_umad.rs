//! The `umad` driver against the real simulator: each test starts its own `ibsim` (unique
//! socket name, private directory, console on a pipe held open), runs `fabric-umad-probe`
//! under the umad2sim preload shim (discover → rank → LIDs → route → configure → LFT upload,
//! JSON on stdout), then checks the switches with `ibroute` / `ibtracert` / `smpquery` run under
//! the same simulator. Every wait has a deadline; the simulator is killed on drop.
//!
//! Needs `ibsim` (Debian `ibsim-utils`) and `infiniband-diags`; CI installs them, so a missing
//! tool fails the test.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fabric_ibsim_harness::{parse_ibroute, Ibsim, NET_2SW2PATH4HCA};
use fabric_topology::gen::generate_str;
use fabric_topology::ibnet::write;
use fabric_topology::{Fabric, Remote};
use serde_json::Value;

const PROBE: &str = env!("CARGO_BIN_EXE_fabric-umad-probe");

/// Starts the probe on `sim`; its stdout lines arrive on the returned channel.
fn probe(sim: &Ibsim, args: &[&str]) -> Probe {
    let mut child = sim
        .command(Path::new(PROBE))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn probe");
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("stdout");
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let err = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx2.send(format!("stderr: {l}"));
        }
    });
    Probe { child, lines: rx }
}

struct Probe {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Probe {
    /// Next JSON line within `d` (stderr lines are collected into the panic message).
    fn next_json(&mut self, d: Duration) -> Value {
        let end = Instant::now() + d;
        let mut err = String::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with("stderr: ") => err.push_str(&l),
                Ok(l) => return serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}")),
                Err(_) => panic!("probe printed nothing within {d:?}; stderr: {err}"),
            }
        }
    }
}

fn net_of(spec: &str) -> (Fabric, String) {
    let f = generate_str(spec, None).expect("generate");
    let t = write(&f);
    (f, t)
}

fn host_of(f: &Fabric) -> String {
    format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid)
}

/// `ibroute` of every switch shows exactly the LFT the probe wrote.
fn check_ibroute(sim: &Ibsim, out: &Value) {
    let lfts = out["lfts"].as_object().expect("lfts");
    let lids = out["switch_lids"].as_object().expect("switch_lids");
    assert!(!lfts.is_empty());
    for (guid, row) in lfts {
        let lid = lids[guid].as_u64().expect("lid");
        // By directed route: LID routing to a switch needs a route the engine may not provide on
        // a fabric that is not a fat-tree (the Debian example net).
        let path = out["switch_paths"][guid].as_str().expect("path");
        let (ok, text) = sim.tool("ibroute", &["-D", path]);
        assert!(ok, "ibroute {lid} failed:\n{text}");
        assert!(text.contains(&guid[2..]), "ibroute {lid} is not switch {guid}:\n{text}");
        let shown = parse_ibroute(&text);
        let want: BTreeMap<u64, u64> = row
            .as_array()
            .expect("row")
            .iter()
            .enumerate()
            .filter_map(|(l, p)| p.as_u64().filter(|&p| p != 255).map(|p| (l as u64, p)))
            .collect();
        assert_eq!(
            shown, want,
            "switch {guid} (LID {lid}): ibroute differs from what was written"
        );
    }
}

/// `ibtracert` from the SM's port to pseudo-random destinations, base and escape LIDs.
fn check_tracert(sim: &Ibsim, out: &Value, pairs: usize) {
    let eps = out["end_port_lids"].as_object().expect("end ports");
    let list: Vec<(String, u64, Option<u64>)> = eps
        .iter()
        .map(|(g, v)| (g.clone(), v[0].as_u64().expect("base"), v[1].as_u64()))
        .collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..pairs {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let a = &list[(x >> 33) as usize % list.len()];
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let b = &list[(x >> 33) as usize % list.len()];
        if a.0 == b.0 {
            continue;
        }
        for (sl, dl) in [(a.1, b.1), (a.2.unwrap_or(a.1), b.2.unwrap_or(b.1))] {
            let (ok, text) = sim.tool("ibtracert", &[&sl.to_string(), &dl.to_string()]);
            assert!(ok, "ibtracert {sl} {dl} failed:\n{text}");
            let dest_node = u64::from_str_radix(&b.0[2..], 16).expect("guid") - 1;
            assert!(
                text.lines().last().unwrap_or("").contains(&format!("{dest_node:016x}")),
                "ibtracert {sl} {dl} does not end at {}:\n{text}",
                b.0
            );
        }
    }
}

#[test]
fn generated_fat_tree_comes_up_and_switches_hold_the_written_lfts() {
    let (f, net) = net_of("PGFT(2;8,16;1,8;1,1)");
    let sim = Ibsim::start_temp("pgft", &net, host_of(&f));
    let mut p = probe(&sim, &[]);
    let out = p.next_json(Duration::from_secs(60));
    assert_eq!(out["switches"].as_u64(), Some(f.num_switches() as u64), "{out}");
    assert_eq!(out["end_ports"].as_u64(), Some(f.num_end_ports() as u64));
    assert_eq!(out["links"].as_u64(), Some(f.count_links().1 as u64));
    assert_eq!(out["failures"].as_u64(), Some(0));
    // The second upload of the same tables sends nothing.
    assert!(out["rewrite_ms"].as_f64().expect("ms") < out["lft_ms"].as_f64().expect("ms") + 1.0);
    eprintln!(
        "PGFT(2;8,16;1,8;1,1): discover {} ms, LIDs+activation {} ms, {} LFT blocks in {} ms, {} SMPs",
        out["discover_ms"], out["lids_ms"], out["blocks"], out["lft_ms"], out["smps"]
    );
    drop(p);
    check_ibroute(&sim, &out);
    check_tracert(&sim, &out, 12);
    let (ok, text) = sim.tool("smpquery", &["portinfo", &out["sm_lid"].to_string(), "1"]);
    assert!(ok && text.contains("LinkState:.......................Active"), "{text}");
    assert!(text.contains("LMC:.............................1"), "{text}");
}

#[test]
fn ibsim_example_net_comes_up() {
    let sim = Ibsim::start_temp("example", NET_2SW2PATH4HCA, "Hca1".to_string());
    let mut p = probe(&sim, &[]);
    let out = p.next_json(Duration::from_secs(30));
    assert_eq!(out["switches"].as_u64(), Some(2));
    assert_eq!(out["end_ports"].as_u64(), Some(4));
    assert_eq!(out["links"].as_u64(), Some(2));
    drop(p);
    check_ibroute(&sim, &out);
}

/// An inter-switch cable of the fabric (leaf GUID, leaf port).
fn some_uplink(f: &Fabric) -> (u64, u8) {
    for s in f.switches() {
        for (pn, p) in s.external_ports() {
            if let Remote::Switch { .. } = p.remote {
                return (s.guid, pn);
            }
        }
    }
    panic!("no inter-switch link");
}

#[test]
fn unlink_and_relink_are_detected_and_ports_reactivated() {
    let (f, net) = net_of("PGFT(2;4,4;1,2;1,1)");
    let mut sim = Ibsim::start_temp("link", &net, host_of(&f));
    let mut p = probe(&sim, &["--watch", "40", "--sweep-ms", "100"]);
    let out = p.next_json(Duration::from_secs(30));
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    let ready = p.next_json(Duration::from_secs(5));
    assert_eq!(ready["ready"], Value::Bool(true));
    let (sw, port) = some_uplink(&f);
    sim.console(&format!("Unlink \"S-{sw:016x}\"[{port}]"));
    let ev = p.next_json(Duration::from_secs(10));
    let s = ev["event"].as_str().expect("event").to_string();
    assert!(s.starts_with("link-down"), "{ev}");
    sim.console(&format!("ReLink \"S-{sw:016x}\"[{port}]"));
    let ev = p.next_json(Duration::from_secs(10));
    assert!(ev["event"].as_str().expect("event").starts_with("link-up"), "{ev}");
    // Give the activation a moment (it happens before the event is emitted).
    let lid = out["switch_lids"][format!("0x{sw:016x}")].as_u64().expect("lid");
    let (ok, text) = sim.tool("smpquery", &["portinfo", &lid.to_string(), &port.to_string()]);
    assert!(ok && text.contains("LinkState:.......................Active"), "{text}");
}

#[test]
fn error_injection_is_survived_through_retries() {
    let (f, net) = net_of("PGFT(2;4,4;1,2;1,1)");
    let mut sim = Ibsim::start_temp("err", &net, host_of(&f));
    // ibsim drops about one packet in 3 on the leaf port the SM's HCA is cabled to.
    let (leaf, leaf_port) = f.end_port(fabric_topology::EndPortId(0)).attach.expect("attached");
    let leaf_guid = f.switch(leaf).guid;
    sim.console(&format!("Error \"S-{leaf_guid:016x}\"[{leaf_port}] 3"));
    std::thread::sleep(Duration::from_millis(200));
    let mut p = probe(&sim, &["--retries", "20", "--timeout-ms", "50"]);
    let out = p.next_json(Duration::from_secs(60));
    assert_eq!(out["failures"].as_u64(), Some(0), "{out}");
    let retries = out["retries"].as_u64().expect("retries");
    eprintln!("error injection: {retries} retries over {} SMPs", out["smps"]);
    assert!(retries > 0, "{out}");
    drop(p);
    sim.console(&format!("Error \"S-{leaf_guid:016x}\"[{leaf_port}] 0"));
    check_ibroute(&sim, &out);
}

/// Set in the copy of this test binary that runs the driver under the shim (see
/// [`the_attached_sa_snapshot_has_the_fabric_and_the_installed_lfts`]).
const SA_CHILD: &str = "FABRIC_UMAD_PROBE_SA_CHILD";
/// Marks the child's JSON lines (libtest prints its own lines on stdout too).
const SA_LINE: &str = "SA-SNAPSHOT ";

/// The driver with an attached `SaService`, under the shim: discover, LIDs (LMC 1), Dmodc,
/// configure, upload; prints the snapshot; then, for every line on stdin naming a port GUID,
/// runs light sweeps until that end port has left the snapshot (at most 10 s) and prints what
/// it found.
fn sa_child() {
    use std::io::Write;
    use std::sync::Arc;

    use fabric_ranking::{rank, RankOptions};
    use fabric_routing::{assign_lids, route_all, EngineKind, Guid2Lid, RoutingContext, IB_MAX_UNICAST_LID};
    use fabric_sa::registry::Registry;
    use fabric_sa::SaService;
    use fabric_southbound::{LftBlockWrite, SouthboundDriver};
    use fabric_topology::fmt_guid;
    use fabric_umad::{UmadConfig, UmadDriver};
    use serde_json::json;

    let say = |v: Value| {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{SA_LINE}{v}");
        let _ = o.flush();
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let drv = UmadDriver::open(UmadConfig::default()).expect("open the umad device");
        let sa = Arc::new(SaService::new(Registry::default(), None));
        assert!(
            drv.attach_sa(sa.clone()),
            "the umad driver keeps the SA snapshot itself"
        );
        let fabric = drv.discover().await.expect("discover");
        let after_discovery = (sa.subnet().nodes.len(), sa.serving());
        let ranking = rank(&fabric, &RankOptions::default());
        let lids = assign_lids(&fabric, &Guid2Lid::new(), 1, IB_MAX_UNICAST_LID).expect("LIDs");
        let ctx = RoutingContext {
            fabric: &fabric,
            ranking: &ranking,
            lids: &lids,
        };
        let routed = route_all(&ctx, EngineKind::Dmodc).expect("route");
        drv.configure_lids(&fabric, &lids).await.expect("configure LIDs");
        let serving_after_lids = sa.serving();
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
        drv.write_lft_blocks(&blocks).await.expect("upload");
        // Everything below comes from the service's snapshot, except the plan's LIDs and the
        // routes the parent reads the switches over.
        let s = sa.subnet();
        let top = lids.top() as usize;
        let mut nodes = Vec::new();
        let mut lfts = BTreeMap::new();
        let mut snap_switch_lids = BTreeMap::new();
        for n in s.nodes.iter() {
            let ports: Vec<Value> = n
                .ports
                .iter()
                .map(|&i| {
                    let p = &s.ports[i as usize];
                    json!({
                        "num": p.port_num,
                        "guid": fmt_guid(p.guid),
                        "lid": p.lid(),
                        "lmc": p.lmc(),
                        "state": p.port_info[32] & 0x0f,
                        "peer": p.peer.map(|(pn, pp)| (fmt_guid(s.nodes[pn as usize].guid()), pp)),
                    })
                })
                .collect();
            if let Some(lft) = s.lft(s.node_index_by_guid(n.guid()).expect("node")) {
                lfts.insert(fmt_guid(n.guid()), lft.to_vec()[..=top].to_vec());
                snap_switch_lids.insert(fmt_guid(n.guid()), s.ports[n.ports[0] as usize].lid());
            }
            nodes.push(json!({"guid": fmt_guid(n.guid()), "switch": n.is_switch(), "ports": ports}));
        }
        let mut plan_switch_lids = BTreeMap::new();
        let mut paths = BTreeMap::new();
        for sw in fabric.switch_ids() {
            let g = fabric.switch(sw).guid;
            plan_switch_lids.insert(fmt_guid(g), lids.switch_lid(sw));
            let path = drv.switch_route(g).unwrap_or_default();
            let dr: Vec<String> = std::iter::once("0".to_string())
                .chain(path.iter().map(ToString::to_string))
                .collect();
            paths.insert(fmt_guid(g), dr.join(","));
        }
        let plan_end_lids: BTreeMap<String, u32> = fabric
            .end_port_ids()
            .map(|e| (fmt_guid(fabric.end_port(e).port_guid), lids.base_lid(e)))
            .collect();
        say(json!({
            "nodes_after_discovery": after_discovery.0,
            "serving_after_discovery": after_discovery.1,
            "serving_after_lids": serving_after_lids,
            "serving": sa.serving(),
            "version": s.version,
            "nodes": nodes,
            "lfts": lfts,
            "switch_lids": plan_switch_lids,
            "snapshot_switch_lids": snap_switch_lids,
            "end_port_lids": plan_end_lids,
            "switch_paths": paths,
            "escape_sl": s.escape.map(|e| e.sl),
            "sm": {"guid": fmt_guid(s.sm.guid), "lid": s.sm.lid, "state": s.sm.state},
            "sm_lid": drv.sm_lid(),
        }));
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            let guid = u64::from_str_radix(line.trim().trim_start_matches("0x"), 16).expect("port GUID");
            line.clear();
            let end = tokio::time::Instant::now() + Duration::from_secs(10);
            let gone = loop {
                let s = sa.subnet();
                if s.port_index_by_guid(guid).is_none() {
                    break Some(s.version);
                }
                if tokio::time::Instant::now() > end {
                    break None;
                }
                drv.light_sweep().await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            say(json!({"gone_at_version": gone}));
        }
    });
}

/// The next `SA_LINE` JSON of the child within `d`.
fn next_sa_json(p: &mut Probe, d: Duration) -> Value {
    let end = Instant::now() + d;
    let mut other = String::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match p.lines.recv_timeout(left) {
            // libtest's "test <name> ... " has no newline before the child's first line.
            Ok(l) => match l.find(SA_LINE).map(|k| &l[k + SA_LINE.len()..]) {
                Some(j) => return serde_json::from_str(j).unwrap_or_else(|e| panic!("{e}: {j}")),
                None => {
                    other.push_str(&l);
                    other.push('\n');
                }
            },
            Err(_) => panic!("the SA child printed no snapshot within {d:?}; its output:\n{other}"),
        }
    }
}

#[test]
fn the_attached_sa_snapshot_has_the_fabric_and_the_installed_lfts() {
    use std::io::Write as _;

    if std::env::var_os(SA_CHILD).is_some() {
        sa_child();
        return;
    }
    let (f, net) = net_of("PGFT(2;4,4;1,2;1,1)");
    let mut sim = Ibsim::start_temp("sa", &net, host_of(&f));
    // This very test, again, under the shim: the driver runs in the child.
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = sim
        .command(&exe)
        .args([
            "--exact",
            "the_attached_sa_snapshot_has_the_fabric_and_the_installed_lfts",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(SA_CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the SA child");
    let mut stdin = child.stdin.take().expect("stdin");
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
    }
    let mut p = Probe { child, lines: rx };
    let out = next_sa_json(&mut p, Duration::from_secs(60));

    // Serving only once the LIDs are configured (this manager is then master).
    assert_eq!(out["serving_after_discovery"], Value::Bool(false), "{out}");
    assert_eq!(out["serving_after_lids"], Value::Bool(true));
    assert_eq!(out["serving"], Value::Bool(true));
    assert_eq!(
        out["nodes_after_discovery"].as_u64(),
        Some((f.num_switches() + f.num_end_ports()) as u64),
        "discovery published every node"
    );
    // Every node, once: the switches and the CA nodes of the fabric file.
    let nodes = out["nodes"].as_array().expect("nodes");
    let got: BTreeMap<String, bool> = nodes
        .iter()
        .map(|n| {
            (
                n["guid"].as_str().expect("guid").to_string(),
                n["switch"].as_bool().expect("type"),
            )
        })
        .collect();
    let mut want: BTreeMap<String, bool> = f.switches().iter().map(|s| (fmt(s.guid), true)).collect();
    want.extend(f.end_ports().iter().map(|e| (fmt(e.node_guid), false)));
    assert_eq!(got, want, "snapshot nodes");
    assert_eq!(nodes.len(), want.len(), "no node twice");
    // LIDs: the plan's, every CA port with LMC 1 (the escape SL is announced), the SM's own.
    assert_eq!(out["snapshot_switch_lids"], out["switch_lids"]);
    let plan = out["end_port_lids"].as_object().expect("end port LIDs");
    let mut links = std::collections::BTreeSet::new();
    for n in nodes {
        for p in n["ports"].as_array().expect("ports") {
            let here = (
                n["guid"].as_str().expect("guid").to_string(),
                p["num"].as_u64().expect("num"),
            );
            if let Some(peer) = p["peer"].as_array() {
                links.insert((
                    here.clone(),
                    (
                        peer[0].as_str().expect("peer").to_string(),
                        peer[1].as_u64().expect("port"),
                    ),
                ));
            }
            if n["switch"] == Value::Bool(false) {
                let g = p["guid"].as_str().expect("port guid");
                assert_eq!(p["lid"].as_u64(), plan[g].as_u64(), "LID of end port {g}");
                assert_eq!(p["lmc"].as_u64(), Some(1), "LMC of end port {g}");
                assert_eq!(p["state"].as_u64(), Some(4), "end port {g} is Active (read back)");
            } else {
                let sw = n["guid"].as_str().expect("guid");
                assert_eq!(
                    p["lid"], out["switch_lids"][sw],
                    "switch {sw} port {}: the switch's LID",
                    here.1
                );
            }
        }
    }
    assert_eq!(out["escape_sl"].as_u64(), Some(u64::from(fabric_umad::ESCAPE_SL)));
    assert_eq!(out["sm"]["lid"], out["sm_lid"]);
    assert_eq!(out["sm"]["state"].as_u64(), Some(3), "master");
    // Peers: exactly the cables of the fabric file (all live), both ways.
    let mut cables = std::collections::BTreeSet::new();
    for s in f.switches() {
        for (pn, port) in s.external_ports() {
            let far = match port.remote {
                Remote::Switch { sw, port } => (fmt(f.switch(sw).guid), u64::from(port)),
                Remote::EndPort(e) => (fmt(f.end_port(e).node_guid), u64::from(f.end_port(e).port_num)),
                Remote::None => continue,
            };
            let here = (fmt(s.guid), u64::from(pn));
            cables.insert((here.clone(), far.clone()));
            cables.insert((far, here));
        }
    }
    assert_eq!(links, cables, "snapshot peers");
    // LFTs: what the switches hold, read back with ibroute.
    check_ibroute(&sim, &out);

    // An end port going down leaves the snapshot at once (the light sweep that sees it).
    let sm_port = f.end_port(fabric_topology::EndPortId(0)).port_guid;
    let victim = f
        .end_ports()
        .iter()
        .find(|e| e.port_guid != sm_port && e.attach.is_some())
        .expect("another end port");
    let (leaf, leaf_port) = victim.attach.expect("attached");
    sim.console(&format!("Unlink \"S-{:016x}\"[{leaf_port}]", f.switch(leaf).guid));
    writeln!(stdin, "{}", fmt(victim.port_guid)).expect("write to the SA child");
    let gone = next_sa_json(&mut p, Duration::from_secs(20));
    let v = gone["gone_at_version"].as_u64();
    eprintln!(
        "SA snapshot: {} nodes at version {}; end port {} gone at version {v:?}",
        nodes.len(),
        out["version"],
        fmt(victim.port_guid)
    );
    assert!(
        v.is_some_and(|v| v > out["version"].as_u64().expect("version")),
        "end port {} still in the snapshot 10 s after its cable was removed: {gone}",
        fmt(victim.port_guid)
    );
    drop(stdin);
}

fn fmt(g: u64) -> String {
    fabric_topology::fmt_guid(g)
}
