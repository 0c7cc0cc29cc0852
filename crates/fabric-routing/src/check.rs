//! Checks of a routing: path walks ([`trace`]), validity (every connected pair of live end
//! ports has a loop-free path through the LFTs that ends at the destination port), deadlock
//! freedom (the channel-dependency graph of each LID set is acyclic, thesis Def. 11 and §1.3.2)
//! and up*-down* conformance to a ranking (those two in `deadlock.rs`, re-exported here).

use rayon::prelude::*;

use fabric_ranking::Ranking;
use fabric_topology::{fmt_guid, EndPortId, Fabric, Lid, PortNum, Remote, SwitchId};

pub use crate::deadlock::{cdg_acyclic, deadlock_free, updown_violations};
use crate::engine::LidSet;
use crate::hops::{components, END};
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::prep::{self, Oriented, INF};
pub use crate::vl::cdg_acyclic_per_layer;
use crate::walk;

/// Where a [`trace`] ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TraceEnd {
    /// Delivered to this end port (through a leaf port).
    EndPort(EndPortId),
    /// Delivered to this switch (LFT entry 0).
    Switch(SwitchId),
}

/// Why a [`trace`] failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("source end port {} is not live", fmt_guid(*.guid))]
    /// The source end port is down or not cabled to a live switch.
    SourceNotLive { ep: EndPortId, guid: u64 },
    #[error("switch {} has no route to LID {lid}", fmt_guid(*.guid))]
    /// A switch on the way has no entry (255) for the LID.
    NoRoute { switch: SwitchId, guid: u64, lid: Lid },
    #[error("switch {} port {port} towards LID {lid} does not lead to a live switch or end port", fmt_guid(*.guid))]
    /// A switch forwards the LID to a port that leads nowhere usable.
    DeadPort {
        switch: SwitchId,
        guid: u64,
        port: PortNum,
        lid: Lid,
    },
    #[error("routing loop towards LID {lid} (switch {} reached again after {hops} hops)", fmt_guid(*.guid))]
    /// The walk went on longer than there are switches.
    Loop {
        switch: SwitchId,
        guid: u64,
        lid: Lid,
        hops: usize,
    },
}

/// Walks the LFTs from end port `src` towards `dlid`. `hops` is cleared, then receives every
/// `(switch, output port)` taken, in order: the switch-to-switch hops, then (when the walk ends
/// at an end port) the leaf port towards it. Allocation-free when `hops` has capacity.
///
/// A walk longer than the number of switches is a loop.
pub fn trace(
    fabric: &Fabric,
    lfts: &Lfts,
    src: EndPortId,
    dlid: Lid,
    hops: &mut Vec<(SwitchId, PortNum)>,
) -> Result<TraceEnd, TraceError> {
    hops.clear();
    let e = fabric.end_port(src);
    let (mut sw, _) = match e.attach {
        Some(a) if fabric.end_port_live(src) => a,
        _ => {
            return Err(TraceError::SourceNotLive {
                ep: src,
                guid: e.port_guid,
            })
        }
    };
    let limit = fabric.num_switches();
    loop {
        let guid = fabric.switch(sw).guid;
        if sw.idx() >= lfts.num_switches() {
            return Err(TraceError::NoRoute {
                switch: sw,
                guid,
                lid: dlid,
            });
        }
        let port = lfts.get(sw, dlid);
        if port == 0 {
            return Ok(TraceEnd::Switch(sw));
        }
        if port == NO_ROUTE {
            return Err(TraceError::NoRoute {
                switch: sw,
                guid,
                lid: dlid,
            });
        }
        if hops.len() >= limit {
            return Err(TraceError::Loop {
                switch: sw,
                guid,
                lid: dlid,
                hops: hops.len(),
            });
        }
        hops.push((sw, port));
        let dead = TraceError::DeadPort {
            switch: sw,
            guid,
            port,
            lid: dlid,
        };
        match fabric.switch(sw).ports.get(port as usize).map(|p| p.remote) {
            Some(Remote::EndPort(ep)) if fabric.end_port_live(ep) => return Ok(TraceEnd::EndPort(ep)),
            Some(Remote::Switch { .. }) => match fabric.switch_link_live(sw, port) {
                Some((next, _)) => sw = next,
                None => return Err(dead),
            },
            _ => return Err(dead),
        }
    }
}

