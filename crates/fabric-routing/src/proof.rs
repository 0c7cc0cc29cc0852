//! A local proof of validity for [`crate::check::destination_check_both_ranked`]: most
//! destinations of a fat-tree routing are shown to be reached from every switch of their
//! component without walking a single path, in one row-major pass over the tables; the
//! destinations the proof does not cover are walked as before ([`crate::walk`]).
//!
//! **The proof.** Take levels for the switches (a hint: the ranking) and, for every switch
//! `s`, the set `down[s]` of switches reachable from `s` by steps to strictly lower levels
//! (including `s`) and the set `ud[s]` reachable by steps up then steps down (`down[s]`
//! included). For a destination with target switch `T` (its leaf, or the switch itself for a
//! switch LID) define the potential
//!
//! ```text
//! pot(s) = level(s)                  if T ∈ down[s]
//!        = H + top − level(s)        otherwise        (H > top, top = highest level)
//! ```
//!
//! An entry of `s` for the destination is *good* when it delivers (port 0 at `T` for a switch
//! LID; the destination's own leaf port at its leaf) or when it leads over a live link to a
//! switch `t` with `pot(t) < pot(s)` and `T ∈ ud[t]`; with these potentials that is: `t`
//! lower than `s` and `T ∈ down[t]`, or `t` higher than `s`, `T ∉ down[s]` and `T ∈ ud[t]`.
//! *Required* switches are the live switches of the destination's component that have sources
//! (live end ports) or have `T ∈ ud[s]`; a good step always lands on a required switch. When
//! every required switch has a good entry, every walk from a source stays on required switches
//! and strictly decreases a non-negative potential until it meets a delivering entry: every
//! source reaches the destination, and no walk loops. (Switches that cannot reach `T`, such as
//! a top switch cut from a pod, may hold no route without spoiling the proof.) This holds for
//! *any* levels and any sets `down[·]`, `ud[·]` (the potential and the required set are fixed
//! functions of the switch), so a wrong hint only makes the proof fail more often, never
//! wrong: a destination with a bad required entry is simply walked, and the result is exactly
//! the walk's (tests compare with the walk on damaged tables and random levels).
//!
//! **The pass.** Destinations are grouped in runs: consecutive LIDs (with a constant step)
//! with the same target leaf (both LID sets: with LMC 1 a leaf's base and escape LIDs
//! alternate). Per switch row and run, the smallest and largest port used are taken (a
//! vectorised pass): when every port between them is good for the run's target, so is the
//! run (usually the up ports of a switch, or the parallel ports down to one child). Otherwise
//! the ports used are gathered into a 64-bit mask (bit `p − 1` for port `p`) and each is
//! checked once. Entries that do not fit the mask (port 0, [`NO_ROUTE`], ports above 64) and
//! switch LIDs (runs of one) are checked one by one. Rows are independent (rayon); the
//! result is one "proved" bit per run.

use rayon::prelude::*;

use fabric_topology::{Fabric, Lid, PortNum, Remote, SwitchId};

use crate::lft::{Lfts, NO_ROUTE};

/// Above this many switches, `down[·]` holds only the leaves (switch LIDs are then walked):
/// the full matrix is `switches²` bits.
const ALL_TARGETS_MAX: usize = 16_384;

/// One run of destinations (all of one LID set, one target, one component).
#[derive(Clone, Debug)]
pub(crate) struct Run {
    /// First LID and step between consecutive LIDs.
    pub lid: Lid,
    pub step: u32,
    /// Number of destinations.
    pub len: u32,
    /// Target switch: the destinations' leaf, or the switch of a switch LID.
    pub target: u32,
    /// Leaf ports of the destinations (end-port runs; empty for a switch LID).
    pub ports: Vec<PortNum>,
    /// Component of the target.
    pub comp: u32,
}

/// Kind of a port of a switch, for one row.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Kind {
    /// Leads nowhere usable (or to a switch without a level, or of equal level).
    Bad,
    /// Port 0 or [`NO_ROUTE`] (decided per entry).
    Special,
    /// A live end port.
    End,
    /// To a switch of lower level.
    Down,
    /// To a switch of higher level.
    Up,
}

