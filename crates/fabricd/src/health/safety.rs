//! The safety bound of isolation (pure): a link is isolated only when the fabric stays whole
//! without it.

use std::collections::VecDeque;

use fabric_topology::{fmt_guid, Fabric, FabricEvent, Guid, PortNum, Remote, SwitchId};

/// The link on `switch`/`port` as isolation sees it: its canonical end (the lower (GUID, port)
/// of the two) and the other end, or why it cannot be isolated: it faces an end port (its loss
/// disconnects that end port), it is not cabled to a switch, it is the last live up-link of a
/// leaf, or its loss disconnects live end ports from each other. `fabric` is the routed fabric
/// (physical state and the isolations already in force).
pub fn check_isolation(fabric: &Fabric, switch: Guid, port: PortNum) -> Result<(Guid, PortNum), String> {
    let sid = fabric
        .switch_by_guid(switch)
        .ok_or_else(|| format!("unknown switch {}", fmt_guid(switch)))?;
    let s = fabric.switch(sid);
    let p = s
        .ports
        .get(port as usize)
        .filter(|_| port >= 1)
        .ok_or_else(|| format!("switch {} has no port {port}", fmt_guid(switch)))?;
    let (rsw, rport) = match p.remote {
        Remote::Switch { sw, port } => (sw, port),
        Remote::EndPort(ep) => {
            return Err(format!(
                "the link to end port {} ({}): isolating it would disconnect that end port",
                fmt_guid(fabric.end_port(ep).port_guid),
                fabric.end_port(ep).desc
            ))
        }
        Remote::None => return Err("the port is not cabled".into()),
    };
    let other = (fabric.switch(rsw).guid, rport);
    let canonical = other.min((switch, port));
    if fabric.switch_link_live(sid, port).is_none() {
        // Already out of the routing: nothing more to lose.
        return Ok(canonical);
    }
    for (leaf, name) in [(sid, &s.desc), (rsw, &fabric.switch(rsw).desc)] {
        let live_links = fabric
            .switch(leaf)
            .external_ports()
            .filter(|&(pn, _)| fabric.switch_link_live(leaf, pn).is_some())
            .count();
        if fabric.is_leaf(leaf) && live_links <= 1 {
            return Err(format!(
                "it is the last live up-link of leaf {} ({name}): isolating it would disconnect its end ports",
                fmt_guid(fabric.switch(leaf).guid)
            ));
        }
    }
    let after = fabric
        .apply(&[FabricEvent::LinkDown { switch, port }])
        .map_err(|e| e.to_string())?;
    let before = leaf_components(fabric);
    let now = leaf_components(&after);
    if now > before {
        return Err(format!(
            "isolating it would split the switches with live end ports into {now} parts (now {before})"
        ));
    }
    Ok(canonical)
}

/// Connected components of the live fabric that hold a switch with live end ports.
fn leaf_components(f: &Fabric) -> usize {
    let n = f.num_switches();
    let mut seen = vec![false; n];
    let mut parts = 0;
    for start in f.switch_ids() {
        if seen[start.idx()] || !f.is_leaf(start) || !f.switch(start).up {
            continue;
        }
        parts += 1;
        seen[start.idx()] = true;
        let mut queue = VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            for (pn, _) in f.switch(s).external_ports() {
                if let Some((r, _)) = f.switch_link_live(s, pn) {
                    if !seen[r.idx()] {
                        seen[r.idx()] = true;
                        queue.push_back(r);
                    }
                }
            }
        }
    }
    parts
}

/// A switch by id (for callers naming ports).
pub fn switch_name(f: &Fabric, id: SwitchId) -> String {
    let s = f.switch(id);
    if s.desc.is_empty() {
        fmt_guid(s.guid)
    } else {
        s.desc.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_port_links_and_last_up_links_are_never_isolated() {
        let f = sample();
        // A leaf with end ports, and one of its up-links.
        let leaf = f.switch_ids().find(|&s| f.is_leaf(s)).unwrap();
        let sw = f.switch(leaf);
        let (up, _) = sw
            .external_ports()
            .find(|(_, p)| matches!(p.remote, Remote::Switch { .. }))
            .unwrap();
        let (down, _) = sw
            .external_ports()
            .find(|(_, p)| matches!(p.remote, Remote::EndPort(_)))
            .unwrap();
        assert!(check_isolation(&f, sw.guid, up).is_ok());
        let e = check_isolation(&f, sw.guid, down).unwrap_err();
        assert!(e.contains("disconnect that end port"), "{e}");
        // Take every up-link but one down: the last one is refused.
        let ups: Vec<PortNum> = sw
            .external_ports()
            .filter(|(_, p)| matches!(p.remote, Remote::Switch { .. }))
            .map(|(n, _)| n)
            .collect();
        let evs: Vec<FabricEvent> = ups[1..]
            .iter()
            .map(|&port| FabricEvent::LinkDown { switch: sw.guid, port })
            .collect();
        let g = f.apply(&evs).unwrap();
        let e = check_isolation(&g, sw.guid, ups[0]).unwrap_err();
        assert!(e.contains("last live up-link of leaf"), "{e}");
        // A link already down is accepted (nothing more to lose).
        assert!(check_isolation(&g, sw.guid, ups[1]).is_ok());
    }

    fn sample() -> Fabric {
        fabric_topology::gen::generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap()
    }
}
