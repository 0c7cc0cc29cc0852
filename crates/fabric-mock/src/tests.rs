//! Tests of the mock driver on a small hand-built two-level fabric with hand-written LFTs.
//!
//! ```text
//!        S0 (0x20)            S1 (0x21)
//!       p1 |  \ p2          p1 |  \ p2
//!          |   \______________|___ \
//!          |    ______________|    \|
//!       p3 |   /             p4     |
//!        L0 (0x10)            L1 (0x11)   leaf ports: 3 -> S0, 4 -> S1, 5-6 uncabled
//!       p1  p2               p1  p2
//!       n0  n1               n2  n3      end ports 0x100, 0x101, 0x110, 0x111
//! ```
//! S0 p1 = L0 p3, S0 p2 = L1 p3, S1 p1 = L0 p4, S1 p2 = L1 p4.
//! LIDs (LMC 1): L0 = 1, L1 = 2, S0 = 3, S1 = 4; n0 = 8/9, n1 = 10/11, n2 = 12/13, n3 = 14/15.

use super::*;
use fabric_routing::LidPlan;
use fabric_southbound::{LftBlockWrite, PacketSimulator, SouthboundDriver, WriteReport};
use fabric_topology::{FabricBuilder, NodeType};

pub(crate) const L0: Guid = 0x10;
pub(crate) const L1: Guid = 0x11;
pub(crate) const S0: Guid = 0x20;
pub(crate) const S1: Guid = 0x21;
pub(crate) const N0: Guid = 0x100;
pub(crate) const N1: Guid = 0x101;
pub(crate) const N2: Guid = 0x110;
pub(crate) const N3: Guid = 0x111;

pub(crate) fn two_level() -> Fabric {
    let mut b = FabricBuilder::new();
    let l0 = b.add_switch(L0, "leaf0", 6).unwrap();
    let l1 = b.add_switch(L1, "leaf1", 6).unwrap();
    let s0 = b.add_switch(S0, "spine0", 4).unwrap();
    let s1 = b.add_switch(S1, "spine1", 4).unwrap();
    b.connect_switches(s0, 1, l0, 3).unwrap();
    b.connect_switches(s0, 2, l1, 3).unwrap();
    b.connect_switches(s1, 1, l0, 4).unwrap();
    b.connect_switches(s1, 2, l1, 4).unwrap();
    for (i, (g, sw, p)) in [(N0, l0, 1), (N1, l0, 2), (N2, l1, 1), (N3, l1, 2)]
        .into_iter()
        .enumerate()
    {
        let ep = b
            .add_end_port(g, g | 0x1000, format!("n{i}"), 1, 1, NodeType::Compute)
            .unwrap();
        b.connect_end_port(ep, sw, p).unwrap();
    }
    b.build()
}

pub(crate) fn plan(lmc: u8) -> LidPlan {
    let base = if lmc == 1 {
        vec![8, 10, 12, 14]
    } else {
        vec![8, 9, 10, 11]
    };
    LidPlan {
        lmc,
        max_lid: IB_MAX_UNICAST_LID,
        switch_lid: vec![1, 2, 3, 4],
        end_port_base: base,
    }
}

/// Block 0 of a switch from `(lid, port)` pairs, every other entry 255.
fn block0(switch: Guid, entries: &[(Lid, u8)]) -> LftBlockWrite {
    let mut e = [NO_ROUTE; BLOCK_SIZE];
    for &(lid, port) in entries {
        e[lid as usize] = port;
    }
    LftBlockWrite {
        switch,
        block: 0,
        entries: e,
    }
}

/// Correct hand-written routes of the base LIDs and switch LIDs (n0, n2 and S0 through S0; n1,
/// n3 and S1 through S1 from the other leaf; spine to spine through L0).
fn base_lfts() -> Vec<LftBlockWrite> {
    vec![
        block0(L0, &[(1, 0), (2, 3), (3, 3), (4, 4), (8, 1), (10, 2), (12, 3), (14, 4)]),
        block0(L1, &[(1, 3), (2, 0), (3, 3), (4, 4), (8, 3), (10, 4), (12, 1), (14, 2)]),
        block0(S0, &[(1, 1), (2, 2), (3, 0), (4, 1), (8, 1), (10, 1), (12, 2), (14, 2)]),
        block0(S1, &[(1, 1), (2, 2), (3, 1), (4, 0), (8, 1), (10, 1), (12, 2), (14, 2)]),
    ]
}

pub(crate) async fn programmed() -> MockFabric {
    let f = two_level();
    let m = MockFabric::new(f.clone());
    m.configure_lids(&f, &plan(1)).await.unwrap();
    let r = m.write_lft_blocks(&base_lfts()).await.unwrap();
    assert_eq!(
        r,
        WriteReport {
            blocks_written: 4,
            retries: 0
        }
    );
    m
}

fn hop(switch: Guid, in_port: PortNum, out_port: PortNum) -> Hop {
    Hop {
        switch,
        in_port,
        out_port,
    }
}

