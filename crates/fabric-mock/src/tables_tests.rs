//! Tests of the MFT and P_Key tables of the mock, its multicast flood and its partition check,
//! on the hand-built two-level fabric of `tests` (plus a 36-port switch for MFT positions).

use super::*;
use crate::tests::{plan, programmed, two_level, L0, L1, N0, N1, N2, N3, S0, S1};
use fabric_southbound::{
    McastDelivery, MftBlockWrite, PacketSimulator, PkeyBlockWrite, PkeyPort, SouthboundDriver, MFT_BLOCK_SIZE,
    MLID_BASE, PKEY_BLOCK_SIZE,
};
use fabric_topology::{FabricBuilder, NodeType};

/// One MFT block write setting `mask` (ports of `position`) for the given MLIDs of one block.
fn mft(switch: Guid, block: u32, position: u8, mlids: &[(Lid, u16)]) -> MftBlockWrite {
    let mut entries = [0u16; MFT_BLOCK_SIZE];
    for &(mlid, mask) in mlids {
        let slot = (mlid - MLID_BASE) as usize;
        assert_eq!(
            slot / MFT_BLOCK_SIZE,
            block as usize,
            "MLID {mlid:#x} outside block {block}"
        );
        entries[slot % MFT_BLOCK_SIZE] = mask;
    }
    MftBlockWrite {
        switch,
        block,
        position,
        entries,
    }
}

/// Bits of the given ports (all below 16).
fn ports(ps: &[u8]) -> u16 {
    ps.iter().fold(0, |m, &p| m | 1 << p)
}

fn pkeys(port: PkeyPort, block: u16, keys: &[u16]) -> PkeyBlockWrite {
    let mut entries = [0u16; PKEY_BLOCK_SIZE];
    entries[..keys.len()].copy_from_slice(keys);
    PkeyBlockWrite { port, block, entries }
}

/// A 36-port switch 0x40 with end ports 0x400 on port 1 and 0x401 on port 35.
fn big_switch() -> Fabric {
    let mut b = FabricBuilder::new();
    let s = b.add_switch(0x40, "big", 36).unwrap();
    for (g, p) in [(0x400, 1), (0x401, 35)] {
        let ep = b.add_end_port(g, g | 0x1000, "n", 1, 1, NodeType::Compute).unwrap();
        b.connect_end_port(ep, s, p).unwrap();
    }
    b.build()
}

#[tokio::test]
async fn mft_blocks_read_back_as_written_per_position() {
    let m = MockFabric::new(big_switch());
    // 36 ports: positions 0 (ports 0-15), 1 (16-31), 2 (32-36).
    let writes = vec![
        mft(0x40, 0, 0, &[(0xC000, 0b10), (0xC01F, 0xFFFF)]),
        mft(0x40, 0, 2, &[(0xC000, 0b1000), (0xC003, 0b1_1111)]),
        mft(0x40, 3, 1, &[(0xC000 + 3 * 32 + 5, 0x8001)]),
    ];
    let r = m.write_mft_blocks(&writes).await.unwrap();
    assert_eq!((r.blocks_written, r.retries), (3, 0));
    for w in &writes {
        assert_eq!(m.read_mft_block(0x40, w.block, w.position).await.unwrap(), w.entries);
    }
    // Never written: zeros (another position of a written block, an unwritten block).
    assert_eq!(m.read_mft_block(0x40, 0, 1).await.unwrap(), [0; 32]);
    assert_eq!(m.read_mft_block(0x40, 31, 0).await.unwrap(), [0; 32]);
    // Bit i of position k is port 16k + i.
    assert_eq!(m.mft_ports(0x40, 0xC000).unwrap(), vec![1, 35]);
    assert_eq!(m.mft_ports(0x40, 0xC003).unwrap(), vec![32, 33, 34, 35, 36]);
    assert_eq!(m.mft_ports(0x40, 0xC000 + 101).unwrap(), vec![16, 31]);
    assert_eq!(m.mft_ports(0x40, 0xC001).unwrap(), Vec::<PortNum>::new());
    // A rewrite replaces the masks of that position only.
    m.write_mft_blocks(&[mft(0x40, 0, 0, &[(0xC000, 0b100)])])
        .await
        .unwrap();
    assert_eq!(m.mft_ports(0x40, 0xC000).unwrap(), vec![2, 35]);
    assert_eq!(m.mft_ports(0x40, 0xC01F).unwrap(), Vec::<PortNum>::new());
    let c = m.counters();
    assert_eq!((c.mft_blocks_written, c.blocks_written, c.blocks_read), (4, 0, 5));
}

