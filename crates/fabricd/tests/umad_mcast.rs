//! Acceptance of multicast and partitions (issue 15) under the real `ibsim` with the umad2sim
//! shim, fabricd (umad driver) as master, the real `saquery`, `ibroute`, `smpquery` and the
//! project's own SA client `fabric-saquery` acting as end nodes:
//!
//! * **IPoIB groups** (`saquery_lists_the_ipoib_groups_as_opensm_does_plus_the_ipv6_one`):
//!   `saquery -g` from another host lists the IPv4 broadcast group at MLID 0xC000 with the
//!   parameters OpenSM 3.3.23 gives it on the same fabric, and the IPv6 all-nodes group
//!   fabricd also creates; the whole records (`fabric-saquery mcmr`) compared with OpenSM's.
//! * **Join and leave** (`a_join_and_a_leave_from_the_client_create_and_remove_a_group`): a
//!   create, a NonMember join and both leaves sent by `fabric-saquery`, seen with `saquery -g`,
//!   `fabricctl mcast` and `ibroute -M`; the MLID is released and reused.
//! * **Trees** (`mfts_form_one_tree_spanning_the_members_also_after_cables_are_removed`): on a
//!   3-level fat-tree with parallel cables, after groups of 2, 30 and every CA joined (each
//!   member from its own host), the MFTs read back with `ibroute -M` from every switch form,
//!   per MLID, one loop-free up*-down* tree over live cables spanning exactly the receivers,
//!   and a packet flooded through them from any member reaches every other member once; the
//!   same after two switch cables and a member's cable are unlinked.
//! * **No MLID leak** (`ten_thousand_send_only_join_and_partial_leave_cycles_leave_no_mlid_allocated`):
//!   10 000 join / partial-leave cycles of a send-only member (FullMember+SendOnlyFullMember
//!   creating a new MGID, then leaving FullMember: the group goes; OpenSM 3.3.23 leaks an MLID
//!   per cycle there), 2 000 more with SendOnlyNonMember, and 10 000 SendOnlyNonMember
//!   join/leave cycles on an existing group, from one client process: every join gets the
//!   same MLID, nothing is left allocated, fabricd keeps serving.
//! * **Partitions** (`partitions_program_pkeys_on_members_only_and_a_reload_moves_a_node`):
//!   `smpquery pkeys` on every CA shows the configured P_Keys on members only; PathRecords
//!   (`saquery --src-to-dst`) exist within a partition with its P_Key and not between ports
//!   sharing none; a SIGHUP after moving a node from one partition to another changes both
//!   without a restart.
//!
//! Needs `ibsim` (ibsim-utils), the umad2sim shim, `opensm` and infiniband-diags (`saquery`,
//! `ibroute`, `smpquery`); a missing one fails the test with an installation hint.

mod common;
#[path = "umad_mcast/mod.rs"]
mod mcast;
#[path = "umad_sa/mod.rs"]
mod support;
mod umad_sim;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{run_with_deadline, status, test_dir};
use fabric_ibsim_harness::saquery::{gid, OpenSm, SaqueryRecord};
use fabric_ibsim_harness::{find_tool, Ibsim, SHIM};
use fabric_proto::v1 as pb;
use fabric_sa::records::McMemberRecord;
use fabric_topology::{EndPortId, Fabric, Guid, Remote};
use mcast::sim::{check_pkeys, cycles, on_each_host, partitions_file, path_pkey, wait_mfts};
use mcast::tree::{check_all, check_delivery, check_tree, levels, same_as_daemon, shapes_text};
use mcast::{
    answer, by_mgid, fabricctl_json, groups, members_of, mgid_norm, mgid_text, on_other_leaves, record, sample,
    start_fabricd, wait_groups, wait_sa, wait_saquery_groups, Dead, IPOIB_V4, IPOIB_V6,
};
use support::{attach, fabric_saquery, host, read_lids, tool_port, PREFIX};
use umad_sim::next_generation;

/// 8 leaves × 8 CAs, 4 spines: 64 CAs, 12 switches.
const SMALL: &str = "PGFT(2;8,8;1,4;1,1)";
/// 16 leaves × 8 CAs, 8 middle switches, 4 top switches with two parallel cables to each
/// middle switch below: 128 CAs, 28 switches.
const THREE_LEVELS: &str = "PGFT(3;8,4,4;1,2,2;1,1,2)";
/// The SM_Key of the tests that proxy-join the manager's own port (a trusted requester).
const SM_KEY: u64 = 0x0123_4567_89ab_cdef;