#[tokio::test]
async fn discover_returns_the_topology_and_its_current_state() {
    let f = two_level();
    let m = MockFabric::new(f.clone());
    let d = m.discover().await.unwrap();
    assert_eq!(d, f);
    assert_eq!(d.generation(), 0);
    assert_eq!(
        d.end_ports().iter().map(|e| e.port_guid).collect::<Vec<_>>(),
        vec![N0, N1, N2, N3]
    );

    m.set_port_state(S0, 2, false).await.unwrap();
    m.set_switch_state(S1, false).await.unwrap();
    m.set_end_port_state(N1, false).await.unwrap();
    let d = m.discover().await.unwrap();
    let expect = f
        .apply(&[
            FabricEvent::LinkDown { switch: L1, port: 3 },
            FabricEvent::SwitchDown(S1),
            FabricEvent::EndPortDown(N1),
        ])
        .unwrap();
    assert_eq!(d, expect);
    assert_eq!(d.generation(), 0);

    m.set_port_state(L1, 3, true).await.unwrap();
    m.set_switch_state(S1, true).await.unwrap();
    m.set_end_port_state(N1, true).await.unwrap();
    assert_eq!(m.discover().await.unwrap(), f);
    assert_eq!(m.counters().sweeps, 3);
}

#[tokio::test]
async fn discover_keeps_initial_faults_of_the_source() {
    let f = two_level()
        .apply(&[FabricEvent::LinkDown { switch: L0, port: 4 }])
        .unwrap();
    let m = MockFabric::new(f.clone());
    assert_eq!(m.discover().await.unwrap(), f);
    m.set_port_state(S1, 1, true).await.unwrap();
    assert_eq!(m.discover().await.unwrap(), two_level());
}

#[tokio::test]
async fn write_read_round_trip() {
    let m = MockFabric::new(two_level());
    let mut e0 = [0u8; BLOCK_SIZE];
    let mut e3 = [0u8; BLOCK_SIZE];
    for i in 0..BLOCK_SIZE {
        e0[i] = (i % 7) as u8;
        e3[i] = (i % 5 + 1) as u8;
    }
    let r = m
        .write_lft_blocks(&[
            LftBlockWrite {
                switch: S0,
                block: 0,
                entries: e0,
            },
            LftBlockWrite {
                switch: S0,
                block: 3,
                entries: e3,
            },
        ])
        .await
        .unwrap();
    assert_eq!(
        r,
        WriteReport {
            blocks_written: 2,
            retries: 0
        }
    );
    assert_eq!(m.read_lft_block(S0, 0).await.unwrap(), e0);
    assert_eq!(m.read_lft_block(S0, 3).await.unwrap(), e3);
    assert_eq!(m.read_lft_block(S0, 1).await.unwrap(), [NO_ROUTE; BLOCK_SIZE]);
    assert_eq!(m.read_lft_block(S0, 9).await.unwrap(), [NO_ROUTE; BLOCK_SIZE]);
    assert_eq!(m.read_lft_block(L0, 0).await.unwrap(), [NO_ROUTE; BLOCK_SIZE]);
    assert_eq!(m.lft_entry(S0, 3 * 64 + 4).unwrap(), 5);

    let all = m.installed_lfts();
    assert_eq!(all.len(), 4);
    assert_eq!(all[&S0].len(), 4 * BLOCK_SIZE);
    assert_eq!(&all[&S0][..64], &e0[..]);
    assert_eq!(&all[&S0][64..192], &[NO_ROUTE; 128][..]);
    assert!(all[&L0].is_empty());
    let t = m.installed_lft_table();
    assert_eq!(t.num_blocks(), 4);
    assert_eq!(t.block(SwitchId(2), 3), &e3[..]);
    assert_eq!(t.row(SwitchId(0)), &[NO_ROUTE; 256][..]);
    let c = m.counters();
    assert_eq!((c.blocks_written, c.blocks_read, c.write_batches), (2, 5, 1));
}

#[tokio::test]
async fn bad_addresses_are_rejected_before_anything_is_written() {
    let m = MockFabric::new(two_level());
    let ok = LftBlockWrite {
        switch: S0,
        block: 0,
        entries: [1; BLOCK_SIZE],
    };
    let e = m
        .write_lft_blocks(&[
            ok.clone(),
            LftBlockWrite {
                switch: 0x99,
                ..ok.clone()
            },
        ])
        .await
        .unwrap_err();
    assert!(matches!(e, DriverError::UnknownSwitch(0x99)), "{e}");
    let e = m
        .write_lft_blocks(&[
            ok.clone(),
            LftBlockWrite {
                block: 768,
                ..ok.clone()
            },
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            DriverError::BlockOutOfRange {
                guid: S0,
                block: 768,
                max_blocks: 768
            }
        ),
        "{e}"
    );
    assert!(m.installed_lfts()[&S0].is_empty());
    assert!(matches!(
        m.read_lft_block(S0, 768).await,
        Err(DriverError::BlockOutOfRange { .. })
    ));
    assert!(matches!(
        m.read_lft_block(0x99, 0).await,
        Err(DriverError::UnknownSwitch(0x99))
    ));
    assert_eq!(m.caps().max_lft_blocks, Some(768));
    assert_eq!(m.caps().max_lid, 0xBFFF);
}

