//! Multicast forwarding tables and partition tables: MFT block writes and reads
//! (MulticastForwardingTable, modifier `position << 28 | block`, bounded by SwitchInfo
//! MulticastFDBCap and the switch's ports; SwitchInfo.MulticastFDBTop raised over the blocks
//! in use on switches that advertise it), P_Key block writes and reads (PartitionTable: a CA
//! port's own table, modifier = block, bounded by NodeInfo.PartitionCap; a switch port's,
//! modifier `port << 16 | block`, bounded by SwitchInfo.PartitionEnforcementCap), and the
//! PortInfo partition enforcement bits of the switch external ports given tables (as OpenSM's
//! `osm_pkey_mgr.c`). Writes go through the one upload machinery of LFT blocks
//! ([`super::upload::upload_blocks`]: same window, retries and counters).

use std::collections::BTreeMap;

use fabric_southbound::{
    DriverError, MftBlockWrite, PkeyBlockWrite, PkeyPort, WriteReport, MFT_BLOCK_SIZE, PKEY_BLOCK_SIZE,
};
use fabric_topology::{fmt_guid, Guid, PortNum};

use super::inner::{check_status, lock, submit, tp_err, Inner, ZERO};
use super::state::{dr, State, SwitchRec};
use super::upload::{upload_blocks, BlockTarget, TableBlock};
use crate::mad::*;
use crate::transport;

/// The up switch `guid`.
fn up_switch(st: &State, guid: Guid) -> Result<&SwitchRec, DriverError> {
    let &i = st.sw_by_guid.get(&guid).ok_or(DriverError::UnknownSwitch(guid))?;
    let s = &st.switches[i];
    if !s.up {
        return Err(DriverError::Unreachable { guid });
    }
    Ok(s)
}

/// Where MFT block `block`, position `position` of `switch` goes, checked against the switch's
/// MulticastFDBCap and ports.
fn mft_target(st: &State, switch: Guid, block: u32, position: u8) -> Result<BlockTarget, DriverError> {
    let s = up_switch(st, switch)?;
    let blocks = s.info.mft_blocks();
    if block >= blocks {
        let first = u32::from(MLID_START) + block.saturating_mul(MFT_BLOCK_SIZE as u32);
        return Err(DriverError::InvalidLidPlan(format!(
            "MFT block {block} (MLIDs {first:#06x}..) is beyond switch {}'s MulticastFDBCap {} ({blocks} blocks)",
            fmt_guid(switch),
            s.info.multicast_fdb_cap()
        )));
    }
    if position > MAX_MFT_POSITION || u16::from(position) * 16 > u16::from(s.nports) {
        return Err(DriverError::InvalidPort {
            guid: switch,
            port: position.saturating_mul(16),
            reason: "MFT position beyond the switch's ports",
        });
    }
    Ok(BlockTarget {
        guid: switch,
        route: dr(&s.path),
        modifier: mft_modifier(block, position),
    })
}

/// PartitionCap of a NodeInfo image (bytes 28–29).
fn partition_cap(node_info: &[u8]) -> u16 {
    u16::from_be_bytes([node_info[28], node_info[29]])
}

