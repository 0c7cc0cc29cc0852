//! The Dmodc fill kernel (thesis §4.2), shared by Dmodc, Up*/Down* and grouped Dmodc: costs,
//! dividers and topological NIDs ([`crate::prep`]), then for every switch `s` and leaf `λ` the
//! closer port groups `C` (eq. 4.5), and for every end port `d` on `λ` the group
//! `C[⌊d/Π_s⌋ mod #C]` (eq. 4.7) and the port `g[⌊d/(Π_s·#C)⌋ mod #g]` (eq. 4.8), `d` being the
//! topological NID (or its gNID, or a seeded random port of `C`: [`Select`]).
//!
//! Up-down guarantee (the downcost variant of §4.2.1/§4.2.2): when `s` has a downward path to
//! `λ` (finite downcost `c'`), `C` holds the down groups whose remote has a smaller downcost;
//! otherwise the up groups whose remote has a smaller cost `c`. A route therefore never turns
//! up after going down. On (degraded) PGFTs this is exactly eq. 4.5: there a switch with a
//! downward path to `λ` has `c = c'` and no up group is closer. The plain eq. 4.5 would allow a
//! down-up turn on a degraded PGFT (a switch that lost its link towards `λ` stepping down to a
//! leaf whose other parent still has one).
//!
//! The link directions come from the caller: the ranking for Dmodc, BFS levels for Up*/Down*
//! (Alg. 12 = BFS directions + this selection; Alg. 11 = random port among `C`).

use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use fabric_topology::{EndPortId, Fabric, Lid, PortNum, SwitchId};

use crate::engine::{LidSet, RoutingContext};
use crate::fastdiv::FastDiv;
use crate::groups::NodeGroups;
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::prep::{self, Costs, Oriented, TopoNids, INF, NONE};
use crate::swlid;

mod rows;
pub(crate) use rows::{closer_masks, LeafSpan};
use rows::{gcd, prefill_gaps, Cursor};

/// Fills one LID set for the link directions `level` (the ranking's for Dmodc, BFS levels for
/// Up*/Down*): the end-port LIDs by `select`, then, for the base set, the switch LIDs. The
/// caller has checked the context ([`crate::engine::check_route_args`]).
pub(crate) fn fill_set(
    ctx: &RoutingContext<'_>,
    level: &[Option<u32>],
    set: LidSet,
    select: Select<'_>,
    lfts: &mut Lfts,
) {
    fill_prepared(ctx, &Prepared::new(ctx.fabric, level), set, select, lfts);
}

/// [`fill_set`] on costs prepared by the caller (Up*/Down* computes its own: shortest legal
/// paths, [`crate::updown`]; load-aware Dmodc on an intact fabric reuses its own). The selection reads `prep.costs` through the up-down rule of
/// this module, so `down` must be finite only where every closer down neighbour also has a
/// finite `down` (true of Alg. 5's downcosts and of Up*/Down*'s down-mode costs).
pub(crate) fn fill_prepared(
    ctx: &RoutingContext<'_>,
    prep: &Prepared,
    set: LidSet,
    select: Select<'_>,
    lfts: &mut Lfts,
) {
    fill_end_ports(ctx.fabric, ctx.lids, prep, set, select, lfts, Write::default());
    if set == LidSet::Base {
        swlid::fill_switch_lids(ctx.fabric, ctx.lids, &prep.o, lfts);
    }
}

/// Rows (by switch id) of an incremental re-fill: [`ROW_SKIP`], [`ROW_ALL`] (every end-port
/// entry) or [`ROW_LEAVES`] (only the destinations on `leaves`, dense leaf indices).
#[derive(Copy, Clone)]
pub(crate) struct RowSel<'a> {
    pub rows: &'a [u8],
    pub leaves: &'a [u32],
}
/// [`RowSel`] values: not filled, only the selected leaves' destinations, whole row.
pub(crate) const ROW_SKIP: u8 = 0;
pub(crate) const ROW_LEAVES: u8 = 1;
pub(crate) const ROW_ALL: u8 = 2;

/// [`fill_prepared`]'s end-port entries of `set` where `rows` selects ([`crate::incremental`]);
/// an entry depends on its row's inputs and its leaf's cost columns only (eqs. 4.5, 4.7–4.8).
pub(crate) fn fill_end_port_rows(
    fabric: &Fabric,
    lids: &LidPlan,
    prep: &Prepared,
    set: LidSet,
    select: Select<'_>,
    lfts: &mut Lfts,
    rows: RowSel<'_>,
) {
    fill_end_ports(
        fabric,
        lids,
        prep,
        set,
        select,
        lfts,
        Write {
            only: Some(rows),
            ..Write::default()
        },
    );
}

