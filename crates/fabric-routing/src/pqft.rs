//! PQFT: the closed-form, contention-free routing of quasi fat-trees (Zahavi, Keslassy,
//! Kolodny, HOTI 2014, Sec. IV, eqs. 9–18) and its fault-resilient variant (Sec. V, Alg. 1).
//!
//! * **Recognition** ([`layout`]): the QFT tuples (Sec. III) of every switch and end node, read
//!   from the generator's names and checked against the QFT connection rule (eqs. 6–8) cable by
//!   cable, so a fabric is accepted only if its live cables are those of a QFT (complete or with
//!   cables / non-leaf switches missing). A fabric whose switches carry no such names (a real
//!   `ibnetdiscover` dump) gets its tuples from the structure ([`structure`]: ranking levels,
//!   port groups, eq. 6's twin switches; complete QFTs only), checked the same way and with a
//!   map from the closed form's port numbers (eqs. 7–8) to the switches' own. Anything else gets [`RoutingError::Unsupported`] with
//!   the reason, as does a QFT shape the paper's routing does not cover (several
//!   cross-connected levels, cross-connections at the top, `p_l ∤ w_{l+2}`) and a PGFT with
//!   parallel cables (its `p` means parallel cables, not cross-connections: use dmodk/dmodc).
//!   An XGFT / PGFT with every `p_l = 1` is the QFT without cross-connections: routed, the
//!   closed form is then d-mod-k.
//! * **Complete QFT**: every entry is the closed form of [`closed`] (eq. 10 decides down or up,
//!   eqs. 13/15 the up port, eqs. 17/18 the down port). No costs, no graph traversal; rayon over
//!   switches. `mu_sp = 1` on constant-bisection QFTs (Theorems 1–2, Corollary 3).
//! * **Degraded QFT** (Alg. 1): the closed-form port is kept whenever its cable is there and
//!   still leads on; otherwise an alternative is taken among the ports that do. Down (the
//!   destination below, i.e. reachable downward): on the merge level this is Alg. 1's alternate
//!   cross-connected switch toward `Q = Get2LevelsDownDescendantSwitch(R, d)` (eq. 19); up:
//!   another live up port. "Leads on" is decided with the up-down costs of the live fabric
//!   (thesis Alg. 5, [`crate::prep::costs`]) instead of Alg. 1's local port masks, so that every
//!   up-down connected pair is routed (where Alg. 1 says "nothing can be done", PQFT goes up
//!   if an up-down path remains) and every route is up*-down* (deadlock-free) and minimal among
//!   them. Alg. 1's "select a random port" is a deterministic hash of the end node and the
//!   switch GUID, so the tables depend only on the fabric.
//!
//! Switch LIDs are routed like Dmodk's ([`crate::swlid`]), escape LIDs by `route_all`.

mod closed;
mod layout;
mod structure;

use rayon::prelude::*;

use fabric_topology::gen::{PgftSpec, SwitchAddr};
use fabric_topology::{Fabric, Lid, PortNum, SwitchId};

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::{Lfts, NO_ROUTE};
use crate::prep::{costs, Costs, Oriented, INF, NONE};
use crate::swlid;
use closed::Closed;
use layout::{qft_layout, QftLayout};

/// The PQFT engine (QFT paper Sec. IV–V); refuses fabrics that are not (degraded) QFTs.
#[derive(Copy, Clone, Debug, Default)]
pub struct Pqft;

impl Pqft {
    /// Whether PQFT can route `fabric` (a complete or degraded QFT of a shape the paper's
    /// routing covers): the reason when it cannot (for a configuration check or a start).
    pub fn check_fabric(fabric: &Fabric) -> Result<(), RoutingError> {
        Self::recognize(fabric).map(|_| ())
    }

