//! [`LftTable`]: a switch's linear forwarding table as the SA snapshot holds it.
//!
//! The table is cut into chunks of [`LFT_CHUNK`] entries (64 LFT blocks), each an `Arc` of its
//! own, so that snapshots share what did not change: applying an acknowledged block to a new
//! snapshot copies one chunk (4 KiB), not the switch's whole table (136 KiB per switch at 65 536
//! nodes with 24-bit addresses; copying every touched table once per group of acknowledged
//! blocks was most of the daemon's CPU while uploading, issue #17), and a snapshot built for a
//! new generation keeps the chunks of the one in force where they hold the same entries.
//!
//! Entries past [`LftTable::len`] read as "no route" (0xff), also inside the last chunk.

use std::sync::Arc;

/// Entries per chunk (64 LFT blocks of 64 entries).
pub const LFT_CHUNK: usize = 4096;

/// "No route" in an LFT.
const NO_ROUTE: u8 = 0xff;

type Chunk = Arc<[u8; LFT_CHUNK]>;

/// One switch's LFT: one output port per LID from LID 0 (0xff: none), in shared chunks.
#[derive(Clone, Debug, Default)]
pub struct LftTable {
    chunks: Vec<Chunk>,
    len: usize,
}

impl LftTable {
    /// A table holding `row` (entry `i` for LID `i`).
    pub fn from_slice(row: &[u8]) -> LftTable {
        LftTable::from_slice_sharing(row, None)
    }

    /// A table holding `row` that shares with `old` every chunk whose entries are the same
    /// (same position, same bytes): a new generation's table mostly shares the snapshot's.
    pub fn from_slice_sharing(row: &[u8], old: Option<&LftTable>) -> LftTable {
        let chunks = row
            .chunks(LFT_CHUNK)
            .enumerate()
            .map(|(c, part)| {
                if let Some(o) = old.and_then(|o| o.chunks.get(c).filter(|_| o.chunk_len(c) == part.len())) {
                    if o[..part.len()] == *part {
                        return o.clone();
                    }
                }
                new_chunk(part)
            })
            .collect();
        LftTable { chunks, len: row.len() }
    }

    /// Number of entries (the highest LID covered + 1).
    pub fn len(&self) -> usize {
        self.len
    }

    /// No entry at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry for LID `lid`; `None` past the table's end.
    pub fn get(&self, lid: usize) -> Option<u8> {
        if lid >= self.len {
            return None;
        }
        Some(self.chunks[lid / LFT_CHUNK][lid % LFT_CHUNK])
    }

    /// The 64 entries of LFT block `block`, 0xff past the table's end.
    pub fn block(&self, block: usize) -> [u8; 64] {
        let mut out = [NO_ROUTE; 64];
        let start = block * 64;
        if start < self.len {
            let n = (self.len - start).min(64);
            let c = &self.chunks[start / LFT_CHUNK];
            let at = start % LFT_CHUNK;
            out[..n].copy_from_slice(&c[at..at + n]);
        }
        out
    }

    /// Writes LFT block `block` (copying its chunk first if another table shares it); the
    /// table grows to cover it, new entries "no route".
    pub fn write_block(&mut self, block: usize, entries: &[u8; 64]) {
        let start = block * 64;
        let end = start + 64;
        while self.chunks.len() * LFT_CHUNK < end {
            self.chunks.push(Arc::new([NO_ROUTE; LFT_CHUNK]));
        }
        self.len = self.len.max(end);
        let c = Arc::make_mut(&mut self.chunks[start / LFT_CHUNK]);
        let at = start % LFT_CHUNK;
        c[at..at + 64].copy_from_slice(entries);
    }

