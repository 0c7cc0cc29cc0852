//! Dense path index: live end ports in global order, directed switch-to-switch channels with
//! dense ids, and path walks through the LFTs without allocation.
//!
//! Destination-based routing makes the path from an end port `s` to an end port `d` depend only
//! on the switch `s` is attached to (its *leaf*) and on `d`'s base LID. Every metric here is
//! therefore computed from walks `leaf -> d`, weighted by how many sources share the leaf.

use fabric_routing::{Lfts, LidPlan, NO_ROUTE};
use fabric_topology::{EndPortId, Fabric, Guid, Lid, PortNum, Remote, SwitchId};

/// Slot value flag: the switch port leads to a live end port (low bits: its live index).
pub(crate) const END: u32 = 1 << 31;
/// Slot value: the switch port leads nowhere usable (not cabled, down, self-loop, port 0,
/// dead end port, or beyond the switch's ports). Has the [`END`] bit set so that one comparison
/// (`slot >= END`) ends every walk.
pub(crate) const DEAD: u32 = u32::MAX;
/// Slots reserved per switch: one per possible LFT entry value (`PortNum` is a byte).
const PORT_SLOTS: usize = 256;

/// A directed switch-to-switch port: output port `port` of switch `switch` (one direction of one
/// cable; parallel cables are distinct ports).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwitchPort {
    pub switch: SwitchId,
    /// GUID of `switch`, for reports.
    pub guid: Guid,
    pub port: PortNum,
}

/// The dense view of one fabric plus its LFTs and LID plan used by every metric.
pub(crate) struct PathIndex<'a> {
    /// Per switch: its LFT row (empty when the LFTs do not cover the switch).
    rows: Vec<&'a [u8]>,
    /// Per switch × 256: what the output port leads to (channel id, `END | live index`, [`DEAD`]).
    slot: Vec<u32>,
    /// Per channel: the switch it leads to.
    ch_to: Vec<u32>,
    /// Per channel: the output port it is.
    ch_port: Vec<SwitchPort>,
    num_switches: usize,
    /// Live end ports in global end-node order (ascending [`EndPortId`]).
    pub live: Vec<EndPortId>,
    /// Per [`EndPortId`]: index into `live`, or `u32::MAX` when the end port is not live.
    pub live_idx: Vec<u32>,
    /// Per live end port: its base LID (0 = none).
    pub lid: Vec<Lid>,
    /// Per live end port: index of its leaf in `leaves`.
    pub leaf_of: Vec<u32>,
    /// Switches with at least one live end port, ascending id.
    pub leaves: Vec<u32>,
    /// Per leaf: number of live end ports attached to it.
    pub leaf_size: Vec<u32>,
}

