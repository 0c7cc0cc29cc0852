//! The umad driver under faults injected in ibsim, through the daemon:
//!
//! * console `Error` injection (10 % of the SMPs dropped) on the leaf port the manager's HCA
//!   hangs on: discovery, LID assignment and the LFT upload complete through retries, and the
//!   daemon reports them (the driver's SMP counters in its log and in the Prometheus counters
//!   `fabricd_driver_smp_retries_total` and friends);
//! * a switch that stops answering (`Error "<spine>" 100`: every SMP entering it is dropped,
//!   as is any packet crossing it): the daemon reports it down (WatchEvents, status, log naming
//!   its GUID) within a bounded time, keeps serving, and routes the rest around it; when it
//!   answers again it is reported up and the original tables return;
//! * during discovery, an HCA answering NodeInfo but not PortInfo, or a spine answering
//!   NodeInfo but not SwitchInfo (ibsim's attribute-filtered `Error`): kept, down; the rest
//!   comes up and is routed;
//! * a spine unlinked whole: reported down, and up again after `ReLink`;
//! * physical fault injection (`InjectFault` with `physical`): PortInfo.PortPhysicalState
//!   Disabled on a leaf uplink (`smpquery portinfo` shows it), the daemon reroutes around it;
//!   re-enabled, the link is active again and the original tables return.
//!
//! Needs `ibsim` (ibsim-utils) and infiniband-diags.

mod common;
mod umad_sim;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{changed_blocks, lfts, link_req, run_with_deadline, status, test_dir, topology};
use fabric_ibsim_harness::{ibroute, ibtracert, Ibsim};
use fabric_proto::v1 as pb;
use tokio_stream::StreamExt;
use umad_sim::{config, next_generation};

/// 16 leaves x 8 nodes = 128 end ports, 8 spines.
const SPEC: &str = "PGFT(2;8,16;1,8;1,1)";

/// The leaves hold the daemon's LFTs (`ibroute -n <LID>`); returns every switch's LFT.
async fn leaves_hold(sim: &Ibsim, c: &mut fabric_proto::Client, t: &pb::Topology) -> HashMap<u64, Vec<u8>> {
    let (_, all) = lfts(c).await;
    for s in t.switches.iter().filter(|s| s.level == Some(0)) {
        let want: std::collections::BTreeMap<u64, u64> = all[&s.guid]
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != 255)
            .map(|(l, &p)| (l as u64, u64::from(p)))
            .collect();
        let shown = ibroute(sim, &["-n", &s.lid.to_string()]);
        assert!(
            shown == want,
            "leaf 0x{:016x} (LID {}) does not hold the daemon's LFT",
            s.guid,
            s.lid
        );
    }
    all
}

/// `ibtracert` from the first end port to every `step`-th other one (base and escape LIDs)
/// reaches the destination.
fn tracert_reaches(sim: &Ibsim, t: &pb::Topology, step: usize) {
    let a = &t.end_ports[0];
    for b in t.end_ports.iter().skip(1).step_by(step) {
        for (sl, dl) in [(a.base_lid, b.base_lid), (a.escape_lid, b.escape_lid)] {
            let (_, end) = ibtracert(sim, sl, dl);
            assert_eq!(
                end, b.node_guid,
                "ibtracert {sl} {dl} does not reach node 0x{:016x}",
                b.node_guid
            );
        }
    }
}

fn start(tag: &str, extra: &str) -> (common::TestDir, fabric_topology::Fabric, Ibsim) {
    let dir = test_dir(tag);
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let host = format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid);
    let sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host);
    std::fs::write(dir.join("fabricd.toml"), config(extra)).expect("write config");
    (dir, f, sim)
}

