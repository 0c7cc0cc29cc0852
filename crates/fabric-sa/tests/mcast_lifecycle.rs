//! Multicast groups over time: MLID allocation and reuse, the send-only join/leave cycles that
//! made OpenSM run out of MLIDs, the MLID limit, IPoIB well-known groups from the partitions,
//! persistence in the registry file, members of ports that go out of service, the listener.

mod mcast_support;
mod registry_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use fabric_sa::mcast::join_state::*;
use fabric_sa::mcast::{McastState, MLID_START};
use fabric_sa::partitions::{ipv4_broadcast_mgid, IPOIB_QKEY};
use fabric_sa::records::Gid;
use fabric_sa::registry::Registry;
use fabric_sa::service::RegistryStore;
use fabric_sa::wire::status;
use fabric_sa::{IpoibGroupSpec, Partitions, SaService};
use mcast_support::*;
use proptest::prelude::*;
use registry_support::{ca_guid, t0};

fn mlids(sa: &SaService) -> Vec<u16> {
    sa.mcast_groups().iter().map(|g| g.mlid).collect()
}

#[test]
fn mlids_are_the_lowest_free_ones_and_are_reused() {
    let sa = mc_service(4);
    for n in 1..=3 {
        one(&join(&sa, CREATE, &rec(mgid(n), 0, FULL), 0));
    }
    assert_eq!(mlids(&sa), [MLID_START, MLID_START + 1, MLID_START + 2]);
    one(&leave(&sa, &rec(mgid(2), 0, FULL), 0));
    assert_eq!(mlids(&sa), [MLID_START, MLID_START + 2]);
    assert_eq!(one(&join(&sa, CREATE, &rec(mgid(4), 0, FULL), 0)).mlid, MLID_START + 1);
    assert_eq!(one(&join(&sa, CREATE, &rec(mgid(5), 0, FULL), 0)).mlid, MLID_START + 3);
}

#[test]
fn ten_thousand_send_only_join_and_partial_leave_cycles_leave_no_mlid_allocated() {
    let sa = mc_service(3);
    // A group with a full member (CA 0); CA 1 joins as a sender and leaves, again and again.
    one(&join(&sa, CREATE, &rec(mgid(1), 0, FULL), 0));
    // CA 2 creates its own group as full member and sender, then leaves FullMember only (a
    // partial leave): no full member is left, the group and its MLID go.
    for i in 0..10_000 {
        let m = one(&join(&sa, JOIN, &rec(mgid(1), 1, SEND_ONLY_NON), 1));
        assert_eq!((m.mlid, m.join_state), (MLID_START, SEND_ONLY_NON));
        assert_eq!(one(&leave(&sa, &rec(mgid(1), 1, SEND_ONLY_NON), 1)).join_state, 0);
        let c = one(&join(&sa, CREATE, &rec(mgid(2), 2, FULL_SEND_ONLY), 2));
        assert_eq!(c.mlid, MLID_START + 1, "cycle {i}: the same MLID again");
        assert_eq!(one(&leave(&sa, &rec(mgid(2), 2, FULL), 2)).join_state, 0);
        assert_eq!(sa.registry().mcast().mlids_in_use(), 1, "cycle {i}");
    }
    one(&leave(&sa, &rec(mgid(1), 0, FULL), 0));
    assert_eq!(sa.registry().mcast().mlids_in_use(), 0);
    assert!(sa.mcast_groups().is_empty());
}

#[test]
fn beyond_the_switches_multicast_fdb_cap_a_create_is_no_resources() {
    let mut s = mc_subnet(2, &[]);
    // The switch says MulticastFDBCap 3.
    s.nodes_mut()[0].switch_info.as_mut().unwrap()[4..6].copy_from_slice(&3u16.to_be_bytes());
    let sa = registry_support::service(s);
    for n in 1..=3 {
        one(&join(&sa, CREATE, &rec(mgid(n), 0, FULL), 0));
    }
    let r = join(&sa, CREATE, &rec(mgid(4), 0, FULL), 0);
    assert_eq!(r.header.status, status::NO_RESOURCES);
    assert_eq!(sa.mcast_groups().len(), 3);
    // Without a cap reported, 1024.
    assert_eq!(fabric_sa::mcast::mlid_limit(&mc_subnet(1, &[])), 1024);
}

