//! SL-to-VL programming (the escape VL: SL [`ESCAPE_SL`] → VL [`ESCAPE_VL`]), off the critical
//! path: the tables still missing ([`sl2vl_targets`], pure), the background programmer that
//! writes them in passes at background priority, and what [`SouthboundDriver::escape_vl_ready`]
//! and [`SouthboundDriver::escape_vl_status`] report.
//!
//! [`SouthboundDriver::escape_vl_ready`]: fabric_southbound::SouthboundDriver::escape_vl_ready
//! [`SouthboundDriver::escape_vl_status`]: fabric_southbound::SouthboundDriver::escape_vl_status

use std::sync::{Arc, Weak};
use std::time::Duration;

use fabric_southbound::{DriverError, EscapeVlStatus};
use fabric_topology::{FabricEvent, Guid};
use tokio::sync::Notify;

use super::inner::{lock, Inner};
use super::state::{dr, live, Sl2VlDone, State};
use crate::mad::*;
use crate::transport;

/// The virtual lane escape-LID traffic (SL 1) is mapped to.
pub const ESCAPE_VL: u8 = 1;
/// Service level of escape-LID traffic.
pub const ESCAPE_SL: u8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Sl2VlSet {
    /// Switch GUID, or CA port GUID.
    guid: Guid,
    is_switch: bool,
    path: Vec<u8>,
    /// Input and output port (switches; `None` for the optimized all-pairs Set and for CAs).
    ports: Option<(u8, u8)>,
    modifier: u32,
}

impl Sl2VlSet {
    fn describe(&self) -> String {
        let who = if self.is_switch { "switch" } else { "CA port" };
        let g = fabric_topology::fmt_guid(self.guid);
        match self.ports {
            Some((i, o)) => format!("SLtoVLMappingTable Set on {who} {g} input port {i} output port {o}"),
            None if self.is_switch => format!("SLtoVLMappingTable Set (all ports) on {who} {g}"),
            None => format!("SLtoVLMappingTable Set on {who} {g}"),
        }
    }
}

