//! The agents' monitors: one task per agent watching its port-event stream, reconnecting with
//! backoff and reporting its switch down past the unreachable deadline, up when it answers.

use std::sync::{Arc, PoisonError, Weak};
use std::time::{Duration, Instant};

use fabric_southbound::TopologyGap;
use fabric_topology::{FabricEvent, Guid, PortNum};
use tokio::sync::watch;

use super::agents::{cable_key, lock, neighbour, port_num, port_up, sweep_one, Inner};
use super::mkey::KeyState;
use crate::proto::{self, NeighbourKind};

/// Starts one monitor task per agent, once (the first discovery starts them); they stop when the
/// driver is dropped.
pub(super) fn start(inner: &Arc<Inner>) {
    let mut started = lock(&inner.monitors_started);
    if *started {
        return;
    }
    *started = true;
    for idx in 0..inner.agents.len() {
        let weak = Arc::downgrade(inner);
        let stop = inner.stop.clone();
        tokio::spawn(monitor(weak, idx, stop));
    }
}

/// Records in the topology gaps what port `p` of switch `guid` (`name`), whose agent the last
/// discovery did not reach, connects that the discovered fabric lacks: an end port (only a
/// leaf's own agent lists its end ports) or a cable between two switches both undiscovered.
fn note_unknown(inner: &Inner, guid: Guid, name: &str, p: &proto::PortInfo) {
    let Ok(pn) = port_num(p.port, guid) else { return };
    let Some(n) = neighbour(p) else { return };
    let (end_port, link) = {
        let d = lock(&inner.discovered);
        if n.kind == NeighbourKind::Ca as i32 {
            ((!d.end_ports.contains(&n.port_guid)).then_some(n.port_guid), None)
        } else {
            let link = PortNum::try_from(n.port)
                .ok()
                .filter(|&rp| !d.links.contains(&cable_key((guid, pn), (n.node_guid, rp))))
                .map(|_| (pn, n.node_guid));
            (None, link)
        }
    };
    if end_port.is_none() && link.is_none() {
        return;
    }
    let mut gaps = lock(&inner.gaps);
    let g = gaps.entry(guid).or_insert_with(|| TopologyGap {
        switch: guid,
        ..TopologyGap::default()
    });
    if g.name.is_empty() {
        g.name = name.to_string();
    }
    if let Some(ep) = end_port.filter(|ep| !g.end_ports.contains(ep)) {
        g.end_ports.push(ep);
    }
    if let Some(l) = link.filter(|l| !g.links.contains(l)) {
        g.links.push(l);
    }
}

/// Applies a port observation of agent `guid` and emits the resulting event, once per cable.
fn observe_port(inner: &Inner, guid: Guid, p: &proto::PortInfo) {
    let Ok(pn) = port_num(p.port, guid) else { return };
    let Some(n) = neighbour(p) else { return };
    let up = port_up(p);
    if n.kind == NeighbourKind::Ca as i32 {
        let changed = lock(&inner.end_port_up).insert(n.port_guid, up) != Some(up);
        if changed {
            inner.emit(if up {
                FabricEvent::EndPortUp(n.port_guid)
            } else {
                FabricEvent::EndPortDown(n.port_guid)
            });
        }
    } else if let Ok(rp) = PortNum::try_from(n.port) {
        let key = cable_key((guid, pn), (n.node_guid, rp));
        let changed = lock(&inner.link_up).insert(key, up) != Some(up);
        if changed {
            inner.emit(if up {
                FabricEvent::LinkUp { switch: guid, port: pn }
            } else {
                FabricEvent::LinkDown { switch: guid, port: pn }
            });
        }
    }
}

/// Re-evaluates whether a switch is down (unreachable past the deadline, or powered off) and
/// emits `SwitchDown` / `SwitchUp` on a change.
fn update_switch_state(inner: &Inner, idx: usize) {
    let a = &inner.agents[idx];
    let Some(guid) = a.guid() else { return };
    let ev = {
        let mut h = lock(&a.health);
        let down = h.unreachable || h.powered_off;
        if down == h.reported_down {
            None
        } else {
            h.reported_down = down;
            Some(if down {
                FabricEvent::SwitchDown(guid)
            } else {
                FabricEvent::SwitchUp(guid)
            })
        }
    };
    if let Some(ev) = ev {
        inner.emit(ev);
    }
}

