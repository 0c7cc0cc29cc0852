//! Which rows must be re-filled: a row (switch) whose inputs to the fill differ between the
//! previous and the new preprocessing (module documentation of [`super`]). Rows are compared by
//! switch id; the rows of the matrices are looked up through each side's own positions.

use rayon::prelude::*;

use fabric_topology::{EndPortId, Fabric, SwitchId};

use crate::fill::{Prepared, RowSel, ROW_ALL, ROW_LEAVES, ROW_SKIP};
use crate::prep::{Nbr, Oriented, NONE};
use crate::swlid::SwReach;

/// The destinations of a LID set are laid out the same way in both: same live end ports, same
/// leaves (by switch id, in the same leaf order), same attached end ports, same topological
/// NIDs. Then the destination spans of the fill are equal and the cost columns mean the same
/// leaf.
pub(super) fn same_destinations(of: &Fabric, op: &Prepared, nf: &Fabric, np: &Prepared) -> bool {
    let leaves = |p: &Prepared| -> Vec<SwitchId> { p.o.leaves.iter().map(|&q| p.o.order[q as usize]).collect() };
    op.tn.of_end_port == np.tn.of_end_port
        && op.tn.leaf_start == np.tn.leaf_start
        && leaves(op) == leaves(np)
        && (0..of.num_end_ports()).all(|e| {
            let e = EndPortId(e as u32);
            of.end_port_live(e) == nf.end_port_live(e) && of.end_port(e).attach == nf.end_port(e).attach
        })
        && op
            .o
            .leaves
            .iter()
            .all(|&q| of.attached_end_ports(op.o.order[q as usize]) == nf.attached_end_ports(op.o.order[q as usize]))
}

/// Position of switch `s` in `o`, if oriented.
fn pos(o: &Oriented, s: usize) -> Option<usize> {
    match o.pos[s] {
        NONE => None,
        p => Some(p as usize),
    }
}

/// The neighbours as (port group, remote switch).
fn nbrs<'a>(o: &'a Oriented, list: &'a [Nbr]) -> impl Iterator<Item = (u16, SwitchId)> + 'a {
    list.iter().map(|nb| (nb.group, o.order[nb.pos as usize]))
}

/// Same orientation around `s`: same port groups, same up and down neighbours.
fn same_neighbourhood(of: &Fabric, oo: &Oriented, po: usize, nf: &Fabric, no: &Oriented, pn: usize, s: usize) -> bool {
    let sid = SwitchId(s as u32);
    of.port_groups(sid) == nf.port_groups(sid)
        && nbrs(oo, oo.ups(po)).eq(nbrs(no, no.ups(pn)))
        && nbrs(oo, oo.downs(po)).eq(nbrs(no, no.downs(pn)))
}

/// Per switch id: `(downcost row changed, cost row changed)` (a switch oriented on one side
/// only counts as changed), and the leaf columns (dense leaf indices, sorted) where a row of a
/// switch oriented on both sides changed.
fn changed_cost_rows(op: &Prepared, np: &Prepared, ns: usize) -> (Vec<(bool, bool)>, Vec<u32>) {
    let diff_cols = |a: &[u8], b: &[u8], out: &mut Vec<u32>| {
        if a != b {
            out.extend((0..a.len()).filter(|&i| a[i] != b[i]).map(|i| i as u32));
        }
    };
    let per: Vec<((bool, bool), Vec<u32>)> = (0..ns)
        .into_par_iter()
        .map(|s| match (pos(&op.o, s), pos(&np.o, s)) {
            (None, None) => ((false, false), Vec::new()),
            (Some(a), Some(b)) => {
                let (od, nd) = (op.costs.down_row(a), np.costs.down_row(b));
                let (of, nf) = (op.costs.full_row(a), np.costs.full_row(b));
                let mut cols = Vec::new();
                diff_cols(od, nd, &mut cols);
                diff_cols(of, nf, &mut cols);
                ((od != nd, of != nf), cols)
            }
            _ => ((true, true), Vec::new()),
        })
        .collect();
    let mut cols: Vec<u32> = per.iter().flat_map(|(_, c)| c.iter().copied()).collect();
    cols.sort_unstable();
    cols.dedup();
    (per.into_iter().map(|(c, _)| c).collect(), cols)
}

/// The re-fill of one LID set ([`crate::fill::RowSel`]): per switch id [`ROW_SKIP`],
/// [`ROW_LEAVES`] or [`ROW_ALL`], and the leaves (dense indices, sorted) of the
/// [`ROW_LEAVES`] rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Refill {
    pub rows: Vec<u8>,
    pub leaves: Vec<u32>,
}

