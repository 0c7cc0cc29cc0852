//! Discovery and change detection: the directed-route sweep ([`discover`]), the light sweep
//! (trap 128 and the periodic one: [`light_sweep`]) with the background tasks that run it
//! ([`ensure_tasks`]), and port enabling/disabling ([`set_port_state`]), whose result is
//! reported like a light sweep's.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use fabric_southbound::DriverError;
use fabric_topology::{Fabric, FabricEvent, Guid, PortNum};
use tokio::sync::Notify;

use super::inner::{check_status, emit, lock, submit, tp_err, Inner, ZERO};
use super::lids::{activate, refresh_ca_ports};
use super::sa_snapshot;
use super::sl2vl::sl2vl_programmer;
use super::state::*;
use crate::mad::*;
use crate::transport::{self, Transport};

/// The switch port a node was reached from during the sweep (`None` for the local node).
type ReachedFrom = Option<(Guid, u8)>;

/// A NodeInfo attribute as read.
type NodeInfoImage = [u8; NODE_INFO_SIZE];

/// A switch reported down because it stopped answering is asked again every this many light
/// sweeps (each attempt on a dead switch costs a whole SMP timeout).
const SILENT_PROBE_EVERY: u64 = 8;

/// Starts the background tasks once (inside a tokio runtime; without one, a later call does):
/// the trap listener (trap 128 wakes the sweeper), the SL-to-VL programmer and the sweeper.
/// They hold a `Weak` to the driver and end when it is dropped.
pub(super) fn ensure_tasks(inner: &Arc<Inner>) {
    if inner.sweeper_started.swap(true, Ordering::SeqCst) {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        inner.sweeper_started.store(false, Ordering::SeqCst);
        return;
    };
    let weak = Arc::downgrade(inner);
    let traps = lock(&inner.traps).take();
    if let Some(mut traps) = traps {
        let w = weak.clone();
        rt.spawn(async move {
            while let Some(smp) = traps.recv().await {
                let Some(inner) = w.upgrade() else { return };
                if smp.attr_id() == ATTR_NOTICE {
                    let n = Notice::decode(smp.data());
                    if n.generic && n.trap_number == 128 {
                        inner.wake.notify_one();
                    }
                }
            }
        });
    }
    let interval = inner.cfg.sweep_interval();
    rt.spawn(sl2vl_programmer(weak.clone(), inner.sl2vl_kick.clone()));
    rt.spawn(sweeper(weak, inner.wake.clone(), interval));
}

