//! Static congestion metrics of a routed fabric (Gliksberg thesis, ch. 2) and job-aware metrics
//! (Domke & Hoefler, *Scheduling-Aware Routing for Supercomputers*).
//!
//! All metrics look at the paths that the LFTs give between **live end ports**, addressed by
//! their **base LID**, in the **global end-node order** (ascending [`EndPortId`]: order of CA
//! records in the source, then port). Only directed switch-to-switch ports count (each parallel
//! cable separately, each direction separately); node–switch edges never do (thesis §2.3).
//!
//! * `src_p(P)` / `dst_p(P)`: number of distinct sources / destinations of the paths `P`
//!   crossing port `p`; `mu_p(P) = min(src_p, dst_p)`, `mu(P) = max_p mu_p(P)` (§2.3.1).
//! * For a permutation every node is the source of one path and the destination of one path, so
//!   `mu_p = src_p = dst_p` = the number of paths crossing `p` (§2.3.2); permutation patterns
//!   use this exact cheap form.
//! * `mu_sp = max_k mu(SP_k)` over the shifts `SP_k(s) = (s + k) mod N`, `k = 1..N-1`, on the
//!   live end ports in global order (`k = 0` is the identity and has no paths).
//! * `mu_rp`: median and 1st / 39th 40-quantiles of `mu` over `r` seeded random permutations.
//! * `mu_a2a = mu(A2A)` and the switch–switch edge-forwarding index `xi` (the thesis' Ξ): the
//!   largest number of all-to-all paths crossing one switch-to-switch port.
//! * [`rp_floor`]: an estimate of the smallest `mu_rp` any destination-based routing can reach
//!   on a ranked fat-tree (balls into bins on each subtree's up-links), to tell how far a
//!   routing is from the best possible.
//! * `nu`: effective diameter (§2.3.3), the mean over ordered routed pairs `s != d` of the number
//!   of edges of the path **including the two node–switch edges** (two end ports on the same
//!   leaf are 2 apart; the switch-to-switch hop count is `nu - 2`).
//! * Per job (a set of end ports): the effective edge-forwarding index `γ^e` of the job's
//!   all-to-all routes and the dark-port share Θ (Domke & Hoefler), see [`job_metrics`].
//!
//! **Architecture invariant:** synchronous, deterministic (random permutations come from a
//! seeded ChaCha stream per permutation, independent of thread scheduling), no I/O; rayon over
//! patterns; no allocation per path or per hop.
//!
//! Destination-based routing makes the path from `s` to `d` depend only on the leaf of `s`, so
//! all-pairs work (validity, `nu`, all-to-all) walks `leaves × N` paths, not `N²`.

mod floor;
mod index;
mod job;
mod loads;
mod perms;
mod progress;
#[doc(hidden)]
pub mod reference;
mod scan;
mod shifts;
mod stats;

use std::sync::atomic::AtomicBool;

use fabric_routing::{Lfts, LidPlan};
use fabric_topology::Fabric;

pub use floor::{rp_floor, RpFloor};
pub use index::SwitchPort;
use index::{PathIndex, RoutedBits};
pub use job::{job_metrics, job_shift_metrics, jobs_metrics, mu_of_pairs, JobMetrics, JobShiftMetrics, PairMetrics};
pub use loads::{port_loads, PortLoad, PortLoads};
pub use progress::Progress;
pub use stats::quantile;

/// Random permutation number `index` of `0..n` (over live end ports in global order) that
/// [`compute`] samples for `mu_rp` with `seed`; lets a tool replay the worst sample.
pub fn rp_permutation(n: usize, seed: u64, index: u64) -> Vec<u32> {
    let mut perm = Vec::with_capacity(n);
    stats::random_permutation(&mut perm, n as u32, seed, index);
    perm
}

/// Errors of the metrics that take end-port lists from the caller.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MetricsError {
    #[error("end port id {id} does not exist (the fabric has {count} end ports)")]
    UnknownEndPort { id: u32, count: usize },
}