/// Per port number: kind and next switch.
type PortTable = Vec<(Kind, u32)>;

/// Levels, targets and `down[·]`: what the proof needs besides the tables.
pub(crate) struct Proof<'a> {
    fabric: &'a Fabric,
    level: Vec<Option<u32>>,
    /// Switch → bit index in the rows of `down` (`u32::MAX`: not a target).
    tidx: Vec<u32>,
    /// Words per row.
    w: usize,
    down: Vec<u64>,
    /// `ud[s]`: the targets reachable from `s` by steps up then steps down (`down[s]` included).
    ud: Vec<u64>,
}

/// What [`crate::check::destination_checks`] needs to try the proof: the levels and the
/// number of switches above which `down[·]` holds only the leaves.
#[derive(Copy, Clone)]
pub(crate) struct Hint<'a> {
    pub level: &'a [Option<u32>],
    pub all_targets_max: usize,
}

impl<'a> Hint<'a> {
    /// The levels with the default limit.
    pub fn new(level: &'a [Option<u32>]) -> Self {
        Hint {
            level,
            all_targets_max: ALL_TARGETS_MAX,
        }
    }
}

impl<'a> Proof<'a> {
    /// `hint.level`: a switch without one, or beyond the slice, has none; `leaves`: the target
    /// switches of end-port destinations.
    pub fn new(fabric: &'a Fabric, hint: Hint<'_>, leaves: &[u32]) -> Self {
        let level = hint.level;
        let n = fabric.num_switches();
        let level: Vec<Option<u32>> = (0..n)
            .map(|s| {
                let l = level.get(s).copied().flatten();
                l.filter(|_| fabric.switch(SwitchId(s as u32)).up)
            })
            .collect();
        let mut tidx = vec![u32::MAX; n];
        let mut nt = 0u32;
        if n <= hint.all_targets_max {
            for (s, t) in tidx.iter_mut().enumerate() {
                *t = s as u32;
            }
            nt = n as u32;
        } else {
            for &l in leaves {
                if tidx[l as usize] == u32::MAX {
                    tidx[l as usize] = nt;
                    nt += 1;
                }
            }
        }
        let w = (nt as usize).div_ceil(64).max(1);
        // down[s] in ascending level order, one level at a time in parallel.
        let mut order: Vec<u32> = (0..n as u32).filter(|&s| level[s as usize].is_some()).collect();
        order.sort_by_key(|&s| (level[s as usize], s));
        let mut down = vec![0u64; n * w];
        let mut i = 0;
        while i < order.len() {
            let lv = level[order[i] as usize];
            let j = i + order[i..].partition_point(|&s| level[s as usize] == lv);
            let rows: Vec<(u32, Vec<u64>)> = order[i..j]
                .par_iter()
                .map(|&s| {
                    let mut row = vec![0u64; w];
                    let t = tidx[s as usize];
                    if t != u32::MAX {
                        row[t as usize / 64] |= 1 << (t % 64);
                    }
                    for g in fabric.port_groups(SwitchId(s)) {
                        let r = g.remote.idx();
                        if level[r].is_some_and(|x| Some(x) < lv) {
                            row.iter_mut().zip(&down[r * w..(r + 1) * w]).for_each(|(a, b)| *a |= b);
                        }
                    }
                    (s, row)
                })
                .collect();
            for (s, row) in rows {
                down[s as usize * w..(s as usize + 1) * w].copy_from_slice(&row);
            }
            i = j;
        }
        // ud[s] in descending level order.
        let mut ud = down.clone();
        let mut j = order.len();
        while j > 0 {
            let lv = level[order[j - 1] as usize];
            let i = order[..j].partition_point(|&s| level[s as usize] < lv);
            let rows: Vec<(u32, Vec<u64>)> = order[i..j]
                .par_iter()
                .map(|&s| {
                    let mut row = ud[s as usize * w..(s as usize + 1) * w].to_vec();
                    for g in fabric.port_groups(SwitchId(s)) {
                        let r = g.remote.idx();
                        if level[r].is_some_and(|x| Some(x) > lv) {
                            row.iter_mut().zip(&ud[r * w..(r + 1) * w]).for_each(|(a, b)| *a |= b);
                        }
                    }
                    (s, row)
                })
                .collect();
            for (s, row) in rows {
                ud[s as usize * w..(s as usize + 1) * w].copy_from_slice(&row);
            }
            j = i;
        }
        Proof {
            fabric,
            level,
            tidx,
            w,
            down,
            ud,
        }
    }