#[tokio::test]
async fn trace_follows_hand_written_lfts() {
    let m = programmed().await;
    assert_eq!(
        m.trace(N0, 12).unwrap(),
        vec![hop(L0, 1, 3), hop(S0, 1, 2), hop(L1, 3, 1)]
    );
    assert_eq!(
        m.trace(N0, 14).unwrap(),
        vec![hop(L0, 1, 4), hop(S1, 1, 2), hop(L1, 4, 2)]
    );
    assert_eq!(
        m.trace(N3, 10).unwrap(),
        vec![hop(L1, 2, 4), hop(S1, 2, 1), hop(L0, 4, 2)]
    );
    assert_eq!(m.trace(N0, 10).unwrap(), vec![hop(L0, 1, 2)]);
    // Switch LIDs are destinations too (LFT entry 0).
    assert_eq!(m.trace(N2, 3).unwrap(), vec![hop(L1, 1, 3), hop(S0, 2, 0)]);
    assert_eq!(m.trace_from_switch(S1, 2).unwrap(), vec![hop(S1, 0, 2), hop(L1, 4, 0)]);
    // The escape LID (base + 1) reaches the same end port once routed.
    m.write_lft_blocks(&[block0(L0, &[(13, 4)]), block0(S1, &[(13, 2)]), block0(L1, &[(13, 1)])])
        .await
        .unwrap();
    assert_eq!(
        m.trace(N1, 13).unwrap(),
        vec![hop(L0, 2, 4), hop(S1, 1, 2), hop(L1, 4, 1)]
    );
}

#[tokio::test]
async fn trace_reports_no_route_with_switch_and_lid() {
    let m = programmed().await;
    // LID 13 (n2's escape LID) is unrouted everywhere.
    assert_eq!(m.trace(N0, 13), Err(TraceError::NoRoute { switch: L0, lid: 13 }));
    // Routed at the leaf but not at the spine.
    m.write_lft_blocks(&[block0(L0, &[(1, 0), (8, 1), (10, 2), (12, 3), (14, 4), (13, 3)])])
        .await
        .unwrap();
    let e = m.trace(N0, 13).unwrap_err();
    assert_eq!(e, TraceError::NoRoute { switch: S0, lid: 13 });
    assert_eq!(
        e.to_string(),
        "switch 0x0000000000000020 has no route to LID 13 (LFT entry 255)"
    );
    // Beyond the installed table.
    assert_eq!(m.trace(N0, 5000), Err(TraceError::NoRoute { switch: L0, lid: 5000 }));
}

#[tokio::test]
async fn trace_detects_a_forwarding_loop() {
    let m = programmed().await;
    // L1 sends LID 14 back up to S0, S0 sends it down to L1: n0 -> L0 -> S1 -> L1 -> S0 -> L1 ...
    m.write_lft_blocks(&[
        block0(L1, &[(2, 0), (8, 3), (10, 4), (12, 1), (14, 3)]),
        block0(S0, &[(3, 0), (8, 1), (10, 1), (12, 2), (14, 2)]),
    ])
    .await
    .unwrap();
    assert_eq!(m.trace(N0, 14), Err(TraceError::Loop { switch: L1, lid: 14 }));
    // A loop between a leaf and a spine only.
    m.write_lft_blocks(&[block0(S0, &[(3, 0), (8, 1), (10, 1), (12, 2), (14, 1)])])
        .await
        .unwrap();
    m.write_lft_blocks(&[block0(L0, &[(1, 0), (8, 1), (10, 2), (12, 3), (14, 3)])])
        .await
        .unwrap();
    let e = m.trace(N1, 14).unwrap_err();
    assert!(
        matches!(
            e,
            TraceError::Loop {
                switch: L0 | S0,
                lid: 14
            }
        ),
        "{e}"
    );
}

#[tokio::test]
async fn trace_reports_misdelivery_and_bad_ports() {
    let m = programmed().await;
    m.write_lft_blocks(&[
        // 10 -> n0 (wrong end port), 12 -> port 5 (uncabled), 14 -> port 9 (no such port),
        // 2 (L1's LID) -> port 0 (consumed by the wrong switch).
        block0(L0, &[(1, 0), (8, 1), (10, 1), (12, 5), (14, 9), (2, 0)]),
    ])
    .await
    .unwrap();
    assert_eq!(
        m.trace(N1, 10),
        Err(TraceError::WrongEndPort {
            switch: L0,
            port: 1,
            lid: 10,
            reached: N0
        })
    );
    assert_eq!(
        m.trace(N1, 12),
        Err(TraceError::NotCabled {
            switch: L0,
            port: 5,
            lid: 12
        })
    );
    assert_eq!(
        m.trace(N1, 14),
        Err(TraceError::InvalidPort {
            switch: L0,
            port: 9,
            lid: 14
        })
    );
    assert_eq!(
        m.trace(N1, 2),
        Err(TraceError::DeliveredToSwitch { switch: L0, lid: 2 })
    );
    assert_eq!(m.trace(0x999, 8), Err(TraceError::UnknownSource(0x999)));
    m.write_lft_blocks(&base_lfts()).await.unwrap();
    m.set_end_port_state(N1, false).await.unwrap();
    assert_eq!(m.trace(N1, 8), Err(TraceError::SourceDown(N1)));
    assert_eq!(
        m.trace(N2, 10),
        Err(TraceError::DestinationDown {
            switch: L0,
            port: 2,
            lid: 10,
            dest: N1
        })
    );
}