impl Refill {
    /// Every row in full.
    pub(super) fn all(ns: usize) -> Self {
        Refill {
            rows: vec![ROW_ALL; ns],
            leaves: Vec::new(),
        }
    }
    /// No row.
    pub(super) fn none(ns: usize) -> Self {
        Refill {
            rows: vec![ROW_SKIP; ns],
            leaves: Vec::new(),
        }
    }
    pub(super) fn sel(&self) -> RowSel<'_> {
        RowSel {
            rows: &self.rows,
            leaves: &self.leaves,
        }
    }
    /// Rows filled at all.
    pub(super) fn count(&self) -> usize {
        self.rows.iter().filter(|&&r| r != ROW_SKIP).count()
    }
}

/// More changed leaf columns than `1 / PARTIAL_MAX_SHARE` of the leaves: rows are re-filled in
/// full (a partial re-fill then saves little).
const PARTIAL_MAX_SHARE: usize = 8;

/// Rows (by switch id) whose end-port entries may differ, and how much of each: the whole row
/// when the switch's orientation, port groups or (`with_div`, the arithmetic of eqs. 4.7–4.8)
/// divider changed; else, when its own cost rows or a neighbour's (downcosts of the down
/// neighbours, costs of the up neighbours) changed, the destinations of the leaves whose cost
/// columns changed anywhere ([`ROW_LEAVES`]): an entry for a destination on leaf `λ` reads the
/// costs of column `λ` only (the closer groups `C`, eq. 4.5), besides the switch's own
/// neighbourhood and divider. Requires [`same_destinations`].
pub(super) fn end_port_rows(of: &Fabric, op: &Prepared, nf: &Fabric, np: &Prepared, with_div: bool) -> Refill {
    let ns = nf.num_switches();
    let (changed, leaves) = changed_cost_rows(op, np, ns);
    let partial_ok = leaves.len() * PARTIAL_MAX_SHARE <= np.o.num_leaves();
    let rows = (0..ns)
        .into_par_iter()
        .map(|s| match (pos(&op.o, s), pos(&np.o, s)) {
            (None, None) => ROW_SKIP,
            (Some(po), Some(pn)) => {
                let (oo, no) = (&op.o, &np.o);
                if !same_neighbourhood(of, oo, po, nf, no, pn, s) || (with_div && op.div[po] != np.div[pn]) {
                    ROW_ALL
                } else if changed[s].0
                    || changed[s].1
                    || no.downs(pn).iter().any(|nb| changed[no.order[nb.pos as usize].idx()].0)
                    || no.ups(pn).iter().any(|nb| changed[no.order[nb.pos as usize].idx()].1)
                {
                    if partial_ok {
                        ROW_LEAVES
                    } else {
                        ROW_ALL
                    }
                } else {
                    ROW_SKIP
                }
            }
            _ => ROW_ALL,
        })
        .collect();
    Refill {
        rows,
        leaves: if partial_ok { leaves } else { Vec::new() },
    }
}

/// Rows (by switch id) whose switch-LID entries may differ: every row when the oriented
/// switches (or their order, i.e. the bit of each switch) changed; else the rows whose
/// orientation or port groups changed, or whose down neighbours' `down` bits or up neighbours'
/// `ud` bits changed.
pub(super) fn switch_lid_rows(
    of: &Fabric,
    op: &Prepared,
    oreach: &SwReach,
    nf: &Fabric,
    np: &Prepared,
    nreach: &SwReach,
) -> Vec<bool> {
    let ns = nf.num_switches();
    let (oo, no) = (&op.o, &np.o);
    if oo.order != no.order || oreach.w != nreach.w {
        return vec![true; ns];
    }
    let n = no.len();
    let changed: Vec<(bool, bool)> = (0..n)
        .into_par_iter()
        .map(|p| {
            (
                oreach.down_row(p) != nreach.down_row(p),
                oreach.ud_row(p) != nreach.ud_row(p),
            )
        })
        .collect();
    (0..ns)
        .into_par_iter()
        .map(|s| match (pos(oo, s), pos(no, s)) {
            (None, None) => false,
            (Some(po), Some(pn)) => {
                !same_neighbourhood(of, oo, po, nf, no, pn, s)
                    || no.downs(pn).iter().any(|nb| changed[nb.pos as usize].0)
                    || no.ups(pn).iter().any(|nb| changed[nb.pos as usize].1)
            }
            _ => true,
        })
        .collect()
}