/// Watches one agent: port-event stream, reconnection with backoff, unreachable deadline.
async fn monitor(weak: Weak<Inner>, idx: usize, mut stop: watch::Receiver<()>) {
    let mut delay = Duration::from_millis(50);
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let stream = async {
            let ch = inner.channel(&inner.agents[idx]).await.map_err(|_| ())?;
            let mut c = Inner::client(ch);
            let req = inner.read_request(proto::WatchPortsRequest {}, inner.read_epoch());
            let r = tokio::time::timeout(inner.cfg.request_timeout, c.watch_ports(req))
                .await
                .map_err(|_| ())?
                .map_err(|_| ())?;
            Ok::<_, ()>(r.into_inner())
        }
        .await;
        if let Ok(mut stream) = stream {
            // The agent answers again (or for the first time): learn what discovery could not
            // (its description, and its GUID when the inventory names it), and make it its
            // switch's agent again, so that writes to the switch reach it.
            let undiscovered = lock(&inner.agents[idx].health).undiscovered;
            if undiscovered || lock(&inner.agents[idx].known).is_none() {
                if let Ok(k) = sweep_one(&inner, idx).await {
                    if undiscovered {
                        // What the agent lists that the daemon's fabric lacks (its end ports,
                        // when discovery only saw the switch from its neighbours) is reported
                        // before the switch is reported up.
                        for p in k.ports.iter().skip(1) {
                            note_unknown(&inner, k.info.guid, &k.info.description, p);
                        }
                        lock(&inner.agents[idx].health).undiscovered = false;
                    }
                    *lock(&inner.agents[idx].known) = Some(k);
                    inner.known_changed();
                }
            }
            if let Some(g) = inner.agents[idx].guid() {
                let mut map = inner.by_guid.write().unwrap_or_else(PoisonError::into_inner);
                // A GUID another agent already answers for stays with it (discovery reports it).
                if !map
                    .get(&g)
                    .is_some_and(|&other| other != idx && lock(&inner.agents[other].known).is_some())
                {
                    map.insert(g, idx);
                }
            }
            {
                // An agent that was lost may have restarted without its addresses: set them
                // up again before its next LFT write.
                let h = lock(&inner.agents[idx].health);
                if h.lost_since.is_some() || h.unreachable || h.gave_up {
                    if let Some(s) = lock(&inner.agents[idx].setup).as_mut() {
                        s.done = false;
                    }
                    inner.key_lost(idx);
                }
            }
            // The management key at once where it may have been lost (the agent restarted).
            // An agent that refused it is not asked again here (each refusal is counted as a
            // violation by the agent): discovery and the switch's next write try again.
            // A fenced manager sets it before its next write instead.
            if *lock(&inner.agents[idx].key_state) == KeyState::Pending && inner.may_write() {
                let _ = inner.ensure_key(idx).await;
            }
            let guid = inner.agents[idx].guid();
            let deadline = inner.cfg.unreachable_deadline;
            drop(inner);
            loop {
                let msg = tokio::select! {
                    _ = stop.changed() => return,
                    m = stream.message() => m,
                };
                let Some(inner) = weak.upgrade() else { return };
                match msg {
                    Ok(Some(ev)) => {
                        delay = Duration::from_millis(50);
                        let Some(guid) = guid else { continue };
                        if ev.port == 0 {
                            lock(&inner.agents[idx].health).powered_off = !ev.powered;
                        } else {
                            let p = proto::PortInfo {
                                port: ev.port,
                                state: ev.state,
                                neighbour: ev.neighbour.clone(),
                                speed: String::new(),
                            };
                            if lock(&inner.agents[idx].health).undiscovered {
                                // The agent answers the stream but not (yet) GetPorts.
                                let name = lock(&inner.agents[idx].known)
                                    .as_ref()
                                    .map(|k| k.info.description.clone())
                                    .unwrap_or_default();
                                note_unknown(&inner, guid, &name, &p);
                            }
                            observe_port(&inner, guid, &p);
                        }
                        if ev.snapshot_end || !ev.snapshot {
                            let reachable_again = {
                                let mut h = lock(&inner.agents[idx].health);
                                h.lost_since = None;
                                h.unreachable = false;
                                std::mem::take(&mut h.gave_up) && !h.reported_down && !h.powered_off
                            };
                            update_switch_state(&inner, idx);
                            if reachable_again {
                                // The switch never went down for the daemon, but requests to it
                                // were given up: tell the daemon it answers again (it rewrites
                                // the switch's tables now instead of at its next retry).
                                inner.emit(FabricEvent::SwitchUp(guid));
                            }
                        }
                    }
                    Ok(None) | Err(_) => {
                        *lock(&inner.agents[idx].channel) = None;
                        break;
                    }
                }
                let _ = deadline;
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        {
            *lock(&inner.agents[idx].channel) = None;
            let mut h = lock(&inner.agents[idx].health);
            let since = *h.lost_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= inner.cfg.unreachable_deadline {
                h.unreachable = true;
            }
        }
        update_switch_state(&inner, idx);
        let cap = (inner.cfg.unreachable_deadline / 4).clamp(Duration::from_millis(50), Duration::from_secs(2));
        drop(inner);
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(cap);
    }
}