/// Result of [`validity`] / [`validity_set`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValidityReport {
    /// No connected pair of live end ports is unreachable, in any checked LID set.
    pub valid: bool,
    /// Unreachable (source, destination) pairs over the base LIDs (at most [`MAX_LISTED`]).
    pub unreachable_pairs: Vec<(EndPortId, EndPortId)>,
    /// Number of unreachable connected pairs over the base LIDs (with LMC ≥ 2: unreachable
    /// (pair, layer offset)s, every layer offset being a base LID).
    pub unreachable_count: u64,
    /// Unreachable pairs over the escape LIDs (at most [`MAX_LISTED`]; empty with LMC 0).
    pub escape_unreachable_pairs: Vec<(EndPortId, EndPortId)>,
    /// Number of unreachable connected pairs over the escape LIDs.
    pub escape_unreachable_count: u64,
    /// Of the unreachable pairs, how many end in a loop (base + escape).
    pub loop_count: u64,
    /// (live end port, live switch) pairs in one component without a route to the switch LID
    /// (informational: not part of `valid`; management reaches such switches by directed route).
    pub switch_unreachable_count: u64,
    /// Pairs of live end ports in different connected components (not required to be routed).
    pub disconnected_pairs: u64,
    /// Connected components of the live fabric that hold live end ports.
    pub components: usize,
}

/// How many unreachable pairs are listed.
pub const MAX_LISTED: usize = 100;

/// Validity of the base LIDs (every layer offset with LMC ≥ 2) and, with LMC ≥ 1, the escape
/// LIDs (the last offset).
pub fn validity(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> ValidityReport {
    let mut r = validity_set(fabric, lids, lfts, LidSet::Base);
    if lids.lmc >= 1 {
        let e = validity_set(fabric, lids, lfts, LidSet::Escape);
        r.escape_unreachable_pairs = e.unreachable_pairs;
        r.escape_unreachable_count = e.unreachable_count;
        r.loop_count += e.loop_count;
    }
    r.valid = r.unreachable_count == 0 && r.escape_unreachable_count == 0;
    r
}

/// Validity of one LID set. Destinations are taken in blocks of 64 consecutive LIDs: the 64
/// entries of every switch are gathered once (one cache line per row), then for each
/// destination a memoised walk finds which switches deliver to it (`O(switches)` per
/// destination) and the sources attached to the others are counted. Also counts unreachable
/// switch LIDs for [`LidSet::Base`].
pub fn validity_set(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, set: LidSet) -> ValidityReport {
    let d = destination_check(fabric, lids, lfts, set);
    let live: Vec<EndPortId> = fabric.end_port_ids().filter(|&e| fabric.end_port_live(e)).collect();
    let comp = components(fabric);
    let attach = |e: EndPortId| fabric.end_port(e).attach.map_or(0, |(s, _)| s.idx());
    let usable = set == LidSet::Base || lids.lmc >= 1;
    // List up to MAX_LISTED pairs: walk the failing destinations (in end-port order) until the
    // cap; every one of them has at least one failing source, so this is at most MAX_LISTED
    // destinations × live end ports walks.
    let failing: std::collections::HashSet<EndPortId> = d.failing.iter().map(|f| f.end_port).collect();
    let mut pairs = Vec::new();
    let mut hv = Vec::new();
    if d.unreachable_pairs > 0 {
        'outer: for &dst in live.iter().filter(|e| failing.contains(e)) {
            for &s in &live {
                if s == dst || comp[attach(s)] != comp[attach(dst)] {
                    continue;
                }
                let lid = lids.base_lid(dst);
                let ok = lid != 0
                    && usable
                    && set.offsets(lids).all(
                        |o| matches!(trace(fabric, lfts, s, lid + o, &mut hv), Ok(TraceEnd::EndPort(x)) if x == dst),
                    );
                if !ok {
                    pairs.push((s, dst));
                    if pairs.len() >= MAX_LISTED {
                        break 'outer;
                    }
                }
            }
        }
    }
    ValidityReport {
        valid: d.unreachable_pairs == 0,
        unreachable_pairs: pairs,
        unreachable_count: d.unreachable_pairs,
        escape_unreachable_pairs: Vec::new(),
        escape_unreachable_count: 0,
        loop_count: d.loop_pairs,
        switch_unreachable_count: d.switch_unreachable_pairs,
        disconnected_pairs: d.disconnected_pairs,
        components: d.components,
    }
}

