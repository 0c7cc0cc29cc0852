//! All `N - 1` shift permutations at once, destination-major (the fast `mu_sp`).
//!
//! Shift `k` sends `s -> (s + k) mod N`, so destination `d` receives from `s = d - k`: the pair
//! `(s, d)` belongs to shift `k = (d - s) mod N`. With destination-based routing the path from
//! `s` to `d` depends only on the leaf of `s`, so for every destination `d` the sources whose
//! path crosses a channel `c` are a union of whole leaves. The live end ports of one leaf are
//! a few *runs* of consecutive indices (one run per leaf in the usual orders), and runs that are
//! adjacent in the global order and cross the same channel towards the same `d` merge into one
//! range `[a, b)`. A range adds one path to channel `c` in every shift `k` of the cyclic
//! interval `(d - b, d - a]`: a difference array over `k` per channel, whose prefix sums are
//! the exact per-shift path counts `count_c(k)`. Then `mu(SP_k) = max_c count_c(k)` and
//! `mu_sp = max_c max_k count_c(k)`.
//!
//! Work: one trace per leaf and destination, one merge step per run and hop, and one pass of
//! `N` per channel that carries any path, instead of `N` walks per shift (`N²` walks). The
//! ranges (16 bytes each) are gathered per group of channels within a memory budget; a first
//! pass counts them to form the groups, each group costs one more pass over the destinations.
//! When the live order interleaves the leaves so much that ranges would not pay off (more runs
//! than a quarter of `N`), the caller falls back to the per-shift walks.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::index::{BlockTable, PathIndex, RoutedBits, BLOCK, END};
use crate::Progress;

/// Bytes of ranges gathered at once (one channel group).
pub(crate) const RANGE_BUDGET: usize = 256 << 20;

/// One range of sources `[a, b)` crossing channel `ch` towards destination `d`.
#[derive(Copy, Clone, Debug)]
struct Range {
    ch: u32,
    d: u32,
    a: u32,
    b: u32,
}

/// Result of the all-shift pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShiftResult {
    /// `mu_sp`.
    pub mu: u32,
    /// Smallest `k` with `mu(SP_k) = mu` (0 when `mu` is 0).
    pub worst_shift: u32,
    /// Per channel: `max_k count_c(k)` (when asked).
    pub per_channel: Vec<u32>,
    /// Per shift `k` (index `k`, index 0 unused): `mu(SP_k)` (when asked).
    pub per_shift: Vec<u32>,
}

/// Runs of consecutive live indices on one leaf: `(a, b, leaf)`, ascending `a`.
pub(crate) fn leaf_runs(idx: &PathIndex<'_>) -> Vec<(u32, u32, u32)> {
    let mut runs: Vec<(u32, u32, u32)> = Vec::new();
    for (s, &li) in idx.leaf_of.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.2 == li => r.1 = s as u32 + 1,
            _ => runs.push((s as u32, s as u32 + 1, li)),
        }
    }
    runs
}

/// Whether the range pass pays off for this order (see the module doc).
pub(crate) fn ranges_pay_off(idx: &PathIndex<'_>, runs: usize) -> bool {
    runs.saturating_mul(4) <= idx.num_live().max(64)
}

/// Per-thread scratch of the destination pass.
struct DestScratch {
    /// Per channel: destination of the open range (`u32::MAX` = none).
    stamp: Vec<u32>,
    start: Vec<u32>,
    end: Vec<u32>,
    touched: Vec<u32>,
    /// Per leaf: its path to the current destination, in `paths[off[l]..off[l + 1]]`.
    paths: Vec<u32>,
    off: Vec<u32>,
    routed: Vec<bool>,
    buf: Vec<u32>,
    /// Next hops towards the current block of destinations.
    pub table: BlockTable,
}

impl DestScratch {
    fn new(channels: usize, leaves: usize) -> Self {
        DestScratch {
            stamp: vec![u32::MAX; channels],
            start: vec![0; channels],
            end: vec![0; channels],
            touched: Vec::new(),
            paths: Vec::new(),
            off: vec![0; leaves + 1],
            routed: vec![false; leaves],
            buf: Vec::new(),
            table: BlockTable::new(),
        }
    }

