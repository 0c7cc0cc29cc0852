//! The incremental validity check (module documentation of [`super`]): the entries that changed,
//! and whether every switch holding one delivers to its destination through the new tables.

use rayon::prelude::*;

use fabric_topology::{EndPortId, Fabric, Lid, SwitchId};

use crate::fill::{ROW_LEAVES, ROW_SKIP};
use crate::hops::components;
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::prep::NONE;

/// Per end port: a label of its connected component (the id of the first live end port of the
/// component), [`NONE`] when the end port is not live. Equal labels on two snapshots mean the
/// same live end ports, grouped into the same components.
pub(super) fn end_port_components(fabric: &Fabric) -> Vec<u32> {
    let comp = components(fabric);
    let mut first = vec![NONE; fabric.num_switches()];
    fabric
        .end_port_ids()
        .map(|e| {
            if !fabric.end_port_live(e) {
                return NONE;
            }
            let Some((s, _)) = fabric.end_port(e).attach else {
                return NONE;
            };
            let c = comp[s.idx()];
            if c == u32::MAX {
                return NONE;
            }
            let f = &mut first[c as usize];
            if *f == NONE {
                *f = e.0;
            }
            *f
        })
        .collect()
}

/// Every `(LID, switch)` whose entry differs between `old` and `new`, on the touched rows (the
/// others were not re-filled): per switch id, [`ROW_ALL`] compares the whole row,
/// [`ROW_LEAVES`] the entries at `at` only (sorted LIDs). Sorted by LID.
pub(super) fn changed_entries(old: &Lfts, new: &Lfts, rows: &[u8], at: &[Lid]) -> Vec<(Lid, u32)> {
    let mut v: Vec<(Lid, u32)> = rows
        .par_iter()
        .enumerate()
        .filter(|(_, &t)| t != ROW_SKIP)
        .flat_map_iter(|(s, &t)| {
            let (a, b) = (old.row(SwitchId(s as u32)), new.row(SwitchId(s as u32)));
            let mut out = Vec::new();
            if t == ROW_LEAVES {
                out.extend(
                    at.iter()
                        .filter(|&&l| a[l as usize] != b[l as usize])
                        .map(|&l| (l, s as u32)),
                );
            } else {
                out.extend(
                    a.iter()
                        .zip(b)
                        .enumerate()
                        .filter(|(_, (x, y))| x != y)
                        .map(|(l, _)| (l as Lid, s as u32)),
                );
            }
            out
        })
        .collect();
    v.par_sort_unstable();
    v
}

/// Whether every live switch holding a changed entry for a live end port's LID (base or
/// escape) delivers to that end port through `lfts` (a walk over live links, at most one visit
/// per switch). Returns the verdict and the number of destination LIDs walked.
pub(super) fn changed_deliver(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, changed: &[(Lid, u32)]) -> (bool, u64) {
    let ns = fabric.num_switches();
    let mut owner = vec![NONE; lfts.row_len()];
    for e in fabric.end_port_ids().filter(|&e| fabric.end_port_live(e)) {
        let b = lids.base_lid(e);
        if b == 0 {
            continue;
        }
        for l in [Some(b), lids.escape_lid(e)].into_iter().flatten() {
            if let Some(o) = owner.get_mut(l as usize) {
                *o = e.0;
            }
        }
    }
    let mut groups: Vec<&[(Lid, u32)]> = Vec::new();
    let mut rest = changed;
    while let Some(&(l, _)) = rest.first() {
        let n = rest.partition_point(|x| x.0 == l);
        if owner.get(l as usize).is_some_and(|&o| o != NONE) {
            groups.push(&rest[..n]);
        }
        rest = &rest[n..];
    }
    let walked = groups.len() as u64;
    let ok = groups
        .par_iter()
        .map_init(
            || Memo {
                good: vec![0; ns],
                epoch: 0,
                path: Vec::new(),
            },
            |m, g| {
                let lid = g[0].0;
                let e = EndPortId(owner[lid as usize]);
                let Some((leaf, lport)) = fabric.end_port(e).attach else {
                    return false;
                };
                m.epoch += 1;
                g.iter()
                    .filter(|&&(_, s)| fabric.switch(SwitchId(s)).up)
                    .all(|&(_, s)| {
                        m.delivers(fabric, lfts, SwitchId(s), lid, leaf, lport, ns)
                            || !fed(fabric, lfts, SwitchId(s), lid, ns)
                    })
            },
        )
        .all(|ok| ok);
    (ok, walked)
}

/// Per rayon task: the switches known to deliver the current LID (`good[s] == epoch`, one
/// epoch per LID), so that walks sharing a suffix stop where an earlier one succeeded.
struct Memo {
    good: Vec<u32>,
    epoch: u32,
    path: Vec<SwitchId>,
}

impl Memo {
    /// [`delivers`], stopping at a switch already known to deliver `lid`; every switch of a
    /// delivering walk is then known to deliver (its own walk is a suffix of this one).
    #[allow(clippy::too_many_arguments)]
    fn delivers(
        &mut self,
        fabric: &Fabric,
        lfts: &Lfts,
        mut s: SwitchId,
        lid: Lid,
        leaf: SwitchId,
        lport: u8,
        ns: usize,
    ) -> bool {
        self.path.clear();
        let mut ok = false;
        for _ in 0..=ns {
            if self.good[s.idx()] == self.epoch {
                ok = true;
                break;
            }
            self.path.push(s);
            let port = lfts.get(s, lid);
            if s == leaf {
                ok = port == lport;
                break;
            }
            if port == NO_ROUTE || port == 0 {
                break;
            }
            match fabric.switch_link_live(s, port) {
                Some((r, _)) => s = r,
                None => break,
            }
        }
        if ok {
            for x in &self.path {
                self.good[x.idx()] = self.epoch;
            }
        }
        ok
    }
}

/// Whether some live source's walk towards `lid` can reach `s`: `s` or a switch forwarding
/// `lid` to it (transitively, over live links) has live end ports. A switch no source reaches
/// (e.g. a top switch that lost its way down to a pod and cannot go up) may keep no route
/// without making the routing invalid.
fn fed(fabric: &Fabric, lfts: &Lfts, s: SwitchId, lid: Lid, ns: usize) -> bool {
    let mut stack = vec![s];
    let mut seen = vec![s];
    while let Some(x) = stack.pop() {
        if fabric.attached_end_ports(x).iter().any(|&e| fabric.end_port_live(e)) {
            return true;
        }
        if seen.len() > ns {
            return true;
        }
        for g in fabric.port_groups(x) {
            let v = g.remote;
            if seen.contains(&v) {
                continue;
            }
            let port = lfts.get(v, lid);
            if fabric.switch_link_live(v, port).is_some_and(|(r, _)| r == x) {
                seen.push(v);
                stack.push(v);
            }
        }
    }
    false
}