/// One destination end port that some connected live source cannot reach through the tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailingDestination {
    /// The destination LID of the checked set (base or escape LID of `end_port`).
    pub lid: Lid,
    /// The destination end port.
    pub end_port: EndPortId,
    /// Live end ports in the destination's component that do not reach it.
    pub unreachable_sources: u64,
}

/// Result of [`destination_check`]: the validity of one LID set, per destination.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DestinationCheck {
    /// Every destination LID (end port and offset: every layer offset of the base set with
    /// LMC ≥ 2) some connected live source cannot reach, in LID order (an end port without a
    /// LID, or beyond the tables, is listed with LID 0 / its LID).
    pub failing: Vec<FailingDestination>,
    /// Unreachable connected (source, destination) pairs of live end ports (the sum over
    /// `failing`; per layer offset with LMC ≥ 2).
    pub unreachable_pairs: u64,
    /// Of those, the pairs whose walk ends in a loop.
    pub loop_pairs: u64,
    /// (live end port, live switch) pairs in one component without a route to the switch LID
    /// (base set only; informational).
    pub switch_unreachable_pairs: u64,
    /// Pairs of live end ports in different connected components: not routable by any
    /// routing, so not "invalid".
    pub disconnected_pairs: u64,
    /// Connected components of the live fabric that hold live end ports.
    pub components: usize,
}

impl DestinationCheck {
    /// No connected pair of live end ports is unreachable.
    pub fn valid(&self) -> bool {
        self.unreachable_pairs == 0
    }
}

/// Validity of one LID set, per destination, in `O(switches × destinations)`: the linear part
/// of [`validity_set`] without the listing of pairs. Destinations are taken in blocks of 64
/// consecutive LIDs: the 64 entries of every switch are gathered once (one cache line per
/// row), then for each destination a memoised walk from every switch with live sources decides
/// which switches deliver to it (each switch is visited once per destination); the sources
/// attached to the others are counted. Blocks run in parallel (rayon).
pub fn destination_check(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, set: LidSet) -> DestinationCheck {
    destination_check_ids(fabric, lids, lfts, set, false)
}

/// [`destination_check`] of the base LIDs and, with LMC 1, of the escape LIDs (LMC 0: an
/// empty, valid check), in one pass over the tables: both sets' destinations share the LFT
/// blocks they are gathered from.
pub fn destination_check_both(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> (DestinationCheck, DestinationCheck) {
    if lids.lmc == 0 {
        return (
            destination_check(fabric, lids, lfts, LidSet::Base),
            DestinationCheck::default(),
        );
    }
    let mut v = destination_checks(fabric, lids, lfts, &[LidSet::Base, LidSet::Escape], Opts::ALL, None);
    let escape = v.pop().unwrap_or_default();
    (v.pop().unwrap_or_default(), escape)
}

/// [`destination_check_both`], faster on ranked fabrics: the destinations whose routes the
/// local proof of [`crate::proof`] covers (every entry of their component moves to a switch of
/// lower potential, for potentials built from `level`, typically the ranking's levels) are
/// not walked; the others are walked as in [`destination_check_both`]. Any `level` gives the
/// same result as [`destination_check_both`] (a wrong one only costs walks).
pub fn destination_check_both_ranked(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    level: &[Option<u32>],
) -> (DestinationCheck, DestinationCheck) {
    destination_check_both_ranked_opt(fabric, lids, lfts, level, true)
}

/// The local proof's hint from `level`, when the proof can do more than the walks: with fewer
/// than two distinct levels among the live switches (every direct topology ranks flat: Slim
/// Fly, HyperX, Dragonfly) no step goes down or up, so the proof only covers destinations that
/// every source switch reaches in one hop (none on a fabric of diameter ≥ 2) and its pass over
/// the tables is spent for nothing (SLIMFLY(5;4): as many instructions as the walks). `None`:
/// every destination is walked (the same result, as for any hint).
fn proof_hint<'a>(fabric: &Fabric, level: &'a [Option<u32>]) -> Option<crate::proof::Hint<'a>> {
    let mut live = fabric
        .switch_ids()
        .filter(|&s| fabric.switch(s).up)
        .filter_map(|s| level.get(s.idx()).copied().flatten());
    let first = live.next()?;
    live.any(|l| l != first).then(|| crate::proof::Hint::new(level))
}

