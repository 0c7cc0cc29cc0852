//! The snapshot's port rows, kept between publications and rebuilt only where something
//! changed (issue #17: ~280 000 ports on the 34 992-node fabric; rebuilding every row with its
//! names at each commit was a third of the daemon's CPU during faults).
//!
//! A row depends on the port's counter track, its flaps (which also age with time), the
//! isolations, the last poll's breaches and refusals, the `[health]` settings and the names
//! and cabling of the fabric. The monitor marks ports whose track changed as dirty; ports with
//! flaps, isolated ends, breaches and refusals are *volatile*: recomputed at every
//! publication, and once more after they stop being volatile. A change of settings or of the
//! names and cabling ([`names_fingerprint`]) rebuilds every row.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use fabric_southbound::CounterPort;
use fabric_topology::Fabric;

use super::PortHealth;
use crate::config::HealthConfig;

/// The rows and what decides which ones to rebuild.
#[derive(Default)]
pub(super) struct Rows {
    /// One row per port of the snapshot, in port order.
    rows: BTreeMap<CounterPort, Arc<PortHealth>>,
    /// Ports whose track changed or was dropped since the last publication.
    dirty: BTreeSet<CounterPort>,
    /// The volatile ports of the last publication.
    volatile: BTreeSet<CounterPort>,
    /// Rebuild every row at the next publication.
    all: bool,
    /// What the rows were built with.
    names: Option<u64>,
    config: Option<Arc<HealthConfig>>,
}

/// Which ports a publication rebuilds.
pub(super) enum Rebuild {
    /// Every port of the snapshot.
    All,
    /// These ports (each one: its row, or its removal when no longer in the snapshot).
    Some(BTreeSet<CounterPort>),
}

impl Rows {
    /// The port's track changed (a read, a failed read, a new or dropped track).
    pub fn mark(&mut self, port: CounterPort) {
        if !self.all {
            self.dirty.insert(port);
        }
    }

    /// Rebuild every row at the next publication (the tracks were cleared).
    pub fn mark_all(&mut self) {
        self.all = true;
        self.dirty.clear();
    }

    /// What to rebuild for a publication with these settings, names and volatile ports (which
    /// become the volatile ports of this publication).
    pub fn plan(&mut self, config: &Arc<HealthConfig>, names: u64, volatile: BTreeSet<CounterPort>) -> Rebuild {
        let same = self.names == Some(names) && self.config.as_ref().is_some_and(|c| Arc::ptr_eq(c, config));
        self.names = Some(names);
        self.config = Some(config.clone());
        let before = std::mem::replace(&mut self.volatile, volatile);
        if self.all || !same {
            self.all = false;
            self.dirty.clear();
            self.rows.clear();
            return Rebuild::All;
        }
        let mut todo = std::mem::take(&mut self.dirty);
        todo.extend(before);
        todo.extend(self.volatile.iter().copied());
        Rebuild::Some(todo)
    }

    /// Whether `port` is volatile in this publication.
    pub fn volatile(&self, port: &CounterPort) -> bool {
        self.volatile.contains(port)
    }

    pub fn set(&mut self, row: PortHealth) {
        self.rows.insert(row.port, Arc::new(row));
    }

    pub fn remove(&mut self, port: &CounterPort) {
        self.rows.remove(port);
    }

    /// The rows in the snapshot's order: notable ports first, worst first (isolated, warning,
    /// then by rate and flaps, then port); the others follow in port order (a port without
    /// anything to show is ok with no error rate and no flaps: only the port tells them apart,
    /// so the map's order is theirs and they need no sort).
    pub fn ordered(&self) -> Vec<Arc<PortHealth>> {
        let mut notable: Vec<Arc<PortHealth>> = self.rows.values().filter(|r| r.notable()).cloned().collect();
        notable.sort_by(|a, b| {
            b.state
                .cmp(&a.state)
                .then(b.max_error_rate.total_cmp(&a.max_error_rate))
                .then(b.flaps.cmp(&a.flaps))
                .then(a.port.cmp(&b.port))
        });
        let mut out = Vec::with_capacity(self.rows.len());
        out.extend(notable);
        out.extend(self.rows.values().filter(|r| !r.notable()).cloned());
        out
    }
}

