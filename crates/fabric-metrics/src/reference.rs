//! The straightforward metrics: one LFT walk per path of every shift and random permutation,
//! source by source. Kept as the reference the fast passes are tested against (and as the
//! fallback of `mu_sp` when the live order interleaves the leaves), and for the benchmark's
//! in-run baseline. Not meant for callers: use [`crate::compute`].

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use fabric_routing::{Lfts, LidPlan};
use fabric_topology::Fabric;

use crate::index::{PathIndex, RoutedBits};
use crate::{shifts, stats, Metrics, MetricsOptions, Progress, RpStats, Scan};

/// `mu` of a permutation pattern `s -> dest(s)` over live indices: the largest number of routed
/// paths crossing one channel (fixed points and unrouted pairs carry no path). `counts` is a
/// reused per-thread scratch array of one counter per channel.
fn permutation_mu(idx: &PathIndex<'_>, bits: &RoutedBits, counts: &mut [u32], dest: impl Fn(u32) -> u32) -> u32 {
    counts.fill(0);
    let mut max = 0;
    for s in 0..idx.num_live() as u32 {
        let d = dest(s);
        if d == s {
            continue;
        }
        let li = idx.leaf_of[s as usize];
        if bits.get(li, d) {
            idx.walk(idx.leaves[li as usize], d, |c| {
                let v = &mut counts[c as usize];
                *v += 1;
                max = max.max(*v);
            });
        }
    }
    max
}

/// `mu` of every shift `k = 1..N-1` by walking its `N` paths (index `k`; index 0 unused).
fn shift_mus(idx: &PathIndex<'_>, bits: &RoutedBits, progress: &Progress, cancel: &AtomicBool) -> Vec<u32> {
    let n = idx.num_live();
    if n < 2 {
        return vec![0; n];
    }
    progress.add_total(n as u64 - 1);
    let mut mus: Vec<u32> = (1..n as u32)
        .into_par_iter()
        .map_init(
            || vec![0u32; idx.num_channels()],
            |counts, k| {
                if cancel.load(Ordering::Relaxed) {
                    return 0;
                }
                let mu = permutation_mu(idx, bits, counts, |s| (s + k) % n as u32);
                progress.advance(1);
                mu
            },
        )
        .collect();
    mus.insert(0, 0);
    mus
}

/// `(mu_sp, smallest worst shift)` by walking every shift (the fallback of `mu_sp`).
pub(crate) fn shift_walks(
    idx: &PathIndex<'_>,
    bits: &RoutedBits,
    progress: &Progress,
    cancel: &AtomicBool,
) -> (u32, u32) {
    let mus = shift_mus(idx, bits, progress, cancel);
    let mut best = (0, 0);
    for (k, &mu) in mus.iter().enumerate() {
        if mu > best.0 {
            best = (mu, k as u32);
        }
    }
    best
}

/// The shift pattern in detail: `mu_sp`, its smallest worst shift, `mu(SP_k)` per shift (index
/// `k`, index 0 unused and 0) and the largest per-shift path count per channel (in channel
/// order: switch id, then port).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShiftProfile {
    pub mu_sp: u32,
    pub worst_shift: u32,
    pub per_shift: Vec<u32>,
    pub per_channel: Vec<u32>,
}

/// [`ShiftProfile`] by walking every path of every shift (the reference).
pub fn shift_profile_reference(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> ShiftProfile {
    let idx = PathIndex::new(fabric, lids, lfts);
    let scan = scan_leaves(&idx, false, &Progress::new());
    let n = idx.num_live() as u32;
    let nch = idx.num_channels();
    let mut per_channel = vec![0u32; nch];
    let mut counts = vec![0u32; nch];
    let mut per_shift = vec![0u32; n as usize];
    for k in 1..n {
        per_shift[k as usize] = permutation_mu(&idx, &scan.bits, &mut counts, |s| (s + k) % n);
        for (m, &c) in per_channel.iter_mut().zip(&counts) {
            *m = (*m).max(c);
        }
    }
    let (mu_sp, worst_shift) = shift_walks(&idx, &scan.bits, &Progress::new(), &AtomicBool::new(false));
    ShiftProfile {
        mu_sp,
        worst_shift,
        per_shift,
        per_channel,
    }
}

/// [`ShiftProfile`] by the destination-major range pass, whatever the live order, gathering at
/// most `budget` bytes of ranges at once (small budgets force many channel groups).
pub fn shift_profile_ranges(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, budget: usize) -> ShiftProfile {
    let idx = PathIndex::new(fabric, lids, lfts);
    let runs = shifts::leaf_runs(&idx);
    let (progress, cancel) = (Progress::new(), AtomicBool::new(false));
    let r = crate::scan::scan_destinations(&idx, false, &progress, &cancel)
        .and_then(|scan| shifts::all_shifts(&idx, &scan.bits, &runs, true, true, budget, &progress, &cancel))
        .unwrap_or_default();
    ShiftProfile {
        mu_sp: r.mu,
        worst_shift: r.worst_shift,
        per_shift: r.per_shift,
        per_channel: r.per_channel,
    }
}

/// [`crate::compute`] the straightforward way: every shift and every random permutation walked
/// source by source.
pub fn compute_reference(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, opts: &MetricsOptions) -> Metrics {
    let idx = PathIndex::new(fabric, lids, lfts);
    let n = idx.num_live();
    let progress = Progress::new();
    let cancel = AtomicBool::new(false);
    let scan = scan_leaves(&idx, opts.all_to_all, &progress);
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
        let dst = a2a_destinations(&idx, &scan.bits);
        m.mu_a2a = scan.src.iter().zip(&dst).map(|(&s, &d)| s.min(d)).max().unwrap_or(0) as u32;
        m.xi = scan.xi.iter().copied().max().unwrap_or(0);
    }
    if opts.shifts && n >= 2 {
        (m.mu_sp, m.worst_shift) = shift_walks(&idx, &scan.bits, &progress, &cancel);
    }
    if opts.random_perms > 0 {
        let values: Vec<u32> = (0..opts.random_perms as u64)
            .into_par_iter()
            .map_init(
                || (vec![0u32; idx.num_channels()], Vec::with_capacity(n)),
                |(counts, perm), i| {
                    stats::random_permutation(perm, n as u32, opts.seed, i);
                    let perm: &Vec<u32> = perm;
                    permutation_mu(&idx, &scan.bits, counts, |s| perm[s as usize])
                },
            )
            .collect();
        m.mu_rp = RpStats::from_values(values);
    }
    m
}