    /// Calls `emit(ch, a, b)` for every merged source range crossing a channel towards `d`, a
    /// destination of the block last filled into `table`.
    fn destination(
        &mut self,
        idx: &PathIndex<'_>,
        runs: &[(u32, u32, u32)],
        d: u32,
        mut emit: impl FnMut(u32, u32, u32),
    ) {
        self.paths.clear();
        for (li, &from) in idx.leaves.iter().enumerate() {
            self.off[li] = self.paths.len() as u32;
            self.routed[li] = self.table.trace(idx, from, d, &mut self.buf);
            if self.routed[li] {
                self.paths.extend_from_slice(&self.buf);
            }
        }
        self.off[idx.leaves.len()] = self.paths.len() as u32;
        for &(a, b, li) in runs {
            let li = li as usize;
            if !self.routed[li] {
                continue;
            }
            // The first hop leaves the sources' own leaf: summed per leaf, not gathered.
            let path = &self.paths[self.off[li] as usize..self.off[li + 1] as usize];
            for &c in path.iter().skip(1) {
                let c = c as usize;
                if self.stamp[c] == d {
                    if self.end[c] == a {
                        self.end[c] = b;
                        continue;
                    }
                    emit(c as u32, self.start[c], self.end[c]);
                } else {
                    self.stamp[c] = d;
                    self.touched.push(c as u32);
                }
                self.start[c] = a;
                self.end[c] = b;
            }
        }
        for &c in &self.touched {
            let c = c as usize;
            emit(c as u32, self.start[c], self.end[c]);
        }
        self.touched.clear();
    }
}

/// Destinations per parallel task: one [`BlockTable`].
const DEST_CHUNK: u32 = BLOCK;