impl<'a> PathIndex<'a> {
    /// Builds the index. Never fails: inconsistencies between the fabric, the LID plan and the
    /// LFTs (missing rows, missing LIDs, LIDs beyond the LFT coverage) make the affected pairs
    /// unrouted.
    pub fn new(fabric: &Fabric, lids: &LidPlan, lfts: &'a Lfts) -> Self {
        let num_switches = fabric.num_switches();
        let lft_switches = lfts.num_switches();
        let rows: Vec<&[u8]> = (0..num_switches)
            .map(|s| {
                if s < lft_switches {
                    lfts.row(SwitchId(s as u32))
                } else {
                    &[][..]
                }
            })
            .collect();

        let mut live = Vec::new();
        let mut live_idx = vec![u32::MAX; fabric.num_end_ports()];
        for ep in fabric.end_port_ids() {
            if fabric.end_port_live(ep) {
                live_idx[ep.idx()] = live.len() as u32;
                live.push(ep);
            }
        }

        let mut slot = vec![DEAD; num_switches * PORT_SLOTS];
        let mut ch_to = Vec::new();
        let mut ch_port = Vec::new();
        for sid in fabric.switch_ids() {
            let sw = fabric.switch(sid);
            for (pn, port) in sw.external_ports() {
                if pn == NO_ROUTE {
                    // A 255th port cannot be named by an LFT entry: 255 means "no route".
                    continue;
                }
                let v = match port.remote {
                    Remote::Switch { .. } => match fabric.switch_link_live(sid, pn) {
                        Some((to, _)) => {
                            ch_to.push(to.0);
                            ch_port.push(SwitchPort {
                                switch: sid,
                                guid: sw.guid,
                                port: pn,
                            });
                            (ch_to.len() - 1) as u32
                        }
                        None => DEAD,
                    },
                    Remote::EndPort(ep) => {
                        let attached_here = fabric.end_ports().get(ep.idx()).and_then(|e| e.attach) == Some((sid, pn));
                        match live_idx.get(ep.idx()) {
                            Some(&li) if li != u32::MAX && attached_here => END | li,
                            _ => DEAD,
                        }
                    }
                    Remote::None => DEAD,
                };
                slot[sid.idx() * PORT_SLOTS + pn as usize] = v;
            }
        }

        let mut leaf_index = vec![u32::MAX; num_switches];
        let mut leaves = Vec::new();
        let mut leaf_size = Vec::new();
        let mut leaf_of = Vec::with_capacity(live.len());
        let mut lid = Vec::with_capacity(live.len());
        // Leaves are numbered in ascending switch id for determinism, independent of end order.
        let mut attach_sw: Vec<u32> = live
            .iter()
            .filter_map(|&ep| fabric.end_port(ep).attach.map(|(s, _)| s.0))
            .collect();
        attach_sw.sort_unstable();
        attach_sw.dedup();
        for s in attach_sw {
            leaf_index[s as usize] = leaves.len() as u32;
            leaves.push(s);
            leaf_size.push(0);
        }
        for &ep in &live {
            // `end_port_live` guarantees an attachment.
            let sw = fabric.end_port(ep).attach.map(|(s, _)| s.idx()).unwrap_or(0);
            let li = leaf_index[sw];
            leaf_of.push(li);
            leaf_size[li as usize] += 1;
            lid.push(lids.end_port_base.get(ep.idx()).copied().unwrap_or(0));
        }

        PathIndex {
            rows,
            slot,
            ch_to,
            ch_port,
            num_switches,
            live,
            live_idx,
            lid,
            leaf_of,
            leaves,
            leaf_size,
        }
    }

    /// Number of live end ports (`N`).
    pub fn num_live(&self) -> usize {
        self.live.len()
    }
    /// Number of switches of the fabric.
    pub fn num_switches(&self) -> usize {
        self.num_switches
    }
    /// Number of directed live switch-to-switch ports (channels).
    pub fn num_channels(&self) -> usize {
        self.ch_to.len()
    }
    /// The switch port a channel id stands for.
    pub fn channel(&self, ch: u32) -> SwitchPort {
        self.ch_port[ch as usize]
    }

    /// What output `port` of switch `sw` leads to.
    #[inline]
    pub(crate) fn next(&self, sw: u32, lid: Lid) -> u32 {
        let port = self.rows[sw as usize].get(lid as usize).copied().unwrap_or(NO_ROUTE);
        self.slot[sw as usize * PORT_SLOTS + port as usize]
    }

    /// Walks from switch `from` towards live end port `dst`, collecting the channels crossed into
    /// `buf` (cleared first). Returns whether the walk reaches `dst`: it fails on a missing LID,
    /// a `NO_ROUTE` or unusable port, delivery to another end port, or a loop (more hops than
    /// switches).
    pub fn trace(&self, from: u32, dst: u32, buf: &mut Vec<u32>) -> bool {
        buf.clear();
        let lid = self.lid[dst as usize];
        if lid == 0 {
            return false;
        }
        let mut sw = from;
        loop {
            let s = self.next(sw, lid);
            if s < END {
                if buf.len() >= self.num_switches {
                    return false;
                }
                buf.push(s);
                sw = self.ch_to[s as usize];
            } else {
                return s == (END | dst);
            }
        }
    }

    /// Walks a pair already known to be routed (by [`PathIndex::trace`]) and calls `f` on every
    /// channel crossed, without recording the path. Bounded by the switch count, so it
    /// terminates even on an unvalidated pair.
    #[inline]
    pub fn walk(&self, from: u32, dst: u32, mut f: impl FnMut(u32)) {
        let lid = self.lid[dst as usize];
        let mut sw = from;
        for _ in 0..self.num_switches {
            let s = self.next(sw, lid);
            if s >= END {
                return;
            }
            f(s);
            sw = self.ch_to[s as usize];
        }
    }
}

/// Destinations per [`BlockTable`]: one LFT cache line of every switch holds their entries
/// when their LIDs are consecutive.
pub(crate) const BLOCK: u32 = 64;