/// Per-thread accumulator of [`scan_leaves`].
struct ScanAcc {
    xi: Vec<u64>,
    src: Vec<u64>,
    /// Per channel: last leaf that counted its sources there.
    stamp: Vec<u32>,
    buf: Vec<u32>,
    edge_sum: u64,
    routed: u64,
    unrouted: u64,
    diameter: u32,
}

impl ScanAcc {
    fn new(channels: usize, a2a: bool) -> Self {
        let len = if a2a { channels } else { 0 };
        ScanAcc {
            xi: vec![0; len],
            src: vec![0; len],
            stamp: vec![u32::MAX; len],
            buf: Vec::new(),
            edge_sum: 0,
            routed: 0,
            unrouted: 0,
            diameter: 0,
        }
    }
    fn merge(mut self, o: ScanAcc) -> ScanAcc {
        for (a, b) in self.xi.iter_mut().zip(&o.xi) {
            *a += b;
        }
        for (a, b) in self.src.iter_mut().zip(&o.src) {
            *a += b;
        }
        self.edge_sum += o.edge_sum;
        self.routed += o.routed;
        self.unrouted += o.unrouted;
        self.diameter = self.diameter.max(o.diameter);
        self
    }
}

/// Leaf-major (the reference; `scan` is the cache-friendly pass): traces every `leaf -> d` path once, weighted by the number of sources on the leaf (minus `d`
/// itself when it sits there): routed bits, `nu`, unrouted pairs and, for all-to-all, the
/// per-channel path counts and distinct-source counts (a leaf's sources all cross a channel as
/// soon as one path from the leaf does, since a path between two end ports of the same leaf
/// crosses no channel).
fn scan_leaves(idx: &PathIndex<'_>, a2a: bool, progress: &Progress) -> Scan {
    let n = idx.num_live();
    let nch = idx.num_channels();
    let mut bits = RoutedBits::new(idx.leaves.len(), n);
    let words = bits.words_per_row;
    let acc = bits
        .bits
        .par_chunks_mut(words)
        .enumerate()
        .fold(
            || ScanAcc::new(nch, a2a),
            |mut acc, (li, row)| {
                let li = li as u32;
                let size = u64::from(idx.leaf_size[li as usize]);
                let from = idx.leaves[li as usize];
                for d in 0..n as u32 {
                    let mult = size - u64::from(idx.leaf_of[d as usize] == li);
                    if mult == 0 {
                        continue;
                    }
                    let mut buf = std::mem::take(&mut acc.buf);
                    if idx.trace(from, d, &mut buf) {
                        RoutedBits::set_in_row(row, d);
                        let edges = buf.len() as u32 + 2;
                        acc.routed += mult;
                        acc.edge_sum += mult * u64::from(edges);
                        acc.diameter = acc.diameter.max(edges);
                        if a2a {
                            for &c in &buf {
                                let c = c as usize;
                                acc.xi[c] += mult;
                                if acc.stamp[c] != li {
                                    acc.stamp[c] = li;
                                    acc.src[c] += size;
                                }
                            }
                        }
                    } else {
                        acc.unrouted += mult;
                    }
                    acc.buf = buf;
                }
                progress.advance(1);
                acc
            },
        )
        .reduce(|| ScanAcc::new(nch, a2a), ScanAcc::merge);
    Scan {
        bits,
        xi: acc.xi,
        src: acc.src,
        dst: Vec::new(),
        edge_sum: acc.edge_sum,
        routed: acc.routed,
        unrouted: acc.unrouted,
        diameter: acc.diameter,
    }
}

/// Destination-major pass of the all-to-all pattern: per channel, the number of distinct
/// destinations whose routed paths from some other end port cross it.
fn a2a_destinations(idx: &PathIndex<'_>, bits: &RoutedBits) -> Vec<u64> {
    let nch = idx.num_channels();
    (0..idx.num_live() as u32)
        .into_par_iter()
        .fold(
            || (vec![0u64; nch], vec![u32::MAX; nch]),
            |(mut dst, mut stamp), d| {
                for (li, &from) in idx.leaves.iter().enumerate() {
                    // Not set for unrouted pairs nor for a leaf whose only source is `d` itself.
                    if !bits.get(li as u32, d) {
                        continue;
                    }
                    idx.walk(from, d, |c| {
                        let c = c as usize;
                        if stamp[c] != d {
                            stamp[c] = d;
                            dst[c] += 1;
                        }
                    });
                }
                (dst, stamp)
            },
        )
        .map(|(dst, _)| dst)
        .reduce(
            || vec![0u64; nch],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    *x += y;
                }
                a
            },
        )
}