    /// The entries as one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for (c, chunk) in self.chunks.iter().enumerate() {
            out.extend_from_slice(&chunk[..self.chunk_len(c)]);
        }
        out
    }

    /// Every entry in LID order.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.chunks
            .iter()
            .enumerate()
            .flat_map(move |(c, chunk)| chunk[..self.chunk_len(c)].iter().copied())
    }

    /// Holds exactly `row`.
    pub fn eq_slice(&self, row: &[u8]) -> bool {
        self.len == row.len()
            && row
                .chunks(LFT_CHUNK)
                .zip(&self.chunks)
                .all(|(part, c)| c[..part.len()] == *part)
    }

    /// Chunks shared with `other` (same allocation), for tests and logs.
    pub fn shared_chunks(&self, other: &LftTable) -> usize {
        self.chunks
            .iter()
            .zip(&other.chunks)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count()
    }

    /// Entries of chunk `c` inside the table.
    fn chunk_len(&self, c: usize) -> usize {
        (self.len - c * LFT_CHUNK).min(LFT_CHUNK)
    }
}

fn new_chunk(part: &[u8]) -> Chunk {
    let mut c = [NO_ROUTE; LFT_CHUNK];
    c[..part.len()].copy_from_slice(part);
    Arc::new(c)
}

impl PartialEq for LftTable {
    fn eq(&self, other: &LftTable) -> bool {
        // Entries past `len` are "no route" in both: whole chunks compare.
        self.len == other.len
            && self
                .chunks
                .iter()
                .zip(&other.chunks)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a[..] == b[..])
    }
}

impl Eq for LftTable {}

impl From<Vec<u8>> for LftTable {
    fn from(row: Vec<u8>) -> LftTable {
        LftTable::from_slice(&row)
    }
}

/// Nodes per group of [`LftList`].
const NODE_GROUP: usize = 256;

type Group = Arc<Vec<Option<Arc<LftTable>>>>;

/// The tables of a snapshot's nodes (by node index), in groups of [`NODE_GROUP`] nodes that
/// snapshots share: a new snapshot that writes one switch's table copies one group (256
/// pointers), not one pointer per node (70 656 at 65 536 end ports) — the upload acknowledges
/// single blocks thousands of times per phase, each applied as a new snapshot (issue #17).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LftList {
    groups: Vec<Group>,
}

impl LftList {
    /// No table for any of `nodes` nodes.
    pub fn new(nodes: usize) -> LftList {
        let groups = (0..nodes.div_ceil(NODE_GROUP))
            .map(|g| Arc::new(vec![None; (nodes - g * NODE_GROUP).min(NODE_GROUP)]))
            .collect();
        LftList { groups }
    }

    /// The table of node `node`.
    pub fn get(&self, node: usize) -> Option<&LftTable> {
        self.groups.get(node / NODE_GROUP)?.get(node % NODE_GROUP)?.as_deref()
    }

    /// The shared table of node `node` (to give another list).
    pub fn get_shared(&self, node: usize) -> Option<Arc<LftTable>> {
        self.groups.get(node / NODE_GROUP)?.get(node % NODE_GROUP)?.clone()
    }

    /// Groups shared with `other` (same allocation), for tests.
    pub fn shared_groups(&self, other: &LftList) -> usize {
        self.groups
            .iter()
            .zip(&other.groups)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count()
    }

    /// The slot of node `node` (its group copied first when shared); `None` past the list.
    pub fn slot_mut(&mut self, node: usize) -> Option<&mut Option<Arc<LftTable>>> {
        let g = self.groups.get_mut(node / NODE_GROUP)?;
        Arc::make_mut(g).get_mut(node % NODE_GROUP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn table(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed) % 37)
            .collect()
    }

    #[test]
    fn reads_what_it_was_built_from_and_no_route_past_the_end() {
        for len in [0, 1, 63, 64, 4095, 4096, 4097, 3 * 4096 + 130] {
            let row = table(len, 3);
            let t = LftTable::from_slice(&row);
            assert_eq!(t.len(), len);
            assert_eq!(t.to_vec(), row);
            assert!(t.eq_slice(&row));
            assert!(t.iter().eq(row.iter().copied()));
            assert_eq!(t.get(len), None);
            for b in 0..=len / 64 {
                let want: Vec<u8> = (b * 64..b * 64 + 64)
                    .map(|i| row.get(i).copied().unwrap_or(0xff))
                    .collect();
                assert_eq!(t.block(b).to_vec(), want, "len {len} block {b}");
            }
        }
    }