/// Which patterns to evaluate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsOptions {
    /// Number `r` of random permutations for `mu_rp` (0 = skip). The thesis samples 1000
    /// (§2.4, §4.2.3: standard deviation 0.96 over 100 runs on the degraded 8640-node PGFT).
    pub random_perms: usize,
    /// Seed of the random permutations: permutation `i` uses `ChaCha8Rng::seed_from_u64(seed)`
    /// on stream `i`.
    pub seed: u64,
    /// Compute `mu_a2a` and `xi` (two passes over `leaves × N` paths).
    pub all_to_all: bool,
    /// Compute `mu_sp` (`N - 1` shifts of `N` paths each).
    pub shifts: bool,
}

impl Default for MetricsOptions {
    fn default() -> Self {
        MetricsOptions {
            random_perms: 1000,
            seed: 0,
            all_to_all: true,
            shifts: true,
        }
    }
}

/// Statistics of `mu` over the sampled random permutations. All zero when none were sampled.
///
/// Quantiles use linear interpolation between order statistics (Hyndman & Fan type 7, the
/// default of R and NumPy): for sorted values `x_0..x_{r-1}` and probability `q`,
/// `h = (r - 1) q`, value `= x_⌊h⌋ + (h - ⌊h⌋)(x_⌊h⌋+1 - x_⌊h⌋)`. See [`quantile`].
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RpStats {
    /// Median (`q = 1/2`): the thesis' `mu^RP(r)`.
    pub median: f64,
    /// 1st 40-quantile (`q = 1/40`): lower end of the 95 % interval.
    pub q1: f64,
    /// 39th 40-quantile (`q = 39/40`): upper end of the 95 % interval.
    pub q39: f64,
    pub min: u32,
    pub max: u32,
    /// Number of permutations sampled (`r`).
    pub samples: usize,
    /// `counts[v]` = number of sampled permutations whose `mu` is `v` (empty when none were
    /// sampled): the empirical distribution, e.g. to compare with [`rp_floor`].
    pub counts: Vec<u32>,
}

impl RpStats {
    /// The statistics of the sampled `mu` values (in any order).
    pub(crate) fn from_values(mut values: Vec<u32>) -> RpStats {
        values.sort_unstable();
        let as_f: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
        let mut counts = vec![0u32; values.last().map_or(0, |&v| v as usize + 1)];
        for &v in &values {
            counts[v as usize] += 1;
        }
        RpStats {
            median: quantile(&as_f, 0.5),
            q1: quantile(&as_f, 1.0 / 40.0),
            q39: quantile(&as_f, 39.0 / 40.0),
            min: values.first().copied().unwrap_or(0),
            max: values.last().copied().unwrap_or(0),
            samples: values.len(),
            counts,
        }
    }

    /// Share of the sampled permutations with `mu ≥ k` (0 when none were sampled).
    pub fn share_at_least(&self, k: u32) -> f64 {
        if self.samples == 0 {
            return 0.0;
        }
        let hits: u64 = self.counts.iter().skip(k as usize).map(|&c| u64::from(c)).sum();
        hits as f64 / self.samples as f64
    }
}

/// Static metrics of one routed fabric. Metrics of patterns switched off in [`MetricsOptions`]
/// are 0.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Metrics {
    /// Live end ports taking part (`N`).
    pub end_ports: usize,
    /// Live directed switch-to-switch ports (each direction of each cable).
    pub switch_ports: usize,
    /// `max_k mu(SP_k)`.
    pub mu_sp: u32,
    /// Smallest shift `k` with `mu(SP_k) = mu_sp` (0 when `mu_sp` is 0).
    pub worst_shift: u32,
    pub mu_rp: RpStats,
    /// `mu` of the all-to-all pattern.
    pub mu_a2a: u32,
    /// Switch–switch edge-forwarding index Ξ of the all-to-all pattern.
    pub xi: u64,
    /// Effective diameter: mean edges per routed ordered pair (0 when no pair is routed).
    pub nu: f64,
    /// Largest number of edges of a routed path (node–switch edges included).
    pub diameter: u32,
    /// Ordered pairs `s != d` of live end ports whose base-LID path does not reach `d`.
    pub unrouted_pairs: u64,
}

