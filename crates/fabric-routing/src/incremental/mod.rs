//! Incremental re-routing after a fault (issue #17): the routing of a new snapshot computed
//! from the previous generation's [`RoutingState`] by re-filling only the LFT rows whose inputs
//! changed, and re-checking validity only for the entries that changed. The result is
//! byte-identical to [`route_all_checked`] on the new snapshot (tables and [`RoutingCheck`],
//! timings aside); whenever that cannot be guaranteed the whole snapshot is routed, and
//! [`RoutePath`] says which path was taken and why.
//!
//! Why row granularity is exact: Dmodc (thesis §4.2, eqs. 4.5, 4.7–4.8) fills row `s` from
//! `s`'s port groups, its up/down neighbours, its divider `Π_s`, its own cost and downcost rows
//! (Alg. 5), its neighbours' cost rows (the closer groups `C`) and the destinations in
//! topological NID order (Alg. 7). The same holds for the escape LIDs (Up*/Down*'s legal
//! paths with Alg. 12's selection, [`crate::updown::route_escape`]) and, with the
//! reachability bitsets in place of costs, for the switch LIDs. The preprocessing (dividers, NIDs,
//! bitsets) is recomputed in full, the costs only where their inputs changed (`prep::costs_from`), the
//! escape's Up*/Down* preparation from kept hop counts and, on fat-trees, proved equal to the
//! base's (module `escape`); all is compared with the previous one: a row is re-filled when one of
//! its inputs differs. Global inputs (the LID plan, the NIDs and the leaf list, the node order
//! of the escape routing) must be unchanged, else every row of that LID set is re-filled.
//!
//! Validity ([`crate::check::destination_check`]'s verdict) is re-established from the
//! previous one: when the previous routing was the engine's own (no fallback) and valid, the
//! live end ports and their components are unchanged, and every switch whose entry for a
//! destination changed delivers to it through the new tables, then every connected source
//! still does (its walk either meets such a switch or follows exactly its previous, live,
//! route). Otherwise — and whenever the snapshot is not of a fat-tree shape, where the full
//! check also checks and repairs the switch LIDs — the full check (and repair) runs on the tables.
//!
//! Only Dmodc without node groups is incremental (it is the default engine); every other
//! engine is routed in full (`RoutePath::Full`).

mod dirty;
mod escape;
#[cfg(test)]
mod escape_tests;
mod recheck;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Instant;

use fabric_ranking::Ranking;
use fabric_topology::Fabric;

use crate::engine::{check_lfts, validate_context, LidSet, RoutingContext, RoutingError};
use crate::fallback::{check_and_repair, route_all_checked, Fallback, RoutingCheck};
use crate::fill::{
    fill_dmodc_fresh, fill_end_port_rows, fill_prepared, Prepared, Select, ROW_ALL, ROW_LEAVES, ROW_SKIP,
};
use crate::groups::NodeGroups;
use crate::lft::Lfts;
use crate::lid::LidPlan;
use crate::route::EngineKind;
use crate::swlid::{fill_switch_lid_rows, SwReach};
use crate::updown::EscapePrep;

/// What a generation keeps for the next one to be routed incrementally (Dmodc, no node
/// groups): the snapshot, the LID plan, the preprocessing of both LID sets and the tables.
pub struct RoutingState {
    fabric: Arc<Fabric>,
    lids: LidPlan,
    base: Prepared,
    reach: SwReach,
    /// The escape's preparation (LMC ≥ 1): the base's ([`EscapePrep::SameAsBase`]) or its own.
    escape: Option<EscapePrep>,
    /// The hop counts of the escape routing's root detection.
    hops: Option<escape::HopCounts>,
    lfts: Arc<Lfts>,
    check: RoutingCheck,
    /// Per end port: the component label of [`recheck::end_port_components`].
    components: Vec<u32>,
    /// The tables of the generation before this one, kept to be recycled as the next
    /// generation's target ([`recycle`]): taken (once) by the next incremental routing, which
    /// re-uses the allocation when nothing else holds it and copies into it only the rows of
    /// [`RoutingState::touched`]. A routing that takes it while a copy is promised or being made
    /// ([`RoutingState::reserve_spare`], [`RoutingState::prepare_spare`]) waits for the copy.
    spare: std::sync::Mutex<Spare>,
    /// Signalled when a promised copy is made or abandoned.
    spare_done: std::sync::Condvar,
    /// The spare is a copy of this generation's own tables ([`RoutingState::prepare_spare`]):
    /// the next routing copies no row into it.
    spare_is_copy: std::sync::atomic::AtomicBool,
    /// Which entries of this generation's tables may differ from the spare's (`None`: any may,
    /// e.g. after a full routing).
    touched: Option<Touched>,
}