/// A hash of everything a row's names and link ends are made of: switch GUIDs, names and the
/// remote of every port; end port GUIDs, names and attachments (not the link states: a
/// link-down leaves the names as they are).
pub(super) fn names_fingerprint(f: &Fabric) -> u64 {
    let mut h = DefaultHasher::new();
    f.num_switches().hash(&mut h);
    for s in f.switches() {
        s.guid.hash(&mut h);
        s.desc.hash(&mut h);
        s.ports.len().hash(&mut h);
        for p in &s.ports {
            p.remote.hash(&mut h);
        }
    }
    f.num_end_ports().hash(&mut h);
    for e in f.end_ports() {
        e.port_guid.hash(&mut h);
        e.desc.hash(&mut h);
        e.attach.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::health::PortState;

    fn row(port: CounterPort, state: PortState, rate: f64, flaps: u32) -> PortHealth {
        PortHealth {
            port,
            name: port.to_string(),
            remote: String::new(),
            state,
            reason: String::new(),
            counters: Vec::new(),
            max_error_rate: rate,
            flaps,
            read_error: String::new(),
        }
    }

    fn port(i: u64) -> CounterPort {
        if i.is_multiple_of(3) {
            CounterPort::EndPort(0x1000 + i)
        } else {
            CounterPort::Switch {
                switch: 0x10 + i / 40,
                port: (i % 40) as u8,
            }
        }
    }

    proptest! {
        /// The order without a full sort is the order of the full sort the snapshot was
        /// built with before (notable first by state, rate, flaps, port; then the rest).
        #[test]
        fn ordered_rows_are_the_fully_sorted_rows(
            specs in proptest::collection::vec((0u64..400, 0u8..3, 0u8..4, 0u32..3), 0..200)
        ) {
            let mut rows = Rows::default();
            let mut reference: BTreeMap<CounterPort, PortHealth> = BTreeMap::new();
            for (i, s, r, f) in specs {
                let state = [PortState::Ok, PortState::Warning, PortState::Isolated][s as usize];
                let rate = [0.0, 0.5, 2.0, 7.25][r as usize];
                let h = row(port(i), state, rate, f);
                reference.insert(h.port, h.clone());
                rows.set(h);
            }
            let mut full: Vec<PortHealth> = reference.into_values().collect();
            full.sort_by(|a, b| {
                (b.notable(), b.state)
                    .cmp(&(a.notable(), a.state))
                    .then(b.max_error_rate.total_cmp(&a.max_error_rate))
                    .then(b.flaps.cmp(&a.flaps))
                    .then(a.port.cmp(&b.port))
            });
            let got: Vec<PortHealth> = rows.ordered().iter().map(|r| (**r).clone()).collect();
            prop_assert_eq!(got, full);
        }
    }

    #[test]
    fn a_publication_rebuilds_dirty_and_volatile_ports_only() {
        let cfg = Arc::new(HealthConfig::default());
        let (a, b, c, d) = (port(1), port(2), port(3), port(4));
        let mut rows = Rows::default();
        assert!(
            matches!(rows.plan(&cfg, 7, BTreeSet::new()), Rebuild::All),
            "first publication"
        );
        assert!(
            matches!(rows.plan(&cfg, 7, BTreeSet::new()), Rebuild::Some(ref t) if t.is_empty()),
            "nothing changed"
        );
        rows.mark(a);
        match rows.plan(&cfg, 7, [b].into()) {
            Rebuild::Some(t) => assert_eq!(t, BTreeSet::from([a, b])),
            Rebuild::All => panic!("a full rebuild for one dirty port"),
        }
        assert!(rows.volatile(&b) && !rows.volatile(&a));
        // `b` stopped being volatile: rebuilt once more (its row loses its flaps), with `c`.
        match rows.plan(&cfg, 7, [c].into()) {
            Rebuild::Some(t) => assert_eq!(t, BTreeSet::from([b, c])),
            Rebuild::All => panic!("a full rebuild"),
        }
        match rows.plan(&cfg, 7, BTreeSet::new()) {
            Rebuild::Some(t) => assert_eq!(t, BTreeSet::from([c])),
            Rebuild::All => panic!("a full rebuild"),
        }
        // Other names or cabling, other settings, or every track cleared: everything.
        assert!(
            matches!(rows.plan(&cfg, 8, BTreeSet::new()), Rebuild::All),
            "names changed"
        );
        let other = Arc::new(HealthConfig::default());
        assert!(
            matches!(rows.plan(&other, 8, BTreeSet::new()), Rebuild::All),
            "settings reloaded"
        );
        rows.mark(d);
        rows.mark_all();
        assert!(matches!(rows.plan(&other, 8, BTreeSet::new()), Rebuild::All), "cleared");
        assert!(matches!(rows.plan(&other, 8, BTreeSet::new()), Rebuild::Some(ref t) if t.is_empty()));
    }

    #[test]
    fn the_names_fingerprint_ignores_link_states_but_not_cabling() {
        let f = fabric_topology::gen::generate_str("PGFT(2;4,4;1,2;1,1)", None).expect("generated fabric");
        let s = f
            .switches()
            .iter()
            .find(|s| {
                s.external_ports()
                    .any(|(_, p)| matches!(p.remote, fabric_topology::Remote::Switch { .. }))
            })
            .expect("a switch with a link");
        let (pn, _) = s
            .external_ports()
            .find(|(_, p)| matches!(p.remote, fabric_topology::Remote::Switch { .. }))
            .expect("a link");
        let down = f
            .apply(&[fabric_topology::FabricEvent::LinkDown {
                switch: s.guid,
                port: pn,
            }])
            .expect("link down");
        assert_eq!(names_fingerprint(&f), names_fingerprint(&down));
        let other = fabric_topology::gen::generate_str("PGFT(2;4,4;1,1;1,1)", None).expect("generated fabric");
        assert_ne!(names_fingerprint(&f), names_fingerprint(&other));
    }
}