/// [`destination_check_both_ranked`]; `switch_lids: false` leaves the switch LIDs out (their
/// `switch_unreachable_pairs` is then 0): what [`crate::check_and_repair`] does on a fat-tree,
/// where it discards that count anyway (issue #17: on the 34 992-node fabric the switch LIDs
/// are 46 of the 285 million entries but cost most of the local proof's time).
pub(crate) fn destination_check_both_ranked_opt(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    level: &[Option<u32>],
    switch_lids: bool,
) -> (DestinationCheck, DestinationCheck) {
    let sets: &[LidSet] = if lids.lmc == 0 {
        &[LidSet::Base]
    } else {
        &[LidSet::Base, LidSet::Escape]
    };
    let opts = Opts {
        wide: false,
        switch_lids,
    };
    let mut v = destination_checks(fabric, lids, lfts, sets, opts, proof_hint(fabric, level));
    let escape = if lids.lmc == 0 {
        DestinationCheck::default()
    } else {
        v.pop().unwrap_or_default()
    };
    (v.pop().unwrap_or_default(), escape)
}

/// [`destination_check`]; `wide`: `u32` next hops even when the switch ids fit in `u16` (tests
/// compare both).
pub(crate) fn destination_check_ids(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    set: LidSet,
    wide: bool,
) -> DestinationCheck {
    let opts = Opts { wide, ..Opts::ALL };
    destination_checks(fabric, lids, lfts, &[set], opts, None)
        .pop()
        .unwrap_or_default()
}

/// Options of [`destination_checks`].
#[derive(Copy, Clone, Debug)]
pub(crate) struct Opts {
    /// `u32` next hops even when the switch ids fit in `u16` (tests compare both).
    pub wide: bool,
    /// Check the switch LIDs of [`LidSet::Base`] (else `switch_unreachable_pairs` is 0).
    pub switch_lids: bool,
}

impl Opts {
    /// Every destination, narrow next hops.
    pub const ALL: Opts = Opts {
        wide: false,
        switch_lids: true,
    };
}