/// Dmodc's base LIDs (end ports by eqs. 4.7–4.8, then the switch LIDs) on tables from
/// [`Lfts::unfilled`]: every row is set to [`NO_ROUTE`] by the task that fills it (one pass over
/// fresh memory, page faults spread over the threads, instead of an initialisation pass and a
/// fill pass). `escape_too`: the escape LIDs have the same ports as the base LIDs (the escape
/// preparation equals `prep`, [`crate::updown::EscapePrep::SameAsBase`]), so every end-port
/// entry is also written at its escape LID in the same pass — with LMC 1 a leaf's base and
/// escape LIDs are then one contiguous range — giving the bytes of a base fill followed by an
/// escape fill.
pub(crate) fn fill_dmodc_fresh(ctx: &RoutingContext<'_>, prep: &Prepared, escape_too: bool, lfts: &mut Lfts) {
    let w = Write {
        dup: escape_too.then(|| LidSet::Escape.offset(ctx.lids)),
        prefill: true,
        ..Write::default()
    };
    fill_end_ports(ctx.fabric, ctx.lids, prep, LidSet::Base, Select::Dmodc, lfts, w);
    swlid::fill_switch_lids(ctx.fabric, ctx.lids, &prep.o, lfts);
}

/// How [`fill_end_ports`] writes the tables.
#[derive(Copy, Clone)]
pub(crate) struct Write<'a> {
    /// Longest port table ([`TABLE_MAX`]; tests check that every path — tables of `d`, tables
    /// of `q`, direct evaluation — writes the same bytes).
    pub table_max: u64,
    /// The rows (by switch id) to fill, `None` = all.
    pub only: Option<RowSel<'a>>,
    /// Also write every end-port entry at `lid + dup` (the escape LIDs, when their ports are
    /// the base LIDs' ports).
    pub dup: Option<Lid>,
    /// Set every entry of every row that neither this pass nor the switch-LID pass after it
    /// writes (LID 0, unassigned LIDs, the end of the last block) to [`NO_ROUTE`]; the caller
    /// then writes every switch LID ([`swlid::fill_switch_lids`]).
    pub prefill: bool,
}

impl Default for Write<'_> {
    fn default() -> Self {
        Write {
            table_max: TABLE_MAX,
            only: None,
            dup: None,
            prefill: false,
        }
    }
}

/// Everything Dmodc computes before filling the tables.
pub(crate) struct Prepared {
    pub o: Oriented,
    pub costs: Costs,
    /// Per position: Π.
    pub div: Vec<u64>,
    pub tn: TopoNids,
}

impl Prepared {
    pub fn new(fabric: &Fabric, level: &[Option<u32>]) -> Self {
        let o = Oriented::new(fabric, level);
        let costs = prep::costs(&o);
        let div = prep::dividers(&o);
        let tn = prep::topological_nids(fabric, &o, &costs);
        Prepared { o, costs, div, tn }
    }

    /// [`Prepared::new`], with the costs re-computed only where they can differ from
    /// `prev`'s ([`crate::prep::costs_from`], same bytes) when the orientation has the
    /// same rows.
    pub(crate) fn new_from(fabric: &Fabric, level: &[Option<u32>], prev: Option<&Prepared>) -> Self {
        let o = Oriented::new(fabric, level);
        let costs = prev
            .and_then(|p| crate::prep::costs_from(&o, &p.o, &p.costs))
            .unwrap_or_else(|| prep::costs(&o));
        let div = prep::dividers(&o);
        let tn = prep::topological_nids(fabric, &o, &costs);
        Prepared { o, costs, div, tn }
    }
}

/// How a port is picked among the closer groups.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Select<'a> {
    /// Eqs. 4.7–4.8 on topological NIDs.
    Dmodc,
    /// Uniformly random port of `C` (Alg. 11), from a generator seeded by `(seed, switch GUID)`.
    Random { seed: u64 },
    /// A least loaded port of `C`, counting the destinations already given to each port of the
    /// switch (destinations in topological NID order; ties in round robin over the ports of `C`
    /// in order): OpenSM's port balancing among its min-hop ports (`osm_switch_recommend_path`).
    Balanced,
    /// Eqs. 4.7–4.8 on the topological NIDs re-indexed by group (thesis Alg. 4, Gxmodk): every
    /// end port's gNID from [`NodeGroups::reindex`] ([`NONE`] where it has no topological NID).
    Grouped(&'a NodeGroups),
}

