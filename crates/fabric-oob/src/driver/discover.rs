//! Discovery: the fabric built from the agents' neighbour tables.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use fabric_southbound::DriverError;
use fabric_topology::{fmt_guid, Fabric, FabricBuilder, Guid, LinkState, NodeType, PortNum, Remote};
use tokio::task::JoinSet;

use super::agents::{
    cable_key, describe_agent, inventory_guids, lock, neighbour, port_num, port_up, sweep_one, Discovered, Health,
    Inner, Known,
};
use super::mkey::KeyState;
use crate::proto::NeighbourKind;

/// Asks every agent for its description and port table concurrently and builds the fabric from
/// the neighbour tables, cross-checking both ends of every cable; records what was discovered,
/// the warnings and the health the monitors start from.
pub(super) async fn discover(inner: &Arc<Inner>) -> Result<Fabric, DriverError> {
    let mut set = JoinSet::new();
    for idx in 0..inner.agents.len() {
        let i = inner.clone();
        set.spawn(async move { (idx, sweep_one(&i, idx).await) });
    }
    let mut results: Vec<Option<Result<Known, DriverError>>> = (0..inner.agents.len()).map(|_| None).collect();
    while let Some(r) = set.join_next().await {
        let (idx, r) = r.map_err(|e| DriverError::Protocol {
            guid: None,
            message: format!("discovery task failed: {e}"),
        })?;
        results[idx] = Some(r);
    }
    let mut warnings = Vec::new();
    // Per agent: (known info, reached now).
    let mut view: Vec<Option<(Known, bool)>> = Vec::with_capacity(results.len());
    let mut by_guid = HashMap::new();
    for (idx, r) in results.into_iter().enumerate() {
        let a = &inner.agents[idx];
        match r {
            Some(Ok(k)) => {
                if let Some(prev) = by_guid.insert(k.info.guid, idx) {
                    return Err(DriverError::Protocol {
                        guid: Some(k.info.guid),
                        message: format!(
                            "{} and {} report the same GUID",
                            describe_agent(&inner.agents[prev]),
                            describe_agent(a)
                        ),
                    });
                }
                *lock(&a.known) = Some(k.clone());
                view.push(Some((k, true)));
            }
            Some(Err(e)) => {
                warnings.push(format!("{}: {e}", describe_agent(a)));
                match lock(&a.known).clone() {
                    Some(k) if !by_guid.contains_key(&k.info.guid) => {
                        by_guid.insert(k.info.guid, idx);
                        view.push(Some((k, false)));
                    }
                    _ => view.push(None),
                }
            }
            None => view.push(None),
        }
    }
    inner.known_changed();
    {
        // Agents listed by GUID stay their switch's agent while they do not answer; what
        // the agents themselves report wins.
        let mut map = inventory_guids(&inner.agents);
        map.extend(by_guid.iter().map(|(&g, &i)| (g, i)));
        *inner.by_guid.write().unwrap_or_else(PoisonError::into_inner) = map;
    }
    // The health the monitors start from is what this discovery reports: a switch returned
    // down (agent unreachable, or powered off) is reported up (`SwitchUp`) as soon as its
    // agent answers with the power on, even before the unreachable deadline.
    let now = Instant::now();
    for (idx, v) in view.iter().enumerate() {
        let mut h = lock(&inner.agents[idx].health);
        match v {
            Some((k, true)) => {
                *h = Health {
                    powered_off: !k.info.powered,
                    reported_down: !k.info.powered,
                    ..Health::default()
                };
            }
            _ => {
                h.lost_since.get_or_insert(now);
                h.unreachable = true;
                h.reported_down = true;
                h.undiscovered = true;
            }
        }
    }

    install_keys(inner, &view, &mut warnings).await;

    let mut b = FabricBuilder::new();
    for (k, reached) in view.iter().flatten() {
        {
            let id = b
                .add_switch(k.info.guid, k.info.description.clone(), k.info.port_count as PortNum)
                .map_err(|e| DriverError::Protocol {
                    guid: Some(k.info.guid),
                    message: e.to_string(),
                })?;
            b.switch_mut(id).up = *reached && k.info.powered;
        }
    }
    // Switches seen only as neighbours (agent never reached): placeholders, down.
    for (k, _) in view.iter().flatten() {
        for p in k.ports.iter().skip(1) {
            if let Some(n) = neighbour(p) {
                if n.kind == NeighbourKind::Switch as i32 && b.switch_by_guid(n.node_guid).is_none() {
                    let nports = (n.node_ports.clamp(1, 254) as PortNum).max(n.port.min(254) as PortNum);
                    if let Ok(id) = b.add_switch(n.node_guid, n.description.clone(), nports) {
                        b.switch_mut(id).up = false;
                        warnings.push(format!(
                            "switch {} \"{}\" is cabled to {} but has no reachable agent",
                            fmt_guid(n.node_guid),
                            n.description,
                            fmt_guid(k.info.guid)
                        ));
                    }
                }
            }
        }
    }
    let name = |g: Guid, b: &FabricBuilder| {
        b.switch_by_guid(g).map_or_else(
            || fmt_guid(g),
            |id| format!("{} \"{}\"", fmt_guid(g), b.switch(id).desc),
        )
    };
    let reached: HashSet<Guid> = view
        .iter()
        .flatten()
        .filter(|(_, r)| *r)
        .map(|(k, _)| k.info.guid)
        .collect();
    let tables: HashMap<Guid, &Known> = view.iter().flatten().map(|(k, _)| (k.info.guid, k)).collect();
    let mut link_up = HashMap::new();
    let mut end_up = HashMap::new();
    for (k, now) in view.iter().flatten() {
        let g = k.info.guid;
        let Some(sid) = b.switch_by_guid(g) else { continue };
        for (pn, p) in k.ports.iter().enumerate().skip(1) {
            let pn = pn as PortNum;
            let up = *now && port_up(p);
            b.switch_mut(sid).ports[pn as usize].state = if up { LinkState::Up } else { LinkState::Down };
            if !p.speed.is_empty() {
                b.switch_mut(sid).ports[pn as usize].speed = Some(p.speed.clone());
            }
            let Some(n) = neighbour(p) else { continue };
            if n.kind == NeighbourKind::Ca as i32 {
                let ep = match b.add_end_port(
                    n.port_guid,
                    n.node_guid,
                    n.description.clone(),
                    n.port.min(255) as PortNum,
                    n.node_ports.clamp(1, 255) as PortNum,
                    NodeType::Compute,
                ) {
                    Ok(ep) => ep,
                    Err(e) => {
                        warnings.push(format!("{} port {pn}: {e}", name(g, &b)));
                        continue;
                    }
                };
                b.connect_end_port(ep, sid, pn).map_err(|e| DriverError::Protocol {
                    guid: Some(g),
                    message: e.to_string(),
                })?;
                b.end_port_mut(ep).up = up;
                end_up.insert(n.port_guid, up);
                continue;
            }
            let Ok(rp) = port_num(n.port, g) else {
                warnings.push(format!(
                    "{} port {pn}: neighbour port {} out of range",
                    name(g, &b),
                    n.port
                ));
                continue;
            };
            let Some(rid) = b.switch_by_guid(n.node_guid) else {
                continue;
            };
            // Cross-check with the other end's table when it answered.
            let reciprocal = match tables.get(&n.node_guid).and_then(|t| t.ports.get(rp as usize)) {
                Some(q) if reached.contains(&n.node_guid) => {
                    let back = neighbour(q).map(|m| (m.node_guid, m.port));
                    if back != Some((g, u32::from(pn))) {
                        warnings.push(format!(
                            "cabling mismatch: {} port {pn} sees {} port {rp}, which sees {}",
                            name(g, &b),
                            name(n.node_guid, &b),
                            match back {
                                Some((bg, bp)) => format!("{} port {bp}", name(bg, &b)),
                                None => "nothing".into(),
                            }
                        ));
                        false
                    } else {
                        true
                    }
                }
                Some(_) => true,
                None if rp <= b.switch(rid).nports => true,
                None => {
                    warnings.push(format!(
                        "{} port {pn} sees {} port {rp}, which does not exist",
                        name(g, &b),
                        name(n.node_guid, &b)
                    ));
                    false
                }
            };
            if !reciprocal || (n.node_guid, rp) < (g, pn) && reached.contains(&n.node_guid) {
                continue; // mismatch, or the lower end connects it
            }
            if b.switch(rid).ports[rp as usize].remote != Remote::None
                || b.switch(sid).ports[pn as usize].remote != Remote::None
            {
                continue;
            }
            if let Err(e) = b.connect_switches(sid, pn, rid, rp) {
                warnings.push(format!("{} port {pn}: {e}", name(g, &b)));
                continue;
            }
            let rup = reached.contains(&n.node_guid)
                && tables
                    .get(&n.node_guid)
                    .and_then(|t| t.ports.get(rp as usize))
                    .is_some_and(port_up);
            link_up.insert(cable_key((g, pn), (n.node_guid, rp)), up && rup);
        }
    }
    let fabric = b.build();
    *lock(&inner.discovered) = Discovered {
        end_ports: end_up.keys().copied().collect(),
        links: link_up.keys().copied().collect(),
    };
    lock(&inner.gaps).clear();
    *lock(&inner.link_up) = link_up;
    *lock(&inner.end_port_up) = end_up;
    *lock(&inner.warnings) = warnings;
    if fabric.num_switches() == 0 {
        return Err(DriverError::Protocol {
            guid: None,
            message: "no agent of the inventory answered".into(),
        });
    }
    Ok(fabric)
}