    /// Per port number of switch `s`: its kind and the switch it leads to.
    fn ports(&self, s: usize, out: &mut PortTable) {
        out.clear();
        out.resize(256, (Kind::Bad, 0));
        out[0] = (Kind::Special, 0);
        out[NO_ROUTE as usize] = (Kind::Special, 0);
        let sid = SwitchId(s as u32);
        let Some(ls) = self.level[s] else {
            return;
        };
        for (pn, p) in self.fabric.switch(sid).external_ports() {
            if pn == 0 || pn == NO_ROUTE {
                continue;
            }
            out[pn as usize] = match p.remote {
                Remote::EndPort(ep) if self.fabric.end_port_live(ep) => (Kind::End, 0),
                Remote::Switch { .. } => match self.fabric.switch_link_live(sid, pn) {
                    Some((t, _)) => match self.level[t.idx()] {
                        Some(lt) if lt < ls => (Kind::Down, t.0),
                        Some(lt) if lt > ls => (Kind::Up, t.0),
                        _ => (Kind::Bad, 0),
                    },
                    None => (Kind::Bad, 0),
                },
                _ => (Kind::Bad, 0),
            };
        }
    }

    /// The proved runs: `out[i]` is set when every required switch (module doc) of run `i`'s
    /// component has a good entry for every destination of the run. `sources[s]`: switch `s`
    /// has live end ports.
    pub fn prove(&self, lfts: &Lfts, comp: &[u32], sources: &[bool], runs: &[Run]) -> Vec<bool> {
        let n = self.fabric.num_switches().min(lfts.num_switches());
        let nw = runs.len().div_ceil(64);
        let bits: Vec<u32> = runs.iter().map(|r| self.tidx[r.target as usize]).collect();
        // Spans of up to 64 runs whose targets have consecutive bits: switch LIDs at
        // consecutive LIDs, or end-port runs of one step that continue each other's LIDs
        // (consecutive leaves). One test per span on a row where every required entry goes
        // up (or none is required); else each run is tested.
        let mut items: Vec<(usize, usize)> = Vec::with_capacity(runs.len());
        let mut i = 0;
        while i < runs.len() {
            let mut j = i + 1;
            if runs[i].ports.is_empty() && bits[i] != u32::MAX {
                while j < runs.len()
                    && j - i < 64
                    && runs[j].ports.is_empty()
                    && runs[j].comp == runs[i].comp
                    && runs[j].lid == runs[i].lid + (j - i) as u32
                    && bits[j] == bits[i] + (j - i) as u32
                {
                    j += 1;
                }
            } else if bits[i] != u32::MAX {
                let step = runs[i].step;
                while j < runs.len()
                    && j - i < 64
                    && !runs[j].ports.is_empty()
                    && runs[j].comp == runs[i].comp
                    && runs[j].step == step
                    && runs[j].lid == runs[j - 1].lid + runs[j - 1].len * step
                    && bits[j] == bits[i] + (j - i) as u32
                {
                    j += 1;
                }
            }
            items.push((i, j));
            i = j;
        }
        // Per row: the runs with a bad entry (a bitset over runs), OR-ed over the rows.
        let bad = (0..n)
            .into_par_iter()
            .fold(
                || (vec![0u64; nw], Row::default()),
                |(mut bad, mut sc), s| {
                    if comp[s] == u32::MAX {
                        return (bad, sc);
                    }
                    self.row_tables(s, &mut sc);
                    let row = lfts.row(SwitchId(s as u32));
                    let (source, cs) = (sources[s], comp[s]);
                    for &(i, j) in &items {
                        if runs[i].comp != cs || (j - i > 1 && self.span_good(row, &runs[i..j], bits[i], source, &sc)) {
                            continue;
                        }
                        for (ri, (r, &b)) in runs[i..j].iter().zip(&bits[i..j]).enumerate() {
                            if (source || bit(&sc.ud, b)) && !self.row_good(s, row, r, b, &sc) {
                                let ri = i + ri;
                                bad[ri / 64] |= 1 << (ri % 64);
                            }
                        }
                    }
                    (bad, sc)
                },
            )
            .map(|(b, _)| b)
            .reduce(
                || vec![0u64; nw],
                |mut a, b| {
                    a.iter_mut().zip(&b).for_each(|(x, y)| *x |= y);
                    a
                },
            );
        // Every switch of a component must have been seen: a table without a row for a live
        // switch proves nothing.
        let short = self.fabric.num_switches() > n;
        (0..runs.len())
            .map(|ri| !short && bits[ri] != u32::MAX && bad[ri / 64] & (1 << (ri % 64)) == 0)
            .collect()
    }

