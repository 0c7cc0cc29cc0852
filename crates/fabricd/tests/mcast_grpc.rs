//! Multicast and partitions through the daemon on its built-in simulated fabric (mock driver,
//! real `fabricd` and `fabricctl` binaries, gRPC over the Unix socket):
//!
//! * joins and leaves (MCMemberRecord Set/Delete through `SaQuery`) make generations whose
//!   multicast forwarding tables, flooded through the mock's own data plane
//!   (`VerifyMulticast`), deliver to every receiving member exactly once, also after a cable
//!   fails; a group created by a join is removed, and its MLID freed, when its last member
//!   leaves; the IPoIB broadcast groups stay;
//! * a partitions file: members see paths within their partition only (SA PathRecord, and the
//!   mock's data plane refuses a trace between ports that share no P_Key), and a SIGHUP that
//!   moves a node between partitions takes effect without a restart.
//!
//! Record images are built here from the IBA layout of MCMemberRecord (vol. 1 15.2.5.17):
//! MGID 0..16, PortGID 16..32, Q_Key 32..36, MLID 36..38, MTU 38, TClass 39, P_Key 40..42,
//! Rate 42, PacketLifeTime 43, SL/FlowLabel/HopLimit 44..48, Scope/JoinState 48.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;
use fabric_proto::Client;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";
const SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;
const IPOIB_BROADCAST: [u8; 16] = [
    0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
];

/// Component mask bits of MCMemberRecord.
mod comp {
    pub const MGID: u64 = 1 << 0;
    pub const PORT_GID: u64 = 1 << 1;
    pub const QKEY: u64 = 1 << 2;
    pub const TCLASS: u64 = 1 << 6;
    pub const PKEY: u64 = 1 << 7;
    pub const SL: u64 = 1 << 12;
    pub const FLOW_LABEL: u64 = 1 << 13;
    pub const JOIN_STATE: u64 = 1 << 16;
}

fn member_record(mgid: [u8; 16], port: u64, join_state: u8, qkey: u32, pkey: u16) -> Vec<u8> {
    let mut r = vec![0u8; 56];
    r[0..16].copy_from_slice(&mgid);
    r[16..24].copy_from_slice(&SUBNET_PREFIX.to_be_bytes());
    r[24..32].copy_from_slice(&port.to_be_bytes());
    r[32..36].copy_from_slice(&qkey.to_be_bytes());
    r[40..42].copy_from_slice(&pkey.to_be_bytes());
    r[48] = join_state & 0x0f;
    r
}

async fn sa(c: &mut Client, method: pb::SaMethod, mask: u64, template: Vec<u8>) -> pb::SaQueryResponse {
    c.sa_query(pb::SaQueryRequest {
        method: method as i32,
        attribute: "mcmr".into(),
        component_mask: mask,
        template,
        ..Default::default()
    })
    .await
    .expect("SaQuery")
    .into_inner()
}

/// Joins `port` to an existing group (the mandatory components: MGID, PortGID, JoinState).
async fn join(c: &mut Client, mgid: [u8; 16], port: u64, join_state: u8) -> pb::SaQueryResponse {
    let mask = comp::MGID | comp::PORT_GID | comp::JOIN_STATE;
    sa(c, pb::SaMethod::Set, mask, member_record(mgid, port, join_state, 0, 0)).await
}

async fn leave(c: &mut Client, mgid: [u8; 16], port: u64, join_state: u8) -> pb::SaQueryResponse {
    let mask = comp::MGID | comp::PORT_GID | comp::JOIN_STATE;
    sa(
        c,
        pb::SaMethod::Delete,
        mask,
        member_record(mgid, port, join_state, 0, 0),
    )
    .await
}

async fn groups(c: &mut Client, trees: bool) -> pb::ListMulticastGroupsResponse {
    c.list_multicast_groups(pb::ListMulticastGroupsRequest { mlid: 0, trees })
        .await
        .expect("ListMulticastGroups")
        .into_inner()
}