#[tokio::test]
async fn mft_addresses_are_checked_before_anything_is_written() {
    let m = MockFabric::new(two_level());
    let good = mft(L0, 0, 0, &[(0xC000, ports(&[1, 2]))]);
    let check = |e: DriverError, want: &str| assert!(e.to_string().contains(want), "{e} does not contain {want}");
    // Default MulticastFDBCap 1024 MLIDs = blocks 0..32.
    match m
        .write_mft_blocks(&[good.clone(), mft(L1, 32, 0, &[])])
        .await
        .unwrap_err()
    {
        DriverError::BlockOutOfRange {
            guid,
            block,
            max_blocks,
        } => assert_eq!((guid, block, max_blocks), (L1, 32, 32)),
        e => panic!("{e}"),
    }
    // A 6-port leaf has position 0 only; its mask names ports 0..=6.
    match m
        .write_mft_blocks(&[good.clone(), mft(L0, 0, 1, &[])])
        .await
        .unwrap_err()
    {
        DriverError::InvalidPort { guid, port, .. } => assert_eq!((guid, port), (L0, 16)),
        e => panic!("{e}"),
    }
    match m
        .write_mft_blocks(&[good.clone(), mft(L0, 1, 0, &[(0xC020, ports(&[6, 7]))])])
        .await
        .unwrap_err()
    {
        DriverError::InvalidPort { guid, port, reason } => {
            assert_eq!((guid, port), (L0, 7));
            check(
                DriverError::InvalidPort { guid, port, reason },
                "beyond the switch's ports",
            );
        }
        e => panic!("{e}"),
    }
    check(
        m.write_mft_blocks(&[mft(0x99, 0, 0, &[])]).await.unwrap_err(),
        "unknown switch",
    );
    // Nothing of the refused batches was written.
    assert_eq!(m.counters().mft_blocks_written, 0);
    assert_eq!(m.read_mft_block(L0, 0, 0).await.unwrap(), [0; 32]);
    check(m.read_mft_block(L0, 0, 1).await.unwrap_err(), "MFT position");
    check(m.read_mft_block(L0, 32, 0).await.unwrap_err(), "block 32");
    // A configured MulticastFDBCap: 100 MLIDs = blocks 0..4.
    m.set_config(MockConfig {
        mcast_fdb_cap: 100,
        ..MockConfig::default()
    })
    .unwrap();
    m.write_mft_blocks(&[mft(L0, 3, 0, &[])]).await.unwrap();
    assert!(matches!(
        m.write_mft_blocks(&[mft(L0, 4, 0, &[])]).await,
        Err(DriverError::BlockOutOfRange { max_blocks: 4, .. })
    ));
    // Dead or unreachable switches.
    m.set_switch_state(S0, false).await.unwrap();
    assert!(matches!(
        m.write_mft_blocks(&[mft(S0, 0, 0, &[])]).await,
        Err(DriverError::Unreachable { guid: S0 })
    ));
    assert!(matches!(
        m.read_mft_block(S0, 0, 0).await,
        Err(DriverError::Unreachable { guid: S0 })
    ));
    m.set_config(MockConfig {
        unreachable_switches: vec![S1],
        ..MockConfig::default()
    })
    .unwrap();
    assert!(matches!(
        m.write_mft_blocks(&[mft(S1, 0, 0, &[])]).await,
        Err(DriverError::Unreachable { guid: S1 })
    ));
}