/// The spare tables of a [`RoutingState`] and the state of their preparation.
#[derive(Default)]
struct Spare {
    lfts: Option<Arc<Lfts>>,
    /// A copy of the generation's own tables is promised or being made: a routing taking the
    /// spare waits until it is done.
    preparing: bool,
    /// The copy is being made (by [`RoutingState::prepare_spare`]).
    copying: bool,
    /// Taken by a routing: nothing is prepared any more.
    taken: bool,
}

impl Spare {
    fn holding(lfts: Option<Arc<Lfts>>) -> std::sync::Mutex<Spare> {
        std::sync::Mutex::new(Spare {
            lfts,
            ..Spare::default()
        })
    }
}

/// A promised spare ([`RoutingState::reserve_spare`]): [`SpareJob::run`] makes the copy; dropped
/// without running, the promise is withdrawn (a routing waiting for it copies itself).
#[must_use = "a reserved spare makes the next routing wait until it is run or dropped"]
pub struct SpareJob {
    state: Option<Arc<RoutingState>>,
}

impl SpareJob {
    /// Makes the copy (the caller's thread and the rayon pool it runs in). Returns whether it
    /// made it.
    pub fn run(mut self) -> bool {
        self.state.take().is_some_and(|s| s.prepare_spare())
    }
}

impl Drop for SpareJob {
    fn drop(&mut self) {
        if let Some(s) = self.state.take() {
            let mut g = s.lock_spare();
            if !g.copying {
                g.preparing = false;
                s.spare_done.notify_all();
            }
        }
    }
}

/// Which entries of a generation's tables may differ from the previous generation's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Touched {
    /// Per switch id: [`ROW_SKIP`] (equal), [`ROW_LEAVES`] (may differ at `lids` only) or
    /// [`ROW_ALL`].
    rows: Vec<u8>,
    /// The LIDs of the [`ROW_LEAVES`] rows, sorted.
    lids: Vec<fabric_topology::Lid>,
}

impl Touched {
    /// The rows re-filled by the base, escape and switch-LID passes: the LIDs of the leaves
    /// the partial base and escape re-fills selected, and every switch LID when a switch-LID
    /// row was re-filled.
    fn new(
        fabric: &Fabric,
        lids: &LidPlan,
        base: (&Prepared, &dirty::Refill),
        escape: Option<(&Prepared, &dirty::Refill)>,
        sw_rows: &[bool],
    ) -> Self {
        let ns = fabric.num_switches();
        let mut rows = base.1.rows.clone();
        let mut out = Vec::new();
        let mut add_leaves = |p: &Prepared, r: &dirty::Refill, off: fabric_topology::Lid| {
            for &li in &r.leaves {
                let sw = p.o.order[p.o.leaves[li as usize] as usize];
                out.extend(
                    fabric
                        .attached_end_ports(sw)
                        .iter()
                        .map(|&e| lids.base_lid(e))
                        .filter(|&b| b != 0)
                        .map(|b| b + off),
                );
            }
        };
        add_leaves(base.0, base.1, 0);
        if let Some((p, r)) = escape {
            rows.iter_mut().zip(&r.rows).for_each(|(a, &b)| *a = (*a).max(b));
            add_leaves(p, r, LidSet::Escape.offset(lids));
        }
        if sw_rows.contains(&true) {
            rows.iter_mut()
                .zip(sw_rows)
                .for_each(|(a, &b)| *a = (*a).max(if b { ROW_LEAVES } else { ROW_SKIP }));
            out.extend(fabric.switch_ids().map(|s| lids.switch_lid(s)).filter(|&l| l != 0));
        }
        out.sort_unstable();
        out.dedup();
        debug_assert_eq!(rows.len(), ns);
        Touched { rows, lids: out }
    }

