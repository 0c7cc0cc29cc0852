//! The all-pairs pass, cache-friendly: every `leaf -> d` path traced once, destinations in
//! blocks of 64 (one [`BlockTable`] of next hops per block, all leaves per block). Gives the
//! routed bits, `nu`, unrouted pairs and, for all-to-all, the paths and distinct destinations
//! per channel, and the distinct sources per channel through one shared bit per leaf and
//! channel (a leaf's end ports all cross a channel as soon as one routed path from the leaf
//! does, since a path between two end ports of one leaf crosses no channel).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

use crate::index::{BlockTable, PathIndex, RoutedBits, BLOCK};
use crate::{Progress, Scan};

/// Per-thread accumulator of the destination-major pass.
struct Acc {
    xi: Vec<u64>,
    dst: Vec<u64>,
    /// Per channel: last destination that counted there.
    stamp: Vec<u32>,
    buf: Vec<u32>,
    edge_sum: u64,
    routed: u64,
    unrouted: u64,
    diameter: u32,
    /// `(word index, that word of every leaf's row)`.
    columns: Vec<(usize, Vec<u64>)>,
}

impl Acc {
    fn new(channels: usize, a2a: bool) -> Self {
        let len = if a2a { channels } else { 0 };
        Acc {
            xi: vec![0; len],
            dst: vec![0; len],
            stamp: vec![u32::MAX; len],
            buf: Vec::new(),
            edge_sum: 0,
            routed: 0,
            unrouted: 0,
            diameter: 0,
            columns: Vec::new(),
        }
    }
    fn merge(mut self, mut o: Acc) -> Acc {
        for (a, b) in self.xi.iter_mut().zip(&o.xi) {
            *a += b;
        }
        for (a, b) in self.dst.iter_mut().zip(&o.dst) {
            *a += b;
        }
        self.edge_sum += o.edge_sum;
        self.routed += o.routed;
        self.unrouted += o.unrouted;
        self.diameter = self.diameter.max(o.diameter);
        self.columns.append(&mut o.columns);
        self
    }
}

/// The all-pairs pass (see the module doc). `None` when cancelled.
pub(crate) fn scan_destinations(
    idx: &PathIndex<'_>,
    a2a: bool,
    progress: &Progress,
    cancel: &AtomicBool,
) -> Option<Scan> {
    let n = idx.num_live();
    let nch = idx.num_channels();
    let nl = idx.leaves.len();
    let mut bits = RoutedBits::new(nl, n);
    let words = bits.words_per_row;
    // Per channel × leaf: whether a routed path from the leaf crosses the channel.
    let leaf_words = nl.div_ceil(64);
    let marks: Vec<AtomicU64> = (0..if a2a { nch * leaf_words } else { 0 })
        .map(|_| AtomicU64::new(0))
        .collect();
    progress.add_total(words as u64);
    debug_assert_eq!(BLOCK, 64, "one routed-bits word per block");
    let acc = (0..words)
        .into_par_iter()
        .fold(
            || (Acc::new(nch, a2a), BlockTable::new()),
            |(mut acc, mut table), w| {
                if cancel.load(Ordering::Relaxed) {
                    return (acc, table);
                }
                let mut col = vec![0u64; nl];
                let mut buf = std::mem::take(&mut acc.buf);
                idx.fill_block(w as u32 * BLOCK, &mut table);
                for d in table.destinations() {
                    let own = idx.leaf_of[d as usize];
                    for (li, &from) in idx.leaves.iter().enumerate() {
                        let size = u64::from(idx.leaf_size[li]);
                        let mult = size - u64::from(own == li as u32);
                        if mult == 0 {
                            continue;
                        }
                        if table.trace(idx, from, d, &mut buf) {
                            col[li] |= 1 << (d & 63);
                            let edges = buf.len() as u32 + 2;
                            acc.routed += mult;
                            acc.edge_sum += mult * u64::from(edges);
                            acc.diameter = acc.diameter.max(edges);
                            if a2a {
                                for &c in &buf {
                                    let c = c as usize;
                                    acc.xi[c] += mult;
                                    if acc.stamp[c] != d {
                                        acc.stamp[c] = d;
                                        acc.dst[c] += 1;
                                    }
                                    let (word, bit) = (&marks[c * leaf_words + li / 64], 1u64 << (li % 64));
                                    if word.load(Ordering::Relaxed) & bit == 0 {
                                        word.fetch_or(bit, Ordering::Relaxed);
                                    }
                                }
                            }
                        } else {
                            acc.unrouted += mult;
                        }
                    }
                }
                acc.buf = buf;
                acc.columns.push((w, col));
                progress.advance(1);
                (acc, table)
            },
        )
        .map(|(acc, _)| acc)
        .reduce(|| Acc::new(nch, a2a), Acc::merge);
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    for (w, col) in &acc.columns {
        for (li, &word) in col.iter().enumerate() {
            bits.bits[li * words + w] = word;
        }
    }
    let src: Vec<u64> = if a2a && leaf_words == 0 {
        vec![0; nch]
    } else if a2a {
        marks
            .par_chunks(leaf_words)
            .map(|words| {
                let mut sum = 0u64;
                for (wi, word) in words.iter().enumerate() {
                    let mut m = word.load(Ordering::Relaxed);
                    while m != 0 {
                        sum += u64::from(idx.leaf_size[wi * 64 + m.trailing_zeros() as usize]);
                        m &= m - 1;
                    }
                }
                sum
            })
            .collect()
    } else {
        Vec::new()
    };
    Some(Scan {
        bits,
        xi: acc.xi,
        src,
        dst: acc.dst,
        edge_sum: acc.edge_sum,
        routed: acc.routed,
        unrouted: acc.unrouted,
        diameter: acc.diameter,
    })
}