/// Fails the test (never skips it) when a tool or the shim is missing.
fn require_tools() {
    assert!(
        Path::new(SHIM).is_file(),
        "the umad2sim shim {SHIM} is not installed (apt-get install libumad2sim0 ibsim-utils)"
    );
    for t in ["ibsim", "opensm", "saquery", "ibroute", "smpquery"] {
        find_tool(t);
    }
    // Built (when stale) here, before any deadline runs: the first `fabric-saquery` run of a
    // test would otherwise include a nested `cargo build` of fabric-umad-probe, minutes on a
    // loaded machine after a change to fabric-sa or fabric-umad.
    support::fabric_saquery_binary();
    // Likewise `fabricctl` (`fabricctl_json`).
    common::fabricctl_binary();
}

fn generate(spec: &str) -> Fabric {
    fabric_topology::gen::generate_str(spec, None).expect("generate the fat-tree")
}

#[test]
fn saquery_lists_the_ipoib_groups_as_opensm_does_plus_the_ipv6_one() {
    require_tools();
    let dir = test_dir("umad-mcast-ipoib");
    let f = generate(SMALL);
    let th = host(&f, tool_port(&f));
    let one_group = |g: &[SaqueryRecord]| !g.is_empty();

    // OpenSM 3.3.23 on the same fabric: its groups by saquery -g and by fabric-saquery.
    let osm_dir = dir.join("opensm");
    std::fs::create_dir_all(&osm_dir).expect("mkdir");
    let (osm_groups, osm_records) = {
        let sim = Ibsim::start(&osm_dir, &fabric_topology::ibnet::write(&f), host(&f, EndPortId(0)));
        let mut osm = OpenSm::start(&sim, &osm_dir, sim.host(), &[]);
        osm.wait_subnet_up(Duration::from_secs(30));
        let g = wait_saquery_groups(&sim, &th, Duration::from_secs(20), one_group);
        let (st, recs) = answer(&fabric_saquery(&sim, &th, &["mcmr"], Duration::from_secs(10)));
        assert_eq!(st, 0, "OpenSM: fabric-saquery mcmr status");
        (g, recs)
    };
    let osm_by = by_mgid(&osm_groups);
    assert_eq!(
        osm_by.keys().collect::<Vec<_>>(),
        [IPOIB_V4],
        "OpenSM's groups: {osm_groups:#?}"
    );
    assert_eq!(osm_by[IPOIB_V4].n("Mlid"), 0xc000);

    // fabricd on a fresh simulator of the same fabric.
    let fd_dir = dir.join("fabricd");
    std::fs::create_dir_all(&fd_dir).expect("mkdir");
    let (sim, d) = start_fabricd(&fd_dir, &f, "", "");
    run_with_deadline(90, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));
        let t0 = Instant::now();
        let fd_groups = wait_saquery_groups(&sim, &th, Duration::from_secs(20), |g| g.len() >= 2);
        eprintln!("saquery -g (fabricd): {} groups in {:?}", fd_groups.len(), t0.elapsed());
        let fd_by = by_mgid(&fd_groups);
        assert_eq!(
            fd_by.keys().map(String::as_str).collect::<BTreeSet<_>>(),
            BTreeSet::from([IPOIB_V4, IPOIB_V6]),
            "fabricd's groups: {fd_groups:#?}"
        );
        // The IPv4 broadcast group: every field saquery prints equals OpenSM's.
        assert_eq!(
            fd_by[IPOIB_V4].fields, osm_by[IPOIB_V4].fields,
            "IPv4 broadcast group vs OpenSM"
        );
        let v6 = &fd_by[IPOIB_V6];
        assert_eq!(v6.n("Mlid"), 0xc001, "the IPv6 group takes the next MLID");
        for k in ["Mtu", "pkey", "Rate", "SL"] {
            assert_eq!(v6.get(k), fd_by[IPOIB_V4].get(k), "IPv6 group {k} vs the IPv4 one");
        }

        // Whole records: as OpenSM's but for the requester-dependent fields.
        let (st, recs) = answer(&fabric_saquery(&sim, &th, &["mcmr"], Duration::from_secs(10)));
        assert_eq!(st, 0);
        let norm = |r: &McMemberRecord| McMemberRecord {
            port_gid: Default::default(),
            join_state: 0,
            proxy_join: 0,
            ..r.clone()
        };
        let osm_v4 = osm_records
            .iter()
            .find(|r| mgid_text(r) == IPOIB_V4)
            .expect("OpenSM's IPv4 record");
        let fd_v4 = recs
            .iter()
            .find(|r| mgid_text(r) == IPOIB_V4)
            .expect("fabricd's IPv4 record");
        assert_eq!(
            norm(fd_v4),
            norm(osm_v4),
            "MCMemberRecord of the IPv4 broadcast group vs OpenSM"
        );
        assert_eq!(fd_v4.qkey, 0x0b1b);
        let fd_v6 = recs
            .iter()
            .find(|r| mgid_text(r) == IPOIB_V6)
            .expect("fabricd's IPv6 record");
        assert_eq!(
            (fd_v6.qkey, fd_v6.pkey, fd_v6.mtu, fd_v6.rate),
            (fd_v4.qkey, fd_v4.pkey, fd_v4.mtu, fd_v4.rate)
        );

        // The daemon lists both as well-known groups without members.
        let g = groups(&mut c, false).await;
        let listed: BTreeMap<u32, (String, bool, usize)> = g
            .groups
            .iter()
            .map(|x| (x.mlid, (mgid_norm(&x.mgid), x.well_known, x.members.len())))
            .collect();
        assert_eq!(
            listed,
            BTreeMap::from([
                (0xc000, (IPOIB_V4.to_string(), true, 0)),
                (0xc001, (IPOIB_V6.to_string(), true, 0))
            ]),
            "ListMulticastGroups"
        );
        assert!(g.enabled && g.not_programmed.is_empty(), "{g:?}");
    });
}