#[test]
fn caps_are_validated() {
    let bad = MockConfig {
        mcast_fdb_cap: IB_MLID_COUNT + 1,
        partition_cap: 0,
        ..MockConfig::default()
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("mcast_fdb_cap 16385") && e.contains("partition_cap"), "{e}");
    let d = MockConfig::default();
    assert_eq!((d.max_mft_blocks(), d.max_pkey_blocks()), (32, 4));
    let odd = MockConfig {
        mcast_fdb_cap: 33,
        partition_cap: 33,
        ..MockConfig::default()
    };
    assert_eq!((odd.max_mft_blocks(), odd.max_pkey_blocks()), (2, 2));
}

#[tokio::test]
async fn table_writes_share_the_lft_error_injection_and_retries() {
    let cfg = MockConfig {
        error_rate: 0.3,
        seed: 11,
        max_retries: 30,
        ..MockConfig::default()
    };
    let blocks: Vec<_> = (0..40u32)
        .map(|i| {
            mft(
                [L0, L1, S0, S1][i as usize % 4],
                i / 4,
                0,
                &[(0xC000 + i / 4 * 32, 0b10)],
            )
        })
        .collect();
    let run = || async {
        let m = MockFabric::new(two_level()).with_config(cfg.clone()).unwrap();
        let r = m.write_mft_blocks(&blocks).await.unwrap();
        (r, m.counters(), m)
    };
    let (r, c, m) = run().await;
    assert_eq!(r.blocks_written, 40);
    assert!(r.retries > 0, "30% error rate over 40 blocks gave no retry");
    assert_eq!(
        (c.write_failures, c.write_attempts),
        (r.retries as u64, 40 + r.retries as u64)
    );
    for b in &blocks {
        assert_eq!(m.read_mft_block(b.switch, b.block, 0).await.unwrap(), b.entries);
    }
    assert_eq!(run().await.0, r, "same seed, same failures");
    // Always failing: the batch gives up naming the switch and the operation.
    let m = MockFabric::new(two_level())
        .with_config(MockConfig {
            error_rate: 1.0,
            max_retries: 2,
            ..MockConfig::default()
        })
        .unwrap();
    match m.write_mft_blocks(&blocks[..1]).await.unwrap_err() {
        DriverError::Transient { guid, op, attempts } => assert_eq!((guid, op, attempts), (L0, "MFT block write", 3)),
        e => panic!("{e}"),
    }
    match m
        .write_pkey_blocks(&[pkeys(PkeyPort::EndPort(N2), 0, &[0xFFFF])])
        .await
        .unwrap_err()
    {
        DriverError::Transient { guid, op, .. } => assert_eq!((guid, op), (N2, "P_Key block write")),
        e => panic!("{e}"),
    }
}

#[tokio::test(start_paused = true)]
async fn table_writes_take_one_latency_per_wave() {
    let cfg = MockConfig {
        op_latency: Duration::from_millis(10),
        max_parallel: 4,
        ..MockConfig::default()
    };
    let m = MockFabric::new(two_level()).with_config(cfg).unwrap();
    let blocks: Vec<_> = (0..10u32).map(|b| mft(L0, b, 0, &[])).collect();
    let t = tokio::time::Instant::now();
    m.write_mft_blocks(&blocks).await.unwrap();
    assert_eq!(t.elapsed(), Duration::from_millis(30)); // waves of 4 + 4 + 2
    let pk: Vec<_> = (0..4u16).map(|b| pkeys(PkeyPort::EndPort(N0), b, &[1])).collect();
    let t = tokio::time::Instant::now();
    m.write_pkey_blocks(&pk).await.unwrap();
    m.read_pkey_block(PkeyPort::EndPort(N0), 3).await.unwrap();
    assert_eq!(t.elapsed(), Duration::from_millis(20));
}

