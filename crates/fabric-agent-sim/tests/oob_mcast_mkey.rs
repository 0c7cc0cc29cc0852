//! End-to-end, with `fabric-agent-sim` as a separate process and the `oob` driver in process:
//! MFT blocks written through the driver, read back and checked by the simulator's multicast
//! verification (which must fail, naming the MLID and end port, for a broken tree); and the
//! management key keeping a second manager from changing the switches.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{upload_all, Sim};
use fabric_oob::proto::{
    CommandRequest, DescribeRequest, GetCountersRequest, McastReport, ReadLftBlockRequest, SetManagementKeyRequest,
    SetPortStateRequest, SlToVlTable, VerifyAllPairsRequest, VerifyMulticastRequest,
};
use fabric_oob::{OobConfig, OobDriver, READ_KEY_METADATA};
use fabric_southbound::{LftBlockWrite, MftBlockWrite, SouthboundDriver, MFT_BLOCK_SIZE, MLID_BASE};
use fabric_topology::{fmt_guid, EndPortId, Fabric, Guid, Lid, PortNum, Remote, SwitchId};
use tonic::Code;

const SPEC: &str = "XGFT(2;4,4;1,4)";

fn cfg(sim: &Sim) -> OobConfig {
    let mut c = OobConfig::new(&sim.inventory);
    c.connect_timeout = Duration::from_millis(300);
    c.request_timeout = Duration::from_secs(2);
    c.unreachable_deadline = Duration::from_millis(800);
    c.max_connections = 4;
    c.max_retries = 2;
    c
}

fn keyed(sim: &Sim, key: u64, protect: u8) -> OobConfig {
    let mut c = cfg(sim);
    c.management_key = key;
    c.management_key_protect = protect;
    c
}

fn is_leaf(f: &Fabric, s: SwitchId) -> bool {
    f.switch(s)
        .external_ports()
        .any(|(_, p)| matches!(p.remote, Remote::EndPort(_)))
}

fn port_to(f: &Fabric, from: SwitchId, to: SwitchId) -> PortNum {
    f.switch(from)
        .external_ports()
        .find(|(_, p)| matches!(p.remote, Remote::Switch { sw, .. } if sw == to))
        .map(|(n, _)| n)
        .expect("cabled")
}

/// Port bits of one MLID, as MFT blocks: (switch, block, position) -> entries.
#[derive(Default, Clone)]
struct Bits(BTreeMap<(Guid, u32, u8), [u16; MFT_BLOCK_SIZE]>);

impl Bits {
    fn set(&mut self, f: &Fabric, s: SwitchId, port: PortNum, mlid: Lid, on: bool) {
        let off = mlid - MLID_BASE;
        let key = (f.switch(s).guid, off / 32, port / 16);
        let e = &mut self.0.entry(key).or_insert([0; MFT_BLOCK_SIZE])[(off % 32) as usize];
        if on {
            *e |= 1 << (port % 16);
        } else {
            *e &= !(1 << (port % 16));
        }
    }
    fn blocks(&self) -> Vec<MftBlockWrite> {
        self.0
            .iter()
            .map(|(&(switch, block, position), &entries)| MftBlockWrite {
                switch,
                block,
                position,
                entries,
            })
            .collect()
    }
}

/// A tree through `spine` for `members`: their leaf ports, both ends of each leaf-spine cable.
fn tree(f: &Fabric, members: &[EndPortId], spine: SwitchId, mlid: Lid) -> Bits {
    let mut b = Bits::default();
    for &m in members {
        let (leaf, port) = f.end_port(m).attach.unwrap();
        b.set(f, leaf, port, mlid, true);
        b.set(f, leaf, port_to(f, leaf, spine), mlid, true);
        b.set(f, spine, port_to(f, spine, leaf), mlid, true);
    }
    b
}