/// Where P_Key block `block` of `port` goes, checked against the port's table capacity
/// (NodeInfo.PartitionCap for CA ports and switch port 0, SwitchInfo.PartitionEnforcementCap
/// for switch external ports).
fn pkey_target(st: &State, port: PkeyPort, block: u16) -> Result<BlockTarget, DriverError> {
    let (guid, what, cap, cap_name, route, modifier) = match port {
        PkeyPort::EndPort(g) => {
            let &i = st.ca_by_guid.get(&g).ok_or(DriverError::UnknownEndPort(g))?;
            let c = &st.cas[i];
            if !c.up {
                return Err(DriverError::Unreachable { guid: g });
            }
            (
                g,
                format!("CA port {} (port {})", fmt_guid(g), c.port_num),
                partition_cap(&c.node_info),
                "PartitionCap (NodeInfo)",
                dr(&c.path),
                u32::from(block),
            )
        }
        PkeyPort::SwitchPort(g, p) => {
            let s = up_switch(st, g)?;
            if p > s.nports {
                return Err(DriverError::InvalidPort {
                    guid: g,
                    port: p,
                    reason: "no such port for a P_Key table",
                });
            }
            let (cap, cap_name) = if p == 0 {
                (partition_cap(&s.node_info), "PartitionCap (NodeInfo)")
            } else {
                (
                    s.info.partition_enforcement_cap(),
                    "PartitionEnforcementCap (SwitchInfo)",
                )
            };
            (
                g,
                format!("switch {} port {p}", fmt_guid(g)),
                cap,
                cap_name,
                dr(&s.path),
                pkey_switch_modifier(p, block),
            )
        }
    };
    if u32::from(block) * PKEY_BLOCK_SIZE as u32 >= u32::from(cap) {
        return Err(DriverError::Protocol {
            guid: Some(guid),
            message: format!(
                "P_Key block {block} (entries {}..{}) is beyond the {cap_name} {cap} of {what}",
                u32::from(block) * PKEY_BLOCK_SIZE as u32,
                (u32::from(block) + 1) * PKEY_BLOCK_SIZE as u32 - 1
            ),
        });
    }
    Ok(BlockTarget { guid, route, modifier })
}

impl TableBlock for MftBlockWrite {
    const ATTR: u16 = ATTR_MFT;
    const SET: &'static str = "MulticastForwardingTable Set";
    const OP: &'static str = "MFT block write";
    fn locate(&self, st: &State) -> Result<Option<BlockTarget>, DriverError> {
        mft_target(st, self.switch, self.block, self.position).map(Some)
    }
    fn data(&self) -> [u8; 64] {
        encode_u16_block(&self.entries)
    }
}

impl TableBlock for PkeyBlockWrite {
    const ATTR: u16 = ATTR_PKEY_TABLE;
    const SET: &'static str = "PartitionTable Set";
    const OP: &'static str = "P_Key block write";
    fn locate(&self, st: &State) -> Result<Option<BlockTarget>, DriverError> {
        pkey_target(st, self.port, self.block).map(Some)
    }
    fn data(&self) -> [u8; 64] {
        encode_u16_block(&self.entries)
    }
}

/// The MulticastFDBTop a switch needs after `written` (block, any MLID in use) were written
/// over `current`: the last MLID of the highest block in use, never lowered (the other blocks
/// in use are not known here); `None` when `current` already covers them.
pub(super) fn raised_mft_top(current: u16, written: impl IntoIterator<Item = (u32, bool)>) -> Option<u16> {
    let highest = written.into_iter().filter(|&(_, used)| used).map(|(b, _)| b).max()?;
    let top = u32::from(MLID_START) + (highest + 1) * MFT_BLOCK_SIZE as u32 - 1;
    let top = u16::try_from(top).unwrap_or(u16::MAX);
    // Below 0xC000 means "no multicast entry" (OpenSM writes 0xBFFF for an empty table).
    (current < MLID_START || current < top).then_some(top)
}