/// [`destination_check`] of each of `sets` (distinct), in one pass over the tables; with
/// `proof` levels, the destinations [`crate::proof`] proves are not walked.
pub(crate) fn destination_checks(
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    sets: &[LidSet],
    opts: Opts,
    proof: Option<crate::proof::Hint<'_>>,
) -> Vec<DestinationCheck> {
    let Opts { wide, switch_lids } = opts;
    use crate::lft::BLOCK_SIZE;
    let ns = fabric.num_switches();
    let comp = components(fabric);
    let live: Vec<EndPortId> = fabric.end_port_ids().filter(|&e| fabric.end_port_live(e)).collect();
    let attach = |e: EndPortId| fabric.end_port(e).attach.map_or(0, |(s, _)| s.idx());
    // Live end ports per switch and per component.
    let mut per_switch = vec![0u64; ns];
    let ncomp = comp
        .iter()
        .filter(|&&c| c != u32::MAX)
        .max()
        .map_or(0, |&m| m as usize + 1);
    let mut per_comp = vec![0u64; ncomp];
    for &e in &live {
        per_switch[attach(e)] += 1;
        per_comp[comp[attach(e)] as usize] += 1;
    }
    let components = per_comp.iter().filter(|&&c| c > 0).count();
    let total = live.len() as u64;
    let disconnected_pairs = per_comp.iter().map(|&c| c * (total - c)).sum::<u64>();
    let usable = |set: LidSet| set == LidSet::Base || lids.lmc >= 1;

    // Destinations: (LID, target, component, index of the set in `sets`). Target: END | end
    // port, or a switch id.
    let mut dests: Vec<(Lid, u32, u32, usize)> = Vec::new();
    for (si, &set) in sets.iter().enumerate().filter(|(_, &set)| usable(set)) {
        for &e in &live {
            let b = lids.base_lid(e);
            if b != 0 {
                for o in set.offsets(lids) {
                    dests.push((b + o, END | e.0, comp[attach(e)], si));
                }
            }
        }
        if set == LidSet::Base && switch_lids {
            for t in fabric.switch_ids().filter(|&t| fabric.switch(t).up) {
                let l = lids.switch_lid(t);
                if l != 0 {
                    dests.push((l, t.0, comp[t.idx()], si));
                }
            }
        }
    }
    dests.sort_unstable();
    // Destinations beyond the tables' coverage reach nobody.
    let covered = dests.partition_point(|d| lfts.covers(d.0) && lfts.num_switches() >= ns);
    // The destinations to walk: all, or those the proof does not cover.
    let walked: Vec<(Lid, u32, u32, usize)> = match proof {
        None => dests[..covered].to_vec(),
        Some(hint) => {
            let ends: Vec<(Lid, u32, Option<PortNum>, u32, usize)> = dests[..covered]
                .iter()
                .map(|&(lid, target, c, si)| {
                    let (t, port) = if target & END != 0 {
                        let a = fabric.end_port(EndPortId(target & !END)).attach;
                        a.map_or((u32::MAX, Some(0)), |(s, p)| (s.0, Some(p)))
                    } else {
                        (target, None)
                    };
                    (lid, t, port, c, si)
                })
                .collect();
            let (runs, members) = crate::proof::runs(&ends);
            let leaves: Vec<u32> = runs
                .iter()
                .filter(|r| !r.ports.is_empty())
                .map(|r| r.target)
                .filter(|&t| (t as usize) < ns)
                .collect();
            let pr = crate::proof::Proof::new(fabric, hint, &leaves);
            let sources: Vec<bool> = per_switch.iter().map(|&n| n > 0).collect();
            let proved = pr.prove(lfts, &comp, &sources, &runs);
            let mut keep = vec![true; covered];
            for (m, _) in members.iter().zip(&proved).filter(|(_, &p)| p) {
                m.iter().for_each(|&i| keep[i as usize] = false);
            }
            dests[..covered]
                .iter()
                .zip(&keep)
                .filter(|(_, &k)| k)
                .map(|(d, _)| *d)
                .collect()
        }
    };
    let mut blocks: Vec<&[(Lid, u32, u32, usize)]> = Vec::new();
    let mut rest = &walked[..];
    while let Some(&(l, _, _, _)) = rest.first() {
        let b = l as usize / BLOCK_SIZE;
        let n = rest.partition_point(|d| d.0 as usize / BLOCK_SIZE == b);
        blocks.push(&rest[..n]);
        rest = &rest[n..];
    }

    let source_switches: Vec<usize> = (0..ns).filter(|&s| per_switch[s] > 0).collect();
    let block_dests: Vec<Vec<walk::Dest>> = blocks
        .iter()
        .map(|b| {
            b.iter()
                .map(|&(lid, target, comp, _)| {
                    let (switch, leaf) = if target & END != 0 {
                        let e = fabric.end_port(EndPortId(target & !END));
                        (u32::MAX, e.attach.map_or((u32::MAX, 0), |(s, p)| (s.0, p)))
                    } else {
                        (target, (u32::MAX, 0))
                    };
                    walk::Dest {
                        lid,
                        comp,
                        switch,
                        leaf,
                    }
                })
                .collect()
        })
        .collect();
    // The walks, with u16 next hops when the switch ids fit.
    fn run<T: walk::Id>(
        fabric: &Fabric,
        lfts: &Lfts,
        comp: &[u32],
        per_switch: &[u64],
        sources: &[usize],
        blocks: &[Vec<walk::Dest>],
    ) -> Vec<Vec<walk::Outcome>> {
        let next = walk::NextHops::<T>::new(fabric);
        blocks
            .par_iter()
            .map_init(walk::Scratch::default, |scr, b| {
                let mut out = Vec::with_capacity(b.len());
                walk::walk_block(lfts, &next, comp, per_switch, sources, b, scr, &mut out);
                out
            })
            .collect()
    }
    let outcomes = if !wide && ns < u16::MAX as usize - 1 {
        run::<u16>(fabric, lfts, &comp, &per_switch, &source_switches, &block_dests)
    } else {
        run::<u32>(fabric, lfts, &comp, &per_switch, &source_switches, &block_dests)
    };
    // Per set: (unreachable end-port pairs, of which loops, unreachable (end port, switch)
    // pairs, failing destinations).
    let mut acc: Vec<(u64, u64, u64, Vec<FailingDestination>)> = sets.iter().map(|_| (0, 0, 0, Vec::new())).collect();
    for (b, o) in blocks.iter().zip(&outcomes) {
        for (&(lid, target, _, si), o) in b.iter().zip(o) {
            let a = &mut acc[si];
            if target & END == 0 {
                a.2 += o.unreachable;
                continue;
            }
            a.0 += o.unreachable;
            a.1 += o.loops;
            if o.unreachable > 0 {
                a.3.push(FailingDestination {
                    lid,
                    end_port: EndPortId(target & !END),
                    unreachable_sources: o.unreachable,
                });
            }
        }
    }
    // Destinations without a LID or beyond the tables are unreachable from their component.
    let others = |c: u32| per_comp.get(c as usize).copied().unwrap_or(0);
    let mut unreached: Vec<(Lid, EndPortId, u32, usize)> = Vec::new();
    for &(lid, target, c, si) in &dests[covered..] {
        if target & END != 0 {
            unreached.push((lid, EndPortId(target & !END), c, si));
        } else {
            acc[si].2 += others(c);
        }
    }
    for (si, &set) in sets.iter().enumerate() {
        for &e in &live {
            if lids.base_lid(e) == 0 || !usable(set) {
                let lid = if usable(set) {
                    0
                } else {
                    lids.base_lid(e) + set.offset(lids)
                };
                // Every offset of the set is unreachable (one with LMC ≤ 1).
                for _ in 0..set.offsets(lids).len().max(1) {
                    unreached.push((lid, e, comp[attach(e)], si));
                }
            }
        }
    }
    for (lid, end_port, c, si) in unreached {
        let n = others(c) - 1;
        acc[si].0 += n;
        if n > 0 {
            acc[si].3.push(FailingDestination {
                lid,
                end_port,
                unreachable_sources: n,
            });
        }
    }
    sets.iter()
        .zip(acc)
        .map(|(&set, (bad, loops, mut sw_bad, mut failing))| {
            failing.sort_unstable_by_key(|f| (f.lid, f.end_port.0));
            if set == LidSet::Base && switch_lids {
                for t in fabric
                    .switch_ids()
                    .filter(|&t| fabric.switch(t).up && lids.switch_lid(t) == 0)
                {
                    sw_bad += others(comp[t.idx()]);
                }
            }
            DestinationCheck {
                failing,
                unreachable_pairs: bad,
                loop_pairs: loops,
                switch_unreachable_pairs: sw_bad,
                disconnected_pairs,
                components,
            }
        })
        .collect()
}

