//! The layering of the tables [`super::MuSssp`] installed last, kept for the daemon's and
//! `fabricctl`'s [`super::layering`] call on the same tables: the engine already layered them
//! to choose its candidate, and the layering costs as much as the routing. An entry is used
//! only for exactly the same inputs (channels, live switches, destination LIDs, the tables'
//! shape and their columns of those LIDs), so the result is the one a fresh computation gives:
//! the layering reads nothing else of the tables (its routes are the walks towards the base
//! and switch LIDs of [`vl::base_lids`]; other LIDs' entries of [`VlLayering::layer`] are 0).
//! So the daemon's call at LMC 1 hits too, on tables that also hold the escape LIDs the
//! Up*/Down* routing wrote after the engine (before 28 Nov 2026 the whole tables were
//! compared and that call layered again: ~30 % of a five-phase generation on SLIMFLY(5;4)).

use std::sync::Mutex;

use fabric_topology::{Fabric, Lid};

use crate::lft::Lfts;
use crate::lid::LidPlan;
use crate::sssp::Channels;
use crate::vl::{self, VlLayering};

struct Entry {
    key: Key,
    /// The tables' shape (switches, row length) and their entries of `key.dlids`, switch-major.
    num_switches: usize,
    row_len: usize,
    columns: Vec<fabric_topology::PortNum>,
    layering: VlLayering,
}

impl Entry {
    fn new(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, layering: VlLayering) -> Self {
        let key = Key::new(fabric, lids);
        let columns = columns(lfts, &key.dlids);
        Entry {
            key,
            num_switches: lfts.num_switches(),
            row_len: lfts.row_len(),
            columns,
            layering,
        }
    }

    /// The layering, if `lfts` on `fabric` and `lids` are inputs it was computed from.
    fn get(&self, fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> Option<VlLayering> {
        if lfts.num_switches() != self.num_switches || lfts.row_len() != self.row_len {
            return None;
        }
        let key = Key::new(fabric, lids);
        (key == self.key && same_columns(lfts, &key.dlids, &self.columns)).then(|| self.layering.clone())
    }
}

/// Whether `columns` are [`columns`]`(lfts, dlids)`, compared in place (no copy of the
/// tables' columns on the daemon's lookup).
fn same_columns(lfts: &Lfts, dlids: &[Lid], columns: &[fabric_topology::PortNum]) -> bool {
    if columns.len() != lfts.num_switches() * dlids.len() {
        return false;
    }
    (0..lfts.num_switches()).all(|s| {
        let row = lfts.row(fabric_topology::SwitchId(s as u32));
        let want = &columns[s * dlids.len()..(s + 1) * dlids.len()];
        dlids
            .iter()
            .zip(want)
            .all(|(&l, &p)| row.get(l as usize).copied().unwrap_or(crate::lft::NO_ROUTE) == p)
    })
}

/// The entries of `dlids` in every row of `lfts` (switch-major).
fn columns(lfts: &Lfts, dlids: &[Lid]) -> Vec<fabric_topology::PortNum> {
    let mut v = Vec::with_capacity(lfts.num_switches() * dlids.len());
    for s in 0..lfts.num_switches() {
        let row = lfts.row(fabric_topology::SwitchId(s as u32));
        v.extend(
            dlids
                .iter()
                .map(|&l| row.get(l as usize).copied().unwrap_or(crate::lft::NO_ROUTE)),
        );
    }
    v
}

#[derive(PartialEq, Eq)]
struct Key {
    start: Vec<u32>,
    port: Vec<fabric_topology::PortNum>,
    remote: Vec<u32>,
    up: Vec<bool>,
    dlids: Vec<Lid>,
}

impl Key {
    fn new(fabric: &Fabric, lids: &LidPlan) -> Self {
        let ch = Channels::new(fabric);
        Key {
            start: ch.start,
            port: ch.port,
            remote: ch.remote,
            up: fabric.switch_ids().map(|s| fabric.switch(s).up).collect(),
            dlids: vl::base_lids(fabric, lids),
        }
    }
}

static LAST: Mutex<Option<Entry>> = Mutex::new(None);

/// Remembers `layering` as the layering of `lfts` (see the module documentation).
pub(super) fn store(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, layering: VlLayering) {
    let e = Entry::new(fabric, lids, lfts, layering);
    if let Ok(mut g) = LAST.lock() {
        *g = Some(e);
    }
}

/// The remembered layering of `lfts`, if these are the inputs it was computed from.
pub(super) fn lookup(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> Option<VlLayering> {
    let g = LAST.lock().ok()?;
    g.as_ref()?.get(fabric, lids, lfts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::EngineKind;

    /// An entry answers for tables that differ from its own only outside the layered LIDs'
    /// columns (the escape LIDs at LMC 1), with the fresh layering; a change in a layered
    /// column or in the tables' shape misses.
    #[test]
    fn entries_compare_the_layered_columns_only() {
        let f = fabric_topology::gen::generate_str("SLIMFLY(5;4)", None).unwrap();
        let (_, lids, lfts) = routed(&f, EngineKind::MuSssp, 1);
        let escape = lids.escape_offset().unwrap();
        let fresh = super::super::layering::fewest(&f, &lids, &lfts).unwrap();
        let e = Entry::new(&f, &lids, &lfts, fresh.clone());
        assert_eq!(e.get(&f, &lids, &lfts).as_ref(), Some(&fresh));
        let dlids = vl::base_lids(&f, &lids);
        let end = f.end_port_ids().next().unwrap();
        let esc = lids.base_lid(end) + escape;
        assert!(!dlids.contains(&esc));
        let s = fabric_topology::SwitchId(0);
        let flip = |t: &mut Lfts, lid: Lid| {
            let p = t.get(s, lid);
            t.set(s, lid, if p == 1 { 2 } else { 1 });
        };
        let mut escape_changed = lfts.clone();
        flip(&mut escape_changed, esc);
        assert_eq!(
            super::super::layering::fewest(&f, &lids, &escape_changed).unwrap(),
            fresh,
            "the layering does not read the escape column"
        );
        assert_eq!(e.get(&f, &lids, &escape_changed).as_ref(), Some(&fresh));
        let mut base_changed = lfts.clone();
        flip(&mut base_changed, dlids[0]);
        assert!(e.get(&f, &lids, &base_changed).is_none());
        let bigger = lfts.clone().recycled(f.num_switches(), lfts.row_len() as Lid + 10);
        assert!(e.get(&f, &lids, &bigger).is_none());
    }
}
