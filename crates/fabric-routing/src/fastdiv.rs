//! Division by a fixed divisor without a division instruction, for the fill kernel
//! ([`crate::fill`]): `Π`, `#C` and `#g` are fixed per switch or closer-group set while the
//! dividends run over every destination.

/// Exact division and remainder of a `u32` by a fixed `u32` through one 128-bit multiply
/// (Lemire, Kaser & Kurz, "Faster remainder by direct computation", 2019: with
/// `M = ⌈2^64 / d⌉`, `⌊M·a / 2^64⌋ = ⌊a/d⌋` and `⌊(M·a mod 2^64)·d / 2^64⌋ = a mod d` for every
/// 32-bit `a`).
#[derive(Copy, Clone, Debug)]
pub(crate) struct FastDiv {
    pub d: u32,
    m: u64,
}

impl Default for FastDiv {
    fn default() -> Self {
        FastDiv::new(1)
    }
}

impl FastDiv {
    /// `d` must be at least 1.
    pub fn new(d: u32) -> Self {
        let d = d.max(1);
        FastDiv {
            d,
            m: (u64::MAX / u64::from(d)).wrapping_add(1),
        }
    }
    #[inline]
    pub fn div(&self, a: u32) -> u32 {
        if self.d == 1 {
            a
        } else {
            ((u128::from(self.m) * u128::from(a)) >> 64) as u32
        }
    }
    #[inline]
    pub fn rem(&self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn fast_division_is_exact(a in any::<u32>(), d in prop_oneof![1u32..300, any::<u32>().prop_map(|x| x.max(1))]) {
            let f = FastDiv::new(d);
            prop_assert_eq!(f.div(a), a / d);
            prop_assert_eq!(f.rem(a), a % d);
        }
    }

    #[test]
    fn fast_division_edges() {
        for d in [1u32, 2, 3, 7, 255, 256, 65535, u32::MAX - 1, u32::MAX] {
            let f = FastDiv::new(d);
            for a in [0u32, 1, d - 1, d, d.wrapping_add(1), u32::MAX - 1, u32::MAX] {
                assert_eq!((f.div(a), f.rem(a)), (a / d, a % d), "{a} / {d}");
            }
        }
    }
}
