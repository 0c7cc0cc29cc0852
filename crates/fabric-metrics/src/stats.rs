//! Quantiles and seeded random permutations.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Quantile `q` (in `[0, 1]`, clamped) of **sorted** `values` by linear interpolation between
/// order statistics (Hyndman & Fan type 7, the default of R and NumPy):
/// `h = (len - 1) q`, result `= v[⌊h⌋] + (h - ⌊h⌋) (v[⌊h⌋ + 1] - v[⌊h⌋])`.
/// Returns 0 for an empty slice.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let Some(&last) = values.last() else {
        return 0.0;
    };
    let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
    let h = (values.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    match values.get(lo + 1) {
        Some(&hi) => values[lo] + (h - lo as f64) * (hi - values[lo]),
        None => last,
    }
}

/// Uniform integer in `0..n` (`n > 0`) by Lemire's multiply-and-reject method: unbiased, and
/// defined only by the ChaCha output stream, so results never change with `rand` versions.
fn below(rng: &mut ChaCha8Rng, n: u32) -> u32 {
    let mut m = u64::from(rng.next_u32()) * u64::from(n);
    if (m as u32) < n {
        let threshold = n.wrapping_neg() % n;
        while (m as u32) < threshold {
            m = u64::from(rng.next_u32()) * u64::from(n);
        }
    }
    (m >> 32) as u32
}

/// Fills `perm` with random permutation number `index` of `0..n` for `seed`: a Fisher–Yates
/// shuffle of the identity driven by `ChaCha8Rng::seed_from_u64(seed)` on stream `index`.
/// The permutation depends only on `(seed, index, n)`.
pub(crate) fn random_permutation(perm: &mut Vec<u32>, n: u32, seed: u64, index: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    perm.clear();
    perm.extend(0..n);
    for i in (1..n).rev() {
        let j = below(&mut rng, i + 1);
        perm.swap(i as usize, j as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_interpolates_type_7() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 2.5);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
        // h = 3 * 0.025 = 0.075 -> 1 + 0.075
        assert!((quantile(&v, 1.0 / 40.0) - 1.075).abs() < 1e-12);
        // h = 3 * 0.975 = 2.925 -> 3 + 0.925
        assert!((quantile(&v, 39.0 / 40.0) - 3.925).abs() < 1e-12);
        assert_eq!(quantile(&[7.0], 0.3), 7.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
        // 41 values 0..=40: the k-th 40-quantile is exactly k.
        let w: Vec<f64> = (0..=40).map(f64::from).collect();
        assert_eq!(quantile(&w, 1.0 / 40.0), 1.0);
        assert_eq!(quantile(&w, 39.0 / 40.0), 39.0);
    }

    #[test]
    fn permutations_are_permutations_and_reproducible() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for idx in 0..20 {
            random_permutation(&mut a, 50, 7, idx);
            let mut sorted = a.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..50).collect::<Vec<_>>());
            random_permutation(&mut b, 50, 7, idx);
            assert_eq!(a, b);
        }
        random_permutation(&mut a, 50, 7, 0);
        random_permutation(&mut b, 50, 7, 1);
        assert_ne!(a, b, "streams differ");
        random_permutation(&mut b, 50, 8, 0);
        assert_ne!(a, b, "seeds differ");
        random_permutation(&mut a, 0, 1, 0);
        assert!(a.is_empty());
    }

    #[test]
    fn below_is_roughly_uniform() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut hist = [0u32; 6];
        for _ in 0..60_000 {
            hist[below(&mut rng, 6) as usize] += 1;
        }
        for h in hist {
            assert!((9_000..11_000).contains(&h), "{hist:?}");
        }
    }
}
