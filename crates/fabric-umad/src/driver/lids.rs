//! LID assignment ([`SouthboundDriver::configure_lids`]) and port activation: PortInfo Sets
//! (switch port 0: LID, MasterSMLID; CA ports: base LID, LMC, MasterSMLID, and IsSM on the
//! manager's own port), SwitchInfo.LinearFDBTop, then every INIT port ARMED and ACTIVE; the
//! LIDs in force found by discovery ([`lids_in_force`]).
//!
//! [`SouthboundDriver::configure_lids`]: fabric_southbound::SouthboundDriver::configure_lids

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use fabric_routing::LidPlan;
use fabric_southbound::DriverError;
use fabric_topology::{Fabric, Guid, Lid};

use super::data_vl::{ca_peer, link_op_vls};
use super::inner::{check_status, lock, submit, tp_err, Inner, ZERO};
use super::sa_snapshot;
use super::state::{dr, Peer, PortRec, State};
use crate::mad::*;
use crate::transport::{self, Transport};

fn lid16(guid: Guid, lid: Lid) -> Result<u16, DriverError> {
    u16::try_from(lid).ok().filter(|l| *l <= 0xbfff).ok_or_else(|| {
        DriverError::InvalidLidPlan(format!(
            "LID {lid} of {} is not a unicast LID",
            fabric_topology::fmt_guid(guid)
        ))
    })
}

/// An up switch of the plan, with what its LID configuration writes.
struct SwitchTarget {
    guid: Guid,
    route: Route,
    port0: PortInfo,
    lid: u16,
    info: SwitchInfo,
    ports: Vec<PortRec>,
    /// OperationalVLs each port is brought up with ([`link_op_vls`]), by port number.
    op_vls: Vec<Option<u8>>,
}

/// A CA port of the plan (down ones too: their LID is recorded, not written).
struct CaTarget {
    guid: Guid,
    route: Route,
    port: u32,
    info: PortInfo,
    base: u16,
    up: bool,
    /// OperationalVLs the port is brought up with ([`link_op_vls`]).
    op_vls: Option<u8>,
}

/// What [`configure_lids`] writes, taken from the state and the plan in one go.
struct LidTargets {
    switches: Vec<SwitchTarget>,
    cas: Vec<CaTarget>,
    /// LID of the manager's own port (its CA port, or its switch's port 0).
    sm_lid: u16,
}

/// The record of `guid` among `recs`, indexed by `by_guid`.
fn record<'a, T>(recs: &'a [T], by_guid: &HashMap<Guid, usize>, guid: Guid) -> Option<&'a T> {
    by_guid.get(&guid).map(|&i| &recs[i])
}

/// The targets of `lids` on `fabric`; every node of the fabric must be known to the driver.
/// Switches that are down or whose port 0 was never read are left out.
fn plan(st: &State, fabric: &Fabric, lids: &LidPlan) -> Result<LidTargets, DriverError> {
    let mut t = LidTargets {
        switches: Vec::new(),
        cas: Vec::new(),
        sm_lid: 0,
    };
    for id in fabric.end_port_ids() {
        let e = fabric.end_port(id);
        let c = record(&st.cas, &st.ca_by_guid, e.port_guid).ok_or(DriverError::UnknownEndPort(e.port_guid))?;
        let base = lid16(e.port_guid, lids.base_lid(id))?;
        if Some(Peer::Ca { port_guid: c.port_guid }) == st.local {
            t.sm_lid = base;
        }
        t.cas.push(CaTarget {
            guid: c.port_guid,
            route: dr(&c.path),
            port: u32::from(c.port_num),
            info: c.info.clone(),
            base,
            up: c.up,
            op_vls: link_op_vls(st, &c.info, ca_peer(st, c.port_guid)),
        });
    }
    for id in fabric.switch_ids() {
        let s = fabric.switch(id);
        let r = record(&st.switches, &st.sw_by_guid, s.guid).ok_or(DriverError::UnknownSwitch(s.guid))?;
        let lid = lid16(s.guid, lids.switch_lid(id))?;
        if Some(Peer::Switch { guid: r.guid, port: 0 }) == st.local {
            t.sm_lid = lid;
        }
        if !r.up {
            continue;
        }
        let Some(port0) = r.ports[0].info.clone() else { continue };
        t.switches.push(SwitchTarget {
            guid: r.guid,
            route: dr(&r.path),
            port0,
            lid,
            info: r.info.clone(),
            ports: r.ports.clone(),
            op_vls: r
                .ports
                .iter()
                .map(|p| p.info.as_ref().and_then(|i| link_op_vls(st, i, p.peer)))
                .collect(),
        });
    }
    Ok(t)
}