/// A fresh MGID of the tests (transient flag, link-local scope, not an SA-assigned one).
const TEST_MGID: &str = "ff12:e01b::1:2";

#[test]
fn a_join_and_a_leave_from_the_client_create_and_remove_a_group() {
    require_tools();
    let dir = test_dir("umad-mcast-join");
    let f = generate(SMALL);
    let tool = tool_port(&f);
    let th = host(&f, tool);
    let [x, y] = on_other_leaves(&f, &[EndPortId(0), tool], 2)[..] else {
        unreachable!()
    };
    let (xg, yg) = (f.end_port(x).port_guid, f.end_port(y).port_guid);
    let (sim, d) = start_fabricd(&dir, &f, "", "");
    let level = levels(&f);
    let no_dead = Dead::new();
    run_with_deadline(120, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));
        let run = |e: EndPortId, args: &[&str]| {
            let t0 = Instant::now();
            let r = fabric_saquery(&sim, &host(&f, e), args, Duration::from_secs(10));
            eprintln!("fabric-saquery {args:?}: {:?}", t0.elapsed());
            r
        };

        // X creates the group.
        let r = &record(&run(x, &["join", "--mgid", TEST_MGID, "--create"]), "X's create");
        let mlid = r.mlid;
        assert_eq!(mgid_text(r), TEST_MGID);
        assert_eq!(
            (r.port_gid.guid(), r.join_state, r.qkey, r.pkey),
            (xg, 1, 0x0b1b, 0xffff)
        );
        assert_eq!(mlid, 0xc002, "the lowest MLID after the two IPoIB groups'");
        let seen = wait_saquery_groups(&sim, &th, Duration::from_secs(10), |g| g.len() == 3);
        assert_eq!(
            by_mgid(&seen)[TEST_MGID].n("Mlid"),
            u64::from(mlid),
            "saquery -g: {seen:#?}"
        );
        let listed = fabricctl_json(&d, &["mcast", "--json"]);
        let group = listed["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .find(|g| g["mgid"].as_str().map(mgid_norm).as_deref() == Some(TEST_MGID))
            .unwrap_or_else(|| panic!("fabricctl mcast: no {TEST_MGID}:\n{listed:#}"));
        assert_eq!(group["mlid"], format!("{mlid:#06x}"));
        assert_eq!(group["members"][0]["port_guid"], format!("0x{xg:016x}"), "{group:#}");
        assert_eq!(group["members"][0]["join_state"], 1);

        // Y joins as NonMember: both receive, through one tree.
        let r = record(
            &run(y, &["join", "--mgid", TEST_MGID, "--join-state", "non"]),
            "Y's join",
        );
        assert_eq!((r.mlid, r.join_state), (mlid, 2));
        wait_groups(&d, &mut c, "two members", Duration::from_secs(10), |g| {
            members_of(g, u32::from(mlid)) == BTreeMap::from([(xg, 1), (yg, 2)])
        })
        .await;
        let receivers = BTreeSet::from([xg, yg]);
        let (_, shape) = wait_mfts(&sim, &th, &f, tool, &no_dead, Duration::from_secs(10), |m| {
            let s = check_tree(&f, m, u64::from(mlid), &receivers, &no_dead, &level)?;
            check_delivery(&f, m, u64::from(mlid), &receivers, &no_dead)?;
            Ok(s)
        });
        assert_eq!(shape.switches, 3, "two leaves and one spine: {shape:?}");

        // Y leaves (DeleteResp: the JoinState kept, none), then X: the group goes.
        let r = record(
            &run(y, &["leave", "--mgid", TEST_MGID, "--join-state", "non"]),
            "Y's leave",
        );
        assert_eq!(r.join_state, 0, "Y's leave: the JoinState kept");
        record(&run(x, &["leave", "--mgid", TEST_MGID]), "X's leave");
        let seen = wait_saquery_groups(&sim, &th, Duration::from_secs(10), |g| g.len() == 2);
        assert!(!by_mgid(&seen).contains_key(TEST_MGID), "{seen:#?}");
        wait_groups(&d, &mut c, "group removed", Duration::from_secs(10), |g| {
            g.groups.len() == 2
        })
        .await;
        let listed = fabricctl_json(&d, &["mcast", "--json"]);
        assert!(
            listed["groups"]
                .as_array()
                .expect("groups")
                .iter()
                .all(|g| g["mgid"].as_str().map(mgid_norm).as_deref() != Some(TEST_MGID)),
            "{listed:#}"
        );
        wait_mfts(&sim, &th, &f, tool, &no_dead, Duration::from_secs(10), |m| {
            match m.iter().find(|(_, t)| !t.is_empty()) {
                Some((g, t)) => Err(format!("switch 0x{g:016x} still forwards {t:?}")),
                None => Ok(()),
            }
        });

        // Its MLID was released: the next create gets it again; leaving twice is refused.
        let r = record(&run(y, &["join", "--mgid", "ff12:e01b::1:3", "--create"]), "Y's create");
        assert_eq!(r.mlid, mlid, "MLID reuse");
        record(&run(y, &["leave", "--mgid", "ff12:e01b::1:3"]), "Y's leave");
        let (st, _) = answer(&run(y, &["leave", "--mgid", "ff12:e01b::1:3"]));
        assert_eq!(st, 0x0200, "leaving a group that is gone: ERR_REQ_INVALID");
    });
}