/// Waits until the committed generation's trees hold `want` members' ports for group `mgid`
/// and nothing is pending (the join's generation is committed and programmed).
async fn until_routed(d: &Daemon, c: &mut Client, mgid: &str, want: usize) -> pb::McastGroup {
    let t = Instant::now();
    loop {
        let r = groups(c, true).await;
        let s = status(c).await;
        if let Some(g) = r.groups.iter().find(|g| g.mgid == mgid) {
            let routed = g.tree.as_ref().is_some_and(|t| !t.switches.is_empty()) || want == 0;
            if g.members.len() == want && routed && s.phase == pb::Phase::Idle as i32 && s.pending_faults == 0 {
                return g.clone();
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "group {mgid} never routed with {want} members: {r:?}; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// VerifyMulticast once the generation covering the last change is committed.
async fn verified(d: &Daemon, c: &mut Client) -> pb::VerifyMulticastResponse {
    let t = Instant::now();
    loop {
        let s = status(c).await;
        let v = c
            .verify_multicast(pb::VerifyMulticastRequest {})
            .await
            .expect("VerifyMulticast")
            .into_inner();
        if v.failures.is_empty() && s.phase == pb::Phase::Idle as i32 && s.pending_faults == 0 {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "multicast never verified: {v:?}; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn joins_make_trees_that_deliver_exactly_once_and_leaves_free_the_mlid() {
    run_with_deadline(240, async {
        let dir = test_dir("mcast");
        let d = Daemon::spawn(&dir, &Opts::new(SMALL), &[]);
        let mut c = d.ready().await;
        let topo = topology(&mut c).await;
        let ports: Vec<u64> = topo.end_ports.iter().map(|e| e.guid).collect();
        assert!(ports.len() >= 12, "{} end ports", ports.len());

        // The IPoIB broadcast groups of the default partition exist, without members. (The
        // daemon hands the partitions of its first generation to the SA on a blocking thread
        // after the commit: the groups may appear a moment after generation 1.)
        let t = Instant::now();
        let bcast = loop {
            let r = groups(&mut c, false).await;
            if let Some(b) = r.groups.iter().find(|g| g.mgid.starts_with("ff12:401b:ffff")) {
                break b.clone();
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "no IPoIB broadcast group: {r:?}; log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        assert!(bcast.well_known && bcast.members.is_empty(), "{bcast:?}");
        assert_eq!(
            (bcast.mlid, bcast.pkey, bcast.qkey),
            (0xc000, 0xffff, 0x0b1b),
            "{bcast:?}"
        );
        let bcast_mgid = bcast.mgid.clone();

        // Ten full members and two send-only members join the broadcast group.
        for &p in &ports[..10] {
            let a = join(&mut c, IPOIB_BROADCAST, p, 0x1).await;
            assert_eq!(a.status, 0, "join {p:#x}: {a:?}");
        }
        for &p in &ports[10..12] {
            let a = join(&mut c, IPOIB_BROADCAST, p, 0x4).await;
            assert_eq!(a.status, 0, "send-only join {p:#x}: {a:?}");
        }
        let g = until_routed(&d, &mut c, &bcast_mgid, 12).await;
        let tree = g.tree.expect("tree");
        assert_ne!(tree.root_guid, 0, "{tree:?}");
        assert!(tree.unreachable.is_empty(), "{tree:?}");
        let v = verified(&d, &mut c).await;
        // 12 senders (10 receivers + 2 send-only), each to the 10 receivers but itself.
        assert_eq!(v.deliveries_checked, 10 * 9 + 2 * 10, "{v:?}");

        // A cable of the tree fails: the next generation's tree avoids it and still delivers.
        let (sw, port) = tree
            .switches
            .iter()
            .filter(|s| s.level > 0)
            .flat_map(|s| s.ports.iter().map(move |&p| (s.guid, p)))
            .next()
            .expect("a top switch port in the tree");
        let before = status(&mut c).await.generation;
        c.inject_fault(link_req(sw, port, false, true, true))
            .await
            .expect("link down");
        wait_status(&d, &mut c, "generation after the fault", Duration::from_secs(30), |s| {
            s.generation > before
        })
        .await;
        let v = verified(&d, &mut c).await;
        assert_eq!(v.deliveries_checked, 10 * 9 + 2 * 10, "{v:?}");
        let g = until_routed(&d, &mut c, &bcast_mgid, 12).await;
        let t2 = g.tree.expect("tree");
        assert!(
            !t2.switches.iter().any(|s| s.guid == sw && s.ports.contains(&port)),
            "the tree still uses the failed cable {sw:#x}[{port}]: {t2:?}"
        );

        // A new group, created by a join with every component a creation needs.
        let mut mgid = [0u8; 16];
        mgid[..4].copy_from_slice(&[0xff, 0x15, 0x12, 0x34]);
        mgid[15] = 7;
        let create = comp::MGID
            | comp::PORT_GID
            | comp::QKEY
            | comp::TCLASS
            | comp::PKEY
            | comp::SL
            | comp::FLOW_LABEL
            | comp::JOIN_STATE;
        let a = sa(
            &mut c,
            pb::SaMethod::Set,
            create,
            member_record(mgid, ports[0], 0x1, 0x1234, 0xffff),
        )
        .await;
        assert_eq!(a.status, 0, "create: {a:?}");
        let a = join(&mut c, mgid, ports[5], 0x1).await;
        assert_eq!(a.status, 0, "second member: {a:?}");
        let r = groups(&mut c, false).await;
        let created = r
            .groups
            .iter()
            .find(|g| g.qkey == 0x1234)
            .unwrap_or_else(|| panic!("created group missing: {r:?}"))
            .clone();
        let mlids: BTreeSet<u32> = r.groups.iter().map(|g| g.mlid).collect();
        assert_eq!(mlids.len(), r.groups.len(), "MLIDs are distinct: {r:?}");
        until_routed(&d, &mut c, &created.mgid, 2).await;
        verified(&d, &mut c).await;
        // `fabricctl mcast` lists it with its members.
        let out = std::process::Command::new(fabricctl_binary())
            .arg("--socket")
            .arg(&d.socket)
            .args(["mcast", "--trees", "--json"])
            .output()
            .expect("fabricctl mcast");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let listed = j["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .find(|g| g["mgid"] == created.mgid.as_str())
            .unwrap_or_else(|| panic!("fabricctl mcast does not list {}: {j}", created.mgid))
            .clone();
        assert_eq!(listed["members"].as_array().map(Vec::len), Some(2), "{listed}");
        assert!(
            listed["tree"]["switches"].as_array().is_some_and(|s| !s.is_empty()),
            "{listed}"
        );

        // Both leave: the group is gone and its MLID free; the broadcast group's members leave
        // too, the group stays (well-known) with an empty tree.
        for p in [ports[0], ports[5]] {
            let a = leave(&mut c, mgid, p, 0x1).await;
            assert_eq!(a.status, 0, "leave: {a:?}");
        }
        // The send-only members first: when the last full member leaves, the group's other
        // members go with it (IBA: a group lives while it has a full member).
        for &p in &ports[10..12] {
            let a = leave(&mut c, IPOIB_BROADCAST, p, 0x4).await;
            assert_eq!(a.status, 0, "send-only leave {p:#x}: {a:?}");
        }
        for &p in &ports[..10] {
            assert_eq!(leave(&mut c, IPOIB_BROADCAST, p, 0x1).await.status, 0);
        }
        let t = Instant::now();
        loop {
            let r = groups(&mut c, true).await;
            let gone = !r.groups.iter().any(|g| g.mlid == created.mlid);
            let b = r
                .groups
                .iter()
                .find(|g| g.mgid == bcast_mgid)
                .expect("broadcast group stays");
            let empty = b.members.is_empty() && b.tree.as_ref().is_none_or(|t| t.switches.is_empty());
            if gone && empty {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "groups after the leaves: {r:?}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        // The freed MLID is the one the next new group gets (lowest free first).
        mgid[15] = 8;
        let a = sa(
            &mut c,
            pb::SaMethod::Set,
            create,
            member_record(mgid, ports[1], 0x1, 0x99, 0xffff),
        )
        .await;
        assert_eq!(a.status, 0, "{a:?}");
        let r = groups(&mut c, false).await;
        let again = r.groups.iter().find(|g| g.qkey == 0x99).expect("new group");
        assert_eq!(again.mlid, created.mlid, "the freed MLID is reused: {r:?}");
    });
}

/// `fabricctl ARGS` over the daemon's socket: (success, stdout + stderr).
fn fabricctl(d: &Daemon, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(fabricctl_binary())
        .arg("--socket")
        .arg(&d.socket)
        .args(args)
        .output()
        .expect("run fabricctl");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The number of PathRecords from `src` to `dst` (by port GUID), and their P_Keys.
async fn path_pkeys(c: &mut Client, src: u64, dst: u64) -> (u32, Vec<u16>) {
    let mut t = vec![0u8; 64];
    // PathRecord: DGID 8..24, SGID 24..40; components 2 DGID, 3 SGID.
    t[8..16].copy_from_slice(&SUBNET_PREFIX.to_be_bytes());
    t[16..24].copy_from_slice(&dst.to_be_bytes());
    t[24..32].copy_from_slice(&SUBNET_PREFIX.to_be_bytes());
    t[32..40].copy_from_slice(&src.to_be_bytes());
    let r = c
        .sa_query(pb::SaQueryRequest {
            method: pb::SaMethod::GetTable as i32,
            attribute: "pr".into(),
            component_mask: (1 << 2) | (1 << 3),
            template: t,
            ..Default::default()
        })
        .await
        .expect("SaQuery pr")
        .into_inner();
    let pkeys = r
        .records
        .iter()
        .map(|rec| u16::from_be_bytes([rec.raw[50], rec.raw[51]]))
        .collect();
    (r.status, pkeys)
}

#[test]
fn partitions_separate_tenants_and_a_reload_moves_a_node() {
    run_with_deadline(240, async {
        let dir = test_dir("partitions");
        // The port GUIDs of the generated fabric are known only once it runs: start with the
        // default partition, read them, then write the partitions file and reload.
        let file = dir.join("partitions.conf");
        std::fs::write(&file, "Default=0x7fff, ipoib : ALL=full ;\n").expect("write partitions");
        let mut opts = Opts::new(SMALL);
        opts.extra = format!("[partitions]\nfile = \"{}\"\n", file.display());
        let d = Daemon::spawn(&dir, &opts, &[]);
        let mut c = d.ready().await;
        let topo = topology(&mut c).await;
        let e: Vec<&pb::EndPortInfo> = topo.end_ports.iter().collect();
        let (a, b, x, y) = (e[0].guid, e[5].guid, e[10].guid, e[15].guid);
        // Everybody shares the default partition: a path a -> x.
        let (st, pk) = path_pkeys(&mut c, a, x).await;
        assert_eq!(st, 0, "a -> x in the default partition");
        assert!(!pk.is_empty() && pk.iter().all(|&k| k & 0x7fff == 0x7fff), "{pk:x?}");

        // Tenants: blue {a, b}, red {x, y}; everybody only a limited member of Default (the
        // SM's port would be full; the mock has none), so blue and red share nothing.
        let conf = |blue: &[u64], red: &[u64]| {
            let list = |v: &[u64]| {
                v.iter()
                    .map(|g| format!("{g:#018x}=full"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!(
                "Default=0x7fff : ALL=limited ;\nblue=0x0b01, ipoib : {} ;\nred=0x0b02 : {} ;\n",
                list(blue),
                list(red)
            )
        };
        std::fs::write(&file, conf(&[a, b], &[x, y])).expect("write partitions");
        let g0 = status(&mut c).await.generation;
        d.signal(libc_sighup());
        wait_status(
            &d,
            &mut c,
            "generation after the reload",
            Duration::from_secs(30),
            |s| s.generation > g0 && s.phase == pb::Phase::Idle as i32 && s.ready,
        )
        .await;
        let t = Instant::now();
        loop {
            let (st_ab, pk_ab) = path_pkeys(&mut c, a, b).await;
            let (st_ax, pk_ax) = path_pkeys(&mut c, a, x).await;
            // A table answer: no path is no record.
            if st_ab == 0 && !pk_ab.is_empty() && pk_ab.iter().all(|&k| k & 0x7fff == 0x0b01) && pk_ax.is_empty() {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "paths after the reload: a->b {st_ab:#x} {pk_ab:x?}, a->x {st_ax:#x} {pk_ax:x?}; log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The mock's data plane enforces the P_Key tables the daemon programmed.
        let (ok, out) = fabricctl(&d, &["trace", &format!("{a:#018x}"), &format!("{x:#018x}")]);
        assert!(
            !ok && out.contains("share no partition"),
            "a -> x must be refused by the ports: {out}"
        );
        let (ok, out) = fabricctl(&d, &["trace", &format!("{a:#018x}"), &format!("{b:#018x}")]);
        assert!(ok, "a -> b: {out}");
        // `fabricctl partitions` lists them; the blue IPoIB group exists.
        let (ok, out) = fabricctl(&d, &["partitions", "--members"]);
        assert!(
            ok && out.contains("blue") && out.contains("0xb01") && out.contains("red"),
            "{out}"
        );
        let r = groups(&mut c, false).await;
        assert!(r.groups.iter().any(|g| g.mgid.starts_with("ff12:401b:8b01")), "{r:?}");

        // Reload: x moves from red to blue, without a restart.
        std::fs::write(&file, conf(&[a, b, x], &[y])).expect("write partitions");
        let g1 = status(&mut c).await.generation;
        d.signal(libc_sighup());
        wait_status(
            &d,
            &mut c,
            "generation after the second reload",
            Duration::from_secs(30),
            |s| s.generation > g1 && s.phase == pb::Phase::Idle as i32 && s.ready,
        )
        .await;
        let t = Instant::now();
        loop {
            let (st_ax, pk_ax) = path_pkeys(&mut c, a, x).await;
            let (st_xy, pk_xy) = path_pkeys(&mut c, x, y).await;
            if st_ax == 0 && !pk_ax.is_empty() && pk_ax.iter().all(|&k| k & 0x7fff == 0x0b01) && pk_xy.is_empty() {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "after the move: a->x {st_ax:#x} {pk_ax:x?}, x->y {st_xy:#x} {pk_xy:x?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (ok, out) = fabricctl(&d, &["trace", &format!("{a:#018x}"), &format!("{x:#018x}")]);
        assert!(ok, "a -> x after the move: {out}");

        // A broken file is refused by the reload; the partitions in force stay.
        std::fs::write(&file, "blue=0x0b01 : 0x12 ;\nred = : ;\n").expect("write partitions");
        d.signal(libc_sighup());
        let t = Instant::now();
        while !d.log_text().contains("reload refused") {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "no refusal logged:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            d.log_text().contains("partitions.conf:2"),
            "the error names file and line:\n{}",
            d.log_text()
        );
        let (_, pk_ax) = path_pkeys(&mut c, a, x).await;
        assert!(!pk_ax.is_empty(), "the partitions in force stay");
    });
}

fn libc_sighup() -> i32 {
    1
}