/// The all-shift pass. `bits` are the routed bits of the path scan; `per_channel` /
/// `per_shift` ask for the detailed outputs. Returns `None` when `cancel` was raised (checked
/// between destination blocks and switches).
///
/// A path's first channel leaves the source's own leaf: those ranges are not gathered but
/// added when the leaf's channels are summed (one LFT row read per leaf), since they are most
/// of the ranges (one per leaf and destination); the gathered ranges are the transit ones.
#[allow(clippy::too_many_arguments)]
pub(crate) fn all_shifts(
    idx: &PathIndex<'_>,
    bits: &RoutedBits,
    runs: &[(u32, u32, u32)],
    per_channel: bool,
    per_shift: bool,
    budget: usize,
    progress: &Progress,
    cancel: &AtomicBool,
) -> Option<ShiftResult> {
    let n = idx.num_live() as u32;
    let nch = idx.num_channels();
    let leaves = idx.leaves.len();
    let ns = idx.num_switches();
    let mut out = ShiftResult {
        per_channel: if per_channel { vec![0; nch] } else { Vec::new() },
        per_shift: if per_shift { vec![0; n as usize] } else { Vec::new() },
        ..ShiftResult::default()
    };
    if n < 2 {
        return Some(out);
    }
    let chunks: Vec<u32> = (0..n).step_by(DEST_CHUNK as usize).collect();
    let dests = |c0: u32| c0..(c0 + DEST_CHUNK).min(n);
    // Pass 0: transit ranges per channel.
    progress.add_total(chunks.len() as u64);
    let counts = chunks
        .par_iter()
        .fold(
            || (DestScratch::new(nch, leaves), vec![0u32; nch]),
            |(mut sc, mut cnt), &c0| {
                if !cancel.load(Ordering::Relaxed) {
                    idx.fill_block(c0, &mut sc.table);
                    for d in dests(c0) {
                        sc.destination(idx, runs, d, |c, _, _| cnt[c as usize] += 1);
                    }
                    progress.advance(1);
                }
                (sc, cnt)
            },
        )
        .map(|(_, cnt)| cnt)
        .reduce(
            || vec![0u32; nch],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    *x += y;
                }
                a
            },
        );
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    // Channels of each switch (channel ids ascend with the switch id).
    let mut sw_ch = vec![(0u32, 0u32); ns];
    for c in 0..nch as u32 {
        let sw = idx.channel(c).switch.idx();
        if sw_ch[sw].1 == 0 {
            sw_ch[sw].0 = c;
        }
        sw_ch[sw].1 = c + 1;
    }
    for sw in 0..ns {
        if sw_ch[sw].1 == 0 {
            let at = sw_ch[..sw].iter().map(|r| r.1).max().unwrap_or(0);
            sw_ch[sw] = (at, at);
        }
    }
    let mut leaf_of_switch = vec![u32::MAX; ns];
    for (li, &sw) in idx.leaves.iter().enumerate() {
        leaf_of_switch[sw as usize] = li as u32;
    }
    let mut runs_of: Vec<Vec<(u32, u32)>> = vec![Vec::new(); leaves];
    for &(a, b, li) in runs {
        runs_of[li as usize].push((a, b));
    }
    // Switch groups of at most `budget` bytes of ranges (a switch alone may exceed it).
    let per_group = (budget / std::mem::size_of::<Range>()).max(1) as u64;
    let mut groups: Vec<(usize, usize, u64)> = Vec::new();
    let (mut g0, mut acc) = (0usize, 0u64);
    for (sw, &(lo, hi)) in sw_ch.iter().enumerate() {
        let k: u64 = counts[lo as usize..hi as usize].iter().map(|&c| u64::from(c)).sum();
        if acc > 0 && acc + k > per_group {
            groups.push((g0, sw, acc));
            g0 = sw;
            acc = 0;
        }
        acc += k;
    }
    groups.push((g0, ns, acc));
    let gathering = groups.iter().filter(|g| g.2 > 0).count() as u64;
    progress.add_total(gathering * chunks.len() as u64 + ns as u64);
    let mut best = (0u32, 0u32);
    for &(s_lo, s_hi, total) in &groups {
        let (lo, hi) = (sw_ch[s_lo].0, if s_hi == ns { nch as u32 } else { sw_ch[s_hi].0 });
        let mut off = vec![0usize; (hi - lo) as usize + 1];
        for c in lo..hi {
            off[(c - lo) as usize + 1] = off[(c - lo) as usize] + counts[c as usize] as usize;
        }
        let mut ranges = vec![
            Range {
                ch: 0,
                d: 0,
                a: 0,
                b: 0
            };
            off[(hi - lo) as usize]
        ];
        if total > 0 {
            // Gather the group's ranges, bucketed by channel (counting sort on `counts`).
            let parts: Vec<Vec<Range>> = chunks
                .par_iter()
                .map_init(
                    || DestScratch::new(nch, leaves),
                    |sc, &c0| {
                        let mut v = Vec::new();
                        if cancel.load(Ordering::Relaxed) {
                            return v;
                        }
                        idx.fill_block(c0, &mut sc.table);
                        for d in dests(c0) {
                            sc.destination(idx, runs, d, |ch, a, b| {
                                if (lo..hi).contains(&ch) {
                                    v.push(Range { ch, d, a, b });
                                }
                            });
                        }
                        progress.advance(1);
                        v
                    },
                )
                .collect();
            if cancel.load(Ordering::Relaxed) {
                return None;
            }
            let mut fill = off.clone();
            for r in parts.into_iter().flatten() {
                let i = &mut fill[(r.ch - lo) as usize];
                ranges[*i] = r;
                *i += 1;
            }
        }
        // Per switch: difference arrays over k of its channels, prefix sums, maxima.
        let ctx = SumCtx {
            idx,
            bits,
            n,
            lo,
            off: &off,
            ranges: &ranges,
            leaf_of_switch: &leaf_of_switch,
            runs_of: &runs_of,
            per_shift,
        };
        let (g_best, g_shift, g_channel) = (s_lo..s_hi)
            .into_par_iter()
            .fold(
                || {
                    (
                        Vec::new(),
                        (0u32, 0u32),
                        vec![0u32; if per_shift { n as usize } else { 0 }],
                        Vec::new(),
                    )
                },
                |(mut diff, mut best, mut shift_max, mut chan), sw| {
                    if cancel.load(Ordering::Relaxed) {
                        return (diff, best, shift_max, chan);
                    }
                    for (c, m) in ctx.switch(sw as u32, sw_ch[sw], &mut diff, &mut shift_max) {
                        if better(m, best) {
                            best = m;
                        }
                        if per_channel {
                            chan.push((c, m.0));
                        }
                    }
                    progress.advance(1);
                    (diff, best, shift_max, chan)
                },
            )
            .map(|(_, best, shift_max, chan)| (best, shift_max, chan))
            .reduce(
                || ((0, 0), Vec::new(), Vec::new()),
                |a, b| {
                    let best = if better(b.0, a.0) { b.0 } else { a.0 };
                    let shift = match (a.1.is_empty(), b.1.is_empty()) {
                        (true, _) => b.1,
                        (_, true) => a.1,
                        _ => a.1.iter().zip(&b.1).map(|(x, y)| *x.max(y)).collect(),
                    };
                    let mut chan = a.2;
                    chan.extend(b.2);
                    (best, shift, chan)
                },
            );
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        if better(g_best, best) {
            best = g_best;
        }
        for (c, m) in g_channel {
            out.per_channel[c as usize] = m;
        }
        for (x, y) in out.per_shift.iter_mut().zip(&g_shift) {
            *x = (*x).max(*y);
        }
    }
    out.mu = best.0;
    out.worst_shift = if best.0 > 0 { best.1 } else { 0 };
    Some(out)
}