/// The subnet prefix written into every managed port's GidPrefix (OpenSM's default
/// `subnet_prefix`, the link-local `fe80::/64`): the ports' GIDs, and the PortGIDs the SA
/// accepts in joins and PathRecords, carry it.
const SUBNET_PREFIX: u64 = fabric_sa::subnet::DEFAULT_SUBNET_PREFIX;

/// The PortInfo Set image giving a CA port its base LID, LMC, master SM LID and GidPrefix.
fn ca_lid_image(info: &PortInfo, base: u16, sm_lid: u16, lmc: u8) -> PortInfo {
    let mut a = info.for_set();
    a.set_gid_prefix(SUBNET_PREFIX);
    a.set_lid(base);
    a.set_master_sm_lid(sm_lid);
    a.set_lmc(lmc);
    a
}

/// The SwitchInfo Set image writing LinearFDBTop (`top`, bounded by the switch's capacity);
/// with `clear_change` it also clears PortStateChange (a 1 written clears it).
fn fdb_top_image(si: &SwitchInfo, top: u16, clear_change: bool) -> SwitchInfo {
    let mut s = si.clone();
    s.set_linear_fdb_top(top.min(si.linear_fdb_cap().saturating_sub(1)));
    s.set_port_state_change(clear_change);
    s
}

/// Records the LIDs written (and LinearFDBTop `top`) in the state.
fn record_lids(st: &mut State, t: &LidTargets, top: u16, lmc: u8) {
    st.sm_lid = t.sm_lid;
    st.lmc = Some(lmc);
    for s in &t.switches {
        if let Some(&i) = st.sw_by_guid.get(&s.guid) {
            st.switches[i].lid = s.lid;
            if let Some(p0) = st.switches[i].ports[0].info.as_mut() {
                p0.set_gid_prefix(SUBNET_PREFIX);
                p0.set_lid(s.lid);
                p0.set_master_sm_lid(t.sm_lid);
            }
            st.switches[i].info.set_linear_fdb_top(top);
        }
    }
    for c in &t.cas {
        if let Some(&ci) = st.ca_by_guid.get(&c.guid) {
            st.cas[ci].info.set_gid_prefix(SUBNET_PREFIX);
            st.cas[ci].info.set_lid(c.base);
            st.cas[ci].info.set_lmc(lmc);
            st.cas[ci].info.set_master_sm_lid(t.sm_lid);
        }
    }
}