    /// Per switch id: whether the row may differ.
    fn any(&self) -> Vec<bool> {
        self.rows.iter().map(|&r| r != ROW_SKIP).collect()
    }
}

impl RoutingState {
    /// The tables are the engine's own (no fallback spliced into them): rows can be reused.
    fn pure(&self) -> bool {
        self.check.fallback == Fallback::None
    }

    /// The preparation the escape LIDs were filled with.
    fn escape(&self) -> Option<&Prepared> {
        escape_of(&self.escape, &self.base)
    }
}

/// The preparation of the escape LIDs: `base` when it was proved equal to Up*/Down*'s.
fn escape_of<'a>(e: &'a Option<EscapePrep>, base: &'a Prepared) -> Option<&'a Prepared> {
    match e {
        None => None,
        Some(EscapePrep::SameAsBase) => Some(base),
        Some(EscapePrep::Own(p)) => Some(p),
    }
}

impl std::fmt::Debug for RoutingState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutingState")
            .field("switches", &self.fabric.num_switches())
            .field("top", &self.lids.top())
            .field("valid", &self.check.valid)
            .finish_non_exhaustive()
    }
}

impl RoutingState {
    /// The tables of the generation (shared, not copied).
    pub fn lfts(&self) -> &Arc<Lfts> {
        &self.lfts
    }

    /// After a full routing there is no spare (or one any row of which may differ): the next
    /// incremental routing would copy every row, into fresh memory when there is no spare
    /// (~0.5 GB of first-touch page faults at 34 992 nodes, LMC 1, seconds on the fault path).
    /// This makes the spare a copy of this generation's tables now (call it off the fault
    /// path, e.g. while the generation is uploaded), so that the next routing copies no row.
    /// Does nothing when a spare of the generation before is kept with the rows that differ
    /// from it (after an incremental routing: a few rows to copy), when the copy is made or
    /// being made, or when the spare was taken. Returns whether it made the copy.
    pub fn prepare_spare(&self) -> bool {
        use std::sync::atomic::Ordering;
        if self.touched.is_some() {
            return false;
        }
        {
            let mut g = self.lock_spare();
            if g.taken || g.copying || self.spare_is_copy.load(Ordering::Acquire) {
                return false;
            }
            g.copying = true;
            g.preparing = true;
        }
        let copy = Arc::new(copy_tables(&self.lfts));
        let mut g = self.lock_spare();
        g.lfts = Some(copy);
        self.spare_is_copy.store(true, Ordering::Release);
        g.copying = false;
        g.preparing = false;
        self.spare_done.notify_all();
        true
    }

    /// Promises the spare [`RoutingState::prepare_spare`] would make, to be made by the
    /// returned job (e.g. on a blocking thread): from now on the next routing from this state
    /// waits for the copy instead of copying every row itself, however early it starts.
    /// `None` when there is nothing to prepare.
    pub fn reserve_spare(self: &Arc<Self>) -> Option<SpareJob> {
        if self.touched.is_some() {
            return None;
        }
        let mut g = self.lock_spare();
        if g.taken || g.preparing || self.spare_is_copy.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        g.preparing = true;
        Some(SpareJob {
            state: Some(self.clone()),
        })
    }

    fn lock_spare(&self) -> std::sync::MutexGuard<'_, Spare> {
        self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Why the whole snapshot was routed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FullReason {
    /// No previous state (first generation, or the previous one kept none).
    NoPrevious,
    /// The engine is not Dmodc, or node groups are in force.
    Engine,
    /// The LID plan changed.
    LidPlan,
    /// The switch or end-port count changed (another fabric).
    Shape,
    /// The topological NIDs or the leaf list of the base routing changed.
    Nids,
    /// The previous tables hold fallback (Up*/Down*) entries.
    Repaired,
    /// LMC ≥ 2: the plan has several layer offsets, which the incremental path does not re-fill
    /// (every generation is routed in full, [`crate::route_all`] repeating offset 0).
    Lmc,
}

impl FullReason {
    /// Short name for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            FullReason::NoPrevious => "no-previous",
            FullReason::Engine => "engine",
            FullReason::LidPlan => "lid-plan",
            FullReason::Shape => "shape",
            FullReason::Nids => "nids",
            FullReason::Repaired => "previous-repaired",
            FullReason::Lmc => "lmc",
        }
    }
}

