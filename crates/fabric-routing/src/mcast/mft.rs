//! Multicast forwarding tables ([`Mfts`]): one 256-bit port mask per (switch, MLID slot), in
//! one flat array, and their block diff in the InfiniBand MFT layout ([`MftBlockDiff`]).

use fabric_topology::{Fabric, Lid, PortNum, SwitchId};

/// First multicast LID (slot 0 of a table).
pub const MLID_BASE: Lid = 0xC000;
/// Last usable multicast LID (0xFFFF is the permissive LID).
pub const MLID_MAX: Lid = 0xFFFE;
/// MLIDs per MFT block.
pub const MFT_BLOCK_SIZE: usize = 32;
/// Ports per MFT position (16 bits of a mask entry).
pub const MFT_POSITION_PORTS: usize = 16;

/// A 256-bit port mask: bit `p` (word `p / 64`, bit `p % 64`) = port `p`; bit 0 is the
/// switch's own port 0.
pub type PortMask = [u64; 4];

/// Whether `mlid` is a multicast LID this crate routes (`0xC000..=0xFFFE`).
pub fn is_mlid(mlid: Lid) -> bool {
    (MLID_BASE..=MLID_MAX).contains(&mlid)
}

/// Sets port `p` in `mask`.
#[inline]
pub(crate) fn set_port(mask: &mut PortMask, p: PortNum) {
    mask[p as usize / 64] |= 1u64 << (p % 64);
}

/// Whether port `p` is in `mask`.
#[inline]
pub fn has_port(mask: &PortMask, p: PortNum) -> bool {
    mask[p as usize / 64] & (1u64 << (p % 64)) != 0
}

/// The ports of a mask, ascending.
pub fn mask_ports(mask: PortMask) -> impl Iterator<Item = PortNum> {
    (0..4usize).flat_map(move |w| {
        let mut bits = mask[w];
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let b = bits.trailing_zeros();
            bits &= bits - 1;
            Some((w * 64 + b as usize) as PortNum)
        })
    })
}

/// Multicast forwarding tables of every switch: `switches × slots` port masks, slot =
/// `mlid - 0xC000`. Masks outside the table read as empty.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Mfts {
    num_switches: usize,
    slots: usize,
    masks: Vec<PortMask>,
}

/// One MFT block of one switch, the unit of an MFT write: MLIDs `0xC000 + 32·block ..+31`,
/// ports `16·position .. 16·position + 15` (bit `i` of an entry = port `16·position + i`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MftBlockDiff {
    /// The switch whose table changes.
    pub switch: SwitchId,
    /// Block number (MLIDs `0xC000 + 32·block ..`).
    pub block: u32,
    /// Position (ports `16·position ..`).
    pub position: u8,
    /// The new 32 entries, one per MLID of the block.
    pub entries: [u16; MFT_BLOCK_SIZE],
}

/// Number of MFT positions of a switch with `nports` external ports (port 0 included).
pub fn num_positions(nports: PortNum) -> u8 {
    (nports as usize + 1).div_ceil(MFT_POSITION_PORTS) as u8
}

impl Mfts {
    /// Empty tables (every mask zero) for `num_switches` switches and `slots` MLIDs from 0xC000.
    pub fn new(num_switches: usize, slots: usize) -> Self {
        Mfts {
            num_switches,
            slots,
            masks: vec![[0; 4]; num_switches * slots],
        }
    }
    /// Number of switches.
    pub fn num_switches(&self) -> usize {
        self.num_switches
    }
    /// Number of MLID slots (MLIDs `0xC000 .. 0xC000 + slots`).
    pub fn num_slots(&self) -> usize {
        self.slots
    }
    /// Number of MFT blocks the table spans (`ceil(slots / 32)`).
    pub fn num_blocks(&self) -> usize {
        self.slots.div_ceil(MFT_BLOCK_SIZE)
    }
    #[inline]
    fn index(&self, sw: SwitchId, mlid: Lid) -> Option<usize> {
        let slot = mlid.checked_sub(MLID_BASE)? as usize;
        (sw.idx() < self.num_switches && slot < self.slots).then(|| sw.idx() * self.slots + slot)
    }
    /// The port mask of `sw` for `mlid` (empty outside the table or for a non-multicast LID).
    #[inline]
    pub fn mask(&self, sw: SwitchId, mlid: Lid) -> PortMask {
        self.index(sw, mlid).map_or([0; 4], |i| self.masks[i])
    }
    /// The ports of `sw`'s mask for `mlid`, ascending.
    pub fn ports(&self, sw: SwitchId, mlid: Lid) -> impl Iterator<Item = PortNum> {
        mask_ports(self.mask(sw, mlid))
    }
    /// Sets the mask of `sw` for `mlid`; returns false (and changes nothing) outside the table.
    pub fn set_mask(&mut self, sw: SwitchId, mlid: Lid, mask: PortMask) -> bool {
        match self.index(sw, mlid) {
            Some(i) => {
                self.masks[i] = mask;
                true
            }
            None => false,
        }
    }
    /// The masks of one switch, one per slot.
    pub fn row(&self, sw: SwitchId) -> &[PortMask] {
        if sw.idx() >= self.num_switches {
            return &[];
        }
        &self.masks[sw.idx() * self.slots..(sw.idx() + 1) * self.slots]
    }
    pub(crate) fn masks_mut(&mut self) -> &mut [PortMask] {
        &mut self.masks
    }