#[test]
fn dropped_smps_are_retried_and_a_silent_switch_is_reported_and_routed_around() {
    let (dir, f, mut sim) = start("umad-silent", "");
    // A free loopback port for the Prometheus endpoint.
    let prom = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let cfg = config(&format!("[prometheus]\nlisten = \"127.0.0.1:{prom}\"\n")).replace("retries = 3", "retries = 10");
    std::fs::write(dir.join("fabricd.toml"), cfg).expect("write config");
    // One SMP in 10 dropped on the leaf port of the manager's HCA: every SMP crosses it.
    let (leaf, leaf_port) = f.end_port(fabric_topology::EndPortId(0)).attach.expect("attached");
    let leaf_guid = f.switch(leaf).guid;
    sim.console(&format!("Error \"S-{leaf_guid:016x}\"[{leaf_port}] 10"));
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(58, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        // The driver's counters reach the log within a second or two.
        let t0 = Instant::now();
        let retries = loop {
            let log = d.log_text();
            let r = log
                .lines()
                .rev()
                .filter(|l| l.contains("umad SMP counters"))
                .filter_map(|l| {
                    l.split("retries=")
                        .nth(1)?
                        .split_whitespace()
                        .next()?
                        .parse::<u64>()
                        .ok()
                })
                .next();
            if let Some(r) = r {
                break r;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "no umad SMP counters in the log:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(retries > 0, "the daemon logged no SMP retry");
        eprintln!("daemon log: {retries} SMP retries");
        let metrics = {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(("127.0.0.1", prom)).expect("connect prometheus");
            write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("write");
            let mut out = String::new();
            s.read_to_string(&mut out).expect("read");
            out
        };
        let value = |name: &str| -> u64 {
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
        };
        assert!(value("fabricd_driver_smp_retries_total ") > 0, "{metrics}");
        assert!(value("fabricd_driver_smps_total ") > value("fabricd_driver_smp_retries_total "));
        assert_eq!(value("fabricd_driver_smp_failures_total "), 0);
        sim.console(&format!("Error \"S-{leaf_guid:016x}\"[{leaf_port}] 0"));

        let topo = topology(&mut c).await;
        let original = leaves_hold(&sim, &mut c, &topo).await;
        // A spine stops answering (and forwarding). Watch the notices first.
        let mut notices = c
            .watch_events(pb::WatchEventsRequest {})
            .await
            .expect("WatchEvents")
            .into_inner();
        let spine = topo.switches.iter().find(|s| s.level == Some(1)).expect("a spine").guid;
        let t_silent = Instant::now();
        sim.console(&format!("Error \"S-{spine:016x}\" 100"));
        let down = loop {
            let n = tokio::time::timeout(Duration::from_secs(10), notices.next())
                .await
                .expect("no notice within 10 s of the switch going silent")
                .expect("stream open")
                .expect("notice");
            if let Some(pb::fabric_notice::Notice::TopologyChange(t)) = n.notice {
                if t.guid == spine {
                    break t;
                }
            }
        };
        assert_eq!(down.kind, pb::FaultKind::Switch as i32, "{down:?}");
        assert!(!down.up && down.physical, "{down:?}");
        let s1 = next_generation(&d, &mut c, s.generation, Duration::from_secs(15)).await;
        eprintln!("silent spine reported and routed around in {:?}", t_silent.elapsed());
        assert_eq!(s1.switches_up + 1, s1.switches, "{s1:?}");
        assert!(
            d.log_text().contains(&format!("{spine:016x}")),
            "the daemon's log does not name the silent switch"
        );
        let topo1 = topology(&mut c).await;
        let sw = topo1.switches.iter().find(|s| s.guid == spine).expect("still listed");
        assert!(!sw.up, "the silent spine is still up in the topology");
        let around = leaves_hold(&sim, &mut c, &topo1).await;
        for l in topo1.switches.iter().filter(|s| s.level == Some(0)) {
            let to_spine: Vec<u32> = l
                .ports
                .iter()
                .filter(|p| p.remote_guid == spine)
                .map(|p| p.port)
                .collect();
            assert!(!to_spine.is_empty());
            assert!(
                !around[&l.guid].iter().any(|&p| to_spine.contains(&u32::from(p))),
                "leaf 0x{:016x} still forwards to the silent spine",
                l.guid
            );
        }
        tracert_reaches(&sim, &topo1, 9);
        // Still serving, and no further generation while the switch stays silent.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let again = status(&mut c).await;
        assert_eq!(
            again.generation, s1.generation,
            "the silent switch keeps causing generations"
        );

        // It answers again: reported up, the original tables return.
        sim.console(&format!("Error \"S-{spine:016x}\" 0"));
        next_generation(&d, &mut c, s1.generation, Duration::from_secs(15)).await;
        let topo2 = topology(&mut c).await;
        let back = leaves_hold(&sim, &mut c, &topo2).await;
        assert_eq!(changed_blocks(&original, &back), 0);
    });
}

/// `smpquery portinfo <lid> <port>` as (LinkState, PhysLinkState).
fn port_states(sim: &Ibsim, lid: u32, port: u32) -> (String, String) {
    let (ok, text) = sim.tool("smpquery", &["portinfo", &lid.to_string(), &port.to_string()]);
    assert!(ok, "smpquery portinfo {lid} {port} failed:\n{text}");
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim_start_matches('.').trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    };
    (field("LinkState:"), field("PhysLinkState:"))
}