    /// The QFT tuples PQFT routes `fabric` with (QFT paper Sec. III), on the levels of a
    /// default ranking: the generator's names when the switches carry them, otherwise from the
    /// structure (complete QFTs; see the module docs). `spec.kind` is `Qft` for a
    /// cross-connected fabric; `end_port_index` is each end port's eq. 4 index `d`.
    pub fn recognize(fabric: &Fabric) -> Result<QftTuples, RoutingError> {
        let ranking = fabric_ranking::rank(fabric, &fabric_ranking::RankOptions::default());
        let lay = layout_for(fabric, &ranking.level)?;
        Ok(QftTuples {
            spec: lay.spec,
            switch_addr: lay.addr,
            end_port_index: lay.index,
        })
    }
}

/// The QFT tuples of a fabric (QFT paper Sec. III), as PQFT routes it ([`Pqft::recognize`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QftTuples {
    /// The spec (`QFT(..)`, or the PGFT/XGFT of a fabric without cross-connections).
    pub spec: PgftSpec,
    /// Tuple of every switch by `SwitchId` (`level` 0 = leaves, `digits[i]` = `s_{i+1}`).
    pub switch_addr: Vec<SwitchAddr>,
    /// Eq. 4 index `d` of every end port by `EndPortId`.
    pub end_port_index: Vec<u64>,
}

/// The tuples of `f` (on the ranking levels `level`) and the closed form's refusal reasons.
fn layout_for(f: &Fabric, level: &[Option<u32>]) -> Result<QftLayout, RoutingError> {
    let unsupported = |reason: String| RoutingError::Unsupported { engine: "pqft", reason };
    let lay = qft_layout(f, level).map_err(|e| unsupported(format!("not a quasi fat-tree: {e}")))?;
    Closed::new(&lay.spec).map_err(unsupported)?;
    Ok(lay)
}

/// One destination: its LID in the set, and its closed-form ports per generator level.
struct Dest {
    lid: Lid,
    /// Its end-node index `d` (eq. 4).
    d: u64,
    /// Dense leaf index of its leaf in the oriented fabric ([`NONE`] if not live).
    leaf: u32,
    /// Port of its leaf toward it.
    leaf_port: PortNum,
    /// Switch-independent closed form, `h` entries each (see [`Closed::ports`]).
    first: usize,
}

impl RoutingEngine for Pqft {
    fn name(&self) -> &'static str {
        "pqft"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let f = ctx.fabric;
        let lay = layout_for(f, &ctx.ranking.level)?;
        let closed = Closed::new(&lay.spec).expect("checked by layout_for");
        let level: Vec<Option<u32>> = f
            .switch_ids()
            .map(|s| f.switch(s).up.then_some(lay.addr[s.idx()].level))
            .collect();
        let o = Oriented::new(f, &level);
        route_qft(f, ctx, set, &lay, &closed, &o, lfts);
        if set == LidSet::Base {
            swlid::fill_switch_lids(f, ctx.lids, &o, lfts);
        }
        Ok(())
    }
}

