//! Estimated floor of `mu_rp` for **any** destination-based routing of a ranked fat-tree.
//!
//! Under destination-based forwarding every path from a source inside a *subtree* to a
//! destination outside it leaves the subtree through one of the subtree's up-links, and the link
//! it takes is chosen by destination (and, at best, the same one for every source of the
//! subtree). Under a random permutation the destinations of the subtree's `n_C` sources are a
//! uniform `n_C`-subset of the `N` end ports, so a link that carries the destinations `D` of the
//! whole subtree carries `Hypergeometric(N, |D|, n_C)` paths. The destination sets of a subtree's `A`
//! up-links partition the `N - n_C` outside destinations; the tail of the busiest link is
//! smallest when they are split evenly and every destination's paths from the subtree share one
//! link (coalescing: a destination whose paths from the subtree split over several links adds
//! to the load of each). The same holds downwards for the paths entering the subtree (destinations inside,
//! sources outside).
//!
//! A *subtree* at level `l` is a connected component of the live switches ranked `≤ l` (linked
//! among themselves) with the end ports of its leaves; its up-links are its live cables to
//! switches ranked above `l`. Leaves are the level-0 subtrees, pods the level-1 ones, and so on.
//!
//! Summing those best-case per-link tails over every subtree and direction gives the expected
//! number `λ(k)` of links with `≥ k` paths (a subtree's two directions use the same cables and
//! carry the same total in a permutation, so the smaller one counts with weight `1 - 1/A`: one
//! event on a single up-link, nearly independent on many); with the links treated as independent (they are
//! nearly so: different subtrees, different destinations) `P(mu ≥ k) ≈ 1 - e^{-λ(k)}`. The
//! result is an *estimate* of a floor, not a proof: routings cannot beat it by more than the
//! model error, which the tests measure against Dmodk/Dmodc on complete fat-trees (where they
//! are optimal) and check from below on degraded ones.
//!
//! Synchronous, deterministic, no I/O; `O(switches × levels)` plus one binomial tail per
//! distinct (size, probability) class.

use std::collections::HashMap;

use fabric_topology::{Fabric, SwitchId};

/// Estimated floor of the random-permutation congestion `mu_rp` (see the module docs).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RpFloor {
    /// `p_at_least[k]` = estimated smallest achievable `P(mu ≥ k)` for one random permutation
    /// (`p_at_least[0] = 1`); the vector ends at the first `k` whose estimate is below `1e-9`.
    pub p_at_least: Vec<f64>,
    /// Largest `k` with `p_at_least[k] ≥ 1/2`: the best median of `mu_rp` any destination-based
    /// routing can expect on this fabric (0 when no path crosses a switch-to-switch port).
    pub median: u32,
    /// Subtrees (level, component) that took part.
    pub subtrees: usize,
}

impl RpFloor {
    /// Estimated smallest achievable `P(mu ≥ k)`.
    pub fn p_at_least(&self, k: u32) -> f64 {
        self.p_at_least.get(k as usize).copied().unwrap_or(0.0)
    }
}

/// Largest `k` the tails are computed for (no port carries more paths than there are sources).
const K_CAP: usize = 4096;