#[test]
fn physical_port_fault_disables_the_port_and_reenabling_restores_the_tables() {
    let (dir, _f, sim) = start(
        "umad-phys",
        "[fault_injection]\nenabled = true\nallow_physical = true\n",
    );
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(58, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        let topo = topology(&mut c).await;
        let original = leaves_hold(&sim, &mut c, &topo).await;
        // A leaf uplink that is not on the manager's own leaf (its SMPs keep their route).
        let leaf = topo
            .switches
            .iter()
            .filter(|s| s.level == Some(0))
            .nth(3)
            .expect("a leaf");
        let up = leaf
            .ports
            .iter()
            .find(|p| p.remote_kind == pb::RemoteKind::Switch as i32)
            .expect("an uplink");
        assert_eq!(port_states(&sim, leaf.lid, up.port), ("Active".into(), "LinkUp".into()));

        let r = c
            .inject_fault(link_req(leaf.guid, up.port, false, true, true))
            .await
            .expect("InjectFault physical down")
            .into_inner();
        assert!(r.generation > s.generation, "{r:?}");
        let (_, phys) = port_states(&sim, leaf.lid, up.port);
        assert_eq!(phys, "Disabled");
        let s1 = next_generation(&d, &mut c, s.generation, Duration::from_secs(15)).await;
        let topo1 = topology(&mut c).await;
        let p = topo1
            .switches
            .iter()
            .find(|s| s.guid == leaf.guid)
            .and_then(|s| s.ports.iter().find(|p| p.port == up.port))
            .expect("port");
        assert_eq!(p.state, pb::PortState::Down as i32, "{p:?}");
        let around = leaves_hold(&sim, &mut c, &topo1).await;
        assert!(
            !around[&leaf.guid].iter().any(|&x| u32::from(x) == up.port),
            "leaf still forwards to its disabled port"
        );
        tracert_reaches(&sim, &topo1, 11);

        let r = c
            .inject_fault(link_req(leaf.guid, up.port, true, true, true))
            .await
            .expect("InjectFault physical up")
            .into_inner();
        assert!(r.generation > s1.generation, "{r:?}");
        next_generation(&d, &mut c, s1.generation, Duration::from_secs(15)).await;
        assert_eq!(port_states(&sim, leaf.lid, up.port), ("Active".into(), "LinkUp".into()));
        let topo2 = topology(&mut c).await;
        let back = leaves_hold(&sim, &mut c, &topo2).await;
        assert_eq!(changed_blocks(&original, &back), 0);
    });
}

/// Waits for the WatchEvents notice of a topology change on `guid`.
async fn change_of(
    notices: &mut tonic::Streaming<pb::FabricNotice>,
    guid: u64,
    kind: pb::FaultKind,
    up: bool,
) -> pb::TopologyChange {
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), notices.next())
            .await
            .unwrap_or_else(|_| panic!("no {kind:?} up={up} notice for 0x{guid:016x} within 10 s"))
            .expect("stream open")
            .expect("notice");
        if let Some(pb::fabric_notice::Notice::TopologyChange(t)) = n.notice {
            if t.guid == guid && t.kind == kind as i32 && t.up == up {
                return t;
            }
        }
    }
}