fn ipoib(pkey: u16) -> IpoibGroupSpec {
    IpoibGroupSpec {
        pkey,
        mgids: vec![ipv4_broadcast_mgid(pkey, 2)],
        mtu: 4,
        rate: 3,
        sl: 0,
        scope: 0,
        qkey: IPOIB_QKEY,
        tclass: 0,
        flow_label: 0,
    }
}

#[test]
fn ipoib_broadcast_groups_are_created_kept_without_members_and_removed_with_their_partition() {
    let sa = mc_service(3);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    sa.set_mcast_listener(Box::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
    }));
    let all = |pkeys: &[u16]| (0..3).map(|i| (ca_guid(i), pkeys.to_vec())).collect::<Vec<_>>();
    let mut parts = Partitions {
        tables: all(&[0xffff, 0x8002]).into_iter().collect(),
        ipoib_groups: vec![ipoib(0x7fff), ipoib(0x0002)],
    };
    sa.set_partitions(Arc::new(parts.clone()));
    let groups = sa.mcast_groups();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].mgid.to_string(), "ff12:401b:ffff::ffff:ffff");
    assert_eq!(
        (
            groups[0].mlid,
            groups[0].pkey,
            groups[0].qkey,
            groups[0].mtu,
            groups[0].well_known
        ),
        (MLID_START, 0xffff, IPOIB_QKEY, 4, true)
    );
    assert_eq!((&groups[1].mgid.0[4..6], groups[1].pkey), (&[0x80u8, 0x02][..], 0x8002));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // IPoIB joins it as a NonMember... and as a full member, then leaves: the group stays.
    let bcast = Gid(ipv4_broadcast_mgid(0xffff, 2));
    let m = one(&join(&sa, JOIN, &rec(bcast, 0, FULL), 0));
    assert_eq!((m.mlid, m.qkey, m.mtu, m.rate), (MLID_START, IPOIB_QKEY, 4, 3));
    one(&leave(&sa, &rec(bcast, 0, FULL), 0));
    assert_eq!(sa.mcast_groups().len(), 2);
    // Another IPoIB group of the partition can be created now that the broadcast one exists.
    let mut all_nodes = bcast;
    all_nodes.0[12..16].copy_from_slice(&[0, 0, 0, 1]);
    let mut r = rec(all_nodes, 1, FULL);
    r.qkey = IPOIB_QKEY;
    assert_eq!(one(&join(&sa, CREATE, &r, 1)).mlid, MLID_START + 2);
    // The same configuration again: no change, no call.
    let (v, n) = (sa.mcast_version(), calls.load(Ordering::SeqCst));
    sa.set_partitions(Arc::new(parts.clone()));
    assert_eq!((sa.mcast_version(), calls.load(Ordering::SeqCst)), (v, n));
    // Partition 2 leaves the configuration: its empty broadcast group goes; the default one
    // has a member now (CA 2), it stays as an ordinary group when unlisted.
    one(&join(&sa, JOIN, &rec(bcast, 2, FULL), 2));
    parts.ipoib_groups = vec![];
    sa.set_partitions(Arc::new(parts.clone()));
    let left: Vec<(u16, bool)> = sa.mcast_groups().iter().map(|g| (g.mlid, g.well_known)).collect();
    assert_eq!(left, [(MLID_START, false), (MLID_START + 2, false)]);
    // CA 2 loses the default partition: it leaves the broadcast group, which then goes.
    parts.tables.insert(ca_guid(2), vec![0x8002]);
    sa.set_partitions(Arc::new(parts));
    assert_eq!(mlids(&sa), [MLID_START + 2]);
    assert!(calls.load(Ordering::SeqCst) >= 4);
}

/// Keeps every saved registry as JSON.
#[derive(Clone, Default)]
struct MemStore(Arc<Mutex<Vec<String>>>);

