//! Support of `umad_mcast.rs`: [`tree`], the independent checks of the multicast forwarding
//! tables read back from the switches; [`sim`], what the simulated hosts see (`ibroute -M`,
//! `smpquery pkeys`, `saquery`, `fabric-saquery` on many hosts at once); and here, fabricd
//! started on the simulator and its groups over gRPC and `fabricctl`.

#![allow(dead_code)]

pub mod sim;
pub mod tree;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use fabric_ibsim_harness::saquery::{saquery, SaqueryRecord};
use fabric_ibsim_harness::Ibsim;
use fabric_proto::v1 as pb;
use fabric_sa::records::McMemberRecord;
use fabric_topology::{EndPortId, Fabric, Guid};

use crate::common::{self, status, Daemon};
use crate::support::{attach, host, ClientRun};
use crate::umad_sim::{self, config};

/// A switch's MFT as `ibroute -M` shows it: MLID → ports of its mask.
pub type Mft = BTreeMap<u64, Vec<u32>>;
/// Switch ports out of service: (switch GUID, port), both ends of an unlinked cable.
pub type Dead = BTreeSet<(Guid, u8)>;

/// The IPoIB IPv4 broadcast MGID of the default partition (OpenSM's first group).
pub const IPOIB_V4: &str = "ff12:401b:ffff::ffff:ffff";
/// The IPoIB IPv6 all-nodes MGID of the default partition (fabricd creates it at start).
pub const IPOIB_V6: &str = "ff12:601b:ffff::1";

/// fabricd on end port 0 of a fresh simulator of `f`, in `dir`; `umad` is added to
/// `[driver.umad]`, `extra` appended.
pub fn start_fabricd(dir: &Path, f: &Fabric, umad: &str, extra: &str) -> (Ibsim, Daemon) {
    let sim = Ibsim::start(dir, &fabric_topology::ibnet::write(f), host(f, EndPortId(0)));
    let cfg = dir.join("fabricd.toml");
    let text = config(extra).replace("window = 16", &format!("window = 16\n{umad}"));
    std::fs::write(&cfg, text).expect("write config");
    let d = umad_sim::spawn_daemon(dir, &cfg, &sim.env());
    (sim, d)
}

