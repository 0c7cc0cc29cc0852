//! Routes to switch LIDs (management traffic, `ibtracert`): any valid up-down path for the
//! orientation in use, port 0 on the switch itself.
//!
//! Reachability is kept as bitsets over oriented switches: `down[s]` = switches reachable from
//! `s` by downward hops only (including `s`), `ud[s]` = reachable by an up-down path. At `s`,
//! a destination in `down[s]` is sent down (first down group, by remote GUID, whose remote
//! reaches it downward), any other destination in `ud[s]` up (first up group whose remote
//! reaches it up-down); the parallel ports of a group take the destinations in turn. A packet
//! sent down is only ever sent down again, so every path is up*-down*. Word-parallel: the work
//! per switch is `groups × switches / 64`, memory two `switches²` bit matrices.

use rayon::prelude::*;

use fabric_topology::{Fabric, Lid, SwitchId};

use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::prep::{Nbr, Oriented, NONE};

/// Fills the switch-LID entries of every row.
pub(crate) fn fill_switch_lids(fabric: &Fabric, lids: &LidPlan, o: &Oriented, lfts: &mut Lfts) {
    fill_switch_lid_rows(fabric, lids, o, &SwReach::new(o), lfts, None);
}

/// The reachability bitsets of the module documentation, `w` words per oriented switch (row
/// position order): `down` (downward hops only) and `ud` (up-down paths).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SwReach {
    pub w: usize,
    pub down: Vec<u64>,
    pub ud: Vec<u64>,
}

impl SwReach {
    /// `down` in ascending level order, then `ud` in descending level order (word-parallel).
    pub(crate) fn new(o: &Oriented) -> Self {
        let n = o.len();
        let w = n.div_ceil(64).max(1);
        let mut down = vec![0u64; n * w];
        for r in &o.level_ranges {
            let (lower, rest) = down.split_at_mut(r.start * w);
            let lower: &[u64] = lower;
            rest[..r.len() * w].par_chunks_mut(w).enumerate().for_each(|(i, row)| {
                let p = r.start + i;
                row[p / 64] |= 1 << (p % 64);
                for nb in o.downs(p) {
                    let src = &lower[nb.pos as usize * w..(nb.pos as usize + 1) * w];
                    row.iter_mut().zip(src).for_each(|(a, b)| *a |= b);
                }
            });
        }
        let mut ud = down.clone();
        for r in o.level_ranges.iter().rev() {
            let (head, upper) = ud.split_at_mut(r.end * w);
            let upper: &[u64] = upper;
            head[r.start * w..].par_chunks_mut(w).enumerate().for_each(|(i, row)| {
                let p = r.start + i;
                for nb in o.ups(p) {
                    let off = (nb.pos as usize - r.end) * w;
                    row.iter_mut().zip(&upper[off..off + w]).for_each(|(a, b)| *a |= b);
                }
            });
        }
        SwReach { w, down, ud }
    }

    /// The `down` bits of position `p`.
    pub(crate) fn down_row(&self, p: usize) -> &[u64] {
        &self.down[p * self.w..(p + 1) * self.w]
    }

    /// The `ud` bits of position `p`.
    pub(crate) fn ud_row(&self, p: usize) -> &[u64] {
        &self.ud[p * self.w..(p + 1) * self.w]
    }
}

