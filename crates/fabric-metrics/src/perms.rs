//! `mu` of the sampled random permutations, computed in batches of permutations over blocks of
//! destinations.
//!
//! A walk towards destination `d` reads one LFT entry per switch it crosses; over a whole
//! permutation these reads jump across the tables (one cache miss per hop on a big fabric).
//! Here the next hops towards a block of [`BLOCK`](crate::index::BLOCK) destinations are copied
//! once into a small [`BlockTable`], and every permutation of a batch walks its paths towards
//! those destinations from that table. The copy is paid once per batch instead of once per
//! permutation, and each permutation keeps its own channel counts, so the result is exactly
//! that of walking each permutation on its own.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::index::{BlockTable, PathIndex, RoutedBits, BLOCK};
use crate::progress::Progress;
use crate::stats;

/// Bytes of channel counts and inverse permutations one batch may hold (per worker).
const BATCH_BUDGET: usize = 128 << 20;
/// Most permutations per batch (beyond this the table copy is already negligible).
const MAX_BATCH: usize = 128;

/// Permutations per batch on a fabric of `n` live end ports and `channels` channels: as many as
/// fit [`BATCH_BUDGET`], at most [`MAX_BATCH`], and few enough that every worker gets batches.
fn batch_size(r: usize, n: usize, channels: usize) -> usize {
    let per_perm = 4 * (n + channels);
    let by_budget = (BATCH_BUDGET / per_perm.max(1)).max(1);
    let by_workers = r.div_ceil(2 * rayon::current_num_threads().max(1)).max(1);
    by_budget.min(MAX_BATCH).min(by_workers)
}

/// `mu` of random permutations `0 .. r` of `seed` (in index order), or `None` when cancelled.
pub(crate) fn permutation_mus(
    idx: &PathIndex<'_>,
    bits: &RoutedBits,
    r: usize,
    seed: u64,
    progress: &Progress,
    cancel: &AtomicBool,
) -> Option<Vec<u32>> {
    let n = idx.num_live();
    let size = batch_size(r, n, idx.num_channels());
    let batches: Vec<(u64, u64)> = (0..r as u64)
        .step_by(size)
        .map(|first| (first, (first + size as u64).min(r as u64)))
        .collect();
    let per_batch: Option<Vec<Vec<u32>>> = batches
        .into_par_iter()
        .map_init(
            || (BlockTable::new(), Vec::with_capacity(n)),
            |(table, perm), (first, end)| {
                let mus = batch_mus(idx, bits, first..end, seed, table, perm, cancel)?;
                progress.advance(end - first);
                Some(mus)
            },
        )
        .collect();
    Some(per_batch?.into_iter().flatten().collect())
}

/// `mu` of permutations `range` of `seed`, `None` when cancelled.
fn batch_mus(
    idx: &PathIndex<'_>,
    bits: &RoutedBits,
    range: std::ops::Range<u64>,
    seed: u64,
    table: &mut BlockTable,
    perm: &mut Vec<u32>,
    cancel: &AtomicBool,
) -> Option<Vec<u32>> {
    let n = idx.num_live();
    let channels = idx.num_channels();
    let p = (range.end - range.start) as usize;
    // inverse[k * n + d] = the source that sends to `d` in permutation `range.start + k`.
    let mut inverse = vec![0u32; p * n];
    for (k, i) in range.enumerate() {
        stats::random_permutation(perm, n as u32, seed, i);
        let inv = &mut inverse[k * n..(k + 1) * n];
        for (s, &d) in perm.iter().enumerate() {
            inv[d as usize] = s as u32;
        }
    }
    let mut counts = vec![0u32; p * channels];
    let mut mus = vec![0u32; p];
    let mut d0 = 0u32;
    while (d0 as usize) < n {
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        idx.fill_block(d0, table);
        for (k, mu) in mus.iter_mut().enumerate() {
            let inv = &inverse[k * n..(k + 1) * n];
            let c = &mut counts[k * channels..(k + 1) * channels];
            for d in table.destinations() {
                let s = inv[d as usize];
                if s == d {
                    continue;
                }
                let li = idx.leaf_of[s as usize];
                if bits.get(li, d) {
                    table.walk(idx.leaves[li as usize], d, |ch| {
                        let v = &mut c[ch as usize];
                        *v += 1;
                        *mu = (*mu).max(*v);
                    });
                }
            }
        }
        d0 += BLOCK;
    }
    Some(mus)
}