/// [`SouthboundDriver::configure_lids`](fabric_southbound::SouthboundDriver::configure_lids):
/// LIDs, LinearFDBTop, port activation, PortStateChange cleared, port states read back; then
/// this manager is master. Takes `sweep_lock`.
pub(super) async fn configure_lids(inner: &Inner, fabric: &Fabric, lids: &LidPlan) -> Result<(), DriverError> {
    lids.check_covers(fabric)
        .map_err(|e| DriverError::InvalidLidPlan(e.to_string()))?;
    let _guard = inner.sweep_lock.lock().await;
    let tp = &inner.tp;
    let top = lids.top();
    let t = plan(&lock(&inner.state), fabric, lids)?;
    let (sm_lid, lmc) = (t.sm_lid, lids.lmc);
    // 1. LIDs: switch port 0 and CA ports (the transport adds the M_Key protection to these
    // Sets: they are where every managed port gets its key).
    let mut port_sets = Vec::new();
    let mut pend = Vec::new();
    for s in &t.switches {
        let mut a = s.port0.for_set();
        a.set_gid_prefix(SUBNET_PREFIX);
        a.set_lid(s.lid);
        a.set_master_sm_lid(sm_lid);
        a.set_lmc(0);
        port_sets.push((
            s.guid,
            0,
            "PortInfo (switch LID)",
            submit(tp, &s.route, METHOD_SET, ATTR_PORT_INFO, 0, &a.raw)?,
        ));
    }
    for c in t.cas.iter().filter(|c| c.up) {
        let mut a = ca_lid_image(&c.info, c.base, sm_lid, lmc);
        if c.route.hops() == 0 {
            a.set_capability_mask(a.capability_mask() | CAP_IS_SM);
        }
        port_sets.push((
            c.guid,
            c.port,
            "PortInfo (CA LID)",
            submit(tp, &c.route, METHOD_SET, ATTR_PORT_INFO, c.port, &a.raw)?,
        ));
    }
    // 2. LinearFDBTop.
    let top16 =
        u16::try_from(top).map_err(|_| DriverError::InvalidLidPlan(format!("top LID {top} is above 0xffff")))?;
    for s in &t.switches {
        let set = fdb_top_image(&s.info, top16, false);
        pend.push((
            s.guid,
            "SwitchInfo (LinearFDBTop)",
            submit(tp, &s.route, METHOD_SET, ATTR_SWITCH_INFO, 0, &set.raw)?,
        ));
    }
    let mut refused = Vec::new();
    for (g, port, op, rx) in port_sets {
        let r = transport::wait(rx)
            .await
            .map_err(|e| tp_err(g, op, e))
            .and_then(|r| check_status(g, op, &r));
        if let Err(e) = r {
            refused.push((g, port, e));
        }
    }
    if let Some(e) = refused_error(inner.cfg.m_key != 0, refused) {
        return Err(e);
    }
    for (g, op, rx) in pend {
        let r = transport::wait(rx).await.map_err(|e| tp_err(g, op, e))?;
        check_status(g, op, &r)?;
    }
    // 3. Port activation: INIT → ARMED on every port, then ACTIVE.
    let mut ports: Vec<(Route, u32, PortInfo)> = Vec::new();
    for s in &t.switches {
        for (p, rec) in s.ports.iter().enumerate().skip(1) {
            if let Some(i) = &rec.info {
                if matches!(i.state(), PortState::Init | PortState::Armed) {
                    let mut a = i.for_set();
                    if let Some(v) = s.op_vls[p] {
                        a.set_operational_vls(v);
                    }
                    ports.push((s.route.clone(), p as u32, a));
                }
            }
        }
    }
    for c in &t.cas {
        if c.up && matches!(c.info.state(), PortState::Init | PortState::Armed) {
            let mut a = ca_lid_image(&c.info, c.base, sm_lid, lmc);
            if let Some(v) = c.op_vls {
                a.set_operational_vls(v);
            }
            ports.push((c.route.clone(), c.port, a));
        }
    }
    activate(tp, &ports).await;
    // Our own activation raised PortStateChange on every switch (and trap 128): clear it
    // before the port states are re-read below, so that the light sweep the trap wakes
    // finds nothing to re-read (it would read every port of every switch again, competing
    // with the LFT upload that follows). A change after the clear raises the flag again.
    let mut clears = Vec::with_capacity(t.switches.len());
    for s in &t.switches {
        let set = fdb_top_image(&s.info, top16, true);
        clears.push(submit(tp, &s.route, METHOD_SET, ATTR_SWITCH_INFO, 0, &set.raw)?);
    }
    for rx in clears {
        // A lost clear only costs a light sweep of that switch.
        let _ = transport::wait(rx).await;
    }
    // 4. Re-read the port states and record the new LIDs.
    record_lids(&mut lock(&inner.state), &t, top16, lmc);
    refresh_port_states(inner).await;
    // LIDs assigned, ports active: the subnet is up with this manager as its master.
    inner.tp.sm_identity().state.store(SM_STATE_MASTER, Ordering::Relaxed);
    // The SA answers from now on, from a snapshot with the LIDs and port states just read.
    sa_snapshot::publish(inner);
    sa_snapshot::sync_serving(inner);
    // SL-to-VL is not programmed here: the first generation after start is a direct upload
    // that needs no escape VL, and the tables (tens of thousands of Sets) would compete with
    // its LFT upload. `escape_vl_ready` programs them (the daemon asks for it after the
    // first commit).
    Ok(())
}