/// Estimates the `mu_rp` floor of `fabric` for the switch levels `level` (by dense switch id,
/// leaves at 0, `None` for dead or unranked switches: the ranking's `level` vector).
///
/// Switches without a level and their cables are ignored; a fabric split in several parts is
/// handled (each subtree only counts its own end ports against the live total).
pub fn rp_floor(fabric: &Fabric, level: &[Option<u32>]) -> RpFloor {
    let n_sw = fabric.num_switches();
    let lvl = |s: SwitchId| level.get(s.idx()).copied().flatten().filter(|_| fabric.switch(s).up);
    let live_eps: Vec<u64> = fabric
        .switch_ids()
        .map(|s| {
            fabric
                .attached_end_ports(s)
                .iter()
                .filter(|&&e| fabric.end_port_live(e))
                .count() as u64
        })
        .collect();
    let n: u64 = live_eps.iter().sum();
    let height = (0..n_sw)
        .filter_map(|i| lvl(SwitchId(i as u32)))
        .max()
        .map_or(0, |h| h + 1);
    // (end ports inside, up-links) of every subtree.
    let mut subtrees: Vec<(u64, u64)> = Vec::new();
    if n >= 2 {
        let mut parent: Vec<u32> = (0..n_sw as u32).collect();
        // Levels are processed bottom-up; the union-find only ever grows, since the components
        // of `≤ l` are unions of components of `≤ l - 1` linked at level `l`.
        for l in 0..height.saturating_sub(1) {
            for s in fabric.switch_ids().filter(|&s| lvl(s) == Some(l)) {
                for g in fabric.port_groups(s) {
                    if lvl(g.remote).is_some_and(|r| r <= l) {
                        union(&mut parent, s.0, g.remote.0);
                    }
                }
            }
            // Per component root: end ports and up-links (live cables to switches above `l`).
            let mut comp: HashMap<u32, (u64, u64)> = HashMap::new();
            for s in fabric.switch_ids().filter(|&s| lvl(s).is_some_and(|x| x <= l)) {
                let ups: u64 = fabric
                    .port_groups(s)
                    .iter()
                    .filter(|g| lvl(g.remote).is_some_and(|r| r > l))
                    .map(|g| g.ports.len() as u64)
                    .sum();
                let e = comp.entry(find(&mut parent, s.0)).or_default();
                e.0 += live_eps[s.idx()];
                e.1 += ups;
            }
            subtrees.extend(
                comp.into_values()
                    .filter(|&(inside, ups)| inside > 0 && inside < n && ups > 0),
            );
        }
    }
    subtrees.sort_unstable(); // summation order fixed: deterministic to the last bit
    let ln_fact = if subtrees.is_empty() {
        Vec::new()
    } else {
        ln_factorials(n)
    };
    let mut tails: HashMap<(u64, u64), Vec<f64>> = HashMap::new();
    let mut tail = |dests: u64, senders: u64| -> Vec<f64> {
        tails
            .entry((dests, senders))
            .or_insert_with(|| hypergeometric_tail(&ln_fact, n, dests, senders))
            .clone()
    };
    let mut lambda = vec![0.0f64; 1];
    for &(inside, ups) in &subtrees {
        let outside = n - inside;
        // Expected links with ≥ k paths, upwards then downwards. Upwards: the `outside`
        // destinations split over the `ups` links; a link's load is how many of the `inside`
        // sources draw one of its destinations. Downwards: the `inside` destinations, drawn by
        // the `outside` sources.
        let mut dir = [Vec::new(), Vec::new()];
        for (d, (dests, senders)) in [(outside, inside), (inside, outside)].into_iter().enumerate() {
            let (lo, extra) = (dests / ups, dests % ups);
            let (t_lo, t_hi) = (tail(lo, senders), tail(lo + 1, senders));
            dir[d] = (0..t_hi.len())
                .map(|k| (ups - extra) as f64 * t_lo.get(k).copied().unwrap_or(0.0) + extra as f64 * t_hi[k])
                .collect();
        }
        // The two directions use the same cables and, in a permutation, carry the same total
        // (as many paths leave the subtree as enter it): on a subtree with one up-link they are
        // one event. Count the smaller direction with weight 1 - 1/ups.
        let overlap = 1.0 / ups as f64;
        let len = dir[0].len().max(dir[1].len());
        if lambda.len() < len {
            lambda.resize(len, 0.0);
        }
        for (k, lam) in lambda.iter_mut().enumerate().take(len) {
            let (u, w) = (
                dir[0].get(k).copied().unwrap_or(0.0),
                dir[1].get(k).copied().unwrap_or(0.0),
            );
            *lam += u.max(w) + u.min(w) * (1.0 - overlap);
        }
    }
    let subtrees = subtrees.len();
    let mut p_at_least = vec![1.0];
    for &lam in lambda.iter().skip(1) {
        let p = 1.0 - (-lam).exp();
        if p < 1e-9 {
            break;
        }
        p_at_least.push(p);
    }
    let median = p_at_least.iter().rposition(|&p| p >= 0.5).unwrap_or(0) as u32;
    RpFloor {
        p_at_least,
        median,
        subtrees,
    }
}