async fn mcast(sim: &Sim) -> McastReport {
    sim.control()
        .await
        .verify_multicast(VerifyMulticastRequest {})
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mft_blocks_through_the_driver_read_back_and_multicast_verify() {
    let sim = Sim::start(&["--generate", SPEC], "mcast", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let f = driver.discover().await.unwrap();
    let spines: Vec<SwitchId> = f.switch_ids().filter(|&s| !is_leaf(&f, s)).collect();
    // A group of 3 end ports on 3 different leaves, through one spine.
    let mut members = Vec::new();
    for i in 0..f.num_end_ports() as u32 {
        let leaf = f.end_port(EndPortId(i)).attach.unwrap().0;
        if members.len() < 3
            && members
                .iter()
                .all(|&m: &EndPortId| f.end_port(m).attach.unwrap().0 != leaf)
        {
            members.push(EndPortId(i));
        }
    }
    assert_eq!(members.len(), 3);
    let mlid = MLID_BASE + 37; // block 1, entry 5
    let good = tree(&f, &members, spines[0], mlid);
    let blocks = good.blocks();
    let rep = driver.write_mft_blocks(&blocks).await.unwrap();
    assert_eq!(rep.blocks_written, blocks.len());
    for b in &blocks {
        assert_eq!(
            driver.read_mft_block(b.switch, b.block, b.position).await.unwrap(),
            b.entries,
            "switch {} block {} position {}",
            fmt_guid(b.switch),
            b.block,
            b.position
        );
    }
    // Never written: all zero.
    assert_eq!(
        driver.read_mft_block(blocks[0].switch, 100, 0).await.unwrap(),
        [0; MFT_BLOCK_SIZE]
    );
    let mut ctl = sim.control().await;
    let c = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    assert_eq!(c.mft_blocks_written, blocks.len() as u64);

    let r = mcast(&sim).await;
    assert_eq!(
        (r.mlids_checked, r.floods, r.failure_count),
        (1, 3, 0),
        "{:?}",
        r.failures
    );
    // The all-pairs verification carries the same multicast check.
    let all = ctl
        .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.multicast.unwrap().failure_count, 0);

    // A missing member bit: the spine no longer sends to the third member's leaf. Each other
    // member's packet misses it; the failures name the MLID and that end port.
    let c_port = f.end_port(members[2]).port_guid;
    let mut broken = good.clone();
    let c_leaf = f.end_port(members[2]).attach.unwrap().0;
    broken.set(&f, spines[0], port_to(&f, spines[0], c_leaf), mlid, false);
    driver.write_mft_blocks(&broken.blocks()).await.unwrap();
    let r = mcast(&sim).await;
    assert_eq!((r.failed_mlids, r.failure_count), (1, 2), "{:?}", r.failures);
    for x in &r.failures {
        assert_eq!((x.mlid, x.end_port, x.copies), (mlid, c_port, 0));
        assert!(
            x.reason.contains("0xc025") && x.reason.contains(&fmt_guid(c_port)),
            "{}",
            x.reason
        );
    }

    // A loop: the tree also through a second spine between the first two members' leaves.
    let mut looped = good.clone();
    for &m in &members[..2] {
        let leaf = f.end_port(m).attach.unwrap().0;
        looped.set(&f, leaf, port_to(&f, leaf, spines[1]), mlid, true);
        looped.set(&f, spines[1], port_to(&f, spines[1], leaf), mlid, true);
    }
    driver.write_mft_blocks(&looped.blocks()).await.unwrap();
    let r = mcast(&sim).await;
    assert!(r.failure_count > 0);
    let b_port = f.end_port(members[1]).port_guid;
    assert!(
        r.failures
            .iter()
            .any(|x| x.end_port == b_port && x.copies == 2 && x.reason.contains("0xc025")),
        "{:?}",
        r.failures
    );
    assert!(r.failures.iter().any(|x| x.switch_guid != 0), "{:?}", r.failures);

    // Back to the good tree: clean again (the check is about the tables, not history).
    let mut fix = looped.clone();
    for &m in &members[..2] {
        let leaf = f.end_port(m).attach.unwrap().0;
        fix.set(&f, leaf, port_to(&f, leaf, spines[1]), mlid, false);
        fix.set(&f, spines[1], port_to(&f, spines[1], leaf), mlid, false);
    }
    driver.write_mft_blocks(&fix.blocks()).await.unwrap();
    assert_eq!(mcast(&sim).await.failure_count, 0);

    // A position beyond the switch's ports is refused by the agent, naming the switch.
    let s0 = f.switch(SwitchId(0)).guid;
    let e = driver
        .write_mft_blocks(&[MftBlockWrite {
            switch: s0,
            block: 0,
            position: 15,
            entries: [1; MFT_BLOCK_SIZE],
        }])
        .await
        .unwrap_err();
    assert!(e.to_string().contains(&fmt_guid(s0)), "{e}");
    // One switch whose agent is down fails only its own blocks (the LFT path's rule): the
    // others are written, the error names it.
    let spine_guid = f.switch(spines[0]).guid;
    ctl.command(CommandRequest {
        line: format!("kill {spine_guid:#x}"),
    })
    .await
    .unwrap();
    let other = tree(&f, &members, spines[0], mlid + 1).blocks();
    let e = driver.write_mft_blocks(&other).await.unwrap_err();
    assert!(e.to_string().contains(&fmt_guid(spine_guid)), "{e}");
    for b in other.iter().filter(|b| b.switch != spine_guid) {
        assert_eq!(
            driver.read_mft_block(b.switch, b.block, b.position).await.unwrap(),
            b.entries
        );
    }
    ctl.command(CommandRequest {
        line: format!("restore {spine_guid:#x}"),
    })
    .await
    .unwrap();
    assert_eq!(
        driver.write_mft_blocks(&other).await.unwrap().blocks_written,
        other.len()
    );
    // BXI has no partitions: P_Key tables stay unsupported.
    assert!(matches!(
        driver.write_pkey_blocks(&[]).await,
        Err(fabric_southbound::DriverError::Unsupported(_))
    ));
}

fn refusals_of(c: &fabric_oob::proto::Counters, g: Guid) -> (u64, u64) {
    c.refusals
        .iter()
        .find(|r| r.switch_guid == g)
        .map_or((0, 0), |r| (r.writes, r.reads))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_manager_without_the_key_cannot_change_a_switch() {
    let sim = Sim::start(&["--generate", SPEC], "mkey", false);
    // Above i64::MAX: the whole 64-bit range is usable.
    let key = 0x8000_0000_0000_00a5;
    let first = OobDriver::open(keyed(&sim, key, 1)).unwrap();
    let f = first.discover().await.unwrap();
    assert!(
        first.discovery_warnings().is_empty(),
        "{:?}",
        first.discovery_warnings()
    );
    let mut agents = sim.agents().await;
    for (g, c) in &mut agents {
        let d = c.describe(DescribeRequest {}).await.unwrap().into_inner();
        assert!(d.management_key_set, "{g:#x}");
        assert_eq!(
            (d.management_protect, d.management_key),
            (1, 0),
            "{g:#x}: level 1 never shows the key"
        );
    }
    let (lids, lfts) = common::route(&f, 0xFF_FFFF);
    first.configure_lids(&f, &lids).await.unwrap();
    assert_eq!(
        upload_all(&first, &f, &lfts).await,
        f.num_switches() * lfts.num_blocks()
    );
    let mut ctl = sim.control().await;
    let ok = |r: fabric_oob::proto::VerifyAllPairsReply| r.unreachable_count == 0 && r.pairs_checked > 0;
    assert!(ok(ctl
        .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
        .await
        .unwrap()
        .into_inner()));
    let before = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    assert_eq!(before.management_key_refusals, 0);

    // A second manager without the key discovers (reads are open at level 1), learns that
    // every switch is protected by someone else's key, and cannot write.
    let second = OobDriver::open(cfg(&sim)).unwrap();
    let f2 = second.discover().await.unwrap();
    assert_eq!(f2.num_switches(), f.num_switches());
    assert_eq!(second.management_key_refusals().len(), f.num_switches());
    for s in f.switches() {
        assert!(
            second
                .discovery_warnings()
                .iter()
                .any(|w| w.contains(&fmt_guid(s.guid)) && w.contains("protected")),
            "{:?}",
            second.discovery_warnings()
        );
    }
    let leaf = f.end_port(EndPortId(0)).attach.unwrap().0;
    let leaf_guid = f.switch(leaf).guid;
    let e = second
        .write_lft_blocks(&[LftBlockWrite {
            switch: leaf_guid,
            block: 0,
            entries: [255; 64],
        }])
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&fmt_guid(leaf_guid)) && msg.contains("another manager"),
        "{msg}"
    );
    assert!(second
        .configuration_warnings()
        .iter()
        .any(|w| w.contains(&fmt_guid(leaf_guid))));
    let e = second.set_port_state(leaf_guid, 1, false).await.unwrap_err();
    assert!(e.to_string().contains(&fmt_guid(leaf_guid)), "{e}");
    // Nor can its address set-up: no switch takes it.
    assert!(second.configure_lids(&f2, &lids).await.is_err());

    // A third manager with a wrong key: every switch refuses its key at discovery, named.
    let third = OobDriver::open(keyed(&sim, 0x5eed_5eed_5eed_5eed, 1)).unwrap();
    third.discover().await.unwrap();
    let w = third.discovery_warnings();
    for s in f.switches() {
        assert!(
            w.iter()
                .any(|m| m.contains(&fmt_guid(s.guid)) && m.contains("management key")),
            "{} not reported: {w:?}",
            fmt_guid(s.guid)
        );
        assert!(w.iter().all(|m| !m.contains("5eed")), "the key is never shown: {w:?}");
    }
    assert_eq!(third.management_key_refusals().len(), f.num_switches());

    // A raw client: each refused write is PERMISSION_DENIED naming the switch, counted on it.
    let (g, c) = agents.iter_mut().find(|(g, _)| *g == leaf_guid).unwrap();
    let was = refusals_of(&ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner(), *g);
    let e = c
        .set_port_state(SetPortStateRequest {
            port: 1,
            up: false,
            management_key: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(e.message().contains(&fmt_guid(*g)), "{}", e.message());
    let e = c
        .set_management_key(SetManagementKeyRequest {
            key: 7,
            protect: 0,
            management_key: 7,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = c
        .set_sl_to_vl(SlToVlTable {
            vl_of_sl: vec![0; 16],
            management_key: key ^ 1,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let after = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    assert_eq!(refusals_of(&after, *g), (was.0 + 3, was.1));
    assert!(after.management_key_refusals >= 3 + 3 + f.num_switches() as u64);

    // Nothing changed: the LFTs are what the first manager wrote, every pair still reachable,
    // and the first manager keeps managing with its key.
    for s in f.switch_ids() {
        assert_eq!(
            &first.read_lft_block(f.switch(s).guid, 0).await.unwrap()[..],
            lfts.block(s, 0)
        );
    }
    assert!(ok(ctl
        .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
        .await
        .unwrap()
        .into_inner()));
    assert_eq!(
        upload_all(&first, &f, &lfts).await,
        f.num_switches() * lfts.num_blocks()
    );
    assert!(first.management_key_refusals().is_empty());

    // Protect level 2: reads need the key too (metadata), except Describe.
    let strict = OobDriver::open(keyed(&sim, key, 2)).unwrap();
    strict.discover().await.unwrap();
    assert!(
        strict.discovery_warnings().is_empty(),
        "{:?}",
        strict.discovery_warnings()
    );
    assert_eq!(
        &strict.read_lft_block(leaf_guid, 0).await.unwrap()[..],
        lfts.block(leaf, 0)
    );
    let (_, c) = agents.iter_mut().find(|(g, _)| *g == leaf_guid).unwrap();
    let e = c.read_lft_block(ReadLftBlockRequest { block: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let mut r = tonic::Request::new(ReadLftBlockRequest { block: 0 });
    r.metadata_mut()
        .insert(READ_KEY_METADATA, format!("{key:016x}").parse().unwrap());
    assert_eq!(
        c.read_lft_block(r).await.unwrap().into_inner().entries,
        lfts.block(leaf, 0)
    );
    assert_eq!(
        c.describe(DescribeRequest {})
            .await
            .unwrap()
            .into_inner()
            .management_protect,
        2
    );
    // GetPorts is refused to the keyless manager: it sees every switch down, and says why.
    let f3 = second.discover().await.unwrap();
    assert!(f3.switches().iter().all(|s| !s.up));
    assert!(
        second
            .discovery_warnings()
            .iter()
            .any(|w| w.contains(&fmt_guid(leaf_guid)) && w.contains("another manager")),
        "{:?}",
        second.discovery_warnings()
    );
    let after2 = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    assert!(refusals_of(&after2, leaf_guid).1 >= 1);

    // An administrator's reset of the key lets the second manager in again.
    ctl.command(CommandRequest {
        line: "mkey-clear all".into(),
    })
    .await
    .unwrap();
    second.discover().await.unwrap();
    second.set_port_state(leaf_guid, 1, true).await.unwrap();
    assert!(second.management_key_refusals().is_empty());
}

/// A restarted simulator (its agents come back with no key) gets the key again from the driver
/// as soon as each agent answers, without a new discovery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_set_again_on_agents_that_restarted() {
    let sim = Sim::start(&["--generate", SPEC], "mkey-restart", false);
    let driver = OobDriver::open(keyed(&sim, 0x0bad_cafe, 1)).unwrap();
    let f = driver.discover().await.unwrap();
    let mut rx = driver.subscribe_events();
    let inventory = sim.inventory.clone();
    drop(sim);
    let mut down = 0;
    while down < f.num_switches() {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Some(fabric_topology::FabricEvent::SwitchDown(_))) => down += 1,
            Ok(Some(_)) => {}
            other => panic!("only {down} switches reported down: {other:?}"),
        }
    }
    let sim = Sim::start_at(&["--generate", SPEC, "--reuse-inventory"], inventory);
    let end = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut agents = sim.agents().await;
    loop {
        let mut keyed = 0;
        for (_, c) in &mut agents {
            if c.describe(DescribeRequest {})
                .await
                .unwrap()
                .into_inner()
                .management_key_set
            {
                keyed += 1;
            }
        }
        if keyed == f.num_switches() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "{keyed} of {} agents got the key back",
            f.num_switches()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A keyless write is refused again.
    let (g, c) = &mut agents[0];
    let e = c
        .set_port_state(SetPortStateRequest {
            port: 1,
            up: true,
            management_key: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{g:#x}");
}