/// Sets the management key on every agent this discovery reached (again: an administrator may
/// have reset it); a refusal (the switch is protected by another manager) or an agent without
/// the call becomes a warning naming the switch. Without a configured key, the switches whose
/// agent reports a key are recorded as refusing (their writes will be). Discovery itself goes
/// on: the switch is in the fabric, its writes fail naming it.
async fn install_keys(inner: &Arc<Inner>, view: &[Option<(Known, bool)>], warnings: &mut Vec<String>) {
    let key = inner.cfg.management_key;
    let mut set = JoinSet::new();
    let mut found = Vec::new();
    for (idx, v) in view.iter().enumerate() {
        let Some((k, true)) = v else { continue };
        let name = format!("{} \"{}\"", fmt_guid(k.info.guid), k.info.description);
        let mut st = lock(&inner.agents[idx].key_state);
        if key == 0 {
            *st = if k.info.management_key_set {
                found.push(format!(
                    "switch {name} is protected by a management key (another manager's) and none is configured \
                     ([driver.oob] management_key): its writes will be refused"
                ));
                KeyState::Refused
            } else {
                KeyState::Pending
            };
            continue;
        }
        *st = KeyState::Pending;
        // Fenced (a standby, or a leader whose lease lapsed): set before its next write.
        if !inner.may_write() {
            continue;
        }
        let i = inner.clone();
        set.spawn(async move { (name, i.ensure_key(idx).await) });
    }
    while let Some(r) = set.join_next().await {
        match r {
            Ok((name, Err(e))) => found.push(format!("switch {name}: management key not set: {e}")),
            Ok((_, Ok(()))) => {}
            Err(e) => found.push(format!("management key task failed: {e}")),
        }
    }
    found.sort();
    warnings.extend(found);
    warnings.extend(
        inner
            .key_warnings()
            .into_iter()
            .filter(|w| w.contains("does not implement")),
    );
}
