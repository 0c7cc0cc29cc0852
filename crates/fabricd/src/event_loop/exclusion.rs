//! Virtual faults as exclusions: their canonical key (a link by its lower end) and their
//! persisted form.

use fabric_topology::{fmt_guid, Fabric, FabricEvent, Guid, PortNum, Remote};

use crate::persist::VirtualFault;

/// Canonical key of a virtual fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Exclusion {
    /// Canonical end of the link: the lower (GUID, port).
    Link(Guid, PortNum),
    Switch(Guid),
    Node(Guid),
}

impl Exclusion {
    pub(crate) fn down_event(self) -> FabricEvent {
        match self {
            Exclusion::Link(switch, port) => FabricEvent::LinkDown { switch, port },
            Exclusion::Switch(g) => FabricEvent::SwitchDown(g),
            Exclusion::Node(g) => FabricEvent::EndPortDown(g),
        }
    }
    pub(crate) fn persisted(self) -> VirtualFault {
        match self {
            Exclusion::Link(s, port) => VirtualFault::Link {
                switch: fmt_guid(s),
                port,
            },
            Exclusion::Switch(s) => VirtualFault::Switch { switch: fmt_guid(s) },
            Exclusion::Node(g) => VirtualFault::Node { port_guid: fmt_guid(g) },
        }
    }
}

/// The canonical (lower GUID, port) end of the link on `switch`/`port`.
pub(crate) fn canonical_link(f: &Fabric, switch: Guid, port: PortNum) -> Exclusion {
    match remote_switch_end(f, switch, port) {
        Some(other) if other < (switch, port) => Exclusion::Link(other.0, other.1),
        _ => Exclusion::Link(switch, port),
    }
}

/// The other end of a switch-to-switch cable, as (switch GUID, port).
pub(crate) fn remote_switch_end(f: &Fabric, switch: Guid, port: PortNum) -> Option<(Guid, PortNum)> {
    let id = f.switch_by_guid(switch)?;
    match f.switch(id).ports.get(port as usize)?.remote {
        Remote::Switch { sw, port: rp } => Some((f.switch(sw).guid, rp)),
        _ => None,
    }
}

/// The exclusion a persisted virtual fault stands for, or why it no longer names something
/// of the cabling.
pub(crate) fn exclusion_from_persisted(f: &Fabric, v: &VirtualFault) -> Result<Exclusion, String> {
    let guid = |s: &str| fabric_topology::parse_guid(s).ok_or_else(|| format!("{s:?} is not a GUID"));
    let (x, ev) = match v {
        VirtualFault::Link { switch, port } => {
            let g = guid(switch)?;
            (
                canonical_link(f, g, *port),
                FabricEvent::LinkDown { switch: g, port: *port },
            )
        }
        VirtualFault::Switch { switch } => {
            let g = guid(switch)?;
            (Exclusion::Switch(g), FabricEvent::SwitchDown(g))
        }
        VirtualFault::Node { port_guid } => {
            let g = guid(port_guid)?;
            (Exclusion::Node(g), FabricEvent::EndPortDown(g))
        }
    };
    f.check_event(&ev).map_err(|e| e.to_string())?;
    Ok(x)
}