#[test]
fn mfts_form_one_tree_spanning_the_members_also_after_cables_are_removed() {
    require_tools();
    let dir = test_dir("umad-mcast-trees");
    let f = generate(THREE_LEVELS);
    let level = levels(&f);
    assert_eq!((f.num_end_ports(), f.num_switches()), (128, 28), "{THREE_LEVELS}");
    let sm = EndPortId(0);
    let tool = tool_port(&f);
    let th = host(&f, tool);
    let guid = |e: EndPortId| f.end_port(e).port_guid;
    // Members join from their own host; the manager's host runs no client (a second process
    // on its node would take the SA's MADs), its port joins the all-CA group by proxy.
    let pair: Vec<EndPortId> = vec![EndPortId(9), EndPortId(f.num_end_ports() as u32 - 1)];
    let thirty = sample(&f, 30, &[sm]);
    let all: Vec<EndPortId> = f.end_port_ids().collect();
    let sm_key = format!("0x{SM_KEY:016x}");
    let (mut sim, d) = start_fabricd(&dir, &f, &format!("sm_key = {SM_KEY:#x}"), "");
    run_with_deadline(300, async {
        let mut c = d.ready().await;
        let s0 = next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));

        let t0 = Instant::now();
        let within = Duration::from_secs(10);
        let pair_mgid = "ff12:e01b::2";
        let thirty_mgid = "ff12:e01b::30";
        let join = |mgid: &str, create: bool| {
            let mut a = vec!["join".to_string(), "--mgid".into(), mgid.to_string()];
            if create {
                a.push("--create".into());
            }
            a
        };
        on_each_host(&sim, &f, &pair[..1], 1, within, |_| join(pair_mgid, true));
        on_each_host(&sim, &f, &thirty[..1], 1, within, |_| join(thirty_mgid, true));
        on_each_host(&sim, &f, &pair[1..], 1, within, |_| join(pair_mgid, false));
        on_each_host(&sim, &f, &thirty[1..], 4, within, |_| join(thirty_mgid, false));
        let others: Vec<EndPortId> = all.iter().copied().filter(|&e| e != sm).collect();
        on_each_host(&sim, &f, &others, 4, within, |_| join(IPOIB_V4, false));
        let sm_gid = gid(PREFIX, guid(sm));
        let r = fabric_saquery(
            &sim,
            &th,
            &["join", "--mgid", IPOIB_V4, "--port-gid", &sm_gid, "--sm-key", &sm_key],
            within,
        );
        record(&r, "proxy join of the manager's port");
        eprintln!(
            "{} joins from {} hosts in {:?}",
            2 + 30 + 128,
            2 + 30 + 127,
            t0.elapsed()
        );

        let set = |v: &[EndPortId]| -> BTreeSet<Guid> { v.iter().map(|&e| guid(e)).collect() };
        let g = wait_groups(&d, &mut c, "every member joined", Duration::from_secs(20), |g| {
            g.groups.len() == 4 && g.groups.iter().map(|x| x.members.len()).sum::<usize>() == 2 + 30 + 128
        })
        .await;
        let mlid_of = |g: &pb::ListMulticastGroupsResponse, mgid: &str| -> u16 {
            let m = g
                .groups
                .iter()
                .find(|x| mgid_norm(&x.mgid) == mgid)
                .unwrap_or_else(|| panic!("no group {mgid}"));
            u16::try_from(m.mlid).expect("16-bit MLID")
        };
        let mut want = vec![
            (mlid_of(&g, pair_mgid), set(&pair)),
            (mlid_of(&g, thirty_mgid), set(&thirty)),
            (mlid_of(&g, IPOIB_V4), set(&all)),
        ];
        for (m, r) in &want {
            assert_eq!(
                members_of(&g, u32::from(*m)).keys().copied().collect::<BTreeSet<_>>(),
                *r,
                "{m:#x}"
            );
        }
        let no_dead = Dead::new();
        let t0 = Instant::now();
        let (mfts, shapes) = wait_mfts(&sim, &th, &f, tool, &no_dead, Duration::from_secs(20), |m| {
            check_all(&f, m, &want, &no_dead, &level)
        });
        eprintln!("trees checked in {:?}:\n{}", t0.elapsed(), shapes_text(&shapes));
        let g = groups(&mut c, true).await;
        same_as_daemon(&g, &mfts).unwrap_or_else(|e| panic!("{e}"));
        // The group of 30 spreads over more than one leaf: its root is above the leaves.
        assert!(shapes[1].1.links > 0 && shapes[2].1.switches > 16, "{shapes:?}");

        // Unlink a leaf uplink of the 30-group's tree, a top switch cable of the all-CA
        // tree, and the cable of a member of the 30-group (its memberships go).
        let s1 = status(&mut c).await;
        let mut dead = Dead::new();
        let mut cmds = Vec::new();
        let tree_link = |mlid: u16, lower_level: u32, avoid: &Dead| {
            f.switch_ids()
                .filter(|s| level[s] == lower_level)
                .flat_map(|s| f.switch(s).external_ports().map(move |(p, port)| (s, p, port.remote)))
                .find_map(|(s, p, r)| {
                    let Remote::Switch { sw: t, port: q } = r else {
                        return None;
                    };
                    let on = |x, y: u8| {
                        mfts.get(&f.switch(x).guid)
                            .and_then(|m| m.get(&u64::from(mlid)))
                            .is_some_and(|v| v.contains(&u32::from(y)))
                    };
                    (level[&t] > lower_level && on(s, p) && on(t, q) && !avoid.contains(&(f.switch(s).guid, p)))
                        .then(|| ((f.switch(s).guid, p), (f.switch(t).guid, q)))
                })
                .unwrap_or_else(|| panic!("no tree link of {mlid:#x} above level {lower_level}"))
        };
        let (a, b) = tree_link(want[1].0, 0, &dead);
        dead.extend([a, b]);
        let (a2, b2) = tree_link(want[2].0, 1, &dead);
        assert_ne!(a.0, a2.0);
        dead.extend([a2, b2]);
        let victim = *thirty
            .iter()
            .find(|e| !pair.contains(e) && **e != tool)
            .expect("a member");
        let (vleaf, vport) = attach(&f, victim);
        dead.insert((f.switch(vleaf).guid, vport));
        for (g, p) in [a, a2, (f.switch(vleaf).guid, vport)] {
            cmds.push(format!("Unlink \"S-{g:016x}\"[{p}]"));
        }
        eprintln!("unlinking: {cmds:?}");
        let t0 = Instant::now();
        for cmd in &cmds {
            sim.console(cmd);
        }
        next_generation(&d, &mut c, s1.generation, Duration::from_secs(30)).await;
        let vg = guid(victim);
        want[1].1.remove(&vg);
        want[2].1.remove(&vg);
        let want2 = want.clone();
        let g = wait_groups(
            &d,
            &mut c,
            "the unlinked member left its groups",
            Duration::from_secs(30),
            |g| {
                want2
                    .iter()
                    .all(|(m, r)| members_of(g, u32::from(*m)).keys().copied().collect::<BTreeSet<_>>() == *r)
            },
        )
        .await;
        let (mfts, shapes) = wait_mfts(&sim, &th, &f, tool, &dead, Duration::from_secs(30), |m| {
            check_all(&f, m, &want, &dead, &level)
        });
        eprintln!(
            "trees checked {:?} after the unlinks:\n{}",
            t0.elapsed(),
            shapes_text(&shapes)
        );
        let g2 = groups(&mut c, true).await;
        assert_eq!(g2.generation, g.generation.max(g2.generation));
        same_as_daemon(&g2, &mfts).unwrap_or_else(|e| panic!("{e}"));
        assert!(s0.generation < g2.generation);
    });
}