    /// Fills `sc` for switch `s`: its port table, `down[s]`, `ud[s]`, the targets every up
    /// neighbour reaches, and the number of up ports below each port number.
    fn row_tables(&self, s: usize, sc: &mut Row) {
        let w = self.w;
        self.ports(s, &mut sc.ports);
        sc.down.clear();
        sc.down.extend_from_slice(&self.down[s * w..(s + 1) * w]);
        sc.ud.clear();
        sc.ud.extend_from_slice(&self.ud[s * w..(s + 1) * w]);
        sc.up_ud.clear();
        sc.up_ud.resize(w, u64::MAX);
        sc.up_before.clear();
        sc.up_before.push(0);
        let mut seen = u32::MAX;
        for &(k, t) in &sc.ports {
            let last = *sc.up_before.last().expect("not empty");
            sc.up_before.push(last + u16::from(k == Kind::Up));
            if k == Kind::Up && t != seen {
                seen = t;
                let t = t as usize;
                sc.up_ud
                    .iter_mut()
                    .zip(&self.ud[t * w..(t + 1) * w])
                    .for_each(|(a, b)| *a &= b);
            }
        }
        if sc.up_before.last() == Some(&0) {
            sc.up_ud.iter_mut().for_each(|x| *x = 0);
        }
    }

    /// Whether the runs of `span` (switch LIDs at consecutive LIDs, or end-port runs of one
    /// step continuing each other's LIDs; consecutive target bits from `b0`, at most 64) are
    /// all good on this row by one test: every entry of the span is an up port, and every
    /// required run's target is not below and every up neighbour reaches it (`false`: test
    /// each run). Sound for end-port runs too: on a row that is not a run's target, an entry
    /// is good exactly when its step is ([`Proof::row_good`]), and the row of a required
    /// target has its bit in `down[s]`, which fails the test.
    fn span_good(&self, row: &[u8], span: &[Run], b0: u32, source: bool, sc: &Row) -> bool {
        let len = span.len();
        let lid = span[0].lid as usize;
        let all = if len == 64 { u64::MAX } else { (1u64 << len) - 1 };
        let req = if source { all } else { bits_at(&sc.ud, b0, len) };
        if req == 0 {
            return true;
        }
        let last = span[len - 1].lid as usize + (span[len - 1].len as usize - 1) * span[0].step as usize;
        let minmax = |(a, b): (u8, u8), &p: &u8| (a.min(p), b.max(p));
        let (lo, hi) = if span[0].step == 1 || last == lid {
            row[lid..=last].iter().fold((u8::MAX, 0u8), minmax)
        } else {
            row[lid..=last]
                .iter()
                .step_by(span[0].step as usize)
                .fold((u8::MAX, 0u8), minmax)
        };
        if lo == 0 || hi == NO_ROUTE {
            return false;
        }
        let (lo, hi) = (lo as usize, hi as usize);
        usize::from(sc.up_before[hi + 1] - sc.up_before[lo]) == hi + 1 - lo
            && bits_at(&sc.down, b0, len) & req == 0
            && bits_at(&sc.up_ud, b0, len) & req == req
    }