/// `P(X ≥ k)` for `X ~ Hypergeometric(population, successes, draws)` (the number of marked items
/// among `draws` taken without replacement from `population` items of which `successes` are
/// marked), `k = 0..=min(successes, draws, K_CAP)` (index `k`). `ln_fact[i] = ln(i!)` up to
/// `population`.
///
/// The mass is computed in log space (no overflow for large populations), then summed from the
/// top so small tails keep their precision.
pub(crate) fn hypergeometric_tail(ln_fact: &[f64], population: u64, successes: u64, draws: u64) -> Vec<f64> {
    let kmax = successes.min(draws).min(K_CAP as u64) as usize;
    let lf = |i: u64| ln_fact[i as usize];
    let ln_total = lf(population) - lf(draws) - lf(population - draws);
    let ln_choose = |n: u64, k: u64| lf(n) - lf(k) - lf(n - k);
    let mut tail = vec![0.0; kmax + 1];
    let mut acc = 0.0;
    for i in (0..=kmax as u64).rev() {
        // Impossible when the unmarked draws exceed the unmarked items.
        if draws - i <= population - successes {
            let ln_p = ln_choose(successes, i) + ln_choose(population - successes, draws - i) - ln_total;
            if ln_p > -700.0 {
                acc += ln_p.exp();
            }
        }
        tail[i as usize] = acc.min(1.0);
    }
    tail
}

/// `ln(i!)` for `i = 0..=n`.
fn ln_factorials(n: u64) -> Vec<f64> {
    let mut v = Vec::with_capacity(n as usize + 1);
    let mut acc = 0.0f64;
    v.push(0.0);
    for i in 1..=n {
        acc += (i as f64).ln();
        v.push(acc);
    }
    v
}

fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        let up = parent[parent[x as usize] as usize];
        parent[x as usize] = up;
        x = up;
    }
    x
}

fn union(parent: &mut [u32], a: u32, b: u32) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        // Smaller id as root: deterministic.
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        parent[hi as usize] = lo;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose(n: u64, k: u64) -> f64 {
        (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
    }

    #[test]
    fn hypergeometric_tail_matches_the_direct_sum() {
        let lf = ln_factorials(200);
        for &(pop, succ, draws) in &[
            (10u64, 4u64, 5u64),
            (40, 23, 18),
            (200, 11, 30),
            (200, 190, 20),
            (7, 7, 3),
        ] {
            let t = hypergeometric_tail(&lf, pop, succ, draws);
            assert_eq!(t.len() as u64, succ.min(draws) + 1);
            for k in 0..t.len() as u64 {
                let direct: f64 = (k..=succ.min(draws))
                    .filter(|&i| draws - i <= pop - succ)
                    .map(|i| choose(succ, i) * choose(pop - succ, draws - i) / choose(pop, draws))
                    .sum();
                assert!(
                    (t[k as usize] - direct).abs() <= 1e-9 * direct + 1e-15,
                    "{pop} {succ} {draws} k {k}: {} vs {direct}",
                    t[k as usize]
                );
            }
        }
        // 2 marked among 4, draw 2: P(both marked) = 1/6.
        assert!((hypergeometric_tail(&lf, 4, 2, 2)[2] - 1.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn hypergeometric_tail_of_a_large_fabric_keeps_small_tails() {
        // One leaf of 18 end ports of a 7 776-node fabric sending over 18 up-links: 431 or 432
        // destinations per link, ~Binomial(18, 1/18).
        let lf = ln_factorials(7776);
        let t = hypergeometric_tail(&lf, 7776, 432, 18);
        assert!((t[0] - 1.0).abs() < 1e-9);
        assert!((t[1] - (1.0 - (17.0f64 / 18.0).powi(18))).abs() < 1e-2, "{}", t[1]);
        assert!(t[7] > 1e-6 && t[7] < 1e-4, "{}", t[7]);
        assert!(t[18] > 0.0 && t[18] < 1e-20, "{}", t[18]);
        assert!(t.windows(2).all(|w| w[0] >= w[1]));
    }
}
