//! The tail `P(X ≥ 6) + P(X ≥ 7)` of the repair pass's load estimate, exact ([`tail67`]) and
//! tabulated per (mean, cap) class ([`tail67_tab`], what the pass evaluates per move).

use std::sync::OnceLock;

/// Caps tabulated exactly (`6..=MAX_M`); larger caps use the Poisson limit.
const MAX_M: u32 = 127;
/// Grid of the mean: `STEPS` points per path up to [`MAX_MU`] (linear interpolation between).
const STEPS: f64 = 32.0;
const MAX_MU: f64 = 24.0;
const NMU: usize = (MAX_MU * STEPS) as usize + 2;

/// `P(X ≥ 6) + P(X ≥ 7)` for `X ~ Binomial(m, mu / m)` (0 when `m < 6`). Small tails are
/// summed from the upper terms (no cancellation), large ones as one minus the lower terms.
pub(crate) fn tail67(mu: f64, m: u32) -> f64 {
    if m < 6 || mu <= 0.0 {
        return 0.0;
    }
    let mf = f64::from(m);
    let p = (mu / mf).min(1.0 - 1e-12);
    let r = p / (1.0 - p);
    let mut t = (mf * (-p).ln_1p()).exp();
    if mu > 2.0 {
        let mut cdf = [0.0f64; 7];
        let mut acc = 0.0;
        for (j, slot) in cdf.iter_mut().enumerate() {
            acc += t;
            *slot = acc;
            t *= (mf - j as f64) / (j as f64 + 1.0) * r;
        }
        return ((1.0 - cdf[5]) + (1.0 - cdf[6])).max(0.0);
    }
    for j in 0..6 {
        t *= (mf - f64::from(j)) / (f64::from(j) + 1.0) * r;
    }
    // t = P(X = 6); the upper terms decrease (the mode is below 3).
    let (mut p6, mut p7) = (t, 0.0);
    let mut j = 6u32;
    while j < m && t > 1e-30 {
        t *= (mf - f64::from(j)) / (f64::from(j) + 1.0) * r;
        p6 += t;
        p7 += t;
        j += 1;
        if t < 1e-17 * p6 {
            break;
        }
    }
    p6 + p7
}

/// `P(X ≥ 6) + P(X ≥ 7)` for `X ~ Poisson(mu)`.
pub(crate) fn tail67_poisson(mu: f64) -> f64 {
    if mu <= 0.0 {
        return 0.0;
    }
    let mut t = (-mu).exp();
    let mut cdf = [0.0f64; 7];
    let mut acc = 0.0;
    for (j, slot) in cdf.iter_mut().enumerate() {
        acc += t;
        *slot = acc;
        t *= mu / (j as f64 + 1.0);
    }
    if mu > 2.0 {
        return ((1.0 - cdf[5]) + (1.0 - cdf[6])).max(0.0);
    }
    // Upper terms from P(X = 6) on (no cancellation).
    let mut t = (-mu).exp();
    for j in 0..6 {
        t *= mu / (f64::from(j) + 1.0);
    }
    let (mut p6, mut p7) = (t, 0.0);
    let mut j = 6.0;
    while t > 1e-17 * p6 && t > 1e-30 {
        t *= mu / (j + 1.0);
        p6 += t;
        p7 += t;
        j += 1.0;
    }
    p6 + p7
}

/// The table: row `m - 6` for caps `6..=MAX_M`, the last row the Poisson limit; `NMU`
/// points of the mean each. Built once per process (it depends on nothing else).
fn table() -> &'static [f64] {
    static T: OnceLock<Vec<f64>> = OnceLock::new();
    T.get_or_init(|| {
        let rows = (MAX_M - 6 + 2) as usize;
        let mut t = vec![0.0; rows * NMU];
        for (r, row) in t.chunks_mut(NMU).enumerate() {
            let m = 6 + r as u32;
            for (k, v) in row.iter_mut().enumerate() {
                let mu = k as f64 / STEPS;
                *v = if m > MAX_M { tail67_poisson(mu) } else { tail67(mu, m) };
            }
        }
        t
    })
}

/// [`tail67`] from the table: the cap's row (the Poisson limit above [`MAX_M`]), linear
/// interpolation in the mean; exact beyond the grid. Non-decreasing in `mu`, as the exact
/// tail.
#[inline]
pub(crate) fn tail67_tab(mu: f64, m: u32) -> f64 {
    if m < 6 || mu <= 0.0 {
        return 0.0;
    }
    if mu >= MAX_MU {
        return if m > MAX_M { tail67_poisson(mu) } else { tail67(mu, m) };
    }
    let row = (m.min(MAX_M + 1) - 6) as usize * NMU;
    let x = mu * STEPS;
    let k = x as usize;
    let f = x - k as f64;
    let t = table();
    t[row + k] * (1.0 - f) + t[row + k + 1] * f
}
