//! Linear forwarding tables: per switch a byte per LID (port 0 = the switch itself,
//! [`NO_ROUTE`] = no route), in 64-entry blocks; diffs between two LFT sets.

use fabric_topology::{Lid, PortNum, SwitchId};

mod storage;
use storage::Bytes;

/// Entries per LFT block.
pub const BLOCK_SIZE: usize = 64;
/// LFT entry meaning "no route".
pub const NO_ROUTE: u8 = 255;

/// The LFTs of every switch of a fabric, one flat array (`switches × row_len`), row length a
/// multiple of [`BLOCK_SIZE`] covering LIDs `0..row_len`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lfts {
    row_len: usize,
    data: Bytes,
}

impl Lfts {
    /// All-`NO_ROUTE` tables for `num_switches` switches covering LIDs `0..=top`.
    ///
    /// Large tables are written in parallel (rayon, 1 MiB chunks): a fresh table is mostly
    /// first-touch page faults, which then spread over the worker threads.
    pub fn new(num_switches: usize, top: Lid) -> Self {
        use rayon::iter::ParallelIterator;
        use rayon::slice::ParallelSliceMut;
        const CHUNK: usize = 1 << 20;
        let row_len = (top as usize + 1).div_ceil(BLOCK_SIZE) * BLOCK_SIZE;
        let len = row_len * num_switches;
        let data = if len < 4 * CHUNK {
            Bytes::Vec(vec![NO_ROUTE; len])
        } else {
            let mut data = Bytes::zeroed(len);
            data.par_chunks_mut(CHUNK).for_each(|c| c.fill(NO_ROUTE));
            data
        };
        Lfts { row_len, data }
    }
    /// Tables of the size of [`Lfts::new`] whose entries are still 0 (a zeroed allocation: the
    /// pages are not touched until written). For a fill that writes every entry of every row,
    /// as [`crate::fill::fill_dmodc_fresh`] does (it sets each row to [`NO_ROUTE`] first).
    pub(crate) fn unfilled(num_switches: usize, top: Lid) -> Self {
        let row_len = (top as usize + 1).div_ceil(BLOCK_SIZE) * BLOCK_SIZE;
        Lfts {
            row_len,
            data: Bytes::zeroed(row_len * num_switches),
        }
    }
    /// [`Lfts::unfilled`] in the allocation of `self` (tables no longer needed, of any size):
    /// the entries are unspecified (old bytes or 0), and the pages already in memory are not
    /// faulted in again. For a fill that writes every entry of every row.
    pub(crate) fn recycled(self, num_switches: usize, top: Lid) -> Self {
        let row_len = (top as usize + 1).div_ceil(BLOCK_SIZE) * BLOCK_SIZE;
        Lfts {
            row_len,
            data: self.data.resized(row_len * num_switches),
        }
    }
    /// Number of switches (rows).
    pub fn num_switches(&self) -> usize {
        self.data.len().checked_div(self.row_len).unwrap_or(0)
    }
    /// Number of LIDs covered by each row (a multiple of 64).
    pub fn row_len(&self) -> usize {
        self.row_len
    }
    /// Number of 64-entry LFT blocks per row.
    pub fn num_blocks(&self) -> usize {
        self.row_len / BLOCK_SIZE
    }
    /// The table of one switch, indexed by LID.
    pub fn row(&self, sw: SwitchId) -> &[u8] {
        &self.data[sw.idx() * self.row_len..(sw.idx() + 1) * self.row_len]
    }
    /// The table of one switch, mutable.
    pub fn row_mut(&mut self, sw: SwitchId) -> &mut [u8] {
        &mut self.data[sw.idx() * self.row_len..(sw.idx() + 1) * self.row_len]
    }
    /// Mutable rows, one per switch, for parallel filling (`par_chunks_mut`).
    pub fn rows_mut(&mut self) -> std::slice::ChunksMut<'_, u8> {
        self.data.chunks_mut(self.row_len.max(1))
    }
    /// Mutable rows, one per switch, as a rayon parallel iterator (row `i` is switch `i`).
    pub fn par_rows_mut(&mut self) -> rayon::slice::ChunksMut<'_, u8> {
        use rayon::slice::ParallelSliceMut;
        self.data.par_chunks_mut(self.row_len.max(1))
    }
    /// The whole table, switch-major (`switches × row_len` bytes).
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }
    /// Whether `lid` has an entry in every row.
    pub fn covers(&self, lid: Lid) -> bool {
        (lid as usize) < self.row_len
    }
    /// Output port of `sw` for `lid` ([`NO_ROUTE`] when out of range).
    pub fn get(&self, sw: SwitchId, lid: Lid) -> PortNum {
        let lid = lid as usize;
        if lid >= self.row_len {
            return NO_ROUTE;
        }
        self.data[sw.idx() * self.row_len + lid]
    }
    /// Sets one entry. Panics when `sw` or `lid` is outside the table (callers size it from
    /// the plan's [`LidPlan::top`](crate::lid::LidPlan::top)).
    pub fn set(&mut self, sw: SwitchId, lid: Lid, port: PortNum) {
        let i = sw.idx() * self.row_len + lid as usize;
        self.data[i] = port;
    }
    /// LFT block `block` of a switch (LIDs `64·block..64·block + 63`).
    pub fn block(&self, sw: SwitchId, block: usize) -> &[u8] {
        let start = sw.idx() * self.row_len + block * BLOCK_SIZE;
        &self.data[start..start + BLOCK_SIZE]
    }
    /// LFT block `block` of a switch, mutable.
    pub fn block_mut(&mut self, sw: SwitchId, block: usize) -> &mut [u8] {
        let start = sw.idx() * self.row_len + block * BLOCK_SIZE;
        &mut self.data[start..start + BLOCK_SIZE]
    }

    /// Blocks of `new` that differ from `self` (blocks beyond `self`'s coverage compare
    /// against all-`NO_ROUTE`), in switch-major order.
    pub fn diff(&self, new: &Lfts) -> Vec<LftBlockDiff> {
        let empty = [NO_ROUTE; BLOCK_SIZE];
        let mut out = Vec::new();
        for s in 0..new.num_switches() {
            let sw = SwitchId(s as u32);
            for b in 0..new.num_blocks() {
                let nb = new.block(sw, b);
                let ob = if s < self.num_switches() && b < self.num_blocks() {
                    self.block(sw, b)
                } else {
                    &empty[..]
                };
                if nb != ob {
                    let mut entries = [0u8; BLOCK_SIZE];
                    entries.copy_from_slice(nb);
                    out.push(LftBlockDiff {
                        switch: sw,
                        block: b as u32,
                        entries,
                    });
                }
            }
        }
        out
    }

    /// Applies a diff in place. Blocks beyond the current coverage grow every row.
    pub fn apply(&mut self, diff: &[LftBlockDiff]) {
        if let Some(maxb) = diff.iter().map(|d| d.block as usize + 1).max() {
            if maxb > self.num_blocks() {
                let n = self.num_switches();
                let mut grown = Lfts {
                    row_len: maxb * BLOCK_SIZE,
                    data: Bytes::Vec(vec![NO_ROUTE; maxb * BLOCK_SIZE * n]),
                };
                for s in 0..n {
                    let sw = SwitchId(s as u32);
                    grown.row_mut(sw)[..self.row_len].copy_from_slice(self.row(sw));
                }
                *self = grown;
            }
        }
        for d in diff {
            self.block_mut(d.switch, d.block as usize).copy_from_slice(&d.entries);
        }
    }
}