/// [`SouthboundDriver::write_mft_blocks`](fabric_southbound::SouthboundDriver::write_mft_blocks):
/// the blocks, then SwitchInfo.MulticastFDBTop on the switches advertising
/// IsMulticastFDBTopSupported whose top does not cover the blocks in use.
pub(super) async fn write_mft_blocks(inner: &Inner, blocks: &[MftBlockWrite]) -> Result<WriteReport, DriverError> {
    let (report, done, first_err) = upload_blocks(inner, blocks).await?;
    let mut per_switch: BTreeMap<Guid, Vec<(u32, bool)>> = BTreeMap::new();
    for b in &done {
        per_switch
            .entry(b.switch)
            .or_default()
            .push((b.block, b.entries.iter().any(|&e| e != 0)));
    }
    let mut tops = Vec::new();
    {
        let st = lock(&inner.state);
        for (g, written) in per_switch {
            let Some(&i) = st.sw_by_guid.get(&g) else { continue };
            let s = &st.switches[i];
            let supported = s.ports[0]
                .info
                .as_ref()
                .is_some_and(|p| p.capability_mask() & CAP_MCAST_FDB_TOP != 0);
            if !supported {
                continue;
            }
            if let Some(top) = raised_mft_top(s.info.multicast_fdb_top(), written) {
                let mut si = s.info.clone();
                si.set_multicast_fdb_top(top);
                si.set_port_state_change(false);
                tops.push((
                    g,
                    top,
                    submit(&inner.tp, &dr(&s.path), METHOD_SET, ATTR_SWITCH_INFO, 0, &si.raw)?,
                ));
            }
        }
    }
    let mut err = first_err;
    for (g, top, rx) in tops {
        let r = transport::wait(rx)
            .await
            .map_err(|e| tp_err(g, "SwitchInfo (MulticastFDBTop) Set", e))
            .and_then(|r| check_status(g, "SwitchInfo (MulticastFDBTop) Set", &r));
        match r {
            Ok(()) => {
                let mut st = lock(&inner.state);
                if let Some(&i) = st.sw_by_guid.get(&g) {
                    st.switches[i].info.set_multicast_fdb_top(top);
                }
            }
            Err(e) => {
                err.get_or_insert(e);
            }
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// [`SouthboundDriver::read_mft_block`](fabric_southbound::SouthboundDriver::read_mft_block).
pub(super) async fn read_mft_block(
    inner: &Inner,
    switch: Guid,
    block: u32,
    position: u8,
) -> Result<[u16; MFT_BLOCK_SIZE], DriverError> {
    let t = mft_target(&lock(&inner.state), switch, block, position)?;
    read_block(inner, t, ATTR_MFT, "MulticastForwardingTable Get").await
}

/// [`SouthboundDriver::read_pkey_block`](fabric_southbound::SouthboundDriver::read_pkey_block).
pub(super) async fn read_pkey_block(
    inner: &Inner,
    port: PkeyPort,
    block: u16,
) -> Result<[u16; PKEY_BLOCK_SIZE], DriverError> {
    let t = pkey_target(&lock(&inner.state), port, block)?;
    read_block(inner, t, ATTR_PKEY_TABLE, "PartitionTable Get").await
}

async fn read_block(inner: &Inner, t: BlockTarget, attr: u16, what: &'static str) -> Result<[u16; 32], DriverError> {
    let r = inner
        .tp
        .call(t.route, METHOD_GET, attr, t.modifier, &ZERO)
        .await
        .map_err(|e| tp_err(t.guid, what, e))?;
    check_status(t.guid, what, &r)?;
    Ok(decode_u16_block(r.smp.data()))
}

/// Partition enforcement wanted on the switch external ports of `done` (acknowledged P_Key
/// blocks): on when a block written holds a P_Key, off when block 0 was written empty (an
/// empty table enforces nothing); ports whose writes say neither are left alone.
pub(super) fn enforcement_wanted<'a>(
    done: impl IntoIterator<Item = &'a PkeyBlockWrite>,
) -> BTreeMap<(Guid, PortNum), bool> {
    let mut want: BTreeMap<(Guid, PortNum), bool> = BTreeMap::new();
    for b in done {
        let PkeyPort::SwitchPort(g, p) = b.port else { continue };
        if p == 0 {
            continue;
        }
        let used = b.entries.iter().any(|&k| k & 0x7fff != 0);
        if used {
            want.insert((g, p), true);
        } else if b.block == 0 {
            want.entry((g, p)).or_insert(false);
        }
    }
    want
}

/// [`SouthboundDriver::write_pkey_blocks`](fabric_southbound::SouthboundDriver::write_pkey_blocks):
/// the blocks, then the partition enforcement bits (inbound and outbound) of the switch
/// external ports given tables (PortInfo read, then Set when the bits differ).
pub(super) async fn write_pkey_blocks(inner: &Inner, blocks: &[PkeyBlockWrite]) -> Result<WriteReport, DriverError> {
    let (report, done, first_err) = upload_blocks(inner, blocks).await?;
    let want = enforcement_wanted(done.iter().copied());
    let mut err = first_err;
    if let Err(e) = set_enforcement(inner, &want).await {
        err.get_or_insert(e);
    }
    match err {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Sets the PortInfo partition enforcement bits of the listed switch ports; the first failure
/// names the switch and port.
async fn set_enforcement(inner: &Inner, want: &BTreeMap<(Guid, PortNum), bool>) -> Result<(), DriverError> {
    if want.is_empty() {
        return Ok(());
    }
    let routes: Vec<((Guid, PortNum), bool, Route)> = {
        let st = lock(&inner.state);
        want.iter()
            .filter_map(|(&(g, p), &on)| st.sw_by_guid.get(&g).map(|&i| ((g, p), on, dr(&st.switches[i].path))))
            .collect()
    };
    let mut reads = Vec::with_capacity(routes.len());
    for (gp, on, rt) in routes {
        let rx = submit(&inner.tp, &rt, METHOD_GET, ATTR_PORT_INFO, u32::from(gp.1), &ZERO)?;
        reads.push((gp, on, rt, rx));
    }
    let named = |g: Guid, p: PortNum, e: DriverError| DriverError::Protocol {
        guid: Some(g),
        message: format!("partition enforcement of switch {} port {p}: {e}", fmt_guid(g)),
    };
    let mut first_err = None;
    let mut sets = Vec::new();
    for ((g, p), on, rt, rx) in reads {
        let r = match transport::wait(rx).await {
            Ok(r) => r,
            Err(e) => {
                first_err.get_or_insert(named(g, p, tp_err(g, "PortInfo Get", e)));
                continue;
            }
        };
        if let Err(e) = check_status(g, "PortInfo Get", &r) {
            first_err.get_or_insert(named(g, p, e));
            continue;
        }
        let info = PortInfo::decode(r.smp.data());
        if info.partition_enforcement() == (on, on) {
            continue;
        }
        let mut a = info.for_set();
        a.set_partition_enforcement(on);
        sets.push((
            g,
            p,
            submit(&inner.tp, &rt, METHOD_SET, ATTR_PORT_INFO, u32::from(p), &a.raw)?,
        ));
    }
    for (g, p, rx) in sets {
        match transport::wait(rx).await {
            Ok(r) => {
                if let Err(e) = check_status(g, "PortInfo (partition enforcement) Set", &r) {
                    first_err.get_or_insert(named(g, p, e));
                }
            }
            Err(e) => {
                first_err.get_or_insert(named(g, p, tp_err(g, "PortInfo Set", e)));
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::super::state::tests::{two_by_two, CA, L0};
    use super::*;
    use proptest::prelude::*;

    fn mft(switch: Guid, block: u32, position: u8) -> MftBlockWrite {
        MftBlockWrite {
            switch,
            block,
            position,
            entries: [0; MFT_BLOCK_SIZE],
        }
    }

    /// The hand-built fabric with capacities: every switch 1 024 MLIDs (32 blocks) and
    /// PartitionEnforcementCap 32, the CA PartitionCap 64.
    fn with_caps() -> State {
        let mut st = two_by_two();
        for s in &mut st.switches {
            s.info.raw[4..6].copy_from_slice(&1024u16.to_be_bytes());
            s.info.raw[14..16].copy_from_slice(&32u16.to_be_bytes());
            s.node_info[28..30].copy_from_slice(&8u16.to_be_bytes());
        }
        for c in &mut st.cas {
            c.node_info[28..30].copy_from_slice(&64u16.to_be_bytes());
        }
        st
    }

    #[test]
    fn mft_blocks_are_bounded_by_the_cap_and_the_ports() {
        let st = with_caps();
        let s = &st.switches[st.sw_by_guid[&L0]];
        let t = mft(L0, 31, 0).locate(&st).unwrap().unwrap();
        assert_eq!((t.guid, t.modifier, t.route), (L0, 31, dr(&s.path)));
        let e = mft(L0, 32, 0).locate(&st).err().unwrap().to_string();
        assert!(e.contains(&fmt_guid(L0)) && e.contains("MulticastFDBCap 1024"), "{e}");
        assert!(e.contains("0xc400"), "first MLID of block 32: {e}");
        let beyond = s.nports / 16 + 1;
        assert!(matches!(
            mft(L0, 0, beyond).locate(&st),
            Err(DriverError::InvalidPort { guid: L0, .. })
        ));
        assert!(matches!(
            mft(0xdead, 0, 0).locate(&st),
            Err(DriverError::UnknownSwitch(0xdead))
        ));
        let mut down = with_caps();
        let i = down.sw_by_guid[&L0];
        down.switches[i].up = false;
        assert!(matches!(
            mft(L0, 0, 0).locate(&down),
            Err(DriverError::Unreachable { guid: L0 })
        ));
        // A switch without multicast support has no block at all.
        let mut none = with_caps();
        none.switches[i].info.raw[4..6].copy_from_slice(&0u16.to_be_bytes());
        assert!(mft(L0, 0, 0).locate(&none).is_err());
    }

    #[test]
    fn pkey_blocks_are_addressed_and_bounded_per_port_kind() {
        let st = with_caps();
        let pk = |port, block| PkeyBlockWrite {
            port,
            block,
            entries: [0; PKEY_BLOCK_SIZE],
        };
        let c = &st.cas[st.ca_by_guid[&CA]];
        let t = pk(PkeyPort::EndPort(CA), 1).locate(&st).unwrap().unwrap();
        assert_eq!((t.guid, t.modifier, t.route), (CA, 1, dr(&c.path)));
        let e = pk(PkeyPort::EndPort(CA), 2).locate(&st).err().unwrap().to_string();
        assert!(
            e.contains("PartitionCap (NodeInfo) 64") && e.contains(&fmt_guid(CA)),
            "{e}"
        );
        let t = pk(PkeyPort::SwitchPort(L0, 2), 0).locate(&st).unwrap().unwrap();
        assert_eq!(t.modifier, 0x0002_0000);
        let e = pk(PkeyPort::SwitchPort(L0, 2), 1)
            .locate(&st)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("PartitionEnforcementCap (SwitchInfo) 32") && e.contains("port 2"),
            "{e}"
        );
        // Port 0 is bounded by the switch's NodeInfo.PartitionCap (8: one block).
        assert!(pk(PkeyPort::SwitchPort(L0, 0), 0).locate(&st).is_ok());
        assert!(matches!(
            pk(PkeyPort::SwitchPort(L0, 200), 0).locate(&st),
            Err(DriverError::InvalidPort {
                guid: L0,
                port: 200,
                ..
            })
        ));
        assert!(matches!(
            pk(PkeyPort::EndPort(0x77), 0).locate(&st),
            Err(DriverError::UnknownEndPort(0x77))
        ));
    }

    #[test]
    fn enforcement_follows_the_tables_written() {
        let block = |port, block, key: u16| PkeyBlockWrite {
            port,
            block,
            entries: std::array::from_fn(|i| if i == 0 { key } else { 0 }),
        };
        let w = [
            block(PkeyPort::SwitchPort(L0, 1), 0, 0xffff),
            block(PkeyPort::SwitchPort(L0, 2), 0, 0),
            block(PkeyPort::SwitchPort(L0, 3), 1, 0),
            block(PkeyPort::SwitchPort(L0, 4), 1, 0x8001),
            block(PkeyPort::SwitchPort(L0, 4), 0, 0),
            block(PkeyPort::SwitchPort(L0, 0), 0, 0xffff),
            block(PkeyPort::EndPort(CA), 0, 0xffff),
            // Limited membership bit only: no P_Key.
            block(PkeyPort::SwitchPort(L0, 5), 0, 0x8000),
        ];
        let want = enforcement_wanted(&w);
        let expect: BTreeMap<(Guid, PortNum), bool> =
            [((L0, 1), true), ((L0, 2), false), ((L0, 4), true), ((L0, 5), false)].into();
        assert_eq!(want, expect);
    }

    proptest! {
        #[test]
        fn mft_top_covers_every_block_in_use_and_never_drops(
            current in prop_oneof![Just(0xbfffu16), 0xc000u16..=0xffff],
            written in proptest::collection::vec((0u32..512, any::<bool>()), 0..20),
        ) {
            let raised = raised_mft_top(current, written.iter().copied());
            let effective = raised.unwrap_or(current);
            for &(b, used) in &written {
                if used {
                    let last = u32::from(MLID_START) + (b + 1) * 32 - 1;
                    prop_assert!(u32::from(effective) >= last.min(0xffff));
                }
            }
            if let Some(t) = raised {
                prop_assert!(current < MLID_START || t > current, "never lowered");
                prop_assert_eq!((u32::from(t) + 1 - u32::from(MLID_START)) % 32, 0);
            }
            if written.iter().all(|&(_, u)| !u) {
                prop_assert_eq!(raised, None);
            }
        }
    }
}