    #[test]
    fn writing_a_block_copies_one_chunk_and_leaves_the_other_table_alone() {
        let row = table(5 * LFT_CHUNK, 1);
        let a = LftTable::from_slice(&row);
        let mut b = a.clone();
        b.write_block(70, &[9; 64]);
        assert_eq!(a.to_vec(), row, "the table b was cloned from is unchanged");
        assert_eq!(b.shared_chunks(&a), 4, "only the written block's chunk was copied");
        assert_eq!(b.block(70), [9; 64]);
        assert_ne!(a, b);
        // Beyond the end: grows, the gap reads "no route".
        let mut c = LftTable::from_slice(&row[..100]);
        c.write_block(200, &[4; 64]);
        assert_eq!(c.len(), 201 * 64);
        assert_eq!(c.get(100), Some(0xff));
        assert_eq!(c.get(200 * 64), Some(4));
    }

    #[test]
    fn a_new_table_shares_the_chunks_that_did_not_change() {
        let row = table(4 * LFT_CHUNK + 10, 2);
        let old = LftTable::from_slice(&row);
        let mut next = row.clone();
        next[LFT_CHUNK + 5] ^= 1;
        let t = LftTable::from_slice_sharing(&next, Some(&old));
        assert!(t.eq_slice(&next));
        assert_eq!(t.shared_chunks(&old), 4, "all but the changed chunk");
        // A shorter or longer row shares nothing of a last chunk of another length.
        let short = LftTable::from_slice_sharing(&row[..LFT_CHUNK + 3], Some(&old));
        assert_eq!(short.shared_chunks(&old), 1);
        assert_eq!(short.to_vec(), row[..LFT_CHUNK + 3]);
    }

    #[test]
    fn a_list_copy_that_sets_one_table_copies_one_group() {
        let mut a = LftList::new(1000);
        *a.slot_mut(5).unwrap() = Some(Arc::new(LftTable::from_slice(&[1, 2])));
        *a.slot_mut(999).unwrap() = Some(Arc::new(LftTable::from_slice(&[3])));
        assert!(a.slot_mut(1000).is_none());
        let mut b = a.clone();
        *b.slot_mut(300).unwrap() = Some(Arc::new(LftTable::from_slice(&[4])));
        assert_eq!(b.shared_groups(&a), 3, "4 groups of 256, one copied");
        assert_eq!(a.get(300), None);
        assert_eq!(b.get(300).map(LftTable::to_vec), Some(vec![4]));
        assert!(std::ptr::eq(a.get(5).unwrap(), b.get(5).unwrap()));
        assert_eq!(b.get(999).map(LftTable::to_vec), Some(vec![3]));
        assert_eq!(b.get(1000), None);
    }

    proptest! {
        #[test]
        fn block_writes_match_a_flat_table(len in 0usize..20_000, writes in proptest::collection::vec((0usize..400, any::<u8>()), 0..40)) {
            let mut flat = table(len, 5);
            let mut t = LftTable::from_slice(&flat);
            let before = t.clone();
            for &(b, v) in &writes {
                t.write_block(b, &[v; 64]);
                if flat.len() < b * 64 + 64 {
                    flat.resize(b * 64 + 64, 0xff);
                }
                flat[b * 64..b * 64 + 64].fill(v);
            }
            prop_assert_eq!(t.to_vec(), flat.clone());
            prop_assert!(t.eq_slice(&flat));
            prop_assert_eq!(&t, &LftTable::from_slice(&flat));
            prop_assert_eq!(before.to_vec(), table(len, 5));
        }
    }
}