/// Per-task buffers of [`fill_end_ports`] (reused across the switches a rayon task handles).
#[derive(Default)]
struct Scratch {
    /// Per leaf: bit `j` set when down neighbour `j` has a smaller downcost (resp. up
    /// neighbour `j` a smaller cost) than this switch.
    down_mask: Vec<u64>,
    up_mask: Vec<u64>,
    tmp: Vec<u8>,
    cset: Vec<u16>,
    /// Flattened port groups of the switch: ports of group g at `gports[gmeta[g].0..]`.
    gports: Vec<PortNum>,
    gmeta: Vec<(u32, FastDiv)>,
    /// Port per `q mod period` for the current closer-group set (empty: not tabulated).
    table: Vec<PortNum>,
    /// Whether `table` is indexed by `d mod period` (else by `q mod period`).
    table_of_d: bool,
    table_div: FastDiv,
    /// [`Select::Balanced`]: destinations given to each port of the switch so far, the ports of
    /// the current C, a lower bound of their loads and the round-robin cursor.
    load: Vec<u32>,
    cports: Vec<PortNum>,
    cmin: u32,
    cur: usize,
}

/// The destinations of one LID set, shared by the Dmodc kernel and load-aware Dmodc: leaves in
/// topological NID order, each with its end ports' LIDs and leaf ports (port order).
pub(crate) struct Destinations {
    /// LIDs of the end ports no switch can route to (not live, or on a leaf without a level).
    pub unrouted: Vec<Lid>,
    /// One span per leaf with end ports, in topological NID order.
    pub spans: Vec<LeafSpan>,
    /// LID of every destination (0: the end port has none).
    pub lids: Vec<Lid>,
    /// Leaf port of every destination.
    pub ports: Vec<PortNum>,
    /// End port of every destination.
    pub end_ports: Vec<EndPortId>,
}

impl Destinations {
    pub fn new(fabric: &Fabric, lids: &LidPlan, p: &Prepared, set: LidSet) -> Self {
        let o = &p.o;
        let nl = o.num_leaves();
        let off = set.offset(lids);
        let lid_of = |ep: EndPortId| -> Lid {
            let b = lids.base_lid(ep);
            if b == 0 {
                0
            } else {
                b + off
            }
        };
        let unrouted: Vec<Lid> = fabric
            .end_port_ids()
            .filter(|&ep| p.tn.of_end_port[ep.idx()] == NONE)
            .map(lid_of)
            .filter(|&l| l != 0)
            .collect();
        let mut order: Vec<u32> = (0..nl as u32).collect();
        order.sort_by_key(|&li| p.tn.leaf_start[li as usize]);
        let mut d = Destinations {
            unrouted,
            spans: Vec::with_capacity(nl),
            lids: Vec::new(),
            ports: Vec::new(),
            end_ports: Vec::new(),
        };
        for &li in &order {
            let sw = o.order[o.leaves[li as usize] as usize];
            let start = d.lids.len();
            for &ep in fabric.attached_end_ports(sw) {
                d.lids.push(lid_of(ep));
                d.ports.push(fabric.end_port(ep).attach.map_or(NO_ROUTE, |(_, pn)| pn));
                d.end_ports.push(ep);
            }
            let l = &d.lids[start..];
            if l.is_empty() {
                continue;
            }
            // Increasing by a constant step (a single LID counts as step 1).
            let step = if l.len() > 1 { l[1].saturating_sub(l[0]) } else { 1 };
            let regular = step > 0 && l[0] != 0 && l.windows(2).all(|w| w[1] > w[0] && w[1] - w[0] == step);
            d.spans.push(LeafSpan {
                li,
                t0: p.tn.leaf_start[li as usize],
                start: start as u32,
                len: l.len() as u32,
                step: if regular { step } else { 0 },
            });
        }
        d
    }
}