/// Join/leave cycles of the acceptance.
const CYCLES: usize = 10_000;
/// Cycles of the variant with SendOnlyNonMember (the same code path as CYCLES's).
const PARTIAL_CYCLES: usize = 2_000;

#[test]
fn ten_thousand_send_only_join_and_partial_leave_cycles_leave_no_mlid_allocated() {
    require_tools();
    let dir = test_dir("umad-mcast-cycles");
    let f = generate(SMALL);
    let tool = tool_port(&f);
    let th = host(&f, tool);
    let [x] = on_other_leaves(&f, &[EndPortId(0), tool], 1)[..] else {
        unreachable!()
    };
    let (sim, d) = start_fabricd(&dir, &f, "", "");
    let n = CYCLES.to_string();
    run_with_deadline(900, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));
        let ok_all = |v: &serde_json::Value, count: usize, what: &str| {
            let want = serde_json::json!({ "0x0000": count });
            assert_eq!(v["cycles"], count, "{what}: {v:#}");
            assert_eq!(v["join_statuses"], want, "{what}: {v:#}");
            assert_eq!(v["leave_statuses"], want, "{what}: {v:#}");
            assert_eq!(
                v["distinct_mlids"], 1,
                "{what}: every join answered with one MLID: {v:#}"
            );
            eprintln!(
                "{what}: {count} cycles in {:.1} s ({:.0}/s); join p50 {} µs p99 {} µs, leave p50 {} µs p99 {} µs",
                v["seconds"].as_f64().unwrap_or(0.0),
                v["cycles_per_s"].as_f64().unwrap_or(0.0),
                v["join"]["p50_us"],
                v["join"]["p99_us"],
                v["leave"]["p50_us"],
                v["leave"]["p99_us"]
            );
        };

        // A send-only member's join/partial-leave on a new group each cycle, the case where
        // OpenSM 3.3.23 leaks an MLID per cycle (measured: ERR_NO_RESOURCES after 1 022
        // cycles, tests/mcast-bench.sh): FullMember + SendOnlyFullMember creates the group,
        // leaving FullMember leaves no full member, so the group must go with its MLID.
        let v = cycles(
            &sim,
            &th,
            &[
                "--count",
                &n,
                "--mgid",
                "ff12:e01b::7:0",
                "--fresh-mgid",
                "--create",
                "--join-state",
                "full+send-only-full",
                "--leave-state",
                "full",
            ],
            Duration::from_secs(600),
        );
        ok_all(
            &v,
            CYCLES,
            "FullMember+SendOnlyFullMember create, partial leave, new MGID each cycle",
        );
        assert_eq!(v["min_mlid"], "0xc002", "{v:#}");
        // The same with SendOnlyNonMember.
        let m = PARTIAL_CYCLES.to_string();
        let v = cycles(
            &sim,
            &th,
            &[
                "--count",
                &m,
                "--mgid",
                "ff12:e01b::7:0",
                "--fresh-mgid",
                "--create",
                "--join-state",
                "full+send-only",
                "--leave-state",
                "full",
            ],
            Duration::from_secs(600),
        );
        ok_all(
            &v,
            PARTIAL_CYCLES,
            "FullMember+SendOnlyNonMember create, partial leave, new MGID each cycle",
        );
        assert_eq!(v["min_mlid"], "0xc002", "{v:#}");

        // SendOnlyNonMember join and leave of an existing group (X's).
        let r = fabric_saquery(
            &sim,
            &host(&f, x),
            &["join", "--mgid", TEST_MGID, "--create"],
            Duration::from_secs(10),
        );
        let mlid = record(&r, "X's create").mlid;
        let v = cycles(
            &sim,
            &th,
            &["--count", &n, "--mgid", TEST_MGID, "--join-state", "send-only"],
            Duration::from_secs(600),
        );
        ok_all(&v, CYCLES, "SendOnlyNonMember join + leave of an existing group");
        assert_eq!(v["min_mlid"], format!("{mlid:#06x}"), "{v:#}");
        let r = fabric_saquery(
            &sim,
            &host(&f, x),
            &["leave", "--mgid", TEST_MGID],
            Duration::from_secs(10),
        );
        record(&r, "X's leave");

        // Nothing but the two IPoIB groups is allocated: the daemon, fabricctl, saquery and
        // the switches agree, and fabricd still serves.
        let g = wait_groups(&d, &mut c, "only the IPoIB groups", Duration::from_secs(20), |g| {
            g.groups.len() == 2
        })
        .await;
        let mlids: Vec<u32> = g.groups.iter().map(|x| x.mlid).collect();
        assert_eq!(mlids, [0xc000, 0xc001], "{g:#?}");
        let listed = fabricctl_json(&d, &["mcast", "--json"]);
        let mlids: Vec<&str> = listed["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .map(|g| g["mlid"].as_str().expect("mlid"))
            .collect();
        assert_eq!(mlids, ["0xc000", "0xc001"], "{listed:#}");
        let seen = wait_saquery_groups(&sim, &th, Duration::from_secs(10), |g| g.len() == 2);
        assert_eq!(
            by_mgid(&seen).keys().map(String::as_str).collect::<BTreeSet<_>>(),
            BTreeSet::from([IPOIB_V4, IPOIB_V6])
        );
        wait_mfts(&sim, &th, &f, tool, &Dead::new(), Duration::from_secs(20), |m| match m
            .iter()
            .find(|(_, t)| !t.is_empty())
        {
            Some((g, t)) => Err(format!("switch 0x{g:016x} still forwards {t:?}")),
            None => Ok(()),
        });
        let r = fabric_saquery(
            &sim,
            &th,
            &["join", "--mgid", "ff12:e01b::8:1", "--create"],
            Duration::from_secs(10),
        );
        assert_eq!(
            record(&r, "a create after the cycles").mlid,
            0xc002,
            "a create after the cycles"
        );
        let s = status(&mut c).await;
        assert_eq!(s.phase, pb::Phase::Idle as i32, "{s:?}");
    });
}