/// The error of the LID configuration when ports refused their PortInfo Set. Without an M_Key
/// it is the first failure as it came; with one (`keyed`), every refusing port is listed by
/// GUID and port in one error: a port protected with another M_Key does not answer a Set
/// carrying ours (or answers it with a bad status).
fn refused_error(keyed: bool, refused: Vec<(Guid, u32, DriverError)>) -> Option<DriverError> {
    let (first_guid, _, _) = refused.first()?;
    let first_guid = *first_guid;
    if !keyed {
        return refused.into_iter().next().map(|(_, _, e)| e);
    }
    let n = refused.len();
    let list: Vec<String> = refused
        .iter()
        .map(|(g, p, e)| format!("{} port {p} ({e})", fabric_topology::fmt_guid(*g)))
        .collect();
    Some(DriverError::Protocol {
        guid: Some(first_guid),
        message: format!(
            "M_Key: {n} port(s) refused the PortInfo Set carrying this manager's M_Key (protected with \
             another key?): {}",
            list.join(", ")
        ),
    })
}

/// ARMED on every listed port, then ACTIVE (both ends of a link must be armed before either is
/// activated). Failures are left to the next sweep.
pub(super) async fn activate(tp: &Transport, ports: &[(Route, u32, PortInfo)]) -> usize {
    let mut retries = 0;
    for target in [PortState::Armed, PortState::Active] {
        let mut pend = Vec::with_capacity(ports.len());
        for (rt, p, info) in ports {
            let mut a = info.clone();
            a.set_state(target);
            if let Ok(rx) = submit(tp, rt, METHOD_SET, ATTR_PORT_INFO, *p, &a.raw) {
                pend.push(rx);
            }
        }
        for rx in pend {
            if let Ok(r) = transport::wait(rx).await {
                retries += r.attempts as usize - 1;
            }
        }
    }
    retries
}

/// Re-reads PortInfo of the up CA ports (`only` those listed), after their activation: the SA
/// reports their state and capabilities as the ports hold them.
pub(super) async fn refresh_ca_ports(inner: &Inner, only: Option<&HashSet<Guid>>) {
    let targets: Vec<(Guid, Vec<u8>, u8)> = {
        let st = lock(&inner.state);
        st.cas
            .iter()
            .filter(|c| c.up && only.is_none_or(|o| o.contains(&c.port_guid)))
            .map(|c| (c.port_guid, c.path.clone(), c.port_num))
            .collect()
    };
    let mut pend = Vec::with_capacity(targets.len());
    for (g, path, p) in &targets {
        if let Ok(rx) = submit(&inner.tp, &dr(path), METHOD_GET, ATTR_PORT_INFO, u32::from(*p), &ZERO) {
            pend.push((*g, rx));
        }
    }
    let mut got = Vec::with_capacity(pend.len());
    for (g, rx) in pend {
        if let Ok(r) = transport::wait(rx).await {
            if r.smp.status() == 0 {
                got.push((g, PortInfo::decode(r.smp.data())));
            }
        }
    }
    let mut st = lock(&inner.state);
    for (g, info) in got {
        if let Some(&ci) = st.ca_by_guid.get(&g) {
            st.cas[ci].info = info;
        }
    }
}