impl RegistryStore for MemStore {
    fn save(&self, r: &Registry) -> Result<(), String> {
        self.0
            .lock()
            .unwrap()
            .push(serde_json::to_string(r).map_err(|e| e.to_string())?);
        Ok(())
    }
}

#[test]
fn groups_are_saved_before_the_answer_and_come_back_after_a_restart() {
    let store = MemStore::default();
    let sa = SaService::new(Registry::default(), Some(Box::new(store.clone())));
    sa.publish(mc_subnet(3, &[]));
    sa.set_serving(true);
    sa.set_trusted_key(9);
    one(&join(&sa, CREATE, &rec(mgid(1), 0, FULL), 0));
    let proxy = sa
        .handle(
            &mc_mad(fabric_sa::wire::METHOD_SET, JOIN, &rec(mgid(1), 2, SEND_ONLY_NON), 9),
            &registry_support::from_ca(1),
            t0(),
        )
        .unwrap();
    assert_eq!(one(&proxy).proxy_join, 1);
    one(&join(&sa, CREATE, &rec(Gid::default(), 1, FULL), 1));
    let saved = store.0.lock().unwrap().last().cloned().unwrap();
    assert!(saved.contains("\"version\":2"), "{saved}");
    let back: Registry = serde_json::from_str(&saved).unwrap();
    assert_eq!(back, sa.registry());
    // A restarted SA answers from it, allocates after it, assigns new MGIDs after it.
    let again = SaService::new(back, None);
    again.publish(mc_subnet(3, &[]));
    again.set_serving(true);
    assert_eq!(again.mcast_groups(), sa.mcast_groups());
    assert_eq!(
        one(&join(&again, CREATE, &rec(mgid(3), 0, FULL), 0)).mlid,
        MLID_START + 2
    );
    let fresh = one(&join(&again, CREATE, &rec(Gid::default(), 1, FULL), 1)).mgid;
    assert!(sa.mcast_groups().iter().all(|g| g.mgid != fresh));
    // The member joined by a proxy is still one.
    let r = sa.registry().mcast().groups();
    assert_eq!(r[0].members.len(), 2);
    // Without groups the file stays version 1 (an older fabricd reads it).
    let empty = serde_json::to_string(&Registry::default()).unwrap();
    assert!(empty.contains("\"version\":1") && !empty.contains("mcast"), "{empty}");
}

#[test]
fn a_bad_group_in_the_file_names_the_entry_and_field() {
    let sa = mc_service(2);
    one(&join(&sa, CREATE, &rec(mgid(1), 0, FULL), 0));
    one(&join(&sa, CREATE, &rec(mgid(2), 0, FULL), 0));
    let good = serde_json::to_value(sa.registry()).unwrap();
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|v| v["mcast_groups"][0]["record"] = "00".into()),
            "mcast_groups[0].record: 2 hex digits",
        ),
        (
            Box::new(|v| v["mcast_groups"][1]["members"][0]["join_state"] = 0.into()),
            "mcast_groups[1].members[0].join_state: 0",
        ),
        (
            Box::new(|v| {
                let first = v["mcast_groups"][0].clone();
                v["mcast_groups"][1] = first;
            }),
            "mcast_groups[1]: same MGID as mcast_groups[0]",
        ),
    ];
    for (edit, why) in cases {
        let mut v = good.clone();
        edit(&mut v);
        let e = serde_json::from_value::<Registry>(v).unwrap_err().to_string();
        assert!(e.contains(why), "{why}: {e}");
    }
}