/// Every cable of a spine unlinked in ibsim (the switch is unreachable): reported down; all
/// relinked: reported up again (its ports re-armed and activated) and the tables return.
#[test]
fn an_unlinked_switch_is_reported_down_and_up_again() {
    let (dir, _f, mut sim) = start("umad-unlinked", "");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(58, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        let topo = topology(&mut c).await;
        let original = leaves_hold(&sim, &mut c, &topo).await;
        let mut notices = c
            .watch_events(pb::WatchEventsRequest {})
            .await
            .expect("WatchEvents")
            .into_inner();
        let spine = topo
            .switches
            .iter()
            .rfind(|s| s.level == Some(1))
            .expect("a spine")
            .guid;
        sim.console(&format!("Unlink \"S-{spine:016x}\""));
        change_of(&mut notices, spine, pb::FaultKind::Switch, false).await;
        let s1 = next_generation(&d, &mut c, s.generation, Duration::from_secs(15)).await;
        assert_eq!(s1.switches_up + 1, s1.switches, "{s1:?}");
        tracert_reaches(&sim, &topology(&mut c).await, 13);

        sim.console(&format!("ReLink \"S-{spine:016x}\""));
        change_of(&mut notices, spine, pb::FaultKind::Switch, true).await;
        let s2 = next_generation(&d, &mut c, s1.generation, Duration::from_secs(15)).await;
        // The relinked ports come back in INIT: the generation settles once all are active.
        let t0 = Instant::now();
        loop {
            let st = status(&mut c).await;
            if st.switches_up == st.switches && st.links_up == st.links && st.phase == pb::Phase::Idle as i32 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "links not all back: {st:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(s2.generation > s1.generation);
        next_generation(&d, &mut c, 0, Duration::from_secs(10)).await;
        let topo2 = topology(&mut c).await;
        let back = leaves_hold(&sim, &mut c, &topo2).await;
        assert_eq!(changed_blocks(&original, &back), 0);
    });
}

/// An HCA that answers NodeInfo but drops every PortInfo (ibsim `Error "<node>" 100 21`, the
/// attribute filter) does not stop the bring-up: it is reported down, the rest is routed.
#[test]
fn an_hca_that_stops_answering_during_discovery_is_reported_down() {
    let (dir, f, mut sim) = start("umad-mute-hca", "");
    let mute = f.end_port(fabric_topology::EndPortId(5));
    sim.console(&format!("Error \"H-{:016x}\" 100 21", mute.node_guid));
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(58, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        assert_eq!(s.nodes, 128, "{s:?}");
        assert_eq!(s.nodes_up, 127, "{s:?}");
        let topo = topology(&mut c).await;
        let e = topo
            .end_ports
            .iter()
            .find(|e| e.guid == mute.port_guid)
            .expect("listed");
        assert!(!e.up && !e.live, "{e:?}");
        let live = pb::Topology {
            end_ports: topo.end_ports.iter().filter(|e| e.live).cloned().collect(),
            ..topo.clone()
        };
        leaves_hold(&sim, &mut c, &topo).await;
        tracert_reaches(&sim, &live, 9);
    });
}

/// A spine that answers NodeInfo but drops its SwitchInfo during discovery (`Error "<spine>"
/// 100 18`) is kept, down; the bring-up completes around it.
#[test]
fn a_switch_that_stops_answering_during_discovery_is_kept_down() {
    let (dir, f, mut sim) = start("umad-mute-switch", "");
    let spine = f
        .switch_ids()
        .map(|id| f.switch(id))
        .find(|s| s.desc.contains("L1"))
        .expect("a spine")
        .guid;
    sim.console(&format!("Error \"S-{spine:016x}\" 100 18"));
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(58, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        assert_eq!((s.switches, s.switches_up), (24, 23), "{s:?}");
        let topo = topology(&mut c).await;
        let sw = topo.switches.iter().find(|s| s.guid == spine).expect("listed");
        assert!(!sw.up, "{sw:?}");
        let all = leaves_hold(&sim, &mut c, &topo).await;
        for l in topo.switches.iter().filter(|s| s.level == Some(0)) {
            let to_spine: Vec<u32> = l
                .ports
                .iter()
                .filter(|p| p.remote_guid == spine)
                .map(|p| p.port)
                .collect();
            assert!(!to_spine.is_empty(), "leaf 0x{:016x} has no cable to the spine", l.guid);
            assert!(!all[&l.guid].iter().any(|&p| to_spine.contains(&u32::from(p))));
        }
        tracert_reaches(&sim, &topo, 9);
    });
}