/// Waits until `saquery SMIR` from `host_id` is answered.
pub fn wait_sa(sim: &Ibsim, host_id: &str, within: Duration) {
    let t0 = Instant::now();
    loop {
        let r = saquery(sim, host_id, &["SMIR"]);
        if r.ok && r.text.contains("SMInfoRecord") {
            return;
        }
        assert!(
            t0.elapsed() < within,
            "the SA does not answer saquery SMIR within {within:?}:\n{}",
            r.text
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `saquery -g` until `ok` holds for its groups (at most `within`).
pub fn wait_saquery_groups(
    sim: &Ibsim,
    host_id: &str,
    within: Duration,
    ok: impl Fn(&[SaqueryRecord]) -> bool,
) -> Vec<SaqueryRecord> {
    let t0 = Instant::now();
    loop {
        let r = saquery(sim, host_id, &["-g"]);
        let groups = if r.ok { r.real_records() } else { Vec::new() };
        if ok(&groups) {
            return groups;
        }
        assert!(
            t0.elapsed() < within,
            "saquery -g not as expected within {within:?}:\n{}",
            r.text
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The groups of `saquery -g` by MGID.
pub fn by_mgid(groups: &[SaqueryRecord]) -> BTreeMap<String, SaqueryRecord> {
    groups
        .iter()
        .map(|g| (g.get("MGID").expect("MGID field").to_string(), g.clone()))
        .collect()
}

/// The daemon's multicast groups (gRPC `ListMulticastGroups`, what `fabricctl mcast` shows).
pub async fn groups(c: &mut fabric_proto::Client, trees: bool) -> pb::ListMulticastGroupsResponse {
    c.list_multicast_groups(pb::ListMulticastGroupsRequest { mlid: 0, trees })
        .await
        .expect("ListMulticastGroups")
        .into_inner()
}

/// Waits until the daemon's groups satisfy `ok` and it is idle with nothing pending.
pub async fn wait_groups(
    d: &Daemon,
    c: &mut fabric_proto::Client,
    what: &str,
    within: Duration,
    ok: impl Fn(&pb::ListMulticastGroupsResponse) -> bool,
) -> pb::ListMulticastGroupsResponse {
    let t0 = Instant::now();
    loop {
        let g = groups(c, true).await;
        let s = status(c).await;
        if ok(&g) && s.phase == pb::Phase::Idle as i32 && s.pending_faults == 0 {
            return g;
        }
        assert!(
            t0.elapsed() < within,
            "{what}: not within {within:?}: groups {:#?}\nlog:\n{}",
            g.groups,
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Members of the daemon's group `mlid` as port GUID → JoinState (empty when no group).
pub fn members_of(g: &pb::ListMulticastGroupsResponse, mlid: u32) -> BTreeMap<Guid, u32> {
    g.groups
        .iter()
        .filter(|x| x.mlid == mlid)
        .flat_map(|x| x.members.iter().map(|m| (m.port_guid, m.join_state)))
        .collect()
}

/// `fabricctl --socket <daemon> <args>` (must succeed), its JSON output.
pub fn fabricctl_json(d: &Daemon, args: &[&str]) -> serde_json::Value {
    let out = Command::new(common::fabricctl_binary())
        .arg("--socket")
        .arg(&d.socket)
        .args(args)
        .output()
        .expect("run fabricctl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fabricctl {args:?}: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("fabricctl {args:?}: not JSON ({e}):\n{text}"))
}

/// The one answer of a `fabric-saquery` run (exit 0), with its status and records.
pub fn answer(r: &ClientRun) -> (u64, Vec<McMemberRecord>) {
    assert!(r.ok, "fabric-saquery {:?} failed:\n{}\n{}", r.args, r.stdout, r.stderr);
    (r.status(), sim::mc_records(r))
}

/// The one record of a join or leave `fabric-saquery` answered with status 0 (`what` names
/// the request in the failure).
pub fn record(r: &ClientRun, what: &str) -> McMemberRecord {
    let (st, recs) = answer(r);
    assert_eq!(st, 0, "{what}: status {st:#06x}:\n{}\n{}", r.stdout, r.stderr);
    let [one] = recs.as_slice() else {
        panic!("{what}: {} records:\n{}", recs.len(), r.stdout);
    };
    one.clone()
}

/// An MGID as `saquery` prints it (compressed IPv6 text); the daemon prints every group.
pub fn mgid_norm(s: &str) -> String {
    s.parse::<std::net::Ipv6Addr>()
        .unwrap_or_else(|e| panic!("MGID {s:?}: {e}"))
        .to_string()
}

/// The MGID text of a record, as `saquery` prints it.
pub fn mgid_text(r: &McMemberRecord) -> String {
    std::net::Ipv6Addr::from(r.mgid.0).to_string()
}

/// End ports on pairwise different leaves, other than `avoid`'s leaves, in leaf order.
pub fn on_other_leaves(f: &Fabric, avoid: &[EndPortId], n: usize) -> Vec<EndPortId> {
    let mut leaves: BTreeSet<_> = avoid.iter().map(|&e| attach(f, e).0).collect();
    let mut out = Vec::new();
    for e in f.end_port_ids() {
        if out.len() == n {
            break;
        }
        if leaves.insert(attach(f, e).0) {
            out.push(e);
        }
    }
    assert_eq!(out.len(), n, "not enough leaves");
    out
}

/// Pseudo-random distinct end ports (fixed seed), none of `avoid`.
pub fn sample(f: &Fabric, n: usize, avoid: &[EndPortId]) -> Vec<EndPortId> {
    let len = f.num_end_ports() as u64;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut out: Vec<EndPortId> = Vec::new();
    while out.len() < n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let e = EndPortId(((x >> 33) % len) as u32);
        if !avoid.contains(&e) && !out.contains(&e) {
            out.push(e);
        }
    }
    out
}