/// The next hops of every switch towards a block of up to [`BLOCK`] consecutive live end ports,
/// copied out of the LFTs once (reading each switch's row sequentially), so that the many walks
/// towards these destinations read a small table instead of one LFT cache line per hop.
pub(crate) struct BlockTable {
    d0: u32,
    len: u32,
    num_switches: usize,
    /// Per switch × destination of the block ([`BLOCK`] entries per switch): the slot value of
    /// the LFT entry.
    slot: Vec<u32>,
    /// Per switch × destination of the block: the switch the channel leads to (when a channel).
    to: Vec<u32>,
}

impl BlockTable {
    pub fn new() -> Self {
        BlockTable {
            d0: 0,
            len: 0,
            num_switches: 0,
            slot: Vec::new(),
            to: Vec::new(),
        }
    }

    /// [`PathIndex::trace`] for a destination `dst` of the block.
    #[inline]
    pub fn trace(&self, idx: &PathIndex<'_>, from: u32, dst: u32, buf: &mut Vec<u32>) -> bool {
        buf.clear();
        if idx.lid[dst as usize] == 0 {
            return false;
        }
        let j = (dst - self.d0) as usize;
        let mut sw = from as usize;
        loop {
            let s = self.slot[sw * BLOCK as usize + j];
            if s < END {
                if buf.len() >= self.num_switches {
                    return false;
                }
                buf.push(s);
                sw = self.to[sw * BLOCK as usize + j] as usize;
            } else {
                return s == (END | dst);
            }
        }
    }

    /// [`PathIndex::walk`] for a destination `dst` of the block (a pair known to be routed):
    /// calls `f` on every channel crossed. Bounded by the switch count.
    #[inline]
    pub fn walk(&self, from: u32, dst: u32, mut f: impl FnMut(u32)) {
        let j = (dst - self.d0) as usize;
        let mut sw = from as usize;
        for _ in 0..self.num_switches {
            let s = self.slot[sw * BLOCK as usize + j];
            if s >= END {
                return;
            }
            f(s);
            sw = self.to[sw * BLOCK as usize + j] as usize;
        }
    }

    /// The destinations of the block.
    pub fn destinations(&self) -> std::ops::Range<u32> {
        self.d0..self.d0 + self.len
    }
}

impl PathIndex<'_> {
    /// Fills `t` with the next hops towards live end ports `d0 .. d0 + BLOCK` (clipped to `N`).
    pub fn fill_block(&self, d0: u32, t: &mut BlockTable) {
        let ns = self.num_switches;
        let len = BLOCK.min(self.num_live() as u32 - d0);
        t.d0 = d0;
        t.len = len;
        t.num_switches = ns;
        let b = BLOCK as usize;
        t.slot.resize(ns * b, DEAD);
        t.to.resize(ns * b, 0);
        let lids = &self.lid[d0 as usize..(d0 + len) as usize];
        // Switch-major: each switch's entries are contiguous, so the copy writes sequentially.
        for (sw, (slot_out, to_out)) in t.slot.chunks_exact_mut(b).zip(t.to.chunks_exact_mut(b)).enumerate() {
            let row = self.rows[sw];
            let slots = &self.slot[sw * PORT_SLOTS..(sw + 1) * PORT_SLOTS];
            for (j, &lid) in lids.iter().enumerate() {
                let port = row.get(lid as usize).copied().unwrap_or(NO_ROUTE);
                let v = slots[port as usize];
                slot_out[j] = v;
                if v < END {
                    to_out[j] = self.ch_to[v as usize];
                }
            }
        }
    }
}

/// Bit matrix `leaves × N`: whether the path from a leaf to a live end port is routed.
pub(crate) struct RoutedBits {
    pub words_per_row: usize,
    pub bits: Vec<u64>,
}

impl RoutedBits {
    pub fn new(rows: usize, cols: usize) -> Self {
        let words_per_row = cols.div_ceil(64).max(1);
        RoutedBits {
            words_per_row,
            bits: vec![0; rows * words_per_row],
        }
    }
    #[inline]
    pub fn get(&self, row: u32, col: u32) -> bool {
        let w = self.bits[row as usize * self.words_per_row + (col as usize >> 6)];
        (w >> (col & 63)) & 1 == 1
    }
    #[inline]
    pub fn set_in_row(row: &mut [u64], col: u32) {
        row[col as usize >> 6] |= 1 << (col & 63);
    }
}