/// Fills the end-port LIDs of `set` on every row: a port, or [`NO_ROUTE`] where there is no
/// up-down path (or the end port is not live / not on an oriented leaf).
///
/// Per switch: the port groups are flattened once, and the "closer" relation to every leaf is
/// computed neighbour by neighbour as bit masks over the leaves (sequential, vectorisable
/// passes over the cost rows). Leaves are visited in topological NID order; `C` is rebuilt from
/// its mask only when the mask changes, and while `C` stays the same the arithmetic of eqs.
/// 4.7–4.8 simply continues from one leaf to the next. The port changes only every `Π`
/// destinations and comes from a table of one period, so most entries are a plain store — no
/// division and no allocation per LFT entry.
///
/// `w`: table length, rows, escape duplicates and row prefill ([`Write`]).
fn fill_end_ports(
    fabric: &Fabric,
    lids: &LidPlan,
    p: &Prepared,
    set: LidSet,
    select: Select<'_>,
    lfts: &mut Lfts,
    w: Write<'_>,
) {
    let Write {
        table_max,
        only,
        dup,
        prefill,
    } = w;
    let o = &p.o;
    let nl = o.num_leaves();
    let Destinations {
        unrouted,
        spans,
        lids: all_lids,
        ports: all_ports,
        end_ports,
    } = Destinations::new(fabric, lids, p, set);
    // Grouped selection: the gNID of every entry of `all_lids`.
    let all_gnids: Vec<u32> = match select {
        Select::Grouped(g) => {
            let gnid = g.reindex(&p.tn.of_end_port);
            end_ports.iter().map(|ep| gnid[ep.idx()]).collect()
        }
        Select::Dmodc | Select::Random { .. } | Select::Balanced => Vec::new(),
    };
    // Fast division by every possible #C (a switch has at most 255 port groups).
    let by_nc: Vec<FastDiv> = (0..=256u32).map(|n| FastDiv::new(n.max(1))).collect();
    // The spans of the selected leaves of [`ROW_LEAVES`] rows, in topological NID order.
    let mut want = vec![false; if only.is_some() { nl } else { 0 }];
    only.iter()
        .flat_map(|r| r.leaves)
        .for_each(|&li| want[li as usize] = true);
    let sel_spans: Vec<usize> = (0..want.len().min(spans.len()))
        .filter(|&i| want[spans[i].li as usize])
        .collect();

    // Prefill: only the entries this pass does not write, nor the switch-LID pass after it.
    let gaps = if prefill {
        prefill_gaps(
            lfts.row_len(),
            all_lids.iter().chain(&unrouted).copied(),
            dup,
            &lids.switch_lid,
        )
    } else {
        Vec::new()
    };

    lfts.par_rows_mut()
        .enumerate()
        .for_each_init(Scratch::default, |scr, (s, row)| {
            let partial = match only.map(|r| r.rows.get(s).copied().unwrap_or(ROW_SKIP)) {
                None | Some(ROW_ALL) => false,
                Some(ROW_LEAVES) => true,
                Some(_) => return,
            };
            for g in &gaps {
                row[g.clone()].fill(NO_ROUTE);
            }
            let put = |row: &mut [u8], lid: Lid, port: PortNum| {
                if lid != 0 {
                    row[lid as usize] = port;
                    if let Some(o) = dup {
                        row[lid as usize + o as usize] = port;
                    }
                }
            };
            // `port` at `n` LIDs from `a` by `step` (> 0), and at their duplicates.
            let strided = |row: &mut [u8], a: usize, step: usize, n: usize, port: PortNum| {
                row[a..].iter_mut().step_by(step).take(n).for_each(|x| *x = port);
                if let Some(o) = dup {
                    row[a + o as usize..]
                        .iter_mut()
                        .step_by(step)
                        .take(n)
                        .for_each(|x| *x = port);
                }
            };
            // Base and duplicate LIDs interleave into one contiguous range.
            let paired = |step: usize| dup == Some(1) && step == 2;
            if !partial {
                for &lid in &unrouted {
                    put(row, lid, NO_ROUTE);
                }
            }
            let sp = o.pos[s];
            if sp == NONE {
                for &lid in &all_lids {
                    put(row, lid, NO_ROUTE);
                }
                return;
            }
            let sp = sp as usize;
            let sid = SwitchId(s as u32);
            scr.load.iter_mut().for_each(|x| *x = 0);
            scr.cports.clear();
            let groups = fabric.port_groups(sid);
            scr.gports.clear();
            scr.gmeta.clear();
            for g in groups {
                scr.gmeta
                    .push((scr.gports.len() as u32, FastDiv::new(g.ports.len().max(1) as u32)));
                scr.gports.extend_from_slice(&g.ports);
            }
            let pi = p.div[sp];
            let pi_div = u32::try_from(pi).is_ok().then(|| FastDiv::new(pi as u32));
            let downs = o.downs(sp);
            let ups = o.ups(sp);
            let down_row = p.costs.down_row(sp);
            let full_row = p.costs.full_row(sp);
            let masks = downs.len() <= 64 && ups.len() <= 64;
            if masks {
                let c = &p.costs;
                closer_masks(
                    &mut scr.down_mask,
                    &mut scr.tmp,
                    downs.iter().map(|nb| c.down_row(nb.pos as usize)),
                    down_row,
                );
                closer_masks(
                    &mut scr.up_mask,
                    &mut scr.tmp,
                    ups.iter().map(|nb| c.full_row(nb.pos as usize)),
                    full_row,
                );
            }
            let mut rng = match select {
                Select::Random { seed } => Some(rand_chacha::ChaCha8Rng::seed_from_u64(
                    seed ^ fabric.switch(sid).guid.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                )),
                Select::Dmodc | Select::Grouped(_) | Select::Balanced => None,
            };
            // C of the previous leaf as (kind, mask); kind 2 = none yet.
            let mut prev: (u8, u64) = (2, 0);
            let mut cursor: Option<Cursor> = None;
            let nspans = if partial { sel_spans.len() } else { spans.len() };
            // Spans already written as part of an earlier span's run (below).
            let mut merged_until = 0;
            for si in 0..nspans {
                if si < merged_until {
                    continue;
                }
                let span = &spans[if partial { sel_spans[si] } else { si }];
                let li = span.li as usize;
                let (a, b) = (span.start as usize, (span.start + span.len) as usize);
                let lids_here = &all_lids[a..b];
                if o.leaves[li] as usize == sp {
                    for (&lid, &port) in lids_here.iter().zip(&all_ports[a..b]) {
                        put(row, lid, port);
                    }
                    cursor = None;
                    continue;
                }
                // Eq. 4.5 with the up-down guarantee: C, ordered by remote GUID.
                let (kind, nbrs) = if down_row[li] != INF {
                    (0u8, downs)
                } else if full_row[li] != INF {
                    (1u8, ups)
                } else {
                    for &lid in lids_here {
                        put(row, lid, NO_ROUTE);
                    }
                    cursor = None;
                    continue;
                };
                let changed = if masks {
                    let mask = if kind == 0 { scr.down_mask[li] } else { scr.up_mask[li] };
                    let changed = (kind, mask) != prev;
                    if changed {
                        prev = (kind, mask);
                        scr.cset.clear();
                        let mut bits = mask;
                        while bits != 0 {
                            scr.cset.push(nbrs[bits.trailing_zeros() as usize].group);
                            bits &= bits - 1;
                        }
                    }
                    changed
                } else {
                    let (costs, own) = if kind == 0 {
                        (&p.costs.down, down_row[li])
                    } else {
                        (&p.costs.full, full_row[li])
                    };
                    let before = std::mem::take(&mut scr.cset);
                    scr.cset.extend(
                        nbrs.iter()
                            .filter(|nb| costs[nb.pos as usize * nl + li] < own)
                            .map(|nb| nb.group),
                    );
                    before != scr.cset
                };
                let cset = &scr.cset;
                if cset.is_empty() {
                    for &lid in lids_here {
                        put(row, lid, NO_ROUTE);
                    }
                    cursor = None;
                    continue;
                }
                // The following leaves with the same C whose topological NIDs and LIDs continue
                // this one's are written as one run: the cursor of eqs. 4.7–4.8 would carry over
                // from one leaf to the next anyway (same bytes, one iteration instead of one per
                // leaf: a leaf's row sends every other leaf up through the same C).
                let (mut b_end, mut len) = (b, span.len);
                if masks && all_gnids.is_empty() && matches!(select, Select::Dmodc) {
                    let mask = if kind == 0 { scr.down_mask[li] } else { scr.up_mask[li] };
                    let mut end = si + 1;
                    while end < nspans {
                        let nx = &spans[if partial { sel_spans[end] } else { end }];
                        let nli = nx.li as usize;
                        let same_c = if kind == 0 {
                            down_row[nli] != INF && scr.down_mask[nli] == mask
                        } else {
                            down_row[nli] == INF && full_row[nli] != INF && scr.up_mask[nli] == mask
                        };
                        let continues = nx.start as usize == b_end
                            && nx.t0 == span.t0 + len
                            && nx.step == span.step
                            && (span.step == 0 || all_lids[b_end] == all_lids[b_end - 1] + span.step);
                        if o.leaves[nli] as usize == sp || !same_c || !continues {
                            break;
                        }
                        b_end += nx.len as usize;
                        len += nx.len;
                        end += 1;
                    }
                    merged_until = end;
                }
                let merged = LeafSpan {
                    li: span.li,
                    t0: span.t0,
                    start: span.start,
                    len,
                    step: span.step,
                };
                let span = &merged;
                let lids_here = &all_lids[a..b_end];
                let (gports, gmeta) = (&scr.gports, &scr.gmeta);
                if let Select::Balanced = select {
                    // Round robin over the ports of C at the least load: the cursor moves on
                    // from the last port given; a full turn without a port at `cmin` raises it.
                    if scr.load.is_empty() {
                        scr.load.resize(256, 0);
                    }
                    if changed || scr.cports.is_empty() {
                        scr.cports.clear();
                        for &g in cset {
                            let (start, len) = gmeta[g as usize];
                            scr.cports
                                .extend_from_slice(&gports[start as usize..(start + len.d) as usize]);
                        }
                        scr.cmin = scr.cports.iter().map(|&pt| scr.load[pt as usize]).min().unwrap_or(0);
                        scr.cur = 0;
                    }
                    let k = scr.cports.len();
                    for &lid in lids_here {
                        let mut scanned = 0;
                        while scr.load[scr.cports[scr.cur] as usize] != scr.cmin {
                            scr.cur = if scr.cur + 1 == k { 0 } else { scr.cur + 1 };
                            scanned += 1;
                            if scanned == k {
                                scr.cmin += 1;
                                scanned = 0;
                            }
                        }
                        let pt = scr.cports[scr.cur];
                        scr.load[pt as usize] += 1;
                        scr.cur = if scr.cur + 1 == k { 0 } else { scr.cur + 1 };
                        put(row, lid, pt);
                    }
                    continue;
                }
                if let Some(rng) = rng.as_mut() {
                    // Alg. 11: a uniformly random port among the ports of C.
                    let total: u32 = cset.iter().map(|&g| gmeta[g as usize].1.d).sum();
                    for &lid in lids_here {
                        let mut k = rng.gen_range(0..total);
                        let mut port = NO_ROUTE;
                        for &g in cset {
                            let (start, len) = gmeta[g as usize];
                            if k < len.d {
                                port = gports[(start + k) as usize];
                                break;
                            }
                            k -= len.d;
                        }
                        put(row, lid, port);
                    }
                    continue;
                }
                let nc = &by_nc[cset.len()];
                if !all_gnids.is_empty() {
                    // Gxmodk: eqs. 4.7–4.8 per destination on its gNID (a leaf's gNIDs are not
                    // consecutive, so there is no run to continue).
                    for (&lid, &d) in lids_here.iter().zip(&all_gnids[a..b]) {
                        if d == NONE {
                            put(row, lid, NO_ROUTE);
                            continue;
                        }
                        let q = match &pi_div {
                            Some(fd) => fd.div(d),
                            None => 0,
                        };
                        let (start, len) = gmeta[cset[nc.rem(q) as usize] as usize];
                        let port = gports[(start + if len.d == 1 { 0 } else { len.rem(nc.div(q)) }) as usize];
                        put(row, lid, port);
                    }
                    cursor = None;
                    continue;
                }
                if changed {
                    cursor = None;
                    // The port as a function of q = ⌊d/Π⌋ is periodic with period #C · lcm(#g), so
                    // as a function of d with period Π · #C · lcm(#g): tabulate one period of d when
                    // it is short (every entry is then a table read), else one period of q when
                    // that is short (the port changes every Π entries).
                    scr.table.clear();
                    scr.table_of_d = false;
                    let mut l = 1u64;
                    for &g in cset {
                        let len = u64::from(gmeta[g as usize].1.d);
                        l = l / gcd(l, len) * len;
                        if l * cset.len() as u64 > table_max {
                            break;
                        }
                    }
                    let period_q = l * cset.len() as u64;
                    let port_of_q = |q: u32| {
                        let (start, len) = gmeta[cset[nc.rem(q) as usize] as usize];
                        gports[(start + len.rem(nc.div(q))) as usize]
                    };
                    if pi <= D_TABLE_MAX_PI && period_q.saturating_mul(pi) <= table_max {
                        // port(d) = port_of_q(⌊d/Π⌋): Π copies of each port of one period of q.
                        for q in 0..period_q as u32 {
                            scr.table.extend(std::iter::repeat_n(port_of_q(q), pi as usize));
                        }
                        scr.table_of_d = true;
                    } else if period_q <= table_max {
                        scr.table.extend((0..period_q as u32).map(port_of_q));
                    }
                    scr.table_div = FastDiv::new(scr.table.len().max(1) as u32);
                }
                let table = &scr.table;
                let (k, step) = (lids_here.len(), span.step as usize);
                if scr.table_of_d {
                    // Every entry from the table of one period of d.
                    let mut di = match cursor {
                        Some(c) if c.next_t == span.t0 => c.qi,
                        _ => scr.table_div.rem(span.t0) as usize,
                    };
                    match step {
                        0 => {
                            for &lid in lids_here {
                                put(row, lid, table[di]);
                                di += 1;
                                if di == table.len() {
                                    di = 0;
                                }
                            }
                        }
                        _ if paired(step) => {
                            let a = lids_here[0] as usize;
                            for x in row[a..a + 2 * k].chunks_exact_mut(2) {
                                x.fill(table[di]);
                                di += 1;
                                if di == table.len() {
                                    di = 0;
                                }
                            }
                        }
                        1 if dup.is_none() => {
                            let mut a = lids_here[0] as usize;
                            let mut left = k;
                            while left > 0 {
                                let n = left.min(table.len() - di);
                                row[a..a + n].copy_from_slice(&table[di..di + n]);
                                (a, left, di) = (a + n, left - n, di + n);
                                if di == table.len() {
                                    di = 0;
                                }
                            }
                        }
                        _ => {
                            let a = lids_here[0] as usize;
                            for i in 0..k {
                                strided(row, a + i * step, step, 1, table[di]);
                                di += 1;
                                if di == table.len() {
                                    di = 0;
                                }
                            }
                        }
                    }
                    cursor = Some(Cursor {
                        next_t: span.t0 + span.len,
                        r: 0,
                        gi: 0,
                        q2: 0,
                        qi: di,
                        port: 0,
                    });
                    continue;
                }
                let pick = |gi: usize, q2: u32, qi: usize| {
                    if !table.is_empty() {
                        return table[qi];
                    }
                    let (start, len) = gmeta[cset[gi] as usize];
                    gports[(start + if len.d == 1 { 0 } else { len.rem(q2) }) as usize]
                };
                // Eqs. 4.7–4.8: continue from the previous leaf when its NIDs end where ours start.
                let mut c = match cursor {
                    Some(c) if c.next_t == span.t0 => c,
                    _ => {
                        let t0 = span.t0;
                        let (q, r) = match &pi_div {
                            Some(fd) => {
                                let q = fd.div(t0);
                                (q, u64::from(t0 - q * fd.d))
                            }
                            None => (0, u64::from(t0)),
                        };
                        let (gi, q2, qi) = (nc.rem(q) as usize, nc.div(q), scr.table_div.rem(q) as usize);
                        Cursor {
                            next_t: t0,
                            r,
                            gi,
                            q2,
                            qi,
                            port: pick(gi, q2, qi),
                        }
                    }
                };
                // Runs of destinations with the same port (until r wraps).
                let mut i = 0;
                while i < k {
                    let run = (k - i).min(usize::try_from(pi - c.r).unwrap_or(usize::MAX));
                    let port = c.port;
                    match step {
                        0 => lids_here[i..i + run].iter().for_each(|&lid| put(row, lid, port)),
                        1 if dup.is_none() => {
                            let a = lids_here[i] as usize;
                            row[a..a + run].fill(port);
                        }
                        _ if paired(step) => {
                            let a = lids_here[i] as usize;
                            row[a..a + 2 * run].fill(port);
                        }
                        _ => strided(row, lids_here[i] as usize, step, run, port),
                    }
                    i += run;
                    c.r += run as u64;
                    if c.r == pi {
                        c.r = 0;
                        c.gi += 1;
                        if c.gi == cset.len() {
                            c.gi = 0;
                            c.q2 += 1;
                        }
                        c.qi += 1;
                        if c.qi == table.len() {
                            c.qi = 0;
                        }
                        c.port = pick(c.gi, c.q2, c.qi);
                    }
                }
                c.next_t = span.t0 + span.len;
                cursor = Some(c);
            }
        });
}