async fn sweeper(weak: Weak<Inner>, wake: Arc<Notify>, interval: Option<Duration>) {
    loop {
        let notified = wake.notified();
        match interval {
            Some(iv) => {
                tokio::select! {
                    () = tokio::time::sleep(iv) => {}
                    () = notified => {}
                }
            }
            None => {
                // No periodic sweep: only traps (and explicit wake-ups) start one. The timeout
                // only notices the driver going away.
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {
                        if weak.strong_count() == 0 {
                            return;
                        }
                        continue;
                    }
                    () = notified => {}
                }
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        light_sweep(&inner).await;
    }
}

/// [`SouthboundDriver::discover`](fabric_southbound::SouthboundDriver::discover): a full
/// sweep, merged with what the driver knew ([`State::carry_over`]); the manager's SMInfo gets
/// its GUID. Takes `sweep_lock`.
pub(super) async fn discover(inner: &Inner) -> Result<Fabric, DriverError> {
    let _guard = inner.sweep_lock.lock().await;
    let mut new = discover_all(inner).await?;
    let fabric = {
        let mut st = lock(&inner.state);
        new.carry_over(&mut st);
        *st = new;
        inner.tp.sm_identity().guid.store(st.local_guid(), Ordering::Relaxed);
        build_fabric(&st)
    };
    sa_snapshot::publish(inner);
    fabric
}

/// Breadth-first directed-route discovery from the manager's node, one level at a time with
/// every SMP of a level in flight together; the state it finds, before it is merged.
async fn discover_all(inner: &Inner) -> Result<State, DriverError> {
    let tp = &inner.tp;
    let mut st = State::default();
    // Level 0: the manager's own node.
    let r = transport::wait(submit(tp, &dr(&[]), METHOD_GET, ATTR_NODE_INFO, 0, &ZERO)?)
        .await
        .map_err(|e| tp_err(0, "NodeInfo of the local node", e))?;
    check_status(0, "NodeInfo of the local node", &r)?;
    // Frontier entries: (path to the node, the switch port it was reached from, its NodeInfo
    // decoded and as read).
    let mut frontier: Vec<(Vec<u8>, ReachedFrom, NodeInfo, NodeInfoImage)> = vec![(
        Vec::new(),
        None,
        NodeInfo::decode(r.smp.data()),
        node_info_image(r.smp.data()),
    )];
    while !frontier.is_empty() {
        // Details of the new nodes of this level.
        let mut new_switches = Vec::new();
        let mut new_cas = Vec::new();
        for (path, from, ni, ni_raw) in frontier.drain(..) {
            match ni.node_type {
                NODE_TYPE_SWITCH => {
                    let peer = Peer::Switch {
                        guid: ni.node_guid,
                        port: ni.local_port,
                    };
                    if st.sw_by_guid.contains_key(&ni.node_guid) {
                        if let Some((g, p)) = from {
                            link(&mut st, g, p, peer);
                        }
                        continue;
                    }
                    let rt = dr(&path);
                    let desc = submit(tp, &rt, METHOD_GET, ATTR_NODE_DESC, 0, &ZERO)?;
                    let si = submit(tp, &rt, METHOD_GET, ATTR_SWITCH_INFO, 0, &ZERO)?;
                    let mut pis = Vec::with_capacity(ni.num_ports as usize + 1);
                    for p in 0..=ni.num_ports {
                        pis.push(submit(tp, &rt, METHOD_GET, ATTR_PORT_INFO, u32::from(p), &ZERO)?);
                    }
                    let idx = st.switches.len();
                    st.sw_by_guid.insert(ni.node_guid, idx);
                    st.switches.push(SwitchRec {
                        guid: ni.node_guid,
                        desc: String::new(),
                        node_info: ni_raw,
                        node_desc: ZERO,
                        nports: ni.num_ports,
                        path: path.clone(),
                        lid: 0,
                        info: SwitchInfo::decode(&ZERO),
                        ports: vec![PortRec { info: None, peer: None }; ni.num_ports as usize + 1],
                        lft: HashMap::new(),
                        up: true,
                        reached: true,
                        responsive: true,
                        sl2vl: Sl2VlDone::default(),
                    });
                    if st.local.is_none() {
                        st.local = Some(Peer::Switch {
                            guid: ni.node_guid,
                            port: 0,
                        });
                    }
                    if let Some((g, p)) = from {
                        link(&mut st, g, p, peer);
                    }
                    new_switches.push((idx, ni, desc, si, pis));
                }
                NODE_TYPE_CA | NODE_TYPE_ROUTER => {
                    if st.ca_by_guid.contains_key(&ni.port_guid) {
                        continue;
                    }
                    let rt = dr(&path);
                    let desc = submit(tp, &rt, METHOD_GET, ATTR_NODE_DESC, 0, &ZERO)?;
                    let pi = submit(tp, &rt, METHOD_GET, ATTR_PORT_INFO, u32::from(ni.local_port), &ZERO)?;
                    new_cas.push((path, from, ni, ni_raw, desc, pi));
                }
                _ => {}
            }
        }
        let mut next: Vec<(Vec<u8>, ReachedFrom)> = Vec::new();
        for (idx, ni, desc, si, pis) in new_switches {
            let g = ni.node_guid;
            let d = transport::wait(desc).await;
            let s = transport::wait(si).await;
            let sw = &mut st.switches[idx];
            if let Ok(d) = &d {
                if d.smp.status() == 0 {
                    sw.desc = decode_node_desc(d.smp.data());
                    sw.node_desc = *d.smp.data();
                }
            }
            // A switch that answered NodeInfo but then stops answering is kept, down and
            // not crossed (the light sweep reports it up if it answers again).
            let s = match s {
                Ok(s) if s.smp.status() == 0 => s,
                _ => {
                    sw.up = false;
                    sw.responsive = false;
                    for pi in pis {
                        let _ = transport::wait(pi).await;
                    }
                    continue;
                }
            };
            sw.info = SwitchInfo::decode(s.smp.data());
            for (p, pi) in pis.into_iter().enumerate() {
                // A port whose PortInfo is lost is treated as down.
                let Ok(r) = transport::wait(pi).await else { continue };
                if r.smp.status() != 0 {
                    continue;
                }
                let info = PortInfo::decode(r.smp.data());
                if p == 0 {
                    sw.lid = info.lid();
                } else if live(&info) && p as u8 != ni.local_port {
                    let mut np = sw.path.clone();
                    np.push(p as u8);
                    next.push((np, Some((g, p as u8))));
                }
                sw.ports[p].info = Some(info);
            }
        }
        for (path, from, ni, ni_raw, desc, pi) in new_cas {
            let g = ni.port_guid;
            let d = transport::wait(desc).await;
            let p = transport::wait(pi).await;
            // The manager's own port must answer; another CA that answered NodeInfo but not its
            // PortInfo is kept, down (no LID is written to it).
            let info = match p {
                Ok(p) if p.smp.status() == 0 => Some(PortInfo::decode(p.smp.data())),
                Ok(p) if path.is_empty() => {
                    check_status(g, "PortInfo of the local port", &p)?;
                    None
                }
                Err(e) if path.is_empty() => return Err(tp_err(g, "PortInfo of the local port", e)),
                _ => None,
            };
            let up = info.is_some();
            let info = info.unwrap_or_else(|| PortInfo::decode(&ZERO));
            let (desc, node_desc) = match &d {
                Ok(d) if d.smp.status() == 0 => (decode_node_desc(d.smp.data()), *d.smp.data()),
                _ => (String::new(), ZERO),
            };
            let idx = st.cas.len();
            st.ca_by_guid.insert(g, idx);
            st.cas.push(CaRec {
                port_guid: g,
                node_guid: ni.node_guid,
                desc,
                node_info: ni_raw,
                node_desc,
                port_num: ni.local_port,
                nports: ni.num_ports,
                path: path.clone(),
                info: info.clone(),
                attach: from,
                up,
                sl2vl: false,
            });
            if let Some((sg, sp)) = from {
                link(&mut st, sg, sp, Peer::Ca { port_guid: g });
            }
            if path.is_empty() {
                // The manager's own CA: go on through its port only.
                st.local = Some(Peer::Ca { port_guid: g });
                st.sm_lid = info.lid();
                if live(&info) {
                    next.push((vec![ni.local_port], None));
                }
            }
        }
        // NodeInfo of every neighbour of this level.
        let mut pend = Vec::with_capacity(next.len());
        for (path, from) in next {
            let rx = submit(tp, &dr(&path), METHOD_GET, ATTR_NODE_INFO, 0, &ZERO)?;
            pend.push((path, from, rx));
        }
        for (path, from, rx) in pend {
            // A neighbour that does not answer (dead, or the link just went) is left out.
            let Ok(r) = transport::wait(rx).await else { continue };
            if r.smp.status() != 0 {
                continue;
            }
            let ni = NodeInfo::decode(r.smp.data());
            let ni_raw = node_info_image(r.smp.data());
            let from = match from {
                Some(f) => Some(f),
                None => {
                    // Reached from the local CA: record the attachment on the CA side later.
                    if let Some(Peer::Ca { port_guid }) = st.local {
                        if ni.node_type == NODE_TYPE_SWITCH {
                            if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
                                st.cas[ci].attach = Some((ni.node_guid, ni.local_port));
                            }
                        }
                    }
                    None
                }
            };
            frontier.push((path, from, ni, ni_raw));
        }
    }
    // Attachment of the local CA: mark the switch port side.
    if let Some(Peer::Ca { port_guid }) = st.local {
        if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
            if let Some((sg, sp)) = st.cas[ci].attach {
                link(&mut st, sg, sp, Peer::Ca { port_guid });
            }
        }
    }
    Ok(st)
}