/// Fills the switch-LID entries of the rows (by switch id) where `only` is true (all rows when
/// `None`) from the bitsets `reach` of `o`.
pub(crate) fn fill_switch_lid_rows(
    fabric: &Fabric,
    lids: &LidPlan,
    o: &Oriented,
    reach: &SwReach,
    lfts: &mut Lfts,
    only: Option<&[bool]>,
) {
    let (w, down, ud) = (reach.w, &reach.down, &reach.ud);
    let lid_at: Vec<Lid> = o.order.iter().map(|&s| lids.switch_lid(s)).collect();
    let unoriented: Vec<Lid> = fabric
        .switch_ids()
        .filter(|s| o.pos[s.idx()] == NONE)
        .map(|s| lids.switch_lid(s))
        .filter(|&l| l != 0)
        .collect();

    lfts.par_rows_mut().enumerate().for_each(|(s, row)| {
        if only.is_some_and(|r| !r.get(s).copied().unwrap_or(false)) {
            return;
        }
        for &lid in &unoriented {
            row[lid as usize] = NO_ROUTE;
        }
        let sp = o.pos[s];
        if sp == NONE {
            for &lid in &lid_at {
                if lid != 0 {
                    row[lid as usize] = NO_ROUTE;
                }
            }
            return;
        }
        let sp = sp as usize;
        let groups = fabric.port_groups(SwitchId(s as u32));
        let mut done = vec![0u64; w];
        done[sp / 64] |= 1 << (sp % 64);
        if lid_at[sp] != 0 {
            row[lid_at[sp] as usize] = 0;
        }
        let mut assign = |nbrs: &[Nbr], reach: &[u64], done: &mut [u64]| {
            for nb in nbrs {
                let ports = &groups[nb.group as usize].ports;
                // Parallel ports of the group in turn (round robin over the destinations).
                let mut k = 0;
                let src = &reach[nb.pos as usize * w..(nb.pos as usize + 1) * w];
                for (wi, (d, &r)) in done.iter_mut().zip(src).enumerate() {
                    let mut new = r & !*d;
                    *d |= new;
                    while new != 0 {
                        let b = new.trailing_zeros() as usize;
                        new &= new - 1;
                        let t = wi * 64 + b;
                        let lid = lid_at[t];
                        if lid != 0 {
                            row[lid as usize] = ports[k];
                            k += 1;
                            if k == ports.len() {
                                k = 0;
                            }
                        }
                    }
                }
            }
        };
        assign(o.downs(sp), down, &mut done);
        assign(o.ups(sp), ud, &mut done);
        // Unreachable switches (bits not done, word by word).
        for (wi, &d) in done.iter().enumerate() {
            let mut left = !d;
            while left != 0 {
                let t = wi * 64 + left.trailing_zeros() as usize;
                left &= left - 1;
                if let Some(&lid) = lid_at.get(t) {
                    if lid != 0 {
                        row[lid as usize] = NO_ROUTE;
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use crate::check::{self, TraceEnd};
    use crate::testutil::*;
    use crate::{EngineKind, LidSet};
    use fabric_topology::Fabric;

    fn reach_all_switches(f: &Fabric, kind: EngineKind) -> usize {
        let (r, lids, lfts) = routed(f, kind, 1);
        if kind == EngineKind::Dmodc {
            assert_eq!(check::updown_violations(f, &r, &lids, &lfts, LidSet::Base), 0);
        }
        assert!(check::cdg_acyclic(f, &lids, &lfts, LidSet::Base));
        let mut hops = Vec::new();
        let mut missing = 0;
        for ep in f.end_port_ids().filter(|&e| f.end_port_live(e)) {
            for s in f.switch_ids().filter(|&s| f.switch(s).up) {
                match crate::trace(f, &lfts, ep, lids.switch_lid(s), &mut hops) {
                    Ok(TraceEnd::Switch(t)) => assert_eq!(t, s),
                    _ => missing += 1,
                }
            }
        }
        // Switch rows: each switch routes its own LID to port 0.
        for s in f.switch_ids().filter(|&s| f.switch(s).up) {
            assert_eq!(lfts.get(s, lids.switch_lid(s)), 0);
        }
        missing
    }

    #[test]
    fn every_switch_is_reachable_on_a_complete_pgft() {
        let t = pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]);
        assert_eq!(reach_all_switches(&t.fabric, EngineKind::Dmodc), 0);
        assert_eq!(reach_all_switches(&t.fabric, EngineKind::UpDown), 0);
    }

    #[test]
    fn dead_switch_lids_are_not_routed() {
        let t = pgft(&[2, 2, 2], &[1, 2, 2], &[1, 1, 1]);
        let top = t.fabric.switch_ids().last().unwrap();
        let f = t
            .fabric
            .apply(&[fabric_topology::FabricEvent::SwitchDown(t.fabric.switch(top).guid)])
            .unwrap();
        let (_, lids, lfts) = routed(&f, EngineKind::Dmodc, 1);
        for s in f.switch_ids() {
            assert_eq!(lfts.get(s, lids.switch_lid(top)), crate::NO_ROUTE);
        }
        assert!(lfts.row(top).iter().all(|&b| b == crate::NO_ROUTE));
        assert_eq!(reach_all_switches(&f, EngineKind::Dmodc), 0);
    }
}