#[tokio::test]
async fn port_down_emits_an_event_and_breaks_traces_crossing_it() {
    let m = programmed().await;
    let mut rx = m.subscribe_events();
    let mut rx2 = m.subscribe_events();
    let dropped = m.subscribe_events();
    drop(dropped);

    m.set_port_state(S0, 2, false).await.unwrap();
    assert_eq!(rx.try_recv().unwrap(), FabricEvent::LinkDown { switch: S0, port: 2 });
    assert_eq!(rx2.try_recv().unwrap(), FabricEvent::LinkDown { switch: S0, port: 2 });
    // Both directions of the cable are dead.
    assert_eq!(
        m.trace(N0, 12),
        Err(TraceError::DeadLink {
            switch: S0,
            port: 2,
            lid: 12
        })
    );
    assert_eq!(
        m.trace(N2, 8),
        Err(TraceError::DeadLink {
            switch: L1,
            port: 3,
            lid: 8
        })
    );
    // Paths not crossing it are unaffected.
    assert_eq!(m.trace(N0, 14).unwrap().len(), 3);
    // Setting the same state again is not a change.
    m.set_port_state(L1, 3, false).await.unwrap();
    assert!(rx.try_recv().is_err());

    m.set_port_state(L1, 3, true).await.unwrap();
    assert_eq!(rx.try_recv().unwrap(), FabricEvent::LinkUp { switch: L1, port: 3 });
    assert_eq!(m.trace(N0, 12).unwrap().len(), 3);

    // A cable to an end port.
    m.set_port_state(L1, 1, false).await.unwrap();
    assert_eq!(rx.try_recv().unwrap(), FabricEvent::LinkDown { switch: L1, port: 1 });
    assert_eq!(
        m.trace(N0, 12),
        Err(TraceError::DeadLink {
            switch: L1,
            port: 1,
            lid: 12
        })
    );
    assert_eq!(m.trace(N2, 8), Err(TraceError::SourceDown(N2)));
    assert_eq!(m.counters().state_changes, 3);

    let e = m.set_port_state(L1, 5, false).await.unwrap_err();
    assert!(
        matches!(
            e,
            DriverError::InvalidPort {
                guid: L1,
                port: 5,
                reason: "not cabled"
            }
        ),
        "{e}"
    );
    let e = m.set_port_state(L1, 7, false).await.unwrap_err();
    assert!(matches!(e, DriverError::InvalidPort { guid: L1, port: 7, .. }), "{e}");
    assert!(matches!(
        m.set_port_state(L1, 0, false).await,
        Err(DriverError::InvalidPort { port: 0, .. })
    ));
    assert!(matches!(
        m.set_port_state(0x42, 1, false).await,
        Err(DriverError::UnknownSwitch(0x42))
    ));
    assert!(rx.try_recv().is_err());
}

#[tokio::test]
async fn switch_down_is_unreachable_and_breaks_traces() {
    let m = programmed().await;
    let mut rx = m.subscribe_events();
    m.set_switch_state(S0, false).await.unwrap();
    assert_eq!(rx.try_recv().unwrap(), FabricEvent::SwitchDown(S0));
    assert_eq!(
        m.trace(N0, 12),
        Err(TraceError::DeadLink {
            switch: L0,
            port: 3,
            lid: 12
        })
    );
    assert_eq!(m.trace_from_switch(S0, 1), Err(TraceError::SwitchDown(S0)));
    let e = m.write_lft_blocks(&[block0(S0, &[])]).await.unwrap_err();
    assert!(matches!(e, DriverError::Unreachable { guid: S0 }), "{e}");
    assert!(matches!(
        m.read_lft_block(S0, 0).await,
        Err(DriverError::Unreachable { guid: S0 })
    ));

    // Without reset the LFT survives the power cycle.
    m.set_switch_state(S0, true).await.unwrap();
    assert_eq!(rx.try_recv().unwrap(), FabricEvent::SwitchUp(S0));
    assert_eq!(m.trace(N0, 12).unwrap().len(), 3);

    // With reset, a rebooted switch comes back with an empty LFT and no LID.
    m.set_config(MockConfig {
        reset_on_power_cycle: true,
        ..MockConfig::default()
    })
    .unwrap();
    m.set_switch_state(S0, false).await.unwrap();
    m.set_switch_state(S0, true).await.unwrap();
    assert!(m.installed_lfts()[&S0].is_empty());
    assert_eq!(m.switch_lid(S0).unwrap(), 0);
    assert_eq!(m.trace(N0, 12), Err(TraceError::NoRoute { switch: S0, lid: 12 }));
}

