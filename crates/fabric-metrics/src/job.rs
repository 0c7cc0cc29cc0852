//! Metrics of caller-given traffic: `mu` of an arbitrary pair list, and the job-aware effective
//! edge-forwarding index and dark-port share of Domke & Hoefler.

use rayon::prelude::*;

use fabric_routing::{Lfts, LidPlan};
use fabric_topology::{EndPortId, Fabric};

use crate::index::{PathIndex, SwitchPort};
use crate::MetricsError;

/// Static metrics of an arbitrary list of (source, destination) pairs.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PairMetrics {
    /// Pairs with source ≠ destination (pairs `(s, s)` carry no traffic and are skipped;
    /// a pair listed twice counts twice).
    pub pairs: u64,
    /// Pairs whose base-LID path reaches the destination.
    pub routed: u64,
    /// Pairs with an end port that is not live, or whose path does not reach the destination.
    pub unrouted: u64,
    /// `max_p min(src_p, dst_p)` over the switch-to-switch ports (distinct sources and
    /// destinations of the routed pairs crossing each port).
    pub mu: u32,
    /// Largest number of routed pairs crossing one switch-to-switch port.
    pub xi: u64,
    /// The switch port attaining `mu` (lowest switch id, then port, on ties); `None` when
    /// `mu == 0`.
    pub worst_port: Option<SwitchPort>,
}

/// Job-aware metrics (Domke & Hoefler): for every directed switch-to-switch port `c`, the
/// effective edge-forwarding index `γ^e(c)` is the number of intra-job routes crossing `c`,
/// summed over the jobs; `effective_xi = max_c γ^e(c)`; the dark share
/// `Θ = |{c : γ^e(c) = 0}| / |C*|` where `C*` are the live directed switch-to-switch ports.
/// The routes of a job are all ordered pairs `s ≠ d` of its live end ports (all-to-all).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct JobMetrics {
    /// Number of jobs given.
    pub jobs: usize,
    /// Live end ports taking part, summed over jobs (duplicates within a job counted once).
    pub end_ports: usize,
    /// Listed end ports left out because they are not live.
    pub dead_end_ports: usize,
    /// Intra-job routes considered (ordered pairs `s ≠ d`, summed over jobs).
    pub routes: u64,
    /// Routes whose base-LID path does not reach the destination (they load no port).
    pub unrouted_pairs: u64,
    /// `max_c γ^e(c)`.
    pub effective_xi: u64,
    /// The port attaining `effective_xi` (lowest switch id, then port); `None` when 0.
    pub busiest_port: Option<SwitchPort>,
    /// `|C*|`: live directed switch-to-switch ports.
    pub switch_ports: usize,
    /// Ports of `C*` that no intra-job route uses.
    pub dark_ports: usize,
    /// `dark_ports / switch_ports` (0 when the fabric has no switch-to-switch port).
    pub dark_share: f64,
}

fn check_ids<'i>(fabric: &Fabric, ids: impl IntoIterator<Item = &'i EndPortId>) -> Result<(), MetricsError> {
    let count = fabric.num_end_ports();
    match ids.into_iter().find(|e| e.idx() >= count) {
        Some(e) => Err(MetricsError::UnknownEndPort { id: e.0, count }),
        None => Ok(()),
    }
}

/// Index ranges of runs of equal keys in a sorted slice.
fn runs<T>(v: &[T], key: impl Fn(&T) -> u32) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=v.len() {
        if i == v.len() || key(&v[i]) != key(&v[start]) {
            out.push((start, i));
            start = i;
        }
    }
    out
}

fn sum_into(mut a: Vec<u64>, b: Vec<u64>) -> Vec<u64> {
    for (x, y) in a.iter_mut().zip(&b) {
        *x += y;
    }
    a
}

