//! The load-aware fill's choices among a switch's up-links: usable ranks, least counted
//! up-links and the destination bit sets (arrivals).

/// The up index of rank `t` (`ranks`: the switch's
/// [`Plan::up_row`](crate::dmodc_lb::plan::Plan::up_row)) when it is a live neighbour in `mask`.
/// The mirror's component may be larger than the switch's (removed switches), and
/// [`NO_RANK`](crate::dmodc_lb::targets::NO_RANK) is beyond every row.
#[inline]
pub(crate) fn usable(ranks: &[u8], mask: u64, t: u16) -> Option<usize> {
    match ranks.get(usize::from(t)) {
        Some(&j) if j != u8::MAX && (mask >> j) & 1 != 0 => Some(usize::from(j)),
        _ => None,
    }
}

/// Among the up indices of `mask`, one with the fewest destinations so far in `load`; among
/// those, the first in cyclic order from `cursor`.
#[inline]
pub(crate) fn least_loaded(load: &[u32], mask: u64, cursor: u32) -> usize {
    let rot = mask.rotate_right(cursor % 64);
    let mut bits = rot;
    let mut best = (u32::MAX, 0usize);
    while bits != 0 {
        let j = ((bits.trailing_zeros() + cursor) % 64) as usize;
        bits &= bits - 1;
        if load[j] < best.0 {
            best = (load[j], j);
        }
    }
    best.1
}

/// Whether bit `d` of `bits` is set (beyond its end: no).
#[inline]
pub(super) fn bit(bits: &[u64], d: u32) -> bool {
    bits.get(d as usize / 64).is_some_and(|w| (w >> (d % 64)) & 1 != 0)
}

/// Bits `d0..d0 + len` of `bits` (`len ≤ 64`; beyond its end: 0), bit `d0` lowest.
#[inline]
pub(super) fn window(bits: &[u64], d0: u32, len: u32) -> u64 {
    let (w, sh) = (d0 as usize / 64, d0 % 64);
    let lo = bits.get(w).map_or(0, |x| x >> sh);
    let hi = if sh != 0 {
        bits.get(w + 1).map_or(0, |x| x << (64 - sh))
    } else {
        0
    };
    (lo | hi) & if len >= 64 { u64::MAX } else { (1 << len) - 1 }
}

/// Whether any bit of `d0..d0 + len` is set in `bits`.
#[inline]
pub(super) fn any_bit(bits: &[u64], d0: u32, len: u32) -> bool {
    if bits.is_empty() || len == 0 {
        return false;
    }
    let (a, b) = (d0 as usize, (d0 + len - 1) as usize);
    let (wa, wb) = (a / 64, b / 64);
    bits.iter().enumerate().take(wb + 1).skip(wa).any(|(w, &x)| {
        let lo = if w == wa { u64::MAX << (a % 64) } else { u64::MAX };
        let hi = if w == wb { u64::MAX >> (63 - b % 64) } else { u64::MAX };
        x & lo & hi != 0
    })
}

/// The up indices of `mask` whose `load` is at most `mx`.
#[inline]
pub(super) fn tie_mask(load: &[u32], mask: u64, mx: u32) -> u64 {
    let mut bits = mask;
    let mut t = 0u64;
    while bits != 0 {
        let j = bits.trailing_zeros();
        if load[j as usize] <= mx {
            t |= 1 << j;
        }
        bits &= bits - 1;
    }
    t
}

#[inline]
pub(super) fn min_load(load: &[u32], mask: u64) -> u32 {
    let mut bits = mask;
    let mut m = u32::MAX;
    while bits != 0 {
        m = m.min(load[bits.trailing_zeros() as usize]);
        bits &= bits - 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::{bit, window};

    /// The word-wise window reads the same bits as [`bit`], across word boundaries and past
    /// the end of the words.
    #[test]
    fn window_reads_the_bits_one_by_one_would() {
        let bits = [0x8000_0000_0000_0001u64, 0x0123_4567_89ab_cdef, 0xffff_0000_ffff_0000];
        for d0 in 0..200u32 {
            for len in 0..=64u32 {
                let one = (0..len).filter(|&i| bit(&bits, d0 + i)).fold(0u64, |m, i| m | 1 << i);
                assert_eq!(window(&bits, d0, len), one, "d0 {d0} len {len}");
            }
        }
        assert_eq!(window(&[], 3, 10), 0);
    }
}