/// SwitchInfo of each `(switch, route)`, all in flight together; the switches that answered.
async fn probe_switches(tp: &Transport, targets: &[(Guid, Vec<u8>)]) -> HashMap<Guid, SwitchInfo> {
    let mut pend = Vec::with_capacity(targets.len());
    for (g, path) in targets {
        if let Ok(rx) = submit(tp, &dr(path), METHOD_GET, ATTR_SWITCH_INFO, 0, &ZERO) {
            pend.push((*g, rx));
        }
    }
    let mut out = HashMap::with_capacity(pend.len());
    for (g, rx) in pend {
        if let Ok(r) = transport::wait(rx).await {
            if r.smp.status() == 0 {
                out.insert(g, SwitchInfo::decode(r.smp.data()));
            }
        }
    }
    out
}

/// One light sweep.
///
/// 1. SwitchInfo of every switch over its current directed route.
/// 2. For the switches that answered with PortStateChange set (or that came back): clear it
///    (write 1), read PortInfo of their ports, emit link and end-port events; routes are
///    recomputed over the live links.
/// 3. Switches that did not answer are asked again over the new routes, which avoid every
///    silent switch; step 2 runs for those that answer, and so on until no new route appears (a
///    switch behind a dead one or behind a failed cable is not reported with it). Those still
///    silent are reported down ([`FabricEvent::SwitchDown`], once) and probed again by every
///    later sweep; one that answers again is reported up.
/// 4. Ports that came back in INIT are armed, then activated.
pub(super) async fn light_sweep(inner: &Inner) -> Vec<FabricEvent> {
    let _guard = inner.sweep_lock.lock().await;
    if inner.standby.load(Ordering::Relaxed) {
        // The master handles the fabric (its traps, its port states).
        return Vec::new();
    }
    let tp = &inner.tp;
    let n = inner.sweeps.fetch_add(1, Ordering::Relaxed);
    let (targets, was_up) = {
        let st = lock(&inner.state);
        // Switches without a route are not asked (a link coming up brings them back); silent
        // ones only every SILENT_PROBE_EVERY sweeps, as each costs a full timeout per attempt.
        let targets: Vec<(Guid, Vec<u8>)> = st
            .switches
            .iter()
            .filter(|s| s.up || (s.reached && n.is_multiple_of(SILENT_PROBE_EVERY)))
            .map(|s| (s.guid, s.path.clone()))
            .collect();
        let was_up: HashMap<Guid, bool> = st.switches.iter().map(|s| (s.guid, s.up)).collect();
        (targets, was_up)
    };
    let mut fresh = probe_switches(tp, &targets).await;
    let probed: HashSet<Guid> = targets.iter().map(|(g, _)| *g).collect();
    let mut tried: HashMap<Guid, Vec<u8>> = targets.into_iter().filter(|(g, _)| !fresh.contains_key(g)).collect();
    {
        // Silent switches not asked this time are asked only if a new route to them appears.
        let st = lock(&inner.state);
        for s in st
            .switches
            .iter()
            .filter(|s| !s.responsive && !probed.contains(&s.guid))
        {
            tried.insert(s.guid, s.path.clone());
        }
    }
    let mut silent: HashSet<Guid> = tried.keys().copied().collect();
    let mut events = Vec::new();
    let mut came_back = Vec::new();
    let mut to_arm: Vec<(Route, u32, PortInfo)> = Vec::new();
    // Each round either stops or moves at least one switch from silent to answered.
    loop {
        let flagged: Vec<(Guid, Vec<u8>, SwitchInfo, u8)> = {
            let st = lock(&inner.state);
            let mut f: Vec<_> = fresh
                .iter()
                .filter(|(g, si)| si.port_state_change() || !was_up.get(g).copied().unwrap_or(false))
                .filter_map(|(g, si)| {
                    let i = *st.sw_by_guid.get(g)?;
                    Some((*g, st.switches[i].path.clone(), si.clone(), st.switches[i].nports))
                })
                .collect();
            f.sort_unstable_by_key(|x| x.0);
            f
        };
        came_back.extend(
            fresh
                .keys()
                .filter(|g| !was_up.get(g).copied().unwrap_or(true))
                .copied(),
        );
        fresh.clear();
        let mut clears = Vec::with_capacity(flagged.len());
        let mut port_reads = Vec::new();
        for (g, path, si, nports) in &flagged {
            let mut set = si.clone();
            set.set_port_state_change(true);
            if let Ok(rx) = submit(tp, &dr(path), METHOD_SET, ATTR_SWITCH_INFO, 0, &set.raw) {
                clears.push(rx);
            }
            for p in 1..=*nports {
                if let Ok(rx) = submit(tp, &dr(path), METHOD_GET, ATTR_PORT_INFO, u32::from(p), &ZERO) {
                    port_reads.push((*g, p, rx));
                }
            }
        }
        for rx in clears {
            let _ = transport::wait(rx).await;
        }
        let mut results = Vec::with_capacity(port_reads.len());
        for (g, p, rx) in port_reads {
            if let Ok(r) = transport::wait(rx).await {
                if r.smp.status() == 0 {
                    results.push((g, p, PortInfo::decode(r.smp.data())));
                }
            }
        }
        let retry: Vec<(Guid, Vec<u8>)> = {
            let mut st = lock(&inner.state);
            apply_port_reads(&mut st, results, &mut events, &mut to_arm);
            for s in &mut st.switches {
                s.responsive = !silent.contains(&s.guid);
            }
            let reached = recompute_paths(&mut st);
            st.switches
                .iter()
                .filter(|s| silent.contains(&s.guid) && reached.contains(&s.guid))
                .filter(|s| tried.get(&s.guid) != Some(&s.path))
                .map(|s| (s.guid, s.path.clone()))
                .collect()
        };
        if retry.is_empty() {
            break;
        }
        fresh = probe_switches(tp, &retry).await;
        tried.extend(retry);
        if fresh.is_empty() {
            break;
        }
        for g in fresh.keys() {
            silent.remove(g);
        }
    }
    {
        let mut st = lock(&inner.state);
        for s in &mut st.switches {
            s.responsive = !silent.contains(&s.guid);
        }
        recompute_paths(&mut st);
    }
    came_back.sort_unstable();
    let mut all: Vec<FabricEvent> = came_back.into_iter().map(FabricEvent::SwitchUp).collect();
    all.append(&mut events);
    let mut down: Vec<Guid> = silent
        .into_iter()
        .filter(|g| was_up.get(g).copied().unwrap_or(false))
        .collect();
    down.sort_unstable();
    all.extend(down.into_iter().map(FabricEvent::SwitchDown));
    activate(tp, &to_arm).await;
    sa_after_events(inner, &all).await;
    // SL-to-VL bookkeeping first: once the loop sees the events, the escape VL is not ready.
    inner.sl2vl_after_events(&all);
    emit(inner, &all);
    all
}