    /// Whether every entry of `row` (switch `s`) for run `r` (target bit `b`) is good.
    fn row_good(&self, s: usize, row: &[u8], r: &Run, b: u32, sc: &Row) -> bool {
        let (lid, step, len) = (r.lid as usize, r.step as usize, r.len as usize);
        let step_ok = |p: usize| {
            let (kind, t) = sc.ports[p];
            match kind {
                Kind::Down => bit(&self.down[t as usize * self.w..], b),
                Kind::Up => !bit(&sc.down, b) && (bit(&sc.up_ud, b) || bit(&self.ud[t as usize * self.w..], b)),
                Kind::Bad | Kind::Special | Kind::End => false,
            }
        };
        if r.ports.is_empty() {
            // A switch LID: port 0 here, else a good step.
            let p = row[lid];
            return if p == 0 {
                s as u32 == r.target
            } else {
                step_ok(p as usize)
            };
        }
        if s as u32 == r.target {
            // The destinations' leaf: each one's own port.
            return (0..len).all(|j| row[lid + j * step] == r.ports[j]);
        }
        let end = lid + (len - 1) * step + 1;
        // First the range of ports used (vectorised with step 1): all good when every port of
        // the range is (up ports only towards a target not below that every up neighbour
        // reaches: one test).
        let (lo, hi) = if step == 1 {
            row[lid..end]
                .iter()
                .fold((u8::MAX, 0u8), |(a, b), &p| (a.min(p), b.max(p)))
        } else {
            row[lid..end]
                .iter()
                .step_by(step)
                .fold((u8::MAX, 0u8), |(a, b), &p| (a.min(p), b.max(p)))
        };
        if lo >= 1 && hi < NO_ROUTE {
            let (lo, hi) = (lo as usize, hi as usize);
            let ups = usize::from(sc.up_before[hi + 1] - sc.up_before[lo]);
            if ups == hi + 1 - lo && !bit(&sc.down, b) && bit(&sc.up_ud, b) {
                return true;
            }
            if (lo..=hi).all(step_ok) {
                return true;
            }
        }
        // Else the ports used, exactly: ports 1..=64 as bits 0..=63; anything else shows in
        // `over`.
        let (mut mask, mut over) = (0u64, 0u32);
        for &p in row[lid..end].iter().step_by(step) {
            let i = u32::from(p.wrapping_sub(1));
            mask |= 1u64 << (i & 63);
            over |= i;
        }
        if over >= 64 {
            return row[lid..end].iter().step_by(step).all(|&p| step_ok(p as usize));
        }
        while mask != 0 {
            let p = mask.trailing_zeros() as usize + 1;
            if !step_ok(p) {
                return false;
            }
            mask &= mask - 1;
        }
        true
    }
}

/// Bit `b` of a bitset (`false` for `u32::MAX`, "no bit").
#[inline]
fn bit(row: &[u64], b: u32) -> bool {
    b != u32::MAX && row[b as usize / 64] & (1 << (b % 64)) != 0
}

/// Bits `b0..b0 + len` of a bitset (`len` ≤ 64) as the low bits of a word.
#[inline]
fn bits_at(row: &[u64], b0: u32, len: usize) -> u64 {
    let (wi, sh) = (b0 as usize / 64, b0 % 64);
    let mut v = row[wi] >> sh;
    if sh != 0 && wi + 1 < row.len() {
        v |= row[wi + 1] << (64 - sh);
    }
    if len == 64 {
        v
    } else {
        v & ((1u64 << len) - 1)
    }
}

/// Per-row tables of [`Proof::prove`] (reused across rows).
#[derive(Default)]
struct Row {
    ports: PortTable,
    down: Vec<u64>,
    ud: Vec<u64>,
    /// AND of `ud[t]` over the up neighbours `t` (empty set without any).
    up_ud: Vec<u64>,
    /// `up_before[p]`: up ports among port numbers `0..p`.
    up_before: Vec<u16>,
}