#[tokio::test]
async fn pkey_tables_read_back_as_written_with_the_default_elsewhere() {
    let m = MockFabric::new(two_level());
    let mut default = [0u16; PKEY_BLOCK_SIZE];
    default[0] = 0xFFFF;
    // Never written: 0xFFFF in entry 0 (end ports and switch ports).
    assert_eq!(m.read_pkey_block(PkeyPort::EndPort(N0), 0).await.unwrap(), default);
    assert_eq!(
        m.read_pkey_block(PkeyPort::SwitchPort(L0, 1), 0).await.unwrap(),
        default
    );
    assert_eq!(m.read_pkey_block(PkeyPort::EndPort(N0), 3).await.unwrap(), [0; 32]);
    assert_eq!(m.pkey_table(PkeyPort::EndPort(N0)).unwrap(), vec![0xFFFF]);
    let writes = vec![
        pkeys(PkeyPort::EndPort(N0), 0, &[0x7FFF, 0x8001]),
        pkeys(PkeyPort::EndPort(N0), 2, &[0x0002]),
        pkeys(PkeyPort::SwitchPort(L0, 1), 0, &[0xFFFF, 0x8001]),
    ];
    let r = m.write_pkey_blocks(&writes).await.unwrap();
    assert_eq!(r.blocks_written, 3);
    for w in &writes {
        assert_eq!(m.read_pkey_block(w.port, w.block).await.unwrap(), w.entries);
    }
    assert_eq!(m.read_pkey_block(PkeyPort::EndPort(N0), 1).await.unwrap(), [0; 32]);
    assert_eq!(
        m.pkey_table(PkeyPort::EndPort(N0)).unwrap(),
        vec![0x7FFF, 0x8001, 0x0002]
    );
    assert_eq!(m.pkey_table(PkeyPort::SwitchPort(L0, 1)).unwrap(), vec![0xFFFF, 0x8001]);
    // Other ports keep the default.
    assert_eq!(m.pkey_table(PkeyPort::EndPort(N1)).unwrap(), vec![0xFFFF]);
    assert_eq!(m.pkey_table(PkeyPort::SwitchPort(L0, 2)).unwrap(), vec![0xFFFF]);
    // Writing block 1 first keeps the default entry 0 of block 0.
    m.write_pkey_blocks(&[pkeys(PkeyPort::EndPort(N1), 1, &[0x8003])])
        .await
        .unwrap();
    assert_eq!(m.pkey_table(PkeyPort::EndPort(N1)).unwrap(), vec![0xFFFF, 0x8003]);
    assert_eq!(m.counters().pkey_blocks_written, 4);
}

#[tokio::test]
async fn pkey_addresses_are_checked_and_errors_name_the_port() {
    let m = MockFabric::new(two_level());
    let msg = |e: DriverError| e.to_string();
    // PartitionCap 128 = blocks 0..4.
    let e = msg(m
        .write_pkey_blocks(&[pkeys(PkeyPort::EndPort(N0), 4, &[])])
        .await
        .unwrap_err());
    assert!(
        e.contains("0x0000000000000100") && e.contains("P_Key block 4") && e.contains("128"),
        "{e}"
    );
    match m
        .write_pkey_blocks(&[pkeys(PkeyPort::SwitchPort(L0, 2), 4, &[])])
        .await
        .unwrap_err()
    {
        DriverError::InvalidPort { guid, port, .. } => assert_eq!((guid, port), (L0, 2)),
        e => panic!("{e}"),
    }
    match m.read_pkey_block(PkeyPort::SwitchPort(L0, 7), 0).await.unwrap_err() {
        DriverError::InvalidPort { guid, port, .. } => assert_eq!((guid, port), (L0, 7)),
        e => panic!("{e}"),
    }
    // Port 0, the switch's management port, has its own table.
    assert_eq!(
        m.read_pkey_block(PkeyPort::SwitchPort(L0, 0), 0).await.unwrap()[0],
        0xffff
    );
    assert!(matches!(
        m.write_pkey_blocks(&[pkeys(PkeyPort::EndPort(0x999), 0, &[])]).await,
        Err(DriverError::UnknownEndPort(0x999))
    ));
    assert!(matches!(
        m.read_pkey_block(PkeyPort::SwitchPort(0x98, 1), 0).await,
        Err(DriverError::UnknownSwitch(0x98))
    ));
    // A good block before a bad one in the batch is not written.
    let batch = [
        pkeys(PkeyPort::EndPort(N1), 0, &[0x8001]),
        pkeys(PkeyPort::EndPort(N1), 9, &[]),
    ];
    assert!(m.write_pkey_blocks(&batch).await.is_err());
    assert_eq!(m.pkey_table(PkeyPort::EndPort(N1)).unwrap(), vec![0xFFFF]);
    // A powered-off end port or switch cannot be reached.
    m.set_end_port_state(N3, false).await.unwrap();
    assert!(matches!(
        m.write_pkey_blocks(&[pkeys(PkeyPort::EndPort(N3), 0, &[1])]).await,
        Err(DriverError::Unreachable { guid: N3 })
    ));
    assert!(matches!(
        m.read_pkey_block(PkeyPort::EndPort(N3), 0).await,
        Err(DriverError::Unreachable { guid: N3 })
    ));
    m.set_switch_state(L1, false).await.unwrap();
    assert!(matches!(
        m.write_pkey_blocks(&[pkeys(PkeyPort::SwitchPort(L1, 1), 0, &[1])])
            .await,
        Err(DriverError::Unreachable { guid: L1 })
    ));
}