/// Re-reads PortInfo of every port of every up switch and of the up CA ports (after
/// activation).
async fn refresh_port_states(inner: &Inner) {
    refresh_ca_ports(inner, None).await;
    let tp = &inner.tp;
    let targets: Vec<(Guid, Vec<u8>, u8)> = {
        let st = lock(&inner.state);
        st.switches
            .iter()
            .filter(|s| s.up)
            .map(|s| (s.guid, s.path.clone(), s.nports))
            .collect()
    };
    let mut pend = Vec::new();
    for (g, path, n) in &targets {
        for p in 0..=*n {
            if let Ok(rx) = submit(tp, &dr(path), METHOD_GET, ATTR_PORT_INFO, u32::from(p), &ZERO) {
                pend.push((*g, p, rx));
            }
        }
    }
    let mut got = Vec::with_capacity(pend.len());
    for (g, p, rx) in pend {
        if let Ok(r) = transport::wait(rx).await {
            if r.smp.status() == 0 {
                got.push((g, p, PortInfo::decode(r.smp.data())));
            }
        }
    }
    let mut st = lock(&inner.state);
    for (g, p, info) in got {
        if let Some(&i) = st.sw_by_guid.get(&g) {
            st.switches[i].ports[p as usize].info = Some(info);
        }
    }
}