/// Fills the end-port entries of `set`: pure closed form on a complete QFT, Alg. 1 otherwise.
fn route_qft(
    f: &Fabric,
    ctx: &RoutingContext<'_>,
    set: LidSet,
    lay: &QftLayout,
    closed: &Closed<'_>,
    o: &Oriented,
    lfts: &mut Lfts,
) {
    let h = lay.spec.h;
    let mut dests = Vec::with_capacity(f.num_end_ports());
    let (mut up, mut down, mut digits) = (Vec::new(), Vec::new(), Vec::new());
    for ep in f.end_port_ids() {
        let base = ctx.lids.base_lid(ep);
        let Some((leaf_sw, leaf_port)) = f.end_port(ep).attach else {
            continue;
        };
        if base == 0 || !f.end_port_live(ep) {
            continue;
        }
        let d = lay.index[ep.idx()];
        let a = lay.spec.node_digits(d);
        let first = up.len();
        up.resize(first + h, 0);
        down.resize(first + h, 0);
        closed.ports(d, &a, &mut up[first..], &mut down[first..]);
        digits.extend_from_slice(&a);
        let lp = o.pos[leaf_sw.idx()];
        let leaf = if lp == NONE { NONE } else { o.leaf_idx[lp as usize] };
        dests.push(Dest {
            lid: base + set.offset(ctx.lids),
            d,
            leaf,
            leaf_port,
            first,
        });
    }
    let c = (!lay.complete).then(|| costs(o));
    lfts.par_rows_mut().enumerate().for_each(|(s, row)| {
        let p = o.pos[s];
        if p == NONE {
            return;
        }
        let addr = &lay.addr[s];
        let lv = addr.level as usize;
        let sw = SwitchId(s as u32);
        // Row position of the switch behind each live port (NONE: no live cable).
        let mut behind = [NONE; 256];
        if c.is_some() {
            let groups = f.port_groups(sw);
            for nb in o.ups(p as usize).iter().chain(o.downs(p as usize)) {
                for &port in &groups[nb.group as usize].ports {
                    behind[port as usize] = nb.pos;
                }
            }
        }
        for dst in &dests {
            let a = &digits[dst.first..dst.first + h];
            let port = match &c {
                None => {
                    let gen = if closed.descendant(lv, &addr.digits, a) {
                        down[dst.first + lv]
                    } else {
                        up[dst.first + lv]
                    };
                    lay.ports.as_ref().map_or(gen, |m| m.get(s, gen))
                }
                Some(c) => {
                    let ideal = (down[dst.first + lv], up[dst.first + lv]);
                    resilient(f, o, c, sw, p as usize, &behind, dst, ideal)
                }
            };
            row[dst.lid as usize] = port;
        }
    });
}

/// One cost row of a switch (downward-only or up-down costs).
type CostRow = fn(&Costs, usize) -> &[u8];

/// Alg. 1 at switch `sw` (row position `p`, `behind[port]` the row position behind each live
/// port) for one destination: the closed-form port (`ideal.0` down or `ideal.1` up, by whether
/// the destination is below) when its cable leads on, an alternative otherwise; [`NO_ROUTE`]
/// when no up-down path is left.
#[allow(clippy::too_many_arguments)]
fn resilient(
    f: &Fabric,
    o: &Oriented,
    c: &Costs,
    sw: SwitchId,
    p: usize,
    behind: &[u32; 256],
    dst: &Dest,
    (down, up): (PortNum, PortNum),
) -> PortNum {
    if dst.leaf == NONE {
        return NO_ROUTE;
    }
    let li = dst.leaf as usize;
    let dc = c.down_row(p)[li];
    let (want, ideal, nbrs, row): (u8, PortNum, _, CostRow) = if dc != INF {
        if dc == 0 {
            return dst.leaf_port;
        }
        (dc - 1, down, o.downs(p), Costs::down_row)
    } else {
        let fc = c.full_row(p)[li];
        if fc == INF || fc == 0 {
            return NO_ROUTE;
        }
        (fc - 1, up, o.ups(p), Costs::full_row)
    };
    let groups = f.port_groups(sw);
    let leads = |q: u32| row(c, q as usize)[li] == want;
    // The closed-form port, if it is live and its remote still leads on (a down port of the
    // closed form always leads down, an up port up: the cabling was checked against eqs. 7–8).
    let q = behind[ideal as usize];
    if q != NONE && leads(q) {
        return ideal;
    }
    let count: usize = nbrs
        .iter()
        .filter(|nb| leads(nb.pos))
        .map(|nb| groups[nb.group as usize].ports.len())
        .sum();
    if count == 0 {
        return NO_ROUTE;
    }
    let mut k = (mix(dst.d ^ f.switch(sw).guid.rotate_left(17)) % count as u64) as usize;
    for nb in nbrs.iter().filter(|nb| leads(nb.pos)) {
        let ports = &groups[nb.group as usize].ports;
        if k < ports.len() {
            return ports[k];
        }
        k -= ports.len();
    }
    NO_ROUTE
}

/// SplitMix64 finaliser: the deterministic "random port" of Alg. 1.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests;