#[tokio::test]
async fn error_rate_retries_are_counted_and_reproducible() {
    let cfg = MockConfig {
        error_rate: 0.3,
        seed: 7,
        max_retries: 20,
        ..MockConfig::default()
    };
    let blocks: Vec<_> = (0..50u32)
        .map(|i| LftBlockWrite {
            switch: [L0, L1, S0, S1][i as usize % 4],
            block: i / 4,
            entries: [i as u8; 64],
        })
        .collect();
    let run = || async {
        let m = MockFabric::new(two_level()).with_config(cfg.clone()).unwrap();
        let r = m.write_lft_blocks(&blocks).await.unwrap();
        (r, m.counters(), m.installed_lfts())
    };
    let (r, c, lfts) = run().await;
    assert_eq!(r.blocks_written, 50);
    assert!(r.retries > 0, "30% error rate over 50 blocks gave no retry");
    assert_eq!(c.write_failures, r.retries as u64);
    assert_eq!(c.write_attempts, 50 + r.retries as u64);
    assert_eq!(c.blocks_written, 50);
    for b in &blocks {
        let start = b.block as usize * 64;
        assert_eq!(&lfts[&b.switch][start..start + 64], &b.entries[..]);
    }
    // Same seed, same failures; another seed, another sequence.
    assert_eq!(run().await.0, r);
    let m = MockFabric::new(two_level())
        .with_config(MockConfig { seed: 8, ..cfg.clone() })
        .unwrap();
    let other = m.write_lft_blocks(&blocks).await.unwrap();
    assert_eq!(other.blocks_written, 50);
}

#[tokio::test]
async fn the_write_observer_sees_every_write_that_took_effect_in_order() {
    let cfg = MockConfig {
        error_rate: 0.3,
        seed: 3,
        max_retries: 20,
        ..MockConfig::default()
    };
    let m = Arc::new(MockFabric::new(two_level()).with_config(cfg).unwrap());
    type Seen = Vec<(SwitchId, Guid, u32, [u8; 64], u64)>;
    let log: Arc<Mutex<Seen>> = Arc::default();
    let sink = log.clone();
    m.set_write_observer(Some(Arc::new(move |w: &BlockWritten<'_>| {
        lock(&sink).push((w.switch, w.guid, w.block, *w.entries, w.seq));
    })));
    // The same block of L0 written four times, with failures (re-queued attempts) in between.
    let mut blocks: Vec<_> = (0..40u32)
        .map(|i| LftBlockWrite {
            switch: [L0, L1, S0, S1][i as usize % 4],
            block: i / 4,
            entries: [i as u8; 64],
        })
        .collect();
    for v in [200u8, 201, 202] {
        blocks.push(LftBlockWrite {
            switch: L0,
            block: 0,
            entries: [v; 64],
        });
    }
    let r = m.write_lft_blocks(&blocks).await.unwrap();
    assert!(r.retries > 0);
    let seen = lock(&log).clone();
    assert_eq!(
        seen.len(),
        43,
        "one call per write that took effect, none for failed attempts"
    );
    let seqs: Vec<u64> = seen.iter().map(|s| s.4).collect();
    assert_eq!(seqs, (1..=43).collect::<Vec<_>>());
    for (sw, guid, block, entries, _) in &seen {
        assert_eq!(m.cabling().switch(*sw).guid, *guid);
        assert!(blocks
            .iter()
            .any(|b| b.switch == *guid && b.block == *block && b.entries == *entries));
    }
    // The last write of each block the observer saw is what the switch holds.
    let lfts = m.installed_lfts();
    for (_, guid, block, _, _) in &seen {
        let last = seen
            .iter()
            .rev()
            .find(|s| s.1 == *guid && s.2 == *block)
            .map(|s| s.3)
            .unwrap();
        let start = *block as usize * 64;
        assert_eq!(&lfts[guid][start..start + 64], &last[..]);
    }
    m.set_write_observer(None);
    m.write_lft_blocks(&blocks[..1]).await.unwrap();
    assert_eq!(lock(&log).len(), 43, "no call after the observer is removed");
}