/// [`SouthboundDriver::lids_in_force`](fabric_southbound::SouthboundDriver::lids_in_force): the
/// unicast LIDs the switches and CA ports hold (a CA port's whole LMC range).
pub(super) fn lids_in_force(st: &State) -> Vec<(Guid, Lid, Lid)> {
    let unicast = |lid: u16| (1..=fabric_routing::IB_MAX_UNICAST_LID).contains(&Lid::from(lid));
    let mut out: Vec<(Guid, Lid, Lid)> = st
        .switches
        .iter()
        .filter(|s| unicast(s.lid))
        .map(|s| (s.guid, Lid::from(s.lid), Lid::from(s.lid)))
        .collect();
    out.extend(st.cas.iter().filter(|c| unicast(c.info.lid())).map(|c| {
        let base = Lid::from(c.info.lid());
        (c.port_guid, base, base + (1 << c.info.lmc().min(7)) - 1)
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::super::state::tests::{rec, two_by_two, CA, L0, S1};
    use super::super::state::{build_fabric, recompute_paths};
    use super::*;

    /// Switch LIDs 1, 2, …; end-port base LIDs `base`, `base + 2`, … (LMC 1).
    fn plan_for(fabric: &Fabric, base: Lid) -> LidPlan {
        LidPlan {
            lmc: 1,
            max_lid: 0xbfff,
            switch_lid: (1..=fabric.num_switches() as Lid).collect(),
            end_port_base: (0..fabric.num_end_ports() as Lid).map(|k| base + 2 * k).collect(),
        }
    }

    #[test]
    fn lid_sets_give_ports_the_subnet_prefix() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        let f = build_fabric(&st).unwrap();
        let t = plan(&st, &f, &plan_for(&f, 0x10)).unwrap();
        let a = ca_lid_image(&t.cas[0].info, 0x10, 0x10, 1);
        assert_eq!((a.gid_prefix(), a.lid(), a.lmc()), (0xfe80_0000_0000_0000, 0x10, 1));
        record_lids(&mut st, &t, 0x20, 1);
        assert_eq!(st.cas[st.ca_by_guid[&CA]].info.gid_prefix(), SUBNET_PREFIX);
        assert!(st
            .switches
            .iter()
            .filter(|s| t.switches.iter().any(|x| x.guid == s.guid))
            .all(|s| s.ports[0]
                .info
                .as_ref()
                .is_some_and(|p| p.gid_prefix() == SUBNET_PREFIX)));
    }

    #[test]
    fn a_plan_writes_up_switches_and_names_the_managers_lid() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        let f = build_fabric(&st).unwrap();
        let lids = plan_for(&f, 0x10);
        let s1 = st.sw_by_guid[&S1];
        st.switches[s1].up = false;
        let t = plan(&st, &f, &lids).unwrap();
        assert_eq!(t.switches.len(), 3, "the down spine gets no Set");
        assert!(t.switches.iter().all(|s| s.guid != S1));
        assert_eq!((t.cas.len(), t.cas[0].guid, t.cas[0].base), (1, CA, 0x10));
        assert_eq!(t.sm_lid, 0x10, "the manager's own CA port");
        // Recorded: the switch LIDs, the manager's LID; the CA's whole LMC range is in force.
        record_lids(&mut st, &t, 0x20, lids.lmc);
        let l0 = f.switch_by_guid(L0).unwrap();
        assert_eq!(Lid::from(rec(&st, L0).lid), lids.switch_lid(l0));
        assert_eq!(rec(&st, L0).info.linear_fdb_top(), 0x20);
        assert_eq!(st.sm_lid, 0x10);
        let in_force = lids_in_force(&st);
        assert!(in_force.contains(&(CA, 0x10, 0x11)));
        assert!(
            in_force.iter().all(|(g, _, _)| *g != S1),
            "no LID was written to the down spine"
        );
    }

    #[test]
    fn a_plan_names_what_it_cannot_write() {
        let st = two_by_two();
        let f = build_fabric(&st).unwrap();
        let lids = plan_for(&f, 0x10);
        let mut unknown = two_by_two();
        unknown.ca_by_guid.clear();
        assert!(matches!(
            plan(&unknown, &f, &lids),
            Err(DriverError::UnknownEndPort(CA))
        ));
        let mut beyond = plan_for(&f, 0x10);
        beyond.end_port_base[0] = 0xc000;
        let e = plan(&st, &f, &beyond).err().unwrap();
        assert!(e.to_string().contains("0x0000000000000100"), "{e}");
    }

    #[test]
    fn refusing_ports_are_all_named_when_an_m_key_is_set() {
        let refused = || {
            vec![
                (
                    0x11,
                    0,
                    DriverError::Transient {
                        guid: 0x11,
                        op: "PortInfo (switch LID)",
                        attempts: 4,
                    },
                ),
                (
                    0x22,
                    1,
                    DriverError::Protocol {
                        guid: Some(0x22),
                        message: "PortInfo (CA LID): MAD status 0x001c".into(),
                    },
                ),
            ]
        };
        assert!(refused_error(true, Vec::new()).is_none());
        let e = refused_error(true, refused()).unwrap().to_string();
        assert!(e.contains("M_Key: 2 port(s)"), "{e}");
        assert!(
            e.contains("0x0000000000000011 port 0") && e.contains("0x0000000000000022 port 1"),
            "{e}"
        );
        // Without a key the first failure comes as it was (retry semantics unchanged).
        assert!(matches!(
            refused_error(false, refused()),
            Some(DriverError::Transient { guid: 0x11, .. })
        ));
    }

    #[test]
    fn linear_fdb_top_stays_within_the_switch_capacity() {
        let mut raw = [0u8; SMP_DATA_SIZE];
        raw[0..2].copy_from_slice(&48u16.to_be_bytes());
        raw[11] = 0x04; // PortStateChange as read
        let si = SwitchInfo::decode(&raw);
        let keep = fdb_top_image(&si, 0x100, false);
        assert_eq!((keep.linear_fdb_top(), keep.port_state_change()), (47, false));
        let clear = fdb_top_image(&si, 20, true);
        assert_eq!((clear.linear_fdb_top(), clear.port_state_change()), (20, true));
    }
}