/// Which path [`route_checked_incremental`] took.
#[derive(Clone, Debug, PartialEq)]
pub enum RoutePath {
    /// Every row routed ([`route_all_checked`]).
    Full(FullReason),
    /// Only the rows whose inputs changed were re-filled.
    Incremental(IncrementalStats),
}

impl RoutePath {
    /// `incremental` or `full:<reason>`.
    pub fn name(&self) -> String {
        match self {
            RoutePath::Full(r) => format!("full:{}", r.name()),
            RoutePath::Incremental(_) => "incremental".to_string(),
        }
    }
}

/// What the incremental path did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IncrementalStats {
    /// Rows re-filled: base end-port LIDs, switch LIDs, escape LIDs.
    pub base_rows: usize,
    /// Of `base_rows`, those re-filled only for the destinations of the leaves whose cost
    /// columns changed (the switch kept its neighbourhood and divider).
    pub base_partial_rows: usize,
    pub switch_lid_rows: usize,
    pub escape_rows: usize,
    /// The escape LIDs' global inputs changed: every escape row was re-filled.
    pub escape_all: bool,
    /// LFT entries that differ from the previous generation's.
    pub changed_entries: u64,
    /// Destination LIDs whose changed entries were walked.
    pub checked_lids: u64,
    /// The incremental check could not conclude: the full check (and repair) ran.
    pub full_check: bool,
    /// Rows copied from the previous tables into the target: every row for a fresh copy, only
    /// the previous generation's changed rows when its predecessor's allocation was recycled.
    pub copied_rows: usize,
    /// Breadth-first searches run for the escape routing's root detection (one per live leaf
    /// whose hop counts changed).
    pub hop_searches: usize,
    /// Milliseconds: preparation of the base LIDs (costs, dividers, NIDs, switch-LID bitsets)
    /// and of the escape LIDs (Up*/Down*), dirty rows, copy of the previous tables, re-fill,
    /// changed entries and check.
    pub times: StageTimes,
}

/// Where the time of an incremental routing goes (milliseconds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageTimes {
    pub prep_ms: f64,
    pub escape_prep_ms: f64,
    pub dirty_ms: f64,
    pub copy_ms: f64,
    pub fill_ms: f64,
    pub check_ms: f64,
}

/// The routing of one snapshot with the state for the next one.
#[derive(Debug)]
pub struct Rerouted {
    /// The tables (shared with [`Rerouted::state`]).
    pub lfts: Arc<Lfts>,
    /// Base LIDs and switch LIDs (preparation included), milliseconds.
    pub base_ms: f64,
    /// Escape LIDs (preparation included), milliseconds.
    pub escape_ms: f64,
    /// Same as [`route_all_checked`]'s (timings aside).
    pub check: RoutingCheck,
    /// For the next generation (`None` when the engine is not incremental).
    pub state: Option<RoutingState>,
    /// Incremental path: per switch id, whether its row may differ from the previous
    /// generation's ([`RoutingState::lfts`]); the others are equal by construction. `None`
    /// after a full routing (or a fallback repair, which may touch any row).
    pub touched: Option<Vec<bool>>,
    pub path: RoutePath,
}