#[tokio::test]
async fn writes_fail_after_max_retries() {
    let cfg = MockConfig {
        error_rate: 1.0,
        max_retries: 3,
        ..MockConfig::default()
    };
    let m = MockFabric::new(two_level()).with_config(cfg).unwrap();
    let e = m.write_lft_blocks(&[block0(L0, &[(1, 0)])]).await.unwrap_err();
    assert!(
        matches!(
            e,
            DriverError::Transient {
                guid: L0,
                attempts: 4,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.is_transient());
    assert_eq!(m.counters().write_failures, 4);
    assert!(m.installed_lfts()[&L0].is_empty());
    // Back to a healthy fabric at run time.
    m.set_config(MockConfig::default()).unwrap();
    assert_eq!(m.write_lft_blocks(&[block0(L0, &[(1, 0)])]).await.unwrap().retries, 0);
}

#[test]
fn config_is_validated() {
    let bad = MockConfig {
        error_rate: 1.5,
        max_parallel: 0,
        ..MockConfig::default()
    };
    let e = MockFabric::new(two_level()).with_config(bad).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("error_rate 1.5") && msg.contains("max_parallel"), "{msg}");
    assert!(MockConfig {
        error_rate: f64::NAN,
        ..MockConfig::default()
    }
    .validate()
    .is_err());
    assert_eq!(
        MockConfig {
            max_lid: 63,
            ..MockConfig::default()
        }
        .max_lft_blocks(),
        1
    );
    assert_eq!(
        MockConfig {
            max_lid: 64,
            ..MockConfig::default()
        }
        .max_lft_blocks(),
        2
    );
}

#[tokio::test(start_paused = true)]
async fn latency_is_one_op_per_wave_of_block_writes() {
    let cfg = MockConfig {
        op_latency: Duration::from_millis(10),
        max_parallel: 4,
        ..MockConfig::default()
    };
    let m = MockFabric::new(two_level()).with_config(cfg).unwrap();
    let blocks: Vec<_> = (0..10u32)
        .map(|i| LftBlockWrite {
            switch: L0,
            block: i,
            entries: [1; 64],
        })
        .collect();
    let t = tokio::time::Instant::now();
    m.write_lft_blocks(&blocks).await.unwrap();
    assert_eq!(t.elapsed(), Duration::from_millis(30)); // waves of 4 + 4 + 2
    let t = tokio::time::Instant::now();
    m.read_lft_block(L0, 0).await.unwrap();
    assert_eq!(t.elapsed(), Duration::from_millis(10));
    // Zero latency: no time passes at all.
    m.set_config(MockConfig::default()).unwrap();
    let t = tokio::time::Instant::now();
    m.write_lft_blocks(&blocks).await.unwrap();
    m.discover().await.unwrap();
    assert_eq!(t.elapsed(), Duration::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_uploads_all_land() {
    let m = Arc::new(MockFabric::new(two_level()));
    let mut tasks = Vec::new();
    for t in 0..8u32 {
        let m = m.clone();
        tasks.push(tokio::spawn(async move {
            let blocks: Vec<_> = [L0, L1, S0, S1]
                .iter()
                .flat_map(|&sw| {
                    (0..16u32).map(move |b| LftBlockWrite {
                        switch: sw,
                        block: t * 16 + b,
                        entries: [t as u8; 64],
                    })
                })
                .collect();
            m.write_lft_blocks(&blocks).await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().blocks_written, 64);
    }
    for (_, row) in m.installed_lfts() {
        assert_eq!(row.len(), 128 * 64);
        for (b, chunk) in row.chunks(64).enumerate() {
            assert_eq!(chunk, &[(b / 16) as u8; 64][..]);
        }
    }
}

#[tokio::test]
async fn lid_plans_are_checked() {
    let f = two_level();
    let m = MockFabric::new(f.clone());
    m.configure_lids(&f, &plan(1)).await.unwrap();
    assert_eq!(m.end_port_lid(N2).unwrap(), (12, 1));
    assert_eq!(m.switch_lid(S1).unwrap(), 4);

    let mut p = plan(1);
    p.end_port_base[1] = 9;
    let e = m.configure_lids(&f, &p).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("base LID 9 of 0x0000000000000101 is not aligned"),
        "{e}"
    );
    let mut p = plan(1);
    p.switch_lid[3] = 11; // n1's escape LID
    assert!(matches!(
        m.configure_lids(&f, &p).await,
        Err(DriverError::LidConflict {
            lid: 11,
            first: N1,
            second: S1
        } | DriverError::LidConflict {
            lid: 11,
            first: S1,
            second: N1
        })
    ));
    let mut p = plan(1);
    p.end_port_base[3] = 0xBFFE;
    assert!(m.configure_lids(&f, &p).await.is_ok());
    p.end_port_base[3] = 0xC000;
    assert!(matches!(
        m.configure_lids(&f, &p).await,
        Err(DriverError::InvalidLidPlan(_))
    ));
    let mut p = plan(1);
    p.switch_lid.pop();
    assert!(matches!(
        m.configure_lids(&f, &p).await,
        Err(DriverError::InvalidLidPlan(_))
    ));
    // A fabric naming a switch the mock does not have.
    let mut b = FabricBuilder::new();
    b.add_switch(0x77, "stranger", 4).unwrap();
    let other = b.build();
    let p = LidPlan {
        lmc: 0,
        max_lid: 0xBFFF,
        switch_lid: vec![1],
        end_port_base: vec![],
    };
    assert!(matches!(
        m.configure_lids(&other, &p).await,
        Err(DriverError::UnknownSwitch(0x77))
    ));
    // Failed plans leave the installed one in place.
    assert_eq!(m.end_port_lid(N3).unwrap(), (0xBFFE, 1));
    assert_eq!(m.counters().lid_configs, 2);
}

#[tokio::test]
async fn verify_all_pairs_counts_by_hand() {
    let m = programmed().await;
    // 4 live end ports: 4 * 3 ordered pairs, all routed.
    let r = m.verify_all_pairs(false);
    assert_eq!(
        r,
        ReachReport {
            pairs_checked: 12,
            unreachable: vec![],
            unreachable_count: 0,
            disconnected: 0
        }
    );

    // L1 loses its route to n0 (2 pairs: n2->n0, n3->n0); L0 sends n3's LID to n0 (2 pairs:
    // n0->n3, n1->n3).
    m.write_lft_blocks(&[
        block0(L1, &[(2, 0), (8, 255), (10, 4), (12, 1), (14, 2)]),
        block0(L0, &[(1, 0), (8, 1), (10, 2), (12, 3), (14, 1)]),
    ])
    .await
    .unwrap();
    let r = m.verify_all_pairs(false);
    assert_eq!((r.pairs_checked, r.unreachable_count, r.disconnected), (12, 4, 0));
    let pairs: Vec<_> = r.unreachable.iter().map(|(s, d, _)| (*s, *d)).collect();
    assert_eq!(pairs, vec![(N0, N3), (N1, N3), (N2, N0), (N3, N0)]);
    assert!(r.unreachable[0].2.contains("does not own it"), "{}", r.unreachable[0].2);
    assert_eq!(
        r.unreachable[2].2,
        "switch 0x0000000000000011 has no route to LID 8 (LFT entry 255)"
    );

    // No escape routes at all: every pair fails on its escape LID.
    let r = m.verify_all_pairs(true);
    assert_eq!((r.pairs_checked, r.unreachable_count), (12, 12));

    // Cut L1 off: 2 * 2 * 2 pairs across are disconnected, not checked; intra-leaf pairs are fine.
    m.set_port_state(L1, 3, false).await.unwrap();
    m.set_port_state(L1, 4, false).await.unwrap();
    let r = m.verify_all_pairs(false);
    assert_eq!((r.pairs_checked, r.unreachable_count, r.disconnected), (4, 0, 8));

    // A dead end port is neither source nor destination.
    m.set_port_state(L1, 3, true).await.unwrap();
    m.set_port_state(L1, 4, true).await.unwrap();
    m.set_end_port_state(N3, false).await.unwrap();
    let r = m.verify_all_pairs(false);
    // 3 live: 6 pairs; n2 -> n0 still has no route.
    assert_eq!((r.pairs_checked, r.unreachable_count), (6, 1));
    assert_eq!((r.unreachable[0].0, r.unreachable[0].1), (N2, N0));
}

/// The daemon's Trace and VerifyReachability see the fabric through the driver-neutral
/// `PacketSimulator`: the answers are those of the simulated state, changes included.
#[tokio::test]
async fn packet_simulator_answers_from_the_simulated_state() {
    let m = Arc::new(programmed().await);
    let sim: Arc<dyn PacketSimulator> = m.clone();
    assert_eq!(
        sim.trace(N0, 12).unwrap(),
        vec![hop(L0, 1, 3), hop(S0, 1, 2), hop(L1, 3, 1)]
    );
    assert_eq!(sim.trace(N0, 13), Err(TraceError::NoRoute { switch: L0, lid: 13 }));
    assert_eq!(sim.trace(0x999, 12), Err(TraceError::UnknownSource(0x999)));
    assert_eq!(sim.verify_all_pairs(false), m.verify_all_pairs(false));
    assert_eq!(sim.verify_all_pairs(false).pairs_checked, 12);
    let r = sim.verify_all_pairs(true);
    assert_eq!((r.pairs_checked, r.unreachable_count), (12, 12));

    m.set_port_state(S0, 2, false).await.unwrap();
    assert_eq!(
        sim.trace(N0, 12),
        Err(TraceError::DeadLink {
            switch: S0,
            port: 2,
            lid: 12
        })
    );
    let r = sim.verify_all_pairs(false);
    assert_eq!((r.pairs_checked, r.unreachable_count), (12, 4));
}

#[tokio::test]
async fn verify_with_lmc0_has_no_escape_and_unassigned_lids_fail() {
    let f = two_level();
    let m = MockFabric::new(f.clone());
    let r = m.verify_all_pairs(false);
    assert_eq!((r.pairs_checked, r.unreachable_count), (12, 12));
    assert_eq!(r.unreachable[0].2, "destination end port 0x0000000000000101 has no LID");
    m.configure_lids(&f, &plan(0)).await.unwrap();
    let r = m.verify_all_pairs(true);
    assert_eq!(r.unreachable_count, 12);
    assert!(r.unreachable[0].2.contains("no escape LID"));
}

/// The ibnetdiscover text of [`two_level`], written by hand in ibnetdiscover's layout (spaces
/// instead of tabs), with every cable on both of its ends.
const TWO_LEVEL_IBNET: &str = r#"
switchguid=0x10
Switch 6 "S-0000000000000010"    # "leaf0" base port 0 lid 1 lmc 0
[1]  "H-0000000000001100"[1](100)    # "n0" lid 8 4xEDR
[2]  "H-0000000000001101"[1](101)    # "n1" lid 10 4xEDR
[3]  "S-0000000000000020"[1]    # "spine0" lid 3 4xEDR
[4]  "S-0000000000000021"[1]    # "spine1" lid 4 4xEDR

switchguid=0x11
Switch 6 "S-0000000000000011"    # "leaf1" base port 0 lid 2 lmc 0
[1]  "H-0000000000001110"[1](110)    # "n2" lid 12 4xEDR
[2]  "H-0000000000001111"[1](111)    # "n3" lid 14 4xEDR
[3]  "S-0000000000000020"[2]    # "spine0" lid 3 4xEDR
[4]  "S-0000000000000021"[2]    # "spine1" lid 4 4xEDR

switchguid=0x20
Switch 4 "S-0000000000000020"    # "spine0" base port 0 lid 3 lmc 0
[1]  "S-0000000000000010"[3]    # "leaf0" lid 1 4xEDR
[2]  "S-0000000000000011"[3]    # "leaf1" lid 2 4xEDR

switchguid=0x21
Switch 4 "S-0000000000000021"    # "spine1" base port 0 lid 4 lmc 0
[1]  "S-0000000000000010"[4]    # "leaf0" lid 1 4xEDR
[2]  "S-0000000000000011"[4]    # "leaf1" lid 2 4xEDR

caguid=0x1100
Ca 1 "H-0000000000001100"    # "n0"
[1](100)  "S-0000000000000010"[1]    # lid 8 lmc 0 "leaf0" lid 1 4xEDR

caguid=0x1101
Ca 1 "H-0000000000001101"    # "n1"
[1](101)  "S-0000000000000010"[2]    # lid 10 lmc 0 "leaf0" lid 1 4xEDR

caguid=0x1110
Ca 1 "H-0000000000001110"    # "n2"
[1](110)  "S-0000000000000011"[1]    # lid 12 lmc 0 "leaf1" lid 2 4xEDR

caguid=0x1111
Ca 1 "H-0000000000001111"    # "n3"
[1](111)  "S-0000000000000011"[2]    # lid 14 lmc 0 "leaf1" lid 2 4xEDR
"#;

#[tokio::test]
async fn built_from_topology_text() {
    let m = MockFabric::from_topology_text(TWO_LEVEL_IBNET, "two-level.ibnet").unwrap();
    let d = m.discover().await.unwrap();
    let f = two_level();
    let switches = |f: &Fabric| {
        f.switches()
            .iter()
            .map(|s| (s.guid, s.desc.clone(), s.nports))
            .collect::<Vec<_>>()
    };
    assert_eq!(switches(&d), switches(&f));
    let eps = |f: &Fabric| {
        f.end_ports()
            .iter()
            .map(|e| (e.port_guid, e.attach))
            .collect::<Vec<_>>()
    };
    assert_eq!(eps(&d), eps(&f));
    for s in f.switch_ids() {
        let remotes = |f: &Fabric| f.switch(s).ports.iter().map(|p| p.remote).collect::<Vec<_>>();
        assert_eq!(remotes(&d), remotes(&f));
    }
    assert!(m.topology_warnings().is_empty(), "{:?}", m.topology_warnings());
    // The hand-written routes work on the parsed fabric as on the built one.
    m.configure_lids(&d, &plan(1)).await.unwrap();
    m.write_lft_blocks(&base_lfts()).await.unwrap();
    let r = m.verify_all_pairs(false);
    assert_eq!((r.pairs_checked, r.unreachable_count), (12, 0));

    let e = MockFabric::from_topology_text("Switch 4 \"a\"\n[7] \"a\"[1]\n", "bad.ibnet").unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("topology bad.ibnet: line 2: "), "{msg}");
    let e = MockFabric::from_topology_file(std::path::Path::new("/nonexistent/fabric.ibnet")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("topology /nonexistent/fabric.ibnet: cannot read file"),
        "{e}"
    );
}

#[tokio::test]
async fn built_from_generator() {
    // k-ary n-tree KARY(2,3): 2^3 = 8 end nodes, 3 * 2^2 = 12 switches, 2 * 8 = 16 cables.
    let m = MockFabric::from_generator("KARY(2,3)", None).unwrap();
    let d = m.discover().await.unwrap();
    assert_eq!(
        (d.num_end_ports(), d.num_switches(), d.count_links()),
        (8, 12, (16, 16))
    );
    let deg = Degrade {
        remove_links: 3,
        remove_switches: 1,
        seed: 5,
    };
    let m = MockFabric::from_generator("KARY(2,3)", Some(&deg)).unwrap();
    let d = m.discover().await.unwrap();
    // A non-leaf switch of KARY(2,3) has 4 (middle) or 2 (top) cables; then 3 more go.
    let links = d.count_links().0;
    assert_eq!((d.num_end_ports(), d.num_switches()), (8, 11));
    assert!(links == 16 - 4 - 3 || links == 16 - 2 - 3, "{links}");
    let e = MockFabric::from_generator("KARY(2", None).unwrap_err();
    assert!(matches!(e, DriverError::Topology { .. }), "{e}");
}

#[tokio::test]
async fn verify_switch_lids_counts_by_hand() {
    let m = programmed().await;
    // 4 live end ports x 4 switches, all routed by the hand-written tables.
    let r = m.verify_switch_lids();
    assert_eq!((r.pairs_checked, r.unreachable_count, r.disconnected), (16, 0, 0));
    // L1 loses its route to S1's LID 4 (n2, n3 -> S1); S0 goes down: its LID is no destination
    // any more, and the leaf-to-leaf routes via S0 die: L0 to L1's LID 2 (n0, n1 -> L1) and L1
    // to L0's LID 1 (n2, n3 -> L0).
    m.write_lft_blocks(&[block0(L1, &[(1, 3), (2, 0), (3, 3), (4, 255)])])
        .await
        .unwrap();
    m.set_switch_state(S0, false).await.unwrap();
    let r = m.verify_switch_lids();
    assert_eq!((r.pairs_checked, r.unreachable_count, r.disconnected), (12, 6, 0));
    let pairs: Vec<_> = r.unreachable.iter().map(|(s, d, _)| (*s, *d)).collect();
    assert_eq!(pairs, vec![(N0, L1), (N1, L1), (N2, L0), (N2, S1), (N3, L0), (N3, S1)]);
    assert_eq!(
        r.unreachable[0].2,
        "switch 0x0000000000000010 sends LID 2 out of port 3 whose link is down"
    );
    // Switches without LIDs are reported as such.
    let f = two_level();
    let m = MockFabric::new(f.clone());
    let r = m.verify_switch_lids();
    assert_eq!(r.unreachable_count, 16);
    assert_eq!(r.unreachable[0].2, "destination switch 0x0000000000000010 has no LID");
}