/// Whether `(mu, k)` beats `than`: a larger `mu`, or the same nonzero `mu` at a smaller `k`.
fn better(m: (u32, u32), than: (u32, u32)) -> bool {
    m.0 > than.0 || (m.0 == than.0 && m.0 > 0 && m.1 < than.1)
}

/// What summing one switch's channels needs.
struct SumCtx<'a> {
    idx: &'a PathIndex<'a>,
    bits: &'a RoutedBits,
    n: u32,
    /// First channel of the group.
    lo: u32,
    /// Per channel of the group: its gathered ranges in `ranges[off[c - lo]..off[c - lo + 1]]`.
    off: &'a [usize],
    ranges: &'a [Range],
    leaf_of_switch: &'a [u32],
    runs_of: &'a [Vec<(u32, u32)>],
    per_shift: bool,
}

impl SumCtx<'_> {
    /// `(channel, (max_k count(k), smallest such k))` of the channels `chans` of switch `sw`:
    /// its gathered transit ranges plus, on a leaf, the first hops of its own end ports.
    fn switch(&self, sw: u32, chans: (u32, u32), diff: &mut Vec<i32>, shift_max: &mut [u32]) -> Vec<(u32, (u32, u32))> {
        let n = self.n as usize;
        let k = (chans.1 - chans.0) as usize;
        diff.clear();
        diff.resize(k * (n + 1), 0);
        let mut used = vec![false; k];
        for c in chans.0..chans.1 {
            let i = (c - chans.0) as usize;
            let rs = &self.ranges[self.off[(c - self.lo) as usize]..self.off[(c - self.lo) as usize + 1]];
            for r in rs {
                add_range(&mut diff[i * (n + 1)..(i + 1) * (n + 1)], self.n, r.d, r.a, r.b);
            }
            used[i] |= !rs.is_empty();
        }
        let li = self.leaf_of_switch[sw as usize];
        if li != u32::MAX {
            let own = &self.runs_of[li as usize];
            for d in 0..self.n {
                // Set only for routed paths with a source other than `d`.
                if !self.bits.get(li, d) {
                    continue;
                }
                let c = self.idx.next(sw, self.idx.lid[d as usize]);
                if c >= END || !(chans.0..chans.1).contains(&c) {
                    continue;
                }
                let i = (c - chans.0) as usize;
                used[i] = true;
                for &(a, b) in own {
                    add_range(&mut diff[i * (n + 1)..(i + 1) * (n + 1)], self.n, d, a, b);
                }
            }
        }
        (0..k)
            .filter(|&i| used[i])
            .map(|i| {
                let m = scan_max(&diff[i * (n + 1)..(i + 1) * (n + 1)], self.n, shift_max, self.per_shift);
                (chans.0 + i as u32, m)
            })
            .collect()
    }
}

/// Adds sources `[a, b)` sending to `d` to the difference array over shifts: they reach `d`
/// in shifts `k = d - s (mod n)`, the cyclic interval `d - b + 1 ..= d - a`.
#[inline]
fn add_range(diff: &mut [i32], n: u32, d: u32, a: u32, b: u32) {
    let len = b - a;
    let start = (d + n - (b - 1)) % n;
    let end = start + len;
    diff[start as usize] += 1;
    if end <= n {
        diff[end as usize] -= 1;
    } else {
        diff[n as usize] -= 1;
        diff[0] += 1;
        diff[(end - n) as usize] -= 1;
    }
}

/// `(max_k count(k), smallest such k)` over `k = 1..n-1` from a difference array; folds the
/// counts into `shift_max` when `per_shift`.
fn scan_max(diff: &[i32], n: u32, shift_max: &mut [u32], per_shift: bool) -> (u32, u32) {
    let mut run = diff[0];
    let (mut best, mut at) = (0u32, 0u32);
    for (k, &x) in diff.iter().enumerate().take(n as usize).skip(1) {
        run += x;
        let v = run as u32;
        if v > best {
            best = v;
            at = k as u32;
        }
        if per_shift && v > shift_max[k] {
            shift_max[k] = v;
        }
    }
    (best, at)
}