/// Per channel: distinct `key` values among the routed pairs of `pairs` (sorted by `key`)
/// crossing it, plus path counts and routed / unrouted totals.
fn distinct_counts(
    idx: &PathIndex<'_>,
    pairs: &[(u32, u32)],
    key: impl Fn(&(u32, u32)) -> u32 + Sync,
) -> (Vec<u64>, Vec<u64>, u64, u64) {
    let nch = idx.num_channels();
    let groups = runs(pairs, &key);
    let init = || {
        (
            vec![0u64; nch],
            vec![0u64; nch],
            vec![u32::MAX; nch],
            Vec::new(),
            0u64,
            0u64,
        )
    };
    let (distinct, paths, _, _, routed, unrouted) = groups
        .par_iter()
        .fold(
            init,
            |(mut distinct, mut paths, mut stamp, mut buf, mut routed, mut unrouted), &(a, b)| {
                for p in &pairs[a..b] {
                    let (s, d) = *p;
                    let k = key(p);
                    let from = idx.leaves[idx.leaf_of[s as usize] as usize];
                    if idx.trace(from, d, &mut buf) {
                        routed += 1;
                        for &c in &buf {
                            let c = c as usize;
                            paths[c] += 1;
                            if stamp[c] != k {
                                stamp[c] = k;
                                distinct[c] += 1;
                            }
                        }
                    } else {
                        unrouted += 1;
                    }
                }
                (distinct, paths, stamp, buf, routed, unrouted)
            },
        )
        .map(|(d, p, _, _, r, u)| (d, p, Vec::new(), Vec::new(), r, u))
        .reduce(init, |x, y| {
            (
                sum_into(x.0, y.0),
                sum_into(x.1, y.1),
                Vec::new(),
                Vec::new(),
                x.4 + y.4,
                x.5 + y.5,
            )
        });
    (distinct, paths, routed, unrouted)
}

/// `mu` (and the switch–switch edge-forwarding index) of an arbitrary list of
/// (source, destination) end-port pairs under the base-LID routes of `lfts`.
///
/// Two passes as in the thesis (§2.3.1): pairs grouped by source count distinct sources per
/// port, pairs grouped by destination count distinct destinations; both parallel over groups.
pub fn mu_of_pairs(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    pairs: &[(EndPortId, EndPortId)],
) -> Result<PairMetrics, MetricsError> {
    check_ids(fabric, pairs.iter().flat_map(|(s, d)| [s, d]))?;
    let idx = PathIndex::new(fabric, lids, lfts);
    let mut out = PairMetrics::default();
    let mut live: Vec<(u32, u32)> = Vec::with_capacity(pairs.len());
    for &(s, d) in pairs {
        if s == d {
            continue;
        }
        out.pairs += 1;
        let (ls, ld) = (idx.live_idx[s.idx()], idx.live_idx[d.idx()]);
        if ls == u32::MAX || ld == u32::MAX {
            out.unrouted += 1;
        } else {
            live.push((ls, ld));
        }
    }
    live.sort_unstable();
    let (src, paths, routed, unrouted) = distinct_counts(&idx, &live, |p| p.0);
    live.sort_unstable_by_key(|&(s, d)| (d, s));
    let (dst, _, _, _) = distinct_counts(&idx, &live, |p| p.1);
    out.routed = routed;
    out.unrouted += unrouted;
    out.xi = paths.iter().copied().max().unwrap_or(0);
    let mut best: Option<(u64, usize)> = None;
    for (c, (&s, &d)) in src.iter().zip(&dst).enumerate() {
        let mu = s.min(d);
        let better = match best {
            None => mu > 0,
            Some((m, _)) => mu > m,
        };
        if better {
            best = Some((mu, c));
        }
    }
    if let Some((mu, c)) = best {
        out.mu = mu as u32;
        out.worst_port = Some(idx.channel(c as u32));
    }
    Ok(out)
}

/// [`JobMetrics`] of one job's all-to-all traffic.
pub fn job_metrics(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    job_end_ports: &[EndPortId],
) -> Result<JobMetrics, MetricsError> {
    jobs_metrics(fabric, lids, lfts, &[job_end_ports])
}