#[tokio::test]
async fn a_switch_reboot_loses_its_mft_and_pkeys_when_configured() {
    let m = MockFabric::new(two_level())
        .with_config(MockConfig {
            reset_on_power_cycle: true,
            ..MockConfig::default()
        })
        .unwrap();
    m.write_mft_blocks(&[mft(L0, 0, 0, &[(0xC000, 0b110)])]).await.unwrap();
    m.write_pkey_blocks(&[pkeys(PkeyPort::SwitchPort(L0, 1), 0, &[0x8001])])
        .await
        .unwrap();
    m.set_switch_state(L0, false).await.unwrap();
    m.set_switch_state(L0, true).await.unwrap();
    assert_eq!(m.read_mft_block(L0, 0, 0).await.unwrap(), [0; 32]);
    assert_eq!(m.pkey_table(PkeyPort::SwitchPort(L0, 1)).unwrap(), vec![0xFFFF]);
}

/// The tree of MLID 0xC000 rooted at S0 over all four end ports.
async fn tree_mft(m: &MockFabric) {
    m.write_mft_blocks(&[
        mft(L0, 0, 0, &[(0xC000, ports(&[1, 2, 3]))]),
        mft(L1, 0, 0, &[(0xC000, ports(&[1, 2, 3]))]),
        mft(S0, 0, 0, &[(0xC000, ports(&[0, 1, 2]))]),
    ])
    .await
    .unwrap();
}

#[tokio::test]
async fn flood_follows_the_tree_and_drops_at_dead_links() {
    let m = MockFabric::new(two_level());
    tree_mft(&m).await;
    let d = m.flood_multicast(N0, 0xC000).unwrap();
    // L0 sends to n1 and S0 (not back to n0); S0 (port 0 = itself) to L1; L1 to n2, n3.
    assert_eq!(
        d,
        McastDelivery {
            received: vec![(N1, 1), (N2, 1), (N3, 1)],
            switch_visits: 3,
        }
    );
    let d = m.flood_multicast(N3, 0xC000).unwrap();
    assert_eq!(d.received, vec![(N0, 1), (N1, 1), (N2, 1)]);
    // Another MLID has nothing installed: the packet stops at the first switch.
    let d = m.flood_multicast(N0, 0xC001).unwrap();
    assert_eq!((d.received.len(), d.switch_visits), (0, 1));
    // The trait object answers the same.
    let sim: &dyn PacketSimulator = &m;
    assert_eq!(sim.flood_multicast(N3, 0xC000).unwrap().received.len(), 3);
    // S0-L1 down: the copies for n2, n3 are dropped; n3 down: its copy is dropped.
    m.set_port_state(S0, 2, false).await.unwrap();
    assert_eq!(m.flood_multicast(N0, 0xC000).unwrap().received, vec![(N1, 1)]);
    m.set_port_state(S0, 2, true).await.unwrap();
    m.set_end_port_state(N3, false).await.unwrap();
    assert_eq!(m.flood_multicast(N0, 0xC000).unwrap().received, vec![(N1, 1), (N2, 1)]);
    // S0 off: nothing leaves L0 but the copy to n1.
    m.set_switch_state(S0, false).await.unwrap();
    assert_eq!(m.flood_multicast(N0, 0xC000).unwrap().received, vec![(N1, 1)]);
    // Source errors.
    assert_eq!(m.flood_multicast(N3, 0xC000), Err(TraceError::SourceDown(N3)));
    assert_eq!(
        m.flood_multicast(0x5555, 0xC000),
        Err(TraceError::UnknownSource(0x5555))
    );
    assert_eq!(m.flood_multicast(N0, 0xBFFF), Err(TraceError::NotMulticastLid(0xBFFF)));
}