#[test]
fn partitions_program_pkeys_on_members_only_and_a_reload_moves_a_node() {
    require_tools();
    let dir = test_dir("umad-mcast-partitions");
    let f = generate(SMALL);
    let tool = tool_port(&f);
    let th = host(&f, tool);
    let guid = |e: EndPortId| f.end_port(e).port_guid;
    let ports = on_other_leaves(&f, &[EndPortId(0), tool], 5);
    let (b1, b2, r1, r2, other) = (
        guid(ports[0]),
        guid(ports[1]),
        guid(ports[2]),
        guid(ports[3]),
        guid(ports[4]),
    );
    let file = dir.join("partitions.conf");
    std::fs::write(&file, partitions_file(&[b1, b2], &[r1, r2])).expect("write partitions");
    let extra = format!("[partitions]\nfile = \"{}\"\n", file.display());
    let (sim, d) = start_fabricd(&dir, &f, "", &extra);
    run_with_deadline(240, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
        wait_sa(&sim, &th, Duration::from_secs(20));
        let lids = read_lids(&sim, &th);
        let lid = |g: Guid| lids.base(g);

        let t0 = Instant::now();
        let mut last = check_pkeys(&sim, &th, &f, &lids, &[b1, b2], &[r1, r2]);
        while let Err(e) = &last {
            assert!(t0.elapsed() < Duration::from_secs(20), "P_Key tables:\n{e}");
            std::thread::sleep(Duration::from_millis(200));
            last = check_pkeys(&sim, &th, &f, &lids, &[b1, b2], &[r1, r2]);
        }
        eprintln!(
            "smpquery pkeys on {} CAs as configured after {:?}",
            f.num_end_ports(),
            t0.elapsed()
        );
        // Paths: within blue with its P_Key; none between blue and red; limited to full
        // through the default partition (the source's own entry).
        assert_eq!(path_pkey(&sim, &th, lid(b1), lid(b2)), Some(0x8001), "blue to blue");
        assert_eq!(path_pkey(&sim, &th, lid(r1), lid(r2)), Some(0x8002), "red to red");
        assert_eq!(path_pkey(&sim, &th, lid(b1), lid(r1)), None, "blue to red");
        assert_eq!(path_pkey(&sim, &th, lid(r2), lid(b2)), None, "red to blue");
        assert_eq!(
            path_pkey(&sim, &th, lid(b1), lid(other)),
            Some(0x7fff),
            "blue (limited) to a full member"
        );
        assert_eq!(
            path_pkey(&sim, &th, lid(other), lid(r1)),
            Some(0xffff),
            "a full member to red (limited)"
        );
        // Blue is an IPoIB partition: its broadcast groups exist; red's do not.
        let g = groups(&mut c, false).await;
        let mgids: BTreeSet<String> = g.groups.iter().map(|x| mgid_norm(&x.mgid)).collect();
        assert!(mgids.contains("ff12:401b:8001::ffff:ffff"), "{mgids:?}");
        assert!(!mgids.iter().any(|m| m.contains(":8002:")), "{mgids:?}");
        let listed = fabricctl_json(&d, &["partitions", "--json"]);
        let count = |name: &str| {
            listed["partitions"]
                .as_array()
                .expect("partitions")
                .iter()
                .find(|p| p["name"] == name)
                .map(|p| p["members"].as_array().map_or(0, Vec::len))
        };
        assert_eq!((count("blue"), count("red")), (Some(2), Some(2)), "{listed:#}");

        // Move r1 from red to blue and reload.
        let before = status(&mut c).await;
        std::fs::write(&file, partitions_file(&[b1, b2, r1], &[r2])).expect("rewrite partitions");
        let t0 = Instant::now();
        d.signal(libc::SIGHUP);
        let mut last = check_pkeys(&sim, &th, &f, &lids, &[b1, b2, r1], &[r2]);
        while let Err(e) = &last {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "P_Key tables after the reload:\n{e}\n{}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
            last = check_pkeys(&sim, &th, &f, &lids, &[b1, b2, r1], &[r2]);
        }
        eprintln!("reload: P_Key tables as configured {:?} after SIGHUP", t0.elapsed());
        let t0 = Instant::now();
        loop {
            let now = (
                path_pkey(&sim, &th, lid(b1), lid(r1)),
                path_pkey(&sim, &th, lid(r1), lid(r2)),
            );
            if now == (Some(0x8001), None) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "PathRecords after the reload: {now:x?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            path_pkey(&sim, &th, lid(r2), lid(b2)),
            None,
            "red to blue after the reload"
        );
        // The same process all along (uptime kept; the gRPC connection still answers).
        let s = status(&mut c).await;
        assert_eq!(s.phase, pb::Phase::Idle as i32);
        assert!(s.uptime_s >= before.uptime_s, "no restart: {before:?} then {s:?}");
        assert!(d.log_text().contains("partitions"), "{}", d.log_text());
        let listed = fabricctl_json(&d, &["partitions", "--json"]);
        let blue_members = listed["partitions"]
            .as_array()
            .expect("partitions")
            .iter()
            .find(|p| p["name"] == "blue")
            .map(|p| p["members"].as_array().map_or(0, Vec::len));
        assert_eq!(blue_members, Some(3), "{listed:#}");
    });
}