/// Longest port table tabulated per closer-group set.
const TABLE_MAX: u64 = 4096;
/// Largest divider Π for which the ports are tabulated per destination `d` (one entry per
/// LFT entry) rather than per `q = ⌊d/Π⌋`: with a larger Π the port stays the same for runs of
/// at least this many destinations, which are written as runs, and a table of `d` would cost
/// more to build than it saves (a top switch of a 3-level fabric has Π ≈ 10³ and a new `C`
/// for every leaf).
const D_TABLE_MAX_PI: u64 = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::{assign_lids, Guid2Lid, IB_MAX_UNICAST_LID};

    /// Reference: eqs. 4.5 (with the up-down rule), 4.7 and 4.8 evaluated entry by entry with
    /// plain divisions.
    fn naive(f: &Fabric, lids: &LidPlan, p: &Prepared) -> Vec<Vec<u8>> {
        let o = &p.o;
        let nl = o.num_leaves();
        f.switch_ids()
            .map(|s| {
                let mut row = vec![NO_ROUTE; lids.top() as usize + 1];
                let sp = o.pos[s.idx()];
                if sp == NONE {
                    return row;
                }
                let sp = sp as usize;
                for ep in f.end_port_ids() {
                    let d = p.tn.of_end_port[ep.idx()];
                    if d == NONE {
                        continue;
                    }
                    let (leaf, lport) = f.end_port(ep).attach.unwrap();
                    let lid = lids.base_lid(ep) as usize;
                    if leaf == s {
                        row[lid] = lport;
                        continue;
                    }
                    let li = o.leaf_idx[o.pos[leaf.idx()] as usize] as usize;
                    let (nbrs, m, own) = if p.costs.down_row(sp)[li] != INF {
                        (o.downs(sp), &p.costs.down, p.costs.down_row(sp)[li])
                    } else {
                        (o.ups(sp), &p.costs.full, p.costs.full_row(sp)[li])
                    };
                    let c: Vec<u16> = nbrs
                        .iter()
                        .filter(|nb| m[nb.pos as usize * nl + li] < own)
                        .map(|nb| nb.group)
                        .collect();
                    if c.is_empty() {
                        continue;
                    }
                    let (d, pi, nc) = (u64::from(d), p.div[sp], c.len() as u64);
                    let g = &f.port_groups(s)[c[((d / pi) % nc) as usize] as usize];
                    row[lid] = g.ports[((d / (pi * nc)) % g.ports.len() as u64) as usize];
                }
                row
            })
            .collect()
    }

    #[test]
    fn every_fill_path_matches_the_reference_on_degraded_fabrics() {
        for (m, w, p, links, switches, seed) in [
            (
                &[4u32, 4, 6][..],
                &[1u32, 4, 4][..],
                &[1u32, 1, 1][..],
                12usize,
                1usize,
                1u64,
            ),
            (&[3, 3, 4], &[1, 3, 2], &[1, 2, 1], 10, 2, 2),
            (&[2, 3, 2, 3], &[1, 2, 3, 2], &[1, 1, 2, 1], 20, 2, 3),
        ] {
            // Leaf GUIDs in reverse order: topological NIDs differ from the end-port order.
            let t = pgft_with_guids(m, w, p, |lvl, idx| ((lvl as u64 + 1) << 32) | (0xffff - idx as u64));
            let f = degrade(&t.fabric, links, switches, seed);
            // LIDs with step 1 (LMC 0), step 2 (LMC 1), and irregular (reversed pairs).
            let mut reversed = Guid2Lid::new();
            let n = f.num_end_ports() as u32;
            for (i, e) in f.end_ports().iter().enumerate() {
                let b = 2 * (n - i as u32) + 100;
                reversed.insert(e.port_guid, b, b + 1);
            }
            for lids in [
                assign_lids(&f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).unwrap(),
                assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap(),
                assign_lids(&f, &reversed, 1, IB_MAX_UNICAST_LID).unwrap(),
            ] {
                let prep = Prepared::new(&f, &bfs_rank(&f));
                let want = naive(&f, &lids, &prep);
                for table_max in [0, 1, 7, 64, TABLE_MAX] {
                    let mut lfts = Lfts::new(f.num_switches(), lids.top());
                    fill_end_ports(
                        &f,
                        &lids,
                        &prep,
                        LidSet::Base,
                        Select::Dmodc,
                        &mut lfts,
                        Write {
                            table_max,
                            ..Write::default()
                        },
                    );
                    for s in f.switch_ids() {
                        for ep in f.end_port_ids() {
                            let lid = lids.base_lid(ep);
                            assert_eq!(
                                lfts.get(s, lid),
                                want[s.idx()][lid as usize],
                                "{m:?} lmc {} top {} table {table_max} {s:?} {ep:?} lid {lid}",
                                lids.lmc,
                                lids.top()
                            );
                        }
                    }
                }
            }
        }
    }
}
