//! Table upload ([`upload_blocks`]: the one machinery of LFT, MFT and P_Key block writes) and
//! the LFT: one directed-route LinearForwardingTable Set per block, skipping the blocks the
//! switch is known to hold (a cache per switch, filled by writes and reads), bounded by the
//! switch's LinearFDBCap; and LFT block reads (the daemon reads the switches back when it takes
//! a subnet over).

use fabric_routing::BLOCK_SIZE;
use fabric_southbound::{DriverError, LftBlockWrite, WriteReport};
use fabric_topology::Guid;

use super::inner::{check_status, lock, submit, tp_err, Inner, ZERO};
use super::sa_snapshot;
use super::state::{dr, State};
use crate::mad::*;
use crate::transport;

/// The fewest LFT blocks any switch holds (`None` before a switch answered SwitchInfo).
pub(super) fn max_lft_blocks(st: &State) -> Option<u32> {
    // Switches that never answered SwitchInfo have no known capacity.
    st.switches
        .iter()
        .filter(|s| s.info.linear_fdb_cap() > 0)
        .map(super::state::SwitchRec::max_blocks)
        .min()
}

/// Where one block of a table write goes, found under the `state` lock.
pub(super) struct BlockTarget {
    /// The GUID named in errors (switch node GUID, or CA port GUID).
    pub(super) guid: Guid,
    pub(super) route: Route,
    pub(super) modifier: u32,
}

/// One block of a batch of table writes (LFT, MFT, P_Key): where it goes and what it holds.
/// The upload itself ([`upload_blocks`]) is the same for every table.
pub(super) trait TableBlock {
    /// Attribute written.
    const ATTR: u16;
    /// The Set, as named in status errors ("LinearForwardingTable Set").
    const SET: &'static str;
    /// The operation, as named in transport errors ("LFT block write").
    const OP: &'static str;
    /// The target of the block, checked against what the switch or port supports; `None` when
    /// the target is known to hold the block already (nothing is sent, it counts as written).
    fn locate(&self, st: &State) -> Result<Option<BlockTarget>, DriverError>;
    /// The attribute data.
    fn data(&self) -> [u8; 64];
}

/// The upload of a batch of table blocks: every block located first (an error before anything
/// is sent), then one Set per block, all queued on the transport at once (it keeps `window`
/// SMPs in flight, re-sends lost ones and counts them), then every reply awaited. Returns the
/// report, the blocks acknowledged, and the first error (the others are still awaited: on
/// error some blocks are written).
pub(super) async fn upload_blocks<'a, B: TableBlock>(
    inner: &Inner,
    blocks: &'a [B],
) -> Result<(WriteReport, Vec<&'a B>, Option<DriverError>), DriverError> {
    let tp = &inner.tp;
    let mut pend = Vec::with_capacity(blocks.len());
    let mut skipped = 0usize;
    {
        let st = lock(&inner.state);
        let mut targets = Vec::with_capacity(blocks.len());
        for b in blocks {
            targets.push(b.locate(&st)?);
        }
        for (b, t) in blocks.iter().zip(targets) {
            let Some(t) = t else {
                skipped += 1;
                continue;
            };
            pend.push((
                b,
                t.guid,
                submit(tp, &t.route, METHOD_SET, B::ATTR, t.modifier, &b.data())?,
            ));
        }
    }
    let mut report = WriteReport {
        blocks_written: skipped,
        retries: 0,
    };
    let mut first_err = None;
    let mut done = Vec::with_capacity(pend.len());
    for (b, guid, rx) in pend {
        match transport::wait(rx).await {
            Ok(r) => {
                report.retries += r.attempts as usize - 1;
                if let Err(e) = check_status(guid, B::SET, &r) {
                    first_err.get_or_insert(e);
                    continue;
                }
                report.blocks_written += 1;
                done.push(b);
            }
            Err(e) => {
                first_err.get_or_insert(tp_err(guid, B::OP, e));
            }
        }
    }
    Ok((report, done, first_err))
}

impl TableBlock for LftBlockWrite {
    const ATTR: u16 = ATTR_LFT;
    const SET: &'static str = "LinearForwardingTable Set";
    const OP: &'static str = "LFT block write";
    fn locate(&self, st: &State) -> Result<Option<BlockTarget>, DriverError> {
        let Some(&i) = st.sw_by_guid.get(&self.switch) else {
            return Err(DriverError::UnknownSwitch(self.switch));
        };
        let s = &st.switches[i];
        if !s.up {
            return Err(DriverError::Unreachable { guid: s.guid });
        }
        let max = s.max_blocks();
        if self.block >= max {
            return Err(DriverError::BlockOutOfRange {
                guid: s.guid,
                block: self.block,
                max_blocks: max,
            });
        }
        if s.lft.get(&self.block) == Some(&self.entries) {
            return Ok(None);
        }
        Ok(Some(BlockTarget {
            guid: s.guid,
            route: dr(&s.path),
            modifier: self.block,
        }))
    }
    fn data(&self) -> [u8; 64] {
        let mut data = [0u8; 64];
        data.copy_from_slice(&self.entries);
        data
    }
}

/// [`SouthboundDriver::write_lft_blocks`](fabric_southbound::SouthboundDriver::write_lft_blocks).
pub(super) async fn write_lft_blocks(inner: &Inner, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
    let (report, done, first_err) = upload_blocks(inner, blocks).await?;
    let done: Vec<(Guid, u32, [u8; BLOCK_SIZE])> = done.into_iter().map(|b| (b.switch, b.block, b.entries)).collect();
    sa_snapshot::record_lft_blocks(inner, &done, true);
    match first_err {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// [`SouthboundDriver::read_lft_block`](fabric_southbound::SouthboundDriver::read_lft_block).
pub(super) async fn read_lft_block(inner: &Inner, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
    let (path, max) = {
        let st = lock(&inner.state);
        let Some(&i) = st.sw_by_guid.get(&switch) else {
            return Err(DriverError::UnknownSwitch(switch));
        };
        (st.switches[i].path.clone(), st.switches[i].max_blocks())
    };
    if block >= max {
        return Err(DriverError::BlockOutOfRange {
            guid: switch,
            block,
            max_blocks: max,
        });
    }
    let r = inner
        .tp
        .call(dr(&path), METHOD_GET, ATTR_LFT, block, &ZERO)
        .await
        .map_err(|e| tp_err(switch, "LFT block read", e))?;
    check_status(switch, "LinearForwardingTable Get", &r)?;
    let mut out = [0u8; BLOCK_SIZE];
    out.copy_from_slice(&r.smp.data()[..BLOCK_SIZE]);
    sa_snapshot::record_lft_blocks(inner, &[(switch, block, out)], false);
    Ok(out)
}