/// Whether every pair of live, ranked leaves has an up-down path for the ranking (finite
/// Dmodc cost): the condition under which Dmodc routes every connected pair (thesis §4.2.3).
pub fn leaves_updown_connected(fabric: &Fabric, ranking: &Ranking) -> bool {
    let o = Oriented::new(fabric, &ranking.level);
    let c = prep::costs(&o);
    let all_leaves_ranked = fabric
        .switch_ids()
        .filter(|&s| fabric.is_leaf(s))
        .all(|s| ranking.level.get(s.idx()).copied().flatten().is_some());
    all_leaves_ranked
        && o.leaves
            .iter()
            .all(|&p| c.full_row(p as usize).iter().all(|&v| v != INF))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::EngineKind;

    #[test]
    fn the_proof_is_skipped_on_flat_levels_with_the_same_result() {
        let t = pgft(&[2, 2], &[1, 2], &[1, 1]);
        let f = &t.fabric;
        let (r, lids, mut lfts) = routed(f, EngineKind::Dmodc, 1);
        assert!(
            proof_hint(f, &r.level).is_some(),
            "a fat-tree's two levels: the proof runs"
        );
        let flat = vec![Some(0); f.num_switches()];
        assert!(proof_hint(f, &flat).is_none(), "one level: walks only");
        assert!(proof_hint(f, &[]).is_none(), "no level");
        let unranked_but_one: Vec<Option<u32>> = (0..f.num_switches()).map(|s| (s == 0).then_some(1)).collect();
        assert!(proof_hint(f, &unranked_but_one).is_none());
        // Damaged tables: a loop and a hole; flat levels give what the walks alone give.
        let (a, b) = (EndPortId(0), EndPortId(3));
        let mut hops = Vec::new();
        trace(f, &lfts, a, lids.base_lid(b), &mut hops).unwrap();
        let (spine, _) = hops[1];
        let a_leaf = f.end_port(a).attach.unwrap().0;
        let down = f.port_groups(spine).iter().find(|g| g.remote == a_leaf).unwrap().ports[0];
        lfts.set(spine, lids.base_lid(b), down);
        lfts.set(a_leaf, lids.base_lid(EndPortId(2)), NO_ROUTE);
        let walked = destination_check_both(f, &lids, &lfts);
        assert!(!walked.0.valid());
        for level in [&flat, &r.level] {
            assert_eq!(destination_check_both_ranked(f, &lids, &lfts, level), walked);
        }
    }

    #[test]
    fn trace_reports_routes_loops_and_holes() {
        let t = pgft(&[2, 2], &[1, 2], &[1, 1]);
        let f = &t.fabric;
        let (r, lids, mut lfts) = routed(f, EngineKind::Dmodc, 1);
        let (a, b) = (EndPortId(0), EndPortId(3));
        let mut hops = Vec::new();
        assert_eq!(
            trace(f, &lfts, a, lids.base_lid(b), &mut hops),
            Ok(TraceEnd::EndPort(b))
        );
        assert_eq!(hops.len(), 3, "leaf, spine, leaf port: {hops:?}");
        assert_eq!(hops[2].1, f.end_port(b).attach.unwrap().1);
        let v = validity(f, &lids, &lfts);
        assert!(
            v.valid && v.unreachable_pairs.is_empty() && v.switch_unreachable_count == 0,
            "{v:?}"
        );
        assert!(deadlock_free(f, &r, &lids, &lfts));
        // Make a loop: the spine that b's route uses sends it back down to a's leaf, which sends up.
        let (spine, _) = hops[1];
        let a_leaf = f.end_port(a).attach.unwrap().0;
        let port_to_a_leaf = f.port_groups(spine).iter().find(|g| g.remote == a_leaf).unwrap().ports[0];
        lfts.set(spine, lids.base_lid(b), port_to_a_leaf);
        assert!(matches!(
            trace(f, &lfts, a, lids.base_lid(b), &mut hops),
            Err(TraceError::Loop { .. })
        ));
        let v = validity(f, &lids, &lfts);
        assert!(!v.valid);
        // Sources on a's leaf (2 end ports) loop; the other end port on b's leaf still arrives.
        assert_eq!(v.unreachable_count, 2);
        assert_eq!(v.loop_count, 2);
        assert!(v.unreachable_pairs.contains(&(a, b)));
        assert!(!cdg_acyclic(f, &lids, &lfts, LidSet::Base));
        assert!(updown_violations(f, &r, &lids, &lfts, LidSet::Base) > 0);
        // A hole.
        lfts.set(a_leaf, lids.base_lid(b), NO_ROUTE);
        assert!(matches!(
            trace(f, &lfts, a, lids.base_lid(b), &mut hops),
            Err(TraceError::NoRoute { .. })
        ));
        assert_eq!(
            trace(f, &lfts, a, lids.switch_lid(a_leaf), &mut hops),
            Ok(TraceEnd::Switch(a_leaf))
        );
    }
}