#[test]
fn members_of_ports_that_go_out_of_service_are_removed_and_empty_groups_deleted() {
    let sa = mc_service(3);
    sa.set_partitions(Arc::new(Partitions {
        tables: (0..3).map(|i| (ca_guid(i), vec![0xffff])).collect(),
        ipoib_groups: vec![ipoib(0x7fff)],
    }));
    let bcast = Gid(ipv4_broadcast_mgid(0xffff, 2));
    one(&join(&sa, JOIN, &rec(bcast, 0, FULL), 0));
    one(&join(&sa, CREATE, &rec(mgid(1), 0, FULL), 0));
    one(&join(&sa, JOIN, &rec(mgid(1), 1, NON), 1));
    one(&join(&sa, CREATE, &rec(mgid(2), 1, FULL), 1));
    let v = sa.mcast_version();
    // CA 1 goes down: it leaves group 1; group 2 (only CA 1) is deleted, MLID released.
    sa.publish(mc_subnet(3, &[1]));
    assert!(sa.mcast_version() > v);
    let g = sa.mcast_groups();
    let view: Vec<(u16, Vec<u64>)> = g
        .iter()
        .map(|g| (g.mlid, g.members.iter().map(|m| m.port_guid).collect()))
        .collect();
    assert_eq!(
        view,
        [(MLID_START, vec![ca_guid(0)]), (MLID_START + 1, vec![ca_guid(0)])]
    );
    // CA 0 goes down: group 1 goes; the well-known broadcast group stays, empty.
    sa.publish(mc_subnet(3, &[0, 1]));
    let g = sa.mcast_groups();
    assert_eq!(g.len(), 1);
    assert!(g[0].well_known && g[0].members.is_empty());
    // A snapshot that did not change the ports: nothing happens.
    let v = sa.mcast_version();
    sa.publish(mc_subnet(3, &[0, 1]));
    assert_eq!(sa.mcast_version(), v);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random joins and leaves of 4 ports on 3 MGIDs: every group has a distinct MLID among
    /// the lowest ones, a non-well-known group always has a full member, no member has
    /// JoinState 0, and once everyone left no MLID remains.
    #[test]
    fn random_joins_and_leaves_keep_the_mlid_invariants(ops in prop::collection::vec((0u16..3, 0usize..4, 1u8..16, any::<bool>()), 1..80)) {
        let sa = mc_service(4);
        for (g, ca, state, is_join) in ops {
            let r = rec(mgid(g), ca, state);
            if is_join { join(&sa, CREATE, &r, ca); } else { leave(&sa, &r, ca); }
            let reg = sa.registry();
            let st: &McastState = reg.mcast();
            let groups = st.groups();
            let mut seen: Vec<u16> = groups.iter().map(|g| g.mlid).collect();
            seen.dedup();
            prop_assert_eq!(seen.len(), groups.len());
            prop_assert!(groups.iter().all(|g| (g.mlid - MLID_START) < groups.len() as u16 + 3));
            for g in &groups {
                prop_assert!(g.members.iter().any(|m| m.join_state & FULL != 0));
                prop_assert!(g.members.iter().all(|m| m.join_state != 0));
            }
            prop_assert_eq!(st.mlids_in_use(), groups.len());
        }
        for g in 0..3 {
            for ca in 0..4 {
                let held = sa.registry().mcast().groups().iter()
                    .flat_map(|x| x.members.iter().filter(|m| m.port_guid == ca_guid(ca) && x.mgid == mgid(g)).map(|m| m.join_state).collect::<Vec<_>>())
                    .next();
                if let Some(js) = held {
                    leave(&sa, &rec(mgid(g), ca, js), ca);
                }
            }
        }
        prop_assert_eq!(sa.registry().mcast().mlids_in_use(), 0);
    }
}

#[test]
fn a_standby_installs_the_tables_and_creates_the_groups_when_it_starts_serving() {
    let store = MemStore::default();
    let sa = SaService::new(Registry::default(), Some(Box::new(store.clone())));
    sa.publish(mc_subnet(2, &[]));
    sa.set_partitions(Arc::new(Partitions {
        tables: (0..2).map(|i| (ca_guid(i), vec![0xffff])).collect(),
        ipoib_groups: vec![ipoib(0x7fff)],
    }));
    assert!(sa.partitions().is_some());
    assert!(sa.mcast_groups().is_empty(), "a standby creates nothing");
    assert!(store.0.lock().unwrap().is_empty(), "and writes nothing");
    sa.set_serving(true);
    assert_eq!(mlids(&sa), [MLID_START]);
    assert_eq!(store.0.lock().unwrap().len(), 1);
}