    /// The 32 entries of `position` in `block` of `sw` (zeros beyond the table).
    pub fn block_entries(&self, sw: SwitchId, block: u32, position: u8) -> [u16; MFT_BLOCK_SIZE] {
        let mut e = [0u16; MFT_BLOCK_SIZE];
        let row = self.row(sw);
        let first = block as usize * MFT_BLOCK_SIZE;
        let shift = position as usize * MFT_POSITION_PORTS;
        if shift >= 256 {
            return e;
        }
        for (i, v) in e.iter_mut().enumerate() {
            if let Some(m) = row.get(first + i) {
                *v = (m[shift / 64] >> (shift % 64)) as u16;
            }
        }
        e
    }

    /// Every block and position of one switch (a full resync of its MFT), zero blocks included,
    /// over the table's blocks.
    pub fn switch_blocks(&self, fabric: &Fabric, sw: SwitchId) -> Vec<MftBlockDiff> {
        let npos = num_positions(fabric.switch(sw).nports);
        let mut out = Vec::with_capacity(self.num_blocks() * npos as usize);
        for block in 0..self.num_blocks() as u32 {
            for position in 0..npos {
                out.push(MftBlockDiff {
                    switch: sw,
                    block,
                    position,
                    entries: self.block_entries(sw, block, position),
                });
            }
        }
        out
    }

    /// [`Mfts::switch_blocks`] of every switch of `fabric`, switch-major.
    pub fn all_blocks(&self, fabric: &Fabric) -> Vec<MftBlockDiff> {
        fabric
            .switch_ids()
            .flat_map(|s| self.switch_blocks(fabric, s))
            .collect()
    }
}

/// The (switch, block, position) entries of `new` that differ from `old`, switch-major then
/// block then position, for every switch of `fabric` and only the positions the switch has
/// (`ceil((nports + 1) / 16)`). Tables of different sizes compare as zeros beyond their end,
/// so MLIDs that vanish produce zeroing writes.
pub fn mft_diff(old: &Mfts, new: &Mfts, fabric: &Fabric) -> Vec<MftBlockDiff> {
    let blocks = old.num_blocks().max(new.num_blocks()) as u32;
    let mut out = Vec::new();
    for sw in fabric.switch_ids() {
        let (ro, rn) = (old.row(sw), new.row(sw));
        if ro.is_empty() && rn.is_empty() {
            continue;
        }
        let npos = num_positions(fabric.switch(sw).nports);
        for block in 0..blocks {
            // Cheap skip: the 32 masks are equal (both read as zeros beyond their end).
            let a = block as usize * MFT_BLOCK_SIZE;
            let same = (a..a + MFT_BLOCK_SIZE).all(|i| ro.get(i).unwrap_or(&[0; 4]) == rn.get(i).unwrap_or(&[0; 4]));
            if same {
                continue;
            }
            for position in 0..npos {
                let (eo, en) = (
                    old.block_entries(sw, block, position),
                    new.block_entries(sw, block, position),
                );
                if eo != en {
                    out.push(MftBlockDiff {
                        switch: sw,
                        block,
                        position,
                        entries: en,
                    });
                }
            }
        }
    }
    out
}