/// M_Key on the daemon: the key in force is written to the state directory (`m-key`, mode 0600)
/// and never to the log; a restart whose configuration names no key manages the fabric with the
/// key in force (ibsim 0.10 stores no M_Key, so enforcement itself is shown on the agent
/// simulator: `fabric-agent-sim/tests/oob_mcast_mkey.rs`).
#[test]
fn the_m_key_in_force_is_kept_in_the_state_directory_across_a_restart() {
    use std::os::unix::fs::PermissionsExt;
    require_tools();
    let dir = test_dir("umad-mcast-mkey");
    let f = generate(SMALL);
    let key = "0x00001234abcd5678";
    let (sim, mut d) = start_fabricd(
        &dir,
        &f,
        "m_key = 0x00001234abcd5678\nm_key_protect = 2\nm_key_lease_s = 60",
        "",
    );
    let file = d.state.join("m-key");
    run_with_deadline(120, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(30)).await;
    });
    let text = std::fs::read_to_string(&file).expect("the M_Key is in the state directory");
    assert_eq!(text.trim(), key);
    let mode = std::fs::metadata(&file).expect("stat m-key").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the M_Key file is its owner's only");
    assert!(
        !d.log_text().to_lowercase().contains("1234abcd5678"),
        "the key is never logged"
    );

    // Restart with a configuration that names no key: the key in force is used and kept.
    d.kill9();
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, crate::umad_sim::config("")).expect("write config");
    let d2 = crate::umad_sim::spawn_daemon(&dir, &cfg, &sim.env());
    run_with_deadline(120, async {
        let mut c = d2.ready().await;
        next_generation(&d2, &mut c, 0, Duration::from_secs(30)).await;
        let s = status(&mut c).await;
        assert!(
            s.ready,
            "the restarted manager manages the fabric with the key in force: {s:?}"
        );
    });
    assert_eq!(
        std::fs::read_to_string(&file).expect("m-key").trim(),
        key,
        "the key in force stays"
    );
    assert!(
        !d2.log_text().to_lowercase().contains("1234abcd5678"),
        "the key is never logged"
    );
}