/// Runs of `dests` (`(LID, target switch, leaf port or `None` for a switch LID, component,
/// set)`, sorted by LID): consecutive end-port destinations of one target and component whose
/// LIDs follow with a constant step (with LMC 1 a leaf's base and escape LIDs alternate, so
/// both sets share a run); a switch LID is a run of its own. Returns the runs and, per run,
/// the indices of its destinations in `dests`.
pub(crate) fn runs(dests: &[(Lid, u32, Option<PortNum>, u32, usize)]) -> (Vec<Run>, Vec<Vec<u32>>) {
    let mut runs: Vec<Run> = Vec::new();
    let mut members: Vec<Vec<u32>> = Vec::new();
    for (i, &(lid, target, port, comp, _)) in dests.iter().enumerate() {
        if let (Some(r), Some(port)) = (runs.last_mut(), port) {
            let last = r.lid + (r.len - 1) * r.step;
            let fits = !r.ports.is_empty()
                && r.target == target
                && r.comp == comp
                && lid > last
                && (r.len == 1 || lid - last == r.step);
            if fits {
                if r.len == 1 {
                    r.step = lid - last;
                }
                r.len += 1;
                r.ports.push(port);
                members.last_mut().expect("a run").push(i as u32);
                continue;
            }
        }
        runs.push(Run {
            lid,
            step: 1,
            len: 1,
            target,
            ports: port.into_iter().collect(),
            comp,
        });
        members.push(vec![i as u32]);
    }
    (runs, members)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::check::{destination_check_both, destination_checks, Opts};
    use crate::hops::components;
    use crate::testutil::*;
    use crate::{EngineKind, LidSet};

    /// Both sets checked with the proof (levels `level`, `down[·]` over every switch up to
    /// `all` switches) and without it; then with the proof and without the switch LIDs.
    fn both_ways(
        f: &Fabric,
        lids: &crate::LidPlan,
        lfts: &Lfts,
        level: &[Option<u32>],
        all: usize,
    ) -> (
        Vec<crate::check::DestinationCheck>,
        Vec<crate::check::DestinationCheck>,
        Vec<crate::check::DestinationCheck>,
    ) {
        let sets: &[LidSet] = if lids.lmc == 0 {
            &[LidSet::Base]
        } else {
            &[LidSet::Base, LidSet::Escape]
        };
        let hint = Hint {
            level,
            all_targets_max: all,
        };
        (
            destination_checks(f, lids, lfts, sets, Opts::ALL, Some(hint)),
            destination_checks(f, lids, lfts, sets, Opts::ALL, None),
            destination_checks(
                f,
                lids,
                lfts,
                sets,
                Opts {
                    wide: false,
                    switch_lids: false,
                },
                Some(hint),
            ),
        )
    }

    /// Every run of a routing, and which the proof covers.
    fn proved(f: &Fabric, lids: &crate::LidPlan, lfts: &Lfts, level: &[Option<u32>]) -> (usize, usize) {
        let comp = components(f);
        let mut dests = Vec::new();
        for (si, set) in [LidSet::Base, LidSet::Escape]
            .into_iter()
            .enumerate()
            .take(usize::from(lids.lmc) + 1)
        {
            for e in f.end_port_ids().filter(|&e| f.end_port_live(e)) {
                let (leaf, port) = f.end_port(e).attach.unwrap();
                dests.push((
                    lids.base_lid(e) + set.offset(lids),
                    leaf.0,
                    Some(port),
                    comp[leaf.idx()],
                    si,
                ));
            }
            if set == LidSet::Base {
                for t in f.switch_ids().filter(|&t| f.switch(t).up) {
                    dests.push((lids.switch_lid(t), t.0, None, comp[t.idx()], si));
                }
            }
        }
        dests.sort_unstable();
        let (runs, _) = runs(&dests);
        let leaves: Vec<u32> = runs.iter().map(|r| r.target).collect();
        let mut sources = vec![false; f.num_switches()];
        for e in f.end_port_ids().filter(|&e| f.end_port_live(e)) {
            sources[f.end_port(e).attach.unwrap().0.idx()] = true;
        }
        let p = Proof::new(f, Hint::new(level), &leaves).prove(lfts, &comp, &sources, &runs);
        (p.iter().filter(|&&x| x).count(), runs.len())
    }

    /// On a complete PGFT, Dmodc's base LIDs and switch LIDs and the Up*/Down* escape LIDs
    /// are all proved with the ranking (nothing is walked); a damaged entry un-proves its run.
    #[test]
    fn complete_fat_tree_routes_are_proved_without_walks() {
        let t = pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]);
        let f = &t.fabric;
        for lmc in [0, 1] {
            let (r, lids, mut lfts) = routed(f, EngineKind::Dmodc, lmc);
            let (ok, all) = proved(f, &lids, &lfts, &r.level);
            assert_eq!(ok, all, "lmc {lmc}");
            assert!(all > 20);
            // One wrong entry on a leaf (towards another leaf's end port).
            let e = f.end_port_ids().last().unwrap();
            let first_leaf = f.end_port(fabric_topology::EndPortId(0)).attach.unwrap().0;
            lfts.set(first_leaf, lids.base_lid(e), NO_ROUTE);
            let (ok2, _) = proved(f, &lids, &lfts, &r.level);
            assert_eq!(ok2, all - 1, "lmc {lmc}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// The check with the proof gives exactly the walk's result, on random degraded PGFTs
        /// routed by several engines, with random damage (wrong ports, holes, port 0, loops),
        /// for the ranking's levels, random levels and no levels, with `down[·]` over every
        /// switch or over the leaves only.
        #[test]
        fn proof_gives_the_walks_result(
            shape in 0usize..3,
            links in 0usize..14,
            switches in 0usize..3,
            seed in any::<u64>(),
            lmc in 0u8..2,
            engine in 0usize..3,
            damage in prop_oneof![2 => Just(0usize), 3 => 1usize..60],
            levels in 0usize..4,
            all in prop_oneof![Just(0usize), Just(usize::MAX)],
        ) {
            let t = match shape {
                0 => pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]),
                1 => pgft(&[2, 3, 2, 3], &[1, 2, 3, 2], &[1, 1, 2, 1]),
                _ => pgft(&[4, 4], &[1, 4], &[1, 2]),
            };
            let f = degrade(&t.fabric, links, switches, seed);
            let kind = [EngineKind::Dmodc, EngineKind::UpDown, EngineKind::Ftree][engine];
            let (r, lids, mut lfts) = routed(&f, kind, lmc);
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            for _ in 0..damage {
                let s = SwitchId(rng.gen_range(0..f.num_switches() as u32));
                let lid = rng.gen_range(1..=lids.top());
                let port = match rng.gen_range(0..5) {
                    0 => NO_ROUTE,
                    1 => 0,
                    _ => rng.gen_range(1..=f.switch(s).nports),
                };
                lfts.set(s, lid, port);
            }
            let level: Vec<Option<u32>> = match levels {
                0 => r.level.clone(),
                1 => bfs_rank(&f).into_iter().rev().collect(),
                2 => (0..f.num_switches()).map(|_| rng.gen_range(0u32..4).checked_sub(1)).collect(),
                _ => Vec::new(),
            };
            let (with, without, no_switch_lids) = both_ways(&f, &lids, &lfts, &level, all);
            prop_assert_eq!(&with, &without);
            // Leaving the switch LIDs out changes nothing but their count (check_and_repair on
            // a fat-tree, which zeroes that count).
            let mut want = without.clone();
            want[0].switch_unreachable_pairs = 0;
            prop_assert_eq!(&no_switch_lids, &want);
            if lmc == 1 && all > 0 {
                let (b, e) = destination_check_both(&f, &lids, &lfts);
                prop_assert_eq!(&with, &vec![b, e]);
            }
        }
    }
}