/// After a light sweep or a port state change that gave `events`: CA ports that came back are
/// read again (activated meanwhile), and the SA snapshot is published before the events go out
/// (an end port that went down leaves the snapshot at once: trap 65 to subscribers).
async fn sa_after_events(inner: &Inner, events: &[FabricEvent]) {
    if events.is_empty() || inner.sa.get().is_none() {
        return;
    }
    let back: HashSet<Guid> = events
        .iter()
        .filter_map(|e| match e {
            FabricEvent::EndPortUp(g) => Some(*g),
            _ => None,
        })
        .collect();
    if !back.is_empty() {
        refresh_ca_ports(inner, Some(&back)).await;
    }
    sa_snapshot::publish(inner);
}

/// [`SouthboundDriver::set_port_state`](fabric_southbound::SouthboundDriver::set_port_state):
/// PortPhysicalState set over a route avoiding the port, read back, reported at once. Takes
/// `sweep_lock`.
pub(super) async fn set_port_state(inner: &Inner, switch: Guid, port: PortNum, up: bool) -> Result<(), DriverError> {
    let _guard = inner.sweep_lock.lock().await;
    let path = {
        let st = lock(&inner.state);
        let Some(&i) = st.sw_by_guid.get(&switch) else {
            return Err(DriverError::UnknownSwitch(switch));
        };
        let s = &st.switches[i];
        if port == 0 || port > s.nports {
            return Err(DriverError::InvalidPort {
                guid: switch,
                port,
                reason: "not an external port of this switch",
            });
        }
        if !s.up {
            return Err(DriverError::Unreachable { guid: switch });
        }
        // Not over the cable being changed: the reply would not come back.
        path_avoiding(&st, switch, (switch, port)).ok_or(DriverError::InvalidPort {
            guid: switch,
            port,
            reason: "every route of the manager to this switch crosses this port",
        })?
    };
    let tp = &inner.tp;
    let r = tp
        .call(dr(&path), METHOD_GET, ATTR_PORT_INFO, u32::from(port), &ZERO)
        .await
        .map_err(|e| tp_err(switch, "PortInfo Get", e))?;
    check_status(switch, "PortInfo Get", &r)?;
    let mut a = PortInfo::decode(r.smp.data()).for_set();
    a.set_phys_state(if up { inner.cfg.enable_phys_state } else { PHYS_DISABLED });
    let r = tp
        .call(dr(&path), METHOD_SET, ATTR_PORT_INFO, u32::from(port), &a.raw)
        .await
        .map_err(|e| tp_err(switch, "PortInfo Set (physical state)", e))?;
    check_status(switch, "PortInfo Set (physical state)", &r)?;
    // Read the port back and report the change before returning: a PortInfo Set does not
    // raise the switch's own PortStateChange. A link that must train first (Polling) is
    // reported by the light sweep once it comes up.
    let r = tp
        .call(dr(&path), METHOD_GET, ATTR_PORT_INFO, u32::from(port), &ZERO)
        .await
        .map_err(|e| tp_err(switch, "PortInfo Get", e))?;
    check_status(switch, "PortInfo Get", &r)?;
    let mut events = Vec::new();
    let mut to_arm = Vec::new();
    {
        let mut st = lock(&inner.state);
        apply_port_reads(
            &mut st,
            vec![(switch, port, PortInfo::decode(r.smp.data()))],
            &mut events,
            &mut to_arm,
        );
        recompute_paths(&mut st);
    }
    activate(tp, &to_arm).await;
    sa_after_events(inner, &events).await;
    inner.sl2vl_after_events(&events);
    emit(inner, &events);
    Ok(())
}