/// Computes the static metrics of `lfts` on `fabric` with the base LIDs of `lids`.
///
/// Never fails: inconsistent inputs (an end port without LID, a LID beyond the LFT coverage,
/// LFTs for fewer switches than the fabric) show up as unrouted pairs, and unrouted pairs
/// contribute to no metric other than `unrouted_pairs`.
pub fn compute(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, opts: &MetricsOptions) -> Metrics {
    compute_with_progress(fabric, lids, lfts, opts, &Progress::new())
}

/// [`compute`], reporting its progress in `progress` (see [`Progress`] for the units) for a
/// caller that shows it from another thread.
pub fn compute_with_progress(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    opts: &MetricsOptions,
    progress: &Progress,
) -> Metrics {
    compute_cancellable(fabric, lids, lfts, opts, progress, &AtomicBool::new(false)).unwrap_or_default()
}

/// [`compute_with_progress`] that gives up (returns `None`) soon after `cancel` is raised
/// by another thread: it is checked between groups of destinations, channels and permutations,
/// so a long computation on a big fabric stops within a fraction of a second.
pub fn compute_cancellable(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    opts: &MetricsOptions,
    progress: &Progress,
    cancel: &AtomicBool,
) -> Option<Metrics> {
    let idx = PathIndex::new(fabric, lids, lfts);
    let n = idx.num_live();
    progress.add_total(opts.random_perms as u64);
    let scan = scan::scan_destinations(&idx, opts.all_to_all, progress, cancel)?;
    let mut m = Metrics {
        end_ports: n,
        switch_ports: idx.num_channels(),
        nu: if scan.routed > 0 {
            scan.edge_sum as f64 / scan.routed as f64
        } else {
            0.0
        },
        diameter: scan.diameter,
        unrouted_pairs: scan.unrouted,
        ..Metrics::default()
    };
    if opts.all_to_all {
        m.mu_a2a = scan
            .src
            .iter()
            .zip(&scan.dst)
            .map(|(&s, &d)| s.min(d))
            .max()
            .unwrap_or(0) as u32;
        m.xi = scan.xi.iter().copied().max().unwrap_or(0);
    }
    if opts.shifts && n >= 2 {
        let (mu, k) = shift_mu(&idx, &scan.bits, progress, cancel)?;
        m.mu_sp = mu;
        m.worst_shift = k;
    }
    if opts.random_perms > 0 {
        let values = perms::permutation_mus(&idx, &scan.bits, opts.random_perms, opts.seed, progress, cancel)?;
        m.mu_rp = RpStats::from_values(values);
    }
    Some(m)
}

/// `(mu_sp, worst shift)`: the destination-major range pass when the live order keeps the
/// leaves' end ports in few runs (see `shifts`), else one walk per path of every shift. `None`
/// when cancelled.
fn shift_mu(idx: &PathIndex<'_>, bits: &RoutedBits, progress: &Progress, cancel: &AtomicBool) -> Option<(u32, u32)> {
    let runs = shifts::leaf_runs(idx);
    if shifts::ranges_pay_off(idx, runs.len()) {
        let r = shifts::all_shifts(idx, bits, &runs, false, false, shifts::RANGE_BUDGET, progress, cancel)?;
        return Some((r.mu, r.worst_shift));
    }
    Some(reference::shift_walks(idx, bits, progress, cancel))
}

/// Result of a pass over all `leaves × N` paths.
pub(crate) struct Scan {
    bits: RoutedBits,
    /// Per channel: all-to-all paths crossing it (empty unless all-to-all was asked).
    xi: Vec<u64>,
    /// Per channel: distinct all-to-all sources crossing it (empty unless asked).
    src: Vec<u64>,
    /// Per channel: distinct all-to-all destinations crossing it (empty unless asked; the
    /// leaf-major pass of `reference` leaves it to its `a2a_destinations`).
    dst: Vec<u64>,
    edge_sum: u64,
    routed: u64,
    unrouted: u64,
    diameter: u32,
}

#[cfg(test)]
mod tests;