/// One 64-entry block of one switch with its new contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LftBlockDiff {
    /// The switch whose table changes.
    pub switch: SwitchId,
    /// Block number (LIDs `64·block..64·block + 63`).
    pub block: u32,
    /// The new 64 entries.
    pub entries: [u8; BLOCK_SIZE],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_then_apply_gives_new() {
        let mut a = Lfts::new(3, 100);
        assert_eq!(a.row_len(), 128);
        a.set(SwitchId(1), 5, 3);
        let mut b = a.clone();
        b.set(SwitchId(1), 5, 4);
        b.set(SwitchId(2), 127, 1);
        let d = a.diff(&b);
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].switch, d[0].block), (SwitchId(1), 0));
        assert_eq!((d[1].switch, d[1].block), (SwitchId(2), 1));
        a.apply(&d);
        assert_eq!(a, b);
        assert!(a.diff(&b).is_empty());
    }

    #[test]
    fn large_tables_are_initialised_in_parallel_to_no_route() {
        // 100 × 50 048 bytes: above the parallel threshold (4 MiB).
        let l = Lfts::new(100, 50_000);
        assert_eq!((l.num_switches(), l.row_len()), (100, 50_048));
        assert!(l.as_bytes().len() >= 4 << 20);
        assert!(l.as_bytes().iter().all(|&b| b == NO_ROUTE));
        let small = Lfts::new(3, 100);
        assert!(small.as_bytes().iter().all(|&b| b == NO_ROUTE));
    }

    /// A random LFT set: `switches × lids`, a mix of ports, 0 and `NO_ROUTE`.
    fn arb_lfts(switches: usize, top: Lid) -> impl Strategy<Value = Lfts> {
        let len = Lfts::new(switches, top).as_bytes().len();
        proptest::collection::vec(prop_oneof![3 => 1u8..=36, 1 => Just(0u8), 1 => Just(NO_ROUTE)], len).prop_map(
            move |bytes| {
                let mut l = Lfts::new(switches, top);
                l.data.copy_from_slice(&bytes);
                l
            },
        )
    }

    /// Two random LFT sets over the same switches, the second covering as many or more blocks,
    /// and sometimes equal to the first except for a few entries.
    fn arb_pair() -> impl Strategy<Value = (Lfts, Lfts)> {
        (1usize..6, 0u32..200, 0u32..130, any::<bool>()).prop_flat_map(|(sw, top, extra, similar)| {
            (
                arb_lfts(sw, top),
                arb_lfts(sw, top + extra),
                proptest::collection::vec((0..sw, 0..=top + extra, 0u8..40), 0..8),
            )
                .prop_map(move |(a, b, edits)| {
                    if similar && a.row_len() == b.row_len() {
                        let mut c = a.clone();
                        for (s, lid, p) in edits {
                            c.set(SwitchId(s as u32), lid.min(c.row_len() as u32 - 1), p);
                        }
                        (a, c)
                    } else {
                        (a, b)
                    }
                })
        })
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn apply_of_diff_gives_new((old, new) in arb_pair()) {
            let d = old.diff(&new);
            // Only blocks that really differ are listed, each once, in switch-major order.
            for w in d.windows(2) {
                prop_assert!((w[0].switch, w[0].block) < (w[1].switch, w[1].block));
            }
            for b in &d {
                let sw = b.switch;
                let blk = b.block as usize;
                let before: Vec<u8> = if blk < old.num_blocks() { old.block(sw, blk).to_vec() } else { vec![NO_ROUTE; BLOCK_SIZE] };
                prop_assert_ne!(before, b.entries.to_vec());
            }
            let mut applied = old.clone();
            applied.apply(&d);
            prop_assert_eq!(&applied, &new);
            prop_assert!(applied.diff(&new).is_empty());
        }
    }
}
