//! Cabling mistakes made on purpose ([`recable`]): two switch-to-switch cables swapped at one
//! end and one cable left out, the way a miscabled installation differs from its intended graph.
//! Tests of the cabling validation (`fabricctl validate --expected`, seed 003's deployment check)
//! build their "installed" fabrics with it.

use crate::{Fabric, FabricBuilder, PortNum, Remote, SwitchId};

use super::GenError;

/// A switch port named by the switch's node description (or GUID, as [`Fabric::find_switch`]
/// accepts) and the port number.
pub type NamedPort<'a> = (&'a str, PortNum);

/// `f` rebuilt with the cables at `swap[0]` (to `b`) and `swap[1]` (to `d`) exchanged at their
/// far ends (`swap[0]`–`d` and `swap[1]`–`b`) and the cable at `cut` left out. Switches, end
/// ports, GUIDs and every other cable are kept; the result is a fresh fabric (everything up).
///
/// Errors name the switch or port that is unknown or not cabled to a switch.
pub fn recable(f: &Fabric, swap: [NamedPort<'_>; 2], cut: Option<NamedPort<'_>>) -> Result<Fabric, GenError> {
    let invalid = |reason: String| GenError::Invalid {
        spec: "recable".into(),
        reason,
    };
    let at = |(name, port): NamedPort<'_>| -> Result<(SwitchId, PortNum), GenError> {
        let s = f
            .find_switch(name)
            .ok_or_else(|| invalid(format!("no switch named {name:?}")))?;
        match f.switch(s).ports.get(port as usize).map(|p| p.remote) {
            Some(Remote::Switch { .. }) => Ok((s, port)),
            _ => Err(invalid(format!(
                "switch {name:?} port {port} is not cabled to a switch"
            ))),
        }
    };
    let peer = |(s, p): (SwitchId, PortNum)| match f.switch(s).ports[p as usize].remote {
        Remote::Switch { sw, port } => (sw, port),
        _ => unreachable!("checked by `at`"),
    };
    let (a, c) = (at(swap[0])?, at(swap[1])?);
    let (b, d) = (peer(a), peer(c));
    if a == c || a == d {
        return Err(invalid(format!("{:?} and {:?} are the same cable", swap[0], swap[1])));
    }
    let cut = cut.map(at).transpose()?;
    let topo = |e: crate::TopologyError| invalid(e.to_string());
    let mut bld = FabricBuilder::new();
    for s in f.switches() {
        bld.add_switch(s.guid, s.desc.clone(), s.nports).map_err(topo)?;
    }
    for e in f.end_ports() {
        let id = bld
            .add_end_port(
                e.port_guid,
                e.node_guid,
                e.desc.clone(),
                e.port_num,
                e.node_ports,
                e.node_type,
            )
            .map_err(topo)?;
        if let Some((sw, port)) = e.attach {
            bld.connect_end_port(id, sw, port).map_err(topo)?;
        }
    }
    for (i, s) in f.switches().iter().enumerate() {
        for (pn, p) in s.external_ports() {
            let Remote::Switch { sw, port } = p.remote else {
                continue;
            };
            let (x, y) = ((SwitchId(i as u32), pn), (sw, port));
            if x > y || Some(x) == cut || Some(y) == cut {
                continue;
            }
            let same = |u, v| (x, y) == (u, v) || (x, y) == (v, u);
            let (x, y) = if same(a, b) {
                (a, d)
            } else if same(c, d) {
                (c, b)
            } else {
                (x, y)
            };
            bld.connect_switches(x.0, x.1, y.0, y.1).map_err(topo)?;
        }
    }
    Ok(bld.build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::generate_str;

    #[test]
    fn two_swapped_cables_and_one_cut() {
        let f = generate_str("SLIMFLY(5;4)", None).unwrap();
        let g = recable(
            &f,
            [("SLIMFLY S(0,0,0)", 5), ("SLIMFLY S(1,1,3)", 9)],
            Some(("SLIMFLY S(0,4,2)", 11)),
        )
        .unwrap();
        assert_eq!(g.count_links().0, f.count_links().0 - 1);
        let a = f.find_switch("SLIMFLY S(0,0,0)").unwrap();
        let c = f.find_switch("SLIMFLY S(1,1,3)").unwrap();
        let (b, d) = (f.switch(a).ports[5].remote, f.switch(c).ports[9].remote);
        assert_eq!(g.switch(a).ports[5].remote, d);
        assert_eq!(g.switch(c).ports[9].remote, b);
        let cut = f.find_switch("SLIMFLY S(0,4,2)").unwrap();
        assert!(!matches!(g.switch(cut).ports[11].remote, Remote::Switch { .. }));
        assert_eq!(g.num_end_ports(), f.num_end_ports());
    }

    #[test]
    fn unknown_switches_and_uncabled_ports_are_errors_naming_them() {
        let f = generate_str("SLIMFLY(5;4)", None).unwrap();
        let e = recable(&f, [("nope", 5), ("SLIMFLY S(1,1,3)", 9)], None).unwrap_err();
        assert!(e.to_string().contains("\"nope\""), "{e}");
        // Port 1 of a Slim Fly switch holds an end port.
        let e = recable(&f, [("SLIMFLY S(0,0,0)", 1), ("SLIMFLY S(1,1,3)", 9)], None).unwrap_err();
        assert!(e.to_string().contains("port 1 is not cabled to a switch"), "{e}");
    }
}