/// The SL-to-VL Sets still missing: every up switch advertising IsSLMappingSupported on port 0
/// (one all-pairs Set with OptimizedSLtoVLMappingProgramming, else each (input, output) pair of
/// live ports, input port 0 only on an enhanced port 0) and every up CA port advertising it.
fn sl2vl_targets(st: &State) -> Vec<Sl2VlSet> {
    let mut out = Vec::new();
    for s in st.switches.iter().filter(|s| s.up) {
        let Some(p0) = s.ports.first().and_then(|p| p.info.as_ref()) else {
            continue;
        };
        if p0.capability_mask() & CAP_SL_MAPPING == 0 {
            continue;
        }
        if s.info.optimized_sl2vl() {
            if !s.sl2vl.all {
                out.push(Sl2VlSet {
                    guid: s.guid,
                    is_switch: true,
                    path: s.path.clone(),
                    ports: None,
                    modifier: SlToVl::all_ports_modifier(),
                });
            }
            continue;
        }
        let linked: Vec<u8> = (1..=s.nports)
            .filter(|p| s.ports.get(*p as usize).and_then(|r| r.info.as_ref()).is_some_and(live))
            .collect();
        let port0 = s.info.enhanced_port0().then_some(0u8);
        for inp in port0.into_iter().chain(linked.iter().copied()) {
            for &o in &linked {
                if inp != o && !s.sl2vl.contains(inp, o) {
                    out.push(Sl2VlSet {
                        guid: s.guid,
                        is_switch: true,
                        path: s.path.clone(),
                        ports: Some((inp, o)),
                        modifier: SlToVl::switch_modifier(inp, o),
                    });
                }
            }
        }
    }
    for c in st.cas.iter().filter(|c| c.up && !c.sl2vl) {
        if c.info.capability_mask() & CAP_SL_MAPPING == 0 {
            continue;
        }
        out.push(Sl2VlSet {
            guid: c.port_guid,
            is_switch: false,
            path: c.path.clone(),
            ports: None,
            modifier: 0,
        });
    }
    out
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Inner {
    /// Asks for an SL-to-VL pass that starts from now; returns its number.
    fn request_sl2vl(&self) -> u64 {
        let n = {
            let mut p = lock(&self.sl2vl);
            p.requested += 1;
            p.requested
        };
        self.sl2vl_kick.notify_one();
        n
    }

    /// After physical events: switches and CAs that came back get their tables again (they may
    /// have rebooted), and a pass writes what new or relinked ports lack. Nothing before the
    /// first pass was asked for (the daemon asks for it after its first commit).
    pub(super) fn sl2vl_after_events(&self, events: &[FabricEvent]) {
        let wanted = events.iter().any(|e| {
            matches!(
                e,
                FabricEvent::LinkUp { .. } | FabricEvent::SwitchUp(_) | FabricEvent::EndPortUp(_)
            )
        });
        if !wanted || lock(&self.sl2vl).requested == 0 {
            return;
        }
        sl2vl_forget(&mut lock(&self.state), events);
        self.request_sl2vl();
    }
}

/// Forgets the SL-to-VL tables of the switches and CA ports that came back in `events` (they
/// may have rebooted with default tables). Relinked ports need no forgetting: pairs of ports
/// that were never linked were never written.
fn sl2vl_forget(st: &mut State, events: &[FabricEvent]) {
    for e in events {
        match e {
            FabricEvent::SwitchUp(g) => {
                if let Some(&i) = st.sw_by_guid.get(g) {
                    st.switches[i].sl2vl = Sl2VlDone::default();
                }
            }
            FabricEvent::EndPortUp(g) => {
                if let Some(&i) = st.ca_by_guid.get(g) {
                    st.cas[i].sl2vl = false;
                }
            }
            _ => {}
        }
    }
}

/// The background SL-to-VL programmer: runs a pass whenever one is requested.
pub(super) async fn sl2vl_programmer(weak: Weak<Inner>, kick: Arc<Notify>) {
    loop {
        let due = {
            let Some(inner) = weak.upgrade() else { return };
            let p = lock(&inner.sl2vl);
            (p.completed < p.requested).then_some(p.requested)
        };
        match due {
            Some(n) => {
                let Some(inner) = weak.upgrade() else { return };
                sl2vl_pass(&inner, n).await;
            }
            None => {
                // A kick while not waiting leaves a permit: nothing is lost.
                tokio::select! {
                    () = kick.notified() => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

/// One pass: every missing table, at background priority, all in flight together (the
/// transport bounds the window). Records what was written and the failures, then wakes waiters.
async fn sl2vl_pass(inner: &Inner, n: u64) {
    let started = std::time::Instant::now();
    let (targets, table, gen) = {
        let st = lock(&inner.state);
        (sl2vl_targets(&st), table_in_force(&st).encode(), st.sl2vl_gen)
    };
    lock(&inner.sl2vl).pending = targets.len() as u64;
    let mut pend = Vec::with_capacity(targets.len());
    let mut failures: Vec<(Guid, String)> = Vec::new();
    for t in &targets {
        let route = dr(&t.path);
        match Smp::request(&route, METHOD_SET, ATTR_SL2VL, t.modifier, &table) {
            Ok(smp) => pend.push((t, inner.tp.submit_background(route, smp))),
            Err(e) => failures.push((t.guid, format!("{}: {e}", t.describe()))),
        }
    }
    let mut written = Vec::with_capacity(pend.len());
    for (t, rx) in pend {
        match transport::wait(rx).await {
            Ok(r) if r.smp.status() == 0 => written.push(t),
            Ok(r) => failures.push((t.guid, format!("{}: MAD status {:#06x}", t.describe(), r.smp.status()))),
            Err(e) => failures.push((t.guid, format!("{}: {e}", t.describe()))),
        }
    }
    let superseded = {
        let mut st = lock(&inner.state);
        // A table written under another plan is not the one in force: nothing is recorded,
        // and the next pass (requested by the plan change) writes it again.
        let superseded = st.sl2vl_gen != gen;
        for t in written.iter().filter(|_| !superseded) {
            if t.is_switch {
                if let Some(&i) = st.sw_by_guid.get(&t.guid) {
                    match t.ports {
                        Some((a, b)) => st.switches[i].sl2vl.insert(a, b),
                        None => st.switches[i].sl2vl.all = true,
                    }
                }
            } else if let Some(&i) = st.ca_by_guid.get(&t.guid) {
                st.cas[i].sl2vl = true;
            }
        }
        superseded
    };
    let failed = failures.len() as u64;
    if failed > 0 {
        tracing::warn!(
            failed,
            written = written.len(),
            first = %failures[0].1,
            "SL-to-VL programming left tables unwritten (the escape VL is not ready)"
        );
    } else if superseded {
        tracing::info!(
            tables = written.len(),
            "SL-to-VL pass superseded by a new data VL plan (its tables are written again)"
        );
    } else if !written.is_empty() {
        tracing::info!(
            tables = written.len(),
            ms = started.elapsed().as_millis() as u64,
            "SL-to-VL tables programmed (escape VL ready)"
        );
    }
    {
        let mut p = lock(&inner.sl2vl);
        p.completed = p.completed.max(n);
        p.failed = failed;
        p.pending = failed;
        p.first_failure = failures.into_iter().next();
        p.written += written.len() as u64;
        if failed == 0 && (!written.is_empty() || p.ready_at_unix_ms == 0) {
            p.ready_at_unix_ms = unix_ms();
        }
    }
    inner.sl2vl_finished.notify_waiters();
}

/// The SL-to-VL table the programmer writes: the data VL plan in force, else the escape-only
/// table (SL [`ESCAPE_SL`] on VL [`ESCAPE_VL`], every other SL on VL 0).
pub(super) fn table_in_force(st: &State) -> SlToVl {
    st.data_vl_table.unwrap_or_else(|| SlToVl::escape(ESCAPE_VL))
}

/// Forgets every SL-to-VL table written (a new plan is in force: all are written again).
pub(super) fn sl2vl_forget_all(st: &mut State) {
    for s in &mut st.switches {
        s.sl2vl = Sl2VlDone::default();
    }
    for c in &mut st.cas {
        c.sl2vl = false;
    }
}

/// Starts a pass for what is still missing and waits for it (the caller has started the
/// background tasks): `Ok` when every table is written, else the first failure and how many more.
pub(super) async fn escape_vl_ready(inner: &Inner) -> Result<(), DriverError> {
    wait_for_pass(inner, "escape VL not ready").await
}

/// Like [`escape_vl_ready`], the failure prefixed with `what`.
pub(super) async fn wait_for_pass(inner: &Inner, what: &str) -> Result<(), DriverError> {
    let want = inner.request_sl2vl();
    loop {
        let notified = inner.sl2vl_finished.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let p = lock(&inner.sl2vl);
            if p.completed >= want {
                return match &p.first_failure {
                    None => Ok(()),
                    Some((guid, first)) => Err(DriverError::Protocol {
                        guid: Some(*guid),
                        message: if p.failed > 1 {
                            format!("{what}: {first} (and {} more table(s))", p.failed - 1)
                        } else {
                            format!("{what}: {first}")
                        },
                    }),
                };
            }
        }
        notified.await;
    }
}

/// The escape VL is ready when a pass finished after the last request with nothing failed.
pub(super) fn escape_vl_status(inner: &Inner) -> EscapeVlStatus {
    let p = lock(&inner.sl2vl);
    EscapeVlStatus {
        ready: p.completed >= 1 && p.completed >= p.requested && p.failed == 0,
        pending: p.pending,
        error: p.first_failure.as_ref().map(|(_, w)| w.clone()),
        ready_at_unix_ms: p.ready_at_unix_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::recompute_paths;
    use super::super::state::tests::{pi, rec, two_by_two, CA, L0, L1, S0, S1};
    use super::*;

    /// Sets IsSLMappingSupported on every switch port 0 and on the CA.
    fn with_sl_mapping(st: &mut State) {
        for s in &mut st.switches {
            if let Some(i) = s.ports[0].info.as_mut() {
                i.set_capability_mask(CAP_SL_MAPPING);
            }
        }
        for c in &mut st.cas {
            c.info.set_capability_mask(CAP_SL_MAPPING);
        }
    }

    fn pairs_of(targets: &[Sl2VlSet], g: Guid) -> Vec<(u8, u8)> {
        let mut v: Vec<(u8, u8)> = targets
            .iter()
            .filter(|t| t.guid == g && t.is_switch)
            .filter_map(|t| t.ports)
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn sl2vl_pairs_of_linked_ports_only() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        // Without IsSLMappingSupported nothing is sent (as OpenSM).
        assert!(sl2vl_targets(&st).is_empty());
        with_sl_mapping(&mut st);
        // Spine 0 (2 ports, both cabled): 1→2 and 2→1; base port 0 is no input.
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, S0), vec![(1, 2), (2, 1)]);
        let s0 = t.iter().find(|x| x.guid == S0 && x.ports == Some((2, 1))).unwrap();
        assert_eq!(s0.modifier, 0x0201);
        assert_eq!(s0.path, rec(&st, S0).path);
        // Leaf 1 port 1 is not cabled in this fixture but ACTIVE in its PortInfo; take it
        // down: pairs with port 1 disappear.
        let i = st.sw_by_guid[&L1];
        st.switches[i].ports[1].info = Some(pi(PortState::Down, PHYS_POLLING));
        st.switches[i].ports[4].info = Some(pi(PortState::Down, PHYS_DISABLED));
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, L1), vec![(2, 3), (3, 2)]);
        // Leaf 0: 4 live ports, 12 ordered pairs.
        assert_eq!(pairs_of(&t, L0).len(), 12);
        // The CA: one table, modifier 0.
        let ca: Vec<_> = t.iter().filter(|x| !x.is_switch).collect();
        assert_eq!(ca.len(), 1);
        assert_eq!((ca[0].guid, ca[0].modifier, ca[0].ports), (CA, 0, None));
    }

    #[test]
    fn sl2vl_enhanced_port0_and_optimized_switches() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        with_sl_mapping(&mut st);
        let i = st.sw_by_guid[&S0];
        st.switches[i].info.raw[16] |= 0x08; // EnhancedPort0
        let j = st.sw_by_guid[&S1];
        st.switches[j].info.raw[11] |= 0x01; // OptimizedSLtoVLMappingProgramming
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, S0), vec![(0, 1), (0, 2), (1, 2), (2, 1)]);
        let s1: Vec<_> = t.iter().filter(|x| x.guid == S1).collect();
        assert_eq!(s1.len(), 1, "one Set for every pair");
        assert_eq!((s1[0].modifier, s1[0].ports), (0x0003_0000, None));
    }

    #[test]
    fn sl2vl_written_tables_are_not_written_again() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        with_sl_mapping(&mut st);
        let i = st.sw_by_guid[&S0];
        st.switches[i].sl2vl.insert(1, 2);
        st.cas[0].sl2vl = true;
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, S0), vec![(2, 1)]);
        assert!(t.iter().all(|x| x.is_switch));
        assert!(st.switches[i].sl2vl.contains(1, 2) && !st.switches[i].sl2vl.contains(2, 1));
        // Output ports above 64 land in the right word.
        st.switches[i].sl2vl.insert(200, 130);
        assert!(st.switches[i].sl2vl.contains(200, 130) && !st.switches[i].sl2vl.contains(200, 2));
        // A down switch gets nothing.
        st.switches[i].up = false;
        assert!(pairs_of(&sl2vl_targets(&st), S0).is_empty());
    }

    #[test]
    fn sl2vl_of_relinked_ports_and_returning_nodes() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        with_sl_mapping(&mut st);
        // Leaf 1's port 2 is down while the tables are written.
        let i = st.sw_by_guid[&L1];
        st.switches[i].ports[2].info = Some(pi(PortState::Down, PHYS_POLLING));
        let first = sl2vl_targets(&st);
        for t in &first {
            if let (true, Some((a, b))) = (t.is_switch, t.ports) {
                let k = st.sw_by_guid[&t.guid];
                st.switches[k].sl2vl.insert(a, b);
            }
        }
        st.cas[0].sl2vl = true;
        assert!(sl2vl_targets(&st).is_empty(), "everything written");
        // The port comes up: the pairs with it, in both directions, are due.
        st.switches[i].ports[2].info = Some(pi(PortState::Init, PHYS_LINK_UP));
        let t = sl2vl_targets(&st);
        assert_eq!(pairs_of(&t, L1), vec![(1, 2), (2, 1), (2, 3), (2, 4), (3, 2), (4, 2)]);
        assert_eq!(t.len(), 6);
        // A switch and a CA that come back are written whole again; a link event alone
        // forgets nothing.
        let st2 = &mut st;
        sl2vl_forget(st2, &[FabricEvent::LinkUp { switch: S0, port: 1 }]);
        assert!(pairs_of(&sl2vl_targets(st2), S0).is_empty());
        sl2vl_forget(st2, &[FabricEvent::SwitchUp(S0), FabricEvent::EndPortUp(CA)]);
        let t = sl2vl_targets(st2);
        assert_eq!(pairs_of(&t, S0), vec![(1, 2), (2, 1)]);
        assert!(t.iter().any(|x| !x.is_switch && x.guid == CA));
    }

    #[test]
    fn sl2vl_failures_name_guid_and_ports() {
        let t = Sl2VlSet {
            guid: 0x20,
            is_switch: true,
            path: vec![1],
            ports: Some((3, 5)),
            modifier: 0x0305,
        };
        assert_eq!(
            t.describe(),
            "SLtoVLMappingTable Set on switch 0x0000000000000020 input port 3 output port 5"
        );
    }
}
