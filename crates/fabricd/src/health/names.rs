//! Ports and links in words and as keys: canonical ends, both ends of a link, names.

use std::sync::Arc;

use fabric_southbound::CounterPort;
use fabric_topology::{fmt_guid, Fabric, Guid, PortNum, Remote};

use super::safety::switch_name;
use crate::state::Published;

/// The routed fabric (physical state and virtual faults), or the cabling before the first
/// generation.
pub fn routed_fabric(p: &Published) -> Arc<Fabric> {
    p.current
        .as_ref()
        .map_or_else(|| p.cabling.clone(), |g| g.fabric.clone())
}

/// The canonical end of a link (the lower (GUID, port) of a switch-to-switch link).
pub fn canonical(f: &Fabric, switch: Guid, port: PortNum) -> (Guid, PortNum) {
    match f
        .switch_by_guid(switch)
        .and_then(|id| f.switch(id).ports.get(port as usize))
        .map(|p| p.remote)
    {
        Some(Remote::Switch { sw, port: rp }) => (f.switch(sw).guid, rp).min((switch, port)),
        _ => (switch, port),
    }
}

/// The ports at both ends of the link on `switch`/`port`.
pub fn link_ends(f: &Fabric, switch: Guid, port: PortNum) -> Vec<CounterPort> {
    let mut v = vec![CounterPort::Switch { switch, port }];
    let remote = f
        .switch_by_guid(switch)
        .and_then(|id| f.switch(id).ports.get(port as usize))
        .map(|p| p.remote);
    match remote {
        Some(Remote::Switch { sw, port: rp }) => v.push(CounterPort::Switch {
            switch: f.switch(sw).guid,
            port: rp,
        }),
        Some(Remote::EndPort(ep)) => v.push(CounterPort::EndPort(f.end_port(ep).port_guid)),
        _ => {}
    }
    v
}

/// The switch side of a port's link: the switch port itself, or the leaf port an end port
/// hangs on.
pub fn switch_side(f: &Fabric, p: &CounterPort) -> Option<(Guid, PortNum)> {
    match *p {
        CounterPort::Switch { switch, port } => Some((switch, port)),
        CounterPort::EndPort(g) => {
            let (sw, port) = f.end_port(f.end_port_by_guid(g)?).attach?;
            Some((f.switch(sw).guid, port))
        }
    }
}

/// `switch name [port]` or the end port's name (GUIDs when unnamed or unknown).
pub fn port_name(f: &Fabric, p: &CounterPort) -> String {
    match *p {
        CounterPort::Switch { switch, port } => match f.switch_by_guid(switch) {
            Some(id) => format!("{} [{port}]", switch_name(f, id)),
            None => p.to_string(),
        },
        CounterPort::EndPort(g) => match f.end_port_by_guid(g).map(|id| f.end_port(id)) {
            Some(e) if !e.desc.is_empty() => format!("{} ({})", e.desc, fmt_guid(g)),
            _ => p.to_string(),
        },
    }
}

/// What the port is cabled to, in words.
pub fn remote_name(f: &Fabric, p: &CounterPort) -> String {
    match *p {
        CounterPort::Switch { switch, port } => {
            let remote = f
                .switch_by_guid(switch)
                .and_then(|id| f.switch(id).ports.get(port as usize))
                .map(|p| p.remote);
            match remote {
                Some(Remote::Switch { sw, port }) => format!("{} [{port}]", switch_name(f, sw)),
                Some(Remote::EndPort(ep)) => port_name(f, &CounterPort::EndPort(f.end_port(ep).port_guid)),
                _ => String::new(),
            }
        }
        CounterPort::EndPort(_) => match switch_side(f, p) {
            Some((s, n)) => port_name(f, &CounterPort::Switch { switch: s, port: n }),
            None => String::new(),
        },
    }
}
