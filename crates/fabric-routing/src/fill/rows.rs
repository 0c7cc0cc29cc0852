//! Pieces of the Dmodc fill kernel ([`super`]) that depend on nothing else of it: the closer
//! masks of eq. 4.5, the span of destinations of one leaf, the entries a fresh row must prefill.

use std::ops::Range;

use fabric_topology::{Lid, PortNum};

/// `mask[l]` gets bit `j` set where `rows[j][l] < own[l]` (at most 64 rows). Eight rows at a
/// time are combined into a byte per leaf (vectorisable byte compares), then widened.
pub(crate) fn closer_masks<'a>(
    mask: &mut Vec<u64>,
    tmp: &mut Vec<u8>,
    rows: impl Iterator<Item = &'a [u8]>,
    own: &[u8],
) {
    let n = own.len();
    mask.clear();
    mask.resize(n, 0);
    tmp.clear();
    tmp.resize(n, 0);
    let mut k = 0;
    let mut chunk = 0;
    for row in rows {
        for ((t, &a), &b) in tmp.iter_mut().zip(row).zip(own) {
            *t |= u8::from(a < b) << k;
        }
        k += 1;
        if k == 8 {
            for (m, t) in mask.iter_mut().zip(tmp.iter_mut()) {
                *m |= u64::from(*t) << (8 * chunk);
                *t = 0;
            }
            k = 0;
            chunk += 1;
        }
    }
    if k > 0 {
        for (m, &t) in mask.iter_mut().zip(tmp.iter()) {
            *m |= u64::from(t) << (8 * chunk);
        }
    }
}

/// The end ports of one leaf, in topological NID order.
pub(crate) struct LeafSpan {
    /// Dense leaf index.
    pub li: u32,
    /// Topological NID of the first end port (the others follow).
    pub t0: u32,
    /// Range in `lids` / `ports`.
    pub start: u32,
    pub len: u32,
    /// LIDs are `lids[start] + step·i` when `step > 0` (0: irregular or a LID is 0).
    pub step: u32,
}

/// Where eqs. 4.7–4.8 stand for the next destination: `r = d mod Π`, `(gi, q2) = (q mod #C,
/// ⌊q/#C⌋)` and `qi = q mod period` (for the tabulated ports), `q = ⌊d/Π⌋`; with a table of
/// `d`, `qi = d mod period`.
#[derive(Copy, Clone)]
pub(super) struct Cursor {
    pub next_t: u32,
    pub r: u64,
    pub gi: usize,
    pub q2: u32,
    pub qi: usize,
    pub port: PortNum,
}

/// The entries of a row of `row_len` LIDs that neither the end-port pass (`written`, with
/// their duplicates at `+dup`) nor the switch-LID pass (`switch_lids`) writes — LID 0,
/// unassigned LIDs, the end of the last block — as ranges; the whole row when they are more
/// than a quarter of it (then the rest is overwritten in cache anyway).
pub(crate) fn prefill_gaps(
    row_len: usize,
    written: impl Iterator<Item = Lid>,
    dup: Option<Lid>,
    switch_lids: &[Lid],
) -> Vec<Range<usize>> {
    let n = row_len;
    let mut w = vec![false; n];
    for lid in written.filter(|&l| l != 0) {
        for l in std::iter::once(lid).chain(dup.map(|o| lid + o)) {
            if let Some(x) = w.get_mut(l as usize) {
                *x = true;
            }
        }
    }
    for &l in switch_lids.iter().filter(|&&l| l != 0) {
        if let Some(x) = w.get_mut(l as usize) {
            *x = true;
        }
    }
    let mut gaps = Vec::new();
    let mut i = 0;
    while i < n {
        if w[i] {
            i += 1;
            continue;
        }
        let j = i + w[i..].iter().position(|&x| x).unwrap_or(n - i);
        gaps.push(i..j);
        i = j;
    }
    if gaps.iter().map(ExactSizeIterator::len).sum::<usize>() > n / 4 {
        std::iter::once(0..n).collect()
    } else {
        gaps
    }
}

pub(super) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefill_gaps_are_the_unwritten_lids() {
        // 128 LIDs: end ports 1..=39 odd with duplicates at +1, switch LIDs 100..=103; LID 0,
        // 41..=99 and 104..=127 are left: more than 128 / 4, so the whole row.
        let ends: Vec<Lid> = (1..=40).step_by(2).collect();
        assert_eq!(
            prefill_gaps(128, ends.iter().copied(), Some(1), &[100, 101, 102, 103]),
            vec![0..128]
        );
        // Few gaps: LID 0, 61..=62 (a missing end port and its duplicate) and 127.
        let ends: Vec<Lid> = (1..=125).filter(|&l| l != 61 && l % 2 == 1).collect();
        assert_eq!(
            prefill_gaps(128, ends.iter().copied(), Some(1), &[0, 124, 125]),
            vec![0..1, 61..63, 127..128]
        );
    }
}