/// Routes and checks `fabric` like [`route_all_checked`] (same bytes, same check), from
/// `previous` when it allows (module documentation).
pub fn route_checked_incremental(
    fabric: &Arc<Fabric>,
    ranking: &Ranking,
    lids: &LidPlan,
    kind: EngineKind,
    groups: Option<&NodeGroups>,
    previous: Option<&RoutingState>,
) -> Result<Rerouted, RoutingError> {
    let ctx = RoutingContext { fabric, ranking, lids };
    if kind != EngineKind::Dmodc || groups.is_some() || lids.layer_offsets() > 1 {
        let reason = if kind != EngineKind::Dmodc || groups.is_some() {
            FullReason::Engine
        } else {
            FullReason::Lmc
        };
        let (routed, check) = route_all_checked(&ctx, kind, groups)?;
        return Ok(Rerouted {
            lfts: Arc::new(routed.lfts),
            base_ms: routed.base_ms,
            escape_ms: routed.escape_ms,
            check,
            state: None,
            touched: None,
            path: RoutePath::Full(reason),
        });
    }
    validate_context(&ctx)?;
    let t = Instant::now();
    let base = Prepared::new_from(fabric, &ranking.level, previous.map(|p| &p.base));
    let reach = SwReach::new(&base.o);
    let prep_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let prev_hops = previous.and_then(|p| p.hops.as_ref().map(|h| (&*p.fabric, h)));
    let (hops, hop_searches) = if lids.lmc >= 1 {
        let (h, n) = escape::HopCounts::new(fabric, prev_hops);
        (Some(h), n)
    } else {
        (None, 0)
    };
    let escape = hops.as_ref().map(|h| escape::prepare(fabric, h, &base));
    let escape_prep_ms = t.elapsed().as_secs_f64() * 1e3;
    let reason = match previous {
        None => Some(FullReason::NoPrevious),
        Some(p) if p.fabric.num_switches() != fabric.num_switches() => Some(FullReason::Shape),
        Some(p) if p.fabric.num_end_ports() != fabric.num_end_ports() => Some(FullReason::Shape),
        Some(p) if p.lids != *lids => Some(FullReason::LidPlan),
        Some(p) if !p.pure() => Some(FullReason::Repaired),
        Some(p) if !dirty::same_destinations(&p.fabric, &p.base, fabric, &base) => Some(FullReason::Nids),
        Some(_) => None,
    };
    let components = recheck::end_port_components(fabric);
    let (Some(prev), None) = (previous, reason) else {
        let reason = reason.unwrap_or(FullReason::NoPrevious);
        let t = Instant::now();
        // As `route_all` does: one pass that initialises each row and writes the base (and,
        // when their preparation is the base's, the escape) entries, into the allocation of
        // the generation before `previous` when nothing else holds it.
        let spare = previous.and_then(take_spare).and_then(|a| Arc::try_unwrap(a).ok());
        let (ns, top) = (fabric.num_switches(), lids.top());
        let mut lfts = match spare {
            Some(l) => l.recycled(ns, top),
            None => Lfts::unfilled(ns, top),
        };
        let shared = matches!(escape, Some(EscapePrep::SameAsBase));
        fill_dmodc_fresh(&ctx, &base, shared, &mut lfts);
        let base_ms = prep_ms + t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        if let Some(EscapePrep::Own(e)) = &escape {
            crate::engine::check_route_args(&ctx, LidSet::Escape, &lfts)?;
            fill_prepared(&ctx, e, LidSet::Escape, Select::Dmodc, &mut lfts);
        }
        let escape_ms = escape_prep_ms + t.elapsed().as_secs_f64() * 1e3;
        let check = check_and_repair(&ctx, &kind.to_string(), &mut lfts)?;
        let lfts = Arc::new(lfts);
        // The previous tables become the spare when they have the same shape (any row may
        // differ: `touched` is `None`).
        let spare = previous
            .map(|p| p.lfts.clone())
            .filter(|p| p.row_len() == lfts.row_len() && p.num_switches() == lfts.num_switches());
        return Ok(Rerouted {
            lfts: lfts.clone(),
            base_ms,
            escape_ms,
            state: Some(RoutingState {
                fabric: fabric.clone(),
                lids: lids.clone(),
                base,
                reach,
                escape,
                hops,
                lfts,
                check: check.clone(),
                components,
                spare: Spare::holding(spare),
                spare_done: std::sync::Condvar::new(),
                spare_is_copy: std::sync::atomic::AtomicBool::new(false),
                touched: None,
            }),
            check,
            touched: None,
            path: RoutePath::Full(reason),
        });
    };
    // Incremental: which rows to re-fill.
    let t = Instant::now();
    let t_dirty = Instant::now();
    let ns = fabric.num_switches();
    let base_rows = dirty::end_port_rows(&prev.fabric, &prev.base, fabric, &base, true);
    let sw_rows = dirty::switch_lid_rows(&prev.fabric, &prev.base, &prev.reach, fabric, &base, &reach);
    let (escape_rows, escape_all) = match (prev.escape(), escape_of(&escape, &base)) {
        // Both generations fill the escape from the base preparation: the base rows.
        _ if matches!(
            (&prev.escape, &escape),
            (Some(EscapePrep::SameAsBase), Some(EscapePrep::SameAsBase))
        ) =>
        {
            (base_rows.clone(), false)
        }
        (Some(pe), Some(e)) if dirty::same_destinations(&prev.fabric, pe, fabric, e) => {
            (dirty::end_port_rows(&prev.fabric, pe, fabric, e, true), false)
        }
        (_, Some(_)) => (dirty::Refill::all(ns), true),
        _ => (dirty::Refill::none(ns), false),
    };
    let dirty_ms = t_dirty.elapsed().as_secs_f64() * 1e3;
    let t_copy = Instant::now();
    let (mut lfts, copied_rows) = recycle(prev);
    let copy_ms = t_copy.elapsed().as_secs_f64() * 1e3;
    check_lfts(&ctx, &lfts)?;
    fill_end_port_rows(
        fabric,
        lids,
        &base,
        LidSet::Base,
        Select::Dmodc,
        &mut lfts,
        base_rows.sel(),
    );
    fill_switch_lid_rows(fabric, lids, &base.o, &reach, &mut lfts, Some(&sw_rows));
    let base_ms = prep_ms + t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    if let Some(e) = escape_of(&escape, &base) {
        fill_end_port_rows(
            fabric,
            lids,
            e,
            LidSet::Escape,
            Select::Dmodc,
            &mut lfts,
            escape_rows.sel(),
        );
    }
    let escape_ms = escape_prep_ms + t.elapsed().as_secs_f64() * 1e3;
    let touched = Touched::new(
        fabric,
        lids,
        (&base, &base_rows),
        escape_of(&escape, &base).map(|e| (e, &escape_rows)),
        &sw_rows,
    );
    let count = |v: &[bool]| v.iter().filter(|&&b| b).count();
    let mut stats = IncrementalStats {
        base_rows: base_rows.count(),
        base_partial_rows: base_rows.rows.iter().filter(|&&r| r == ROW_LEAVES).count(),
        switch_lid_rows: count(&sw_rows),
        escape_rows: escape_rows.count(),
        escape_all,
        hop_searches,
        copied_rows,
        ..IncrementalStats::default()
    };
    let fill_total = base_ms - prep_ms + escape_ms - escape_prep_ms;
    let t = Instant::now();
    let changed = recheck::changed_entries(&prev.lfts, &lfts, &touched.rows, &touched.lids);
    stats.changed_entries = changed.len() as u64;
    // The incremental check covers end-port LIDs only: when the snapshot is not a fat-tree
    // shape the full check also checks (and repairs) the switch LIDs, so it must run.
    let can_reuse = prev.check.valid
        && prev.components == components
        && !prev.check.switch_lids_checked
        && fabric_ranking::fat_tree_shape(fabric, ranking).fat_tree;
    let concluded = can_reuse && {
        let (ok, lids_walked) = recheck::changed_deliver(fabric, lids, &lfts, &changed);
        stats.checked_lids = lids_walked;
        ok
    };
    let check = if concluded {
        RoutingCheck {
            engine: kind.to_string(),
            check_ms: t.elapsed().as_secs_f64() * 1e3,
            ..prev.check.clone()
        }
    } else {
        stats.full_check = true;
        check_and_repair(&ctx, &kind.to_string(), &mut lfts)?
    };
    stats.times = StageTimes {
        prep_ms,
        escape_prep_ms,
        dirty_ms,
        copy_ms,
        fill_ms: fill_total - dirty_ms - copy_ms,
        check_ms: t.elapsed().as_secs_f64() * 1e3,
    };
    let lfts = Arc::new(lfts);
    let touched = (check.fallback == Fallback::None).then_some(touched);
    let touched_rows = touched.as_ref().map(Touched::any);
    Ok(Rerouted {
        lfts: lfts.clone(),
        base_ms,
        escape_ms,
        state: Some(RoutingState {
            fabric: fabric.clone(),
            lids: lids.clone(),
            base,
            reach,
            escape,
            hops,
            lfts,
            check: check.clone(),
            components,
            spare: Spare::holding(Some(prev.lfts.clone())),
            spare_done: std::sync::Condvar::new(),
            spare_is_copy: std::sync::atomic::AtomicBool::new(false),
            touched,
        }),
        touched: touched_rows,
        check,
        path: RoutePath::Incremental(stats),
    })
}