#[tokio::test]
async fn a_multicast_cycle_is_reported() {
    let m = MockFabric::new(two_level());
    tree_mft(&m).await;
    // S1 and the leaves' port 4 close the cycle L0 - S0 - L1 - S1 - L0.
    m.write_mft_blocks(&[
        mft(L0, 0, 0, &[(0xC000, ports(&[1, 2, 3, 4]))]),
        mft(L1, 0, 0, &[(0xC000, ports(&[1, 2, 3, 4]))]),
        mft(S1, 0, 0, &[(0xC000, ports(&[1, 2]))]),
    ])
    .await
    .unwrap();
    match m.flood_multicast(N1, 0xC000) {
        Err(TraceError::McastLoop { lid, switch }) => {
            assert_eq!(lid, 0xC000);
            assert!([L0, L1, S0, S1].contains(&switch));
        }
        r => panic!("{r:?}"),
    }
    // Cutting the cycle (S1-L1 down) ends the loop; n2 and n3 get one copy, through S0.
    m.set_port_state(S1, 2, false).await.unwrap();
    assert_eq!(
        m.flood_multicast(N1, 0xC000).unwrap().received,
        vec![(N0, 1), (N2, 1), (N3, 1)]
    );
}

#[tokio::test]
async fn traces_between_ports_without_a_shared_partition_fail() {
    let m = programmed().await;
    // Before any P_Key write everybody is in the default partition.
    for (src, dlid) in [(N0, 10), (N1, 12), (N0, 14), (N3, 8)] {
        m.trace(src, dlid).unwrap();
    }
    let ep = PkeyPort::EndPort;
    m.write_pkey_blocks(&[
        pkeys(ep(N0), 0, &[0x8001]),
        pkeys(ep(N1), 0, &[0x0001]),
        pkeys(ep(N2), 0, &[0x0001, 0x8002]),
    ])
    .await
    .unwrap();
    // n0 full, n1 limited of 0x0001: they talk, both ways.
    m.trace(N0, 10).unwrap();
    m.trace(N1, 8).unwrap();
    // n1 and n2 are both limited members of 0x0001 (n2's 0x8002 is not n1's).
    assert_eq!(
        m.trace(N1, 12),
        Err(TraceError::NoSharedPartition { src: N1, dest: N2 })
    );
    assert_eq!(
        m.trace(N2, 10),
        Err(TraceError::NoSharedPartition { src: N2, dest: N1 })
    );
    // n3 never written: the default 0xFFFF, which n0 does not share.
    let e = m.trace(N0, 14).unwrap_err();
    assert_eq!(e, TraceError::NoSharedPartition { src: N0, dest: N3 });
    assert!(e.to_string().contains("share no partition"), "{e}");
    // Switch LIDs are not partitioned; routing-only checks ignore partitions.
    m.trace(N1, 3).unwrap();
    assert_eq!(m.verify_all_pairs(false).unreachable_count, 0);
    // Giving n3 0x8001 as well lets n0 and n3 talk.
    m.write_pkey_blocks(&[pkeys(ep(N3), 0, &[0xFFFF, 0x0001])])
        .await
        .unwrap();
    m.trace(N0, 14).unwrap();
    m.trace(N3, 8).unwrap();
    assert_eq!(
        m.trace(N3, 10),
        Err(TraceError::NoSharedPartition { src: N3, dest: N1 })
    );
    let _ = plan(1);
}