/// [`JobMetrics`] of several jobs running together: `γ^e` sums the all-to-all routes of every
/// job (routes between different jobs are not traffic).
pub fn jobs_metrics<J: AsRef<[EndPortId]>>(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    jobs: &[J],
) -> Result<JobMetrics, MetricsError> {
    check_ids(fabric, jobs.iter().flat_map(std::convert::AsRef::as_ref))?;
    let idx = PathIndex::new(fabric, lids, lfts);
    let nch = idx.num_channels();
    let mut out = JobMetrics {
        jobs: jobs.len(),
        switch_ports: nch,
        ..JobMetrics::default()
    };
    let mut gamma = vec![0u64; nch];
    let mut per_leaf = vec![0u32; idx.leaves.len()];
    for job in jobs {
        let mut members: Vec<u32> = Vec::with_capacity(job.as_ref().len());
        for ep in job.as_ref() {
            match idx.live_idx[ep.idx()] {
                u32::MAX => out.dead_end_ports += 1,
                li => members.push(li),
            }
        }
        members.sort_unstable();
        members.dedup();
        out.end_ports += members.len();
        // Sources grouped by leaf: every source of a leaf follows the same path to `d`.
        let mut leaves: Vec<u32> = Vec::new();
        for &m in &members {
            let l = idx.leaf_of[m as usize];
            if per_leaf[l as usize] == 0 {
                leaves.push(l);
            }
            per_leaf[l as usize] += 1;
        }
        let groups: Vec<(u32, u64)> = leaves.iter().map(|&l| (l, u64::from(per_leaf[l as usize]))).collect();
        for &l in &leaves {
            per_leaf[l as usize] = 0;
        }
        let init = || (vec![0u64; nch], Vec::new(), 0u64, 0u64);
        let (g, _, routes, unrouted) = members
            .par_iter()
            .fold(init, |(mut g, mut buf, mut routes, mut unrouted), &d| {
                let own = idx.leaf_of[d as usize];
                for &(l, size) in &groups {
                    let mult = size - u64::from(l == own);
                    if mult == 0 {
                        continue;
                    }
                    routes += mult;
                    if idx.trace(idx.leaves[l as usize], d, &mut buf) {
                        for &c in &buf {
                            g[c as usize] += mult;
                        }
                    } else {
                        unrouted += mult;
                    }
                }
                (g, buf, routes, unrouted)
            })
            .map(|(g, _, r, u)| (g, Vec::new(), r, u))
            .reduce(init, |x, y| (sum_into(x.0, y.0), Vec::new(), x.2 + y.2, x.3 + y.3));
        gamma = sum_into(gamma, g);
        out.routes += routes;
        out.unrouted_pairs += unrouted;
    }
    for (c, &v) in gamma.iter().enumerate() {
        if v == 0 {
            out.dark_ports += 1;
        } else if v > out.effective_xi {
            out.effective_xi = v;
            out.busiest_port = Some(idx.channel(c as u32));
        }
    }
    out.dark_share = if nch > 0 {
        out.dark_ports as f64 / nch as f64
    } else {
        0.0
    };
    Ok(out)
}

/// Job-local shift permutations: the job's live end ports in the order given (`j_0..j_{n-1}`,
/// duplicates and dead end ports left out), every shift `k = 1..n-1` sending `j_i` to
/// `j_{(i+k) mod n}` — the thesis' `mu^SP` restricted to the job, the pattern of a collective
/// inside one job.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JobShiftMetrics {
    /// Live end ports of the job (after leaving out duplicates and dead ones).
    pub end_ports: usize,
    /// `max_k mu(shift k)` (a shift is a permutation: `mu` is the largest number of its paths on
    /// one switch-to-switch port).
    pub mu_sp: u32,
    /// The first shift reaching `mu_sp` (0 when `mu_sp == 0`).
    pub worst_shift: u32,
    /// Pairs, over all shifts, whose base-LID path does not reach the destination.
    pub unrouted_pairs: u64,
}

/// [`JobShiftMetrics`] of one job (end ports in the job's own order); parallel over shifts.
pub fn job_shift_metrics(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    job_end_ports: &[EndPortId],
) -> Result<JobShiftMetrics, MetricsError> {
    check_ids(fabric, job_end_ports)?;
    let idx = PathIndex::new(fabric, lids, lfts);
    let mut seen = vec![false; fabric.num_end_ports()];
    let members: Vec<u32> = job_end_ports
        .iter()
        .filter(|ep| !std::mem::replace(&mut seen[ep.idx()], true))
        .map(|ep| idx.live_idx[ep.idx()])
        .filter(|&li| li != u32::MAX)
        .collect();
    let n = members.len();
    let nch = idx.num_channels();
    let (mu_sp, worst_shift, unrouted_pairs) = (1..n)
        .into_par_iter()
        .map_init(
            || (vec![0u32; nch], Vec::new()),
            |(count, buf), k| {
                count.iter_mut().for_each(|c| *c = 0);
                let (mut mu, mut unrouted) = (0u32, 0u64);
                for (i, &s) in members.iter().enumerate() {
                    let d = members[(i + k) % n];
                    if idx.trace(idx.leaves[idx.leaf_of[s as usize] as usize], d, buf) {
                        for &c in buf.iter() {
                            let c = &mut count[c as usize];
                            *c += 1;
                            mu = mu.max(*c);
                        }
                    } else {
                        unrouted += 1;
                    }
                }
                (mu, k as u32, unrouted)
            },
        )
        .reduce(
            || (0, 0, 0),
            |a, b| {
                // The larger mu; on ties the smaller shift (deterministic whatever the split).
                let (best, other) = if (b.0, std::cmp::Reverse(b.1)) > (a.0, std::cmp::Reverse(a.1)) {
                    (b, a)
                } else {
                    (a, b)
                };
                (best.0, best.1, best.2 + other.2)
            },
        );
    Ok(JobShiftMetrics {
        end_ports: n,
        mu_sp,
        worst_shift: if mu_sp == 0 { 0 } else { worst_shift },
        unrouted_pairs,
    })
}