/// The target tables of an incremental routing from `prev`: a copy of `prev`'s tables, made
/// by recycling the allocation of the generation before `prev` when nothing else holds it (the
/// daemon has dropped that generation once `prev` is installed) and copying into it only the
/// rows that `prev` changed; otherwise a fresh copy. Returns the tables and the number of rows
/// copied. A fresh 35 000-node LMC 1 table set is ~0.5 GB of first-touch page faults; the
/// recycled one costs a few hundred rows.
fn recycle(prev: &RoutingState) -> (Lfts, usize) {
    use rayon::prelude::*;
    let spare = take_spare(prev);
    let from = &*prev.lfts;
    let ns = from.num_switches();
    let Some(mut lfts) = spare
        .and_then(unwrap_soon)
        .filter(|l| l.row_len() == from.row_len() && l.num_switches() == ns)
    else {
        return (copy_tables(from), ns);
    };
    if prev.spare_is_copy.load(std::sync::atomic::Ordering::Acquire) {
        return (lfts, 0);
    }
    let copied = std::sync::atomic::AtomicUsize::new(0);
    lfts.par_rows_mut().enumerate().for_each(|(s, row)| {
        let src = from.row(fabric_topology::SwitchId(s as u32));
        match prev.touched.as_ref().map_or(ROW_ALL, |t| t.rows[s]) {
            ROW_SKIP => return,
            ROW_LEAVES => {
                for &l in &prev.touched.as_ref().expect("partial rows come with LIDs").lids {
                    row[l as usize] = src[l as usize];
                }
            }
            _ => row.copy_from_slice(src),
        }
        copied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    (lfts, copied.into_inner())
}

/// How long [`unwrap_soon`] waits for the other holders of a spare to let it go.
const SPARE_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_millis(1000);

/// The spare's tables once nothing else holds them. Holders are transient (in the daemon: an
/// SA snapshot build or a reader of the generation before still running when the next fault's
/// routing starts), and a fresh copy instead costs ~0.5 GB of first-touch page faults at 34 992
/// nodes (0.7 s on an idle 2-core machine, seconds under load): the routing waits for them up
/// to [`SPARE_RELEASE_WAIT`], then gives the spare up (`None`).
fn unwrap_soon(mut a: Arc<Lfts>) -> Option<Lfts> {
    let t = Instant::now();
    loop {
        match Arc::try_unwrap(a) {
            Ok(l) => return Some(l),
            Err(back) if t.elapsed() < SPARE_RELEASE_WAIT => {
                a = back;
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(_) => return None,
        }
    }
}

/// The spare tables of `prev` (taken: at most one routing recycles them), once a promised
/// copy is made.
fn take_spare(prev: &RoutingState) -> Option<Arc<Lfts>> {
    let mut g = prev.lock_spare();
    while g.preparing {
        g = prev
            .spare_done
            .wait(g)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    g.taken = true;
    g.lfts.take()
}

/// A copy of `from`, rows copied in parallel (rayon): a fresh table is mostly first-touch page
/// faults, which then spread over the worker threads (as in [`Lfts::new`]).
fn copy_tables(from: &Lfts) -> Lfts {
    use rayon::prelude::*;
    let ns = from.num_switches();
    let mut lfts = Lfts::new(ns, (from.row_len().max(1) - 1) as fabric_topology::Lid);
    lfts.par_rows_mut()
        .enumerate()
        .for_each(|(s, row)| row.copy_from_slice(from.row(fabric_topology::SwitchId(s as u32))));
    lfts
}
