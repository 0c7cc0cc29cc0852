//! The writer: a [`Fabric`] as ibnetdiscover-style text that ibsim loads.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::lex::is_speed;
use crate::model::{EndPort, EndPortId, Fabric, Guid, NodeType, Port, Remote};

/// Width/speed written for a cabled switch port whose speed is unknown.
const DEFAULT_SPEED: &str = "4xQDR";

/// Writes a fabric as an ibnetdiscover topology file that ibsim loads (`ibsim -s -n FILE`) and
/// that [`parse`](super::parse) reads back.
///
/// Layout (as `ibnetdiscover` prints it): switch records in switch id order, then one record per
/// CA or router in the order of their first end port (the global end-node order), each record
/// preceded by a blank line and a `switchguid=` / `caguid=` / `rtguid=` line. Node ids are
/// `"S-<16 hex>"`, `"H-<16 hex>"` (CAs) and `"R-<16 hex>"` (routers, i.e. end ports of type
/// [`NodeType::Other`]). Descriptions go in the header comments; every port line carries a
/// `lid 0 <width><speed>` trailer so that ibsim sets the link speed and prints no warning.
///
/// `parse(&write(f))` equals `f` when every cable-level fact is representable, which holds for
/// any fabric read by [`parse`](super::parse). What the format cannot carry:
/// * link and node state (`LinkState::Down`, dead switches or nodes): all cabling is written
///   and reads back as up;
/// * end ports without a cable (not written) and CAs with no cabled port (no record);
/// * per-port descriptions and node types of one CA: the first end port of a node gives the
///   node's description; `Io` and `Service` nodes are written as `Ca` and read back as `Compute`;
/// * the end-port order when the ports of one node are not consecutive or not in port order
///   (a CA's ports are written together, in port order);
/// * a cabled switch port without a speed (or with a speed that is not a `<width>x<speed>`
///   token) is written as `4xQDR` and reads back as `Some("4xQDR")`; speeds of uncabled ports;
/// * a double quote or a control character in a description (written as `'` and a space); an
///   empty description reads back as the node id (ibsim does the same).
///
/// For ibsim's sake, a remote description containing `=` is left out of port-line comments
/// (ibsim scans port lines for `key=value` options); descriptions longer than 64 bytes are
/// truncated by ibsim, not here.
pub fn write(fabric: &Fabric) -> String {
    let mut out = String::with_capacity(128 * (fabric.num_switches() * 8 + fabric.num_end_ports() * 2) + 256);
    let _ = writeln!(out, "#");
    let _ = writeln!(
        out,
        "# Topology file: written by fabricd (fabric-topology), generation {}",
        fabric.generation()
    );
    let _ = writeln!(
        out,
        "# {} switches, {} end ports",
        fabric.num_switches(),
        fabric.num_end_ports()
    );
    let _ = writeln!(out, "#");

    for s in fabric.switches() {
        let _ = writeln!(out, "\nswitchguid=0x{:x}({:x})", s.guid, s.guid);
        let _ = writeln!(
            out,
            "Switch\t{} \"S-{:016x}\"\t\t# \"{}\" enhanced port 0 lid 0 lmc 0",
            s.nports,
            s.guid,
            clean(&s.desc)
        );
        for (pn, p) in s.external_ports() {
            match p.remote {
                Remote::None => {}
                Remote::Switch { sw, port } => {
                    let r = fabric.switch(sw);
                    let _ = writeln!(
                        out,
                        "[{pn}]\t\"S-{:016x}\"[{port}]\t\t# {}lid 0 {}",
                        r.guid,
                        remote_desc(&r.desc),
                        speed(p)
                    );
                }
                Remote::EndPort(ep) => {
                    let e = fabric.end_port(ep);
                    let _ = writeln!(
                        out,
                        "[{pn}]\t\"{}-{:016x}\"[{}]({:x}) \t\t# {}lid 0 {}",
                        node_prefix(e),
                        e.node_guid,
                        e.port_num,
                        e.port_guid,
                        remote_desc(&e.desc),
                        speed(p)
                    );
                }
            }
        }
    }

    for ports in end_nodes(fabric) {
        let first = fabric.end_port(ports[0]);
        let nports = ports
            .iter()
            .map(|&id| fabric.end_port(id).port_num)
            .max()
            .unwrap_or(0)
            .max(first.node_ports);
        let (guid_kw, kw) = if first.node_type == NodeType::Other {
            ("rtguid", "Rt")
        } else {
            ("caguid", "Ca")
        };
        let _ = writeln!(out, "\n{guid_kw}=0x{:x}", first.node_guid);
        let _ = writeln!(
            out,
            "{kw}\t{nports} \"{}-{:016x}\"\t\t# \"{}\"",
            node_prefix(first),
            first.node_guid,
            clean(&first.desc)
        );
        for &id in &ports {
            let e = fabric.end_port(id);
            let Some((sw, sp)) = e.attach else { continue };
            let s = fabric.switch(sw);
            let p = &s.ports[sp as usize];
            let _ = writeln!(
                out,
                "[{}]({:x}) \t\"S-{:016x}\"[{sp}]\t\t# lid 0 lmc 0 {}lid 0 {}",
                e.port_num,
                e.port_guid,
                s.guid,
                remote_desc(&s.desc),
                speed(p)
            );
        }
    }
    out
}

/// The cabled end ports of each CA / router node (by node GUID), nodes in order of their first
/// end port, ports in port order.
fn end_nodes(fabric: &Fabric) -> Vec<Vec<EndPortId>> {
    let mut index: HashMap<Guid, usize> = HashMap::new();
    let mut nodes: Vec<Vec<EndPortId>> = Vec::new();
    for id in fabric.end_port_ids() {
        let e = fabric.end_port(id);
        if e.attach.is_none() {
            continue;
        }
        let n = *index.entry(e.node_guid).or_insert_with(|| {
            nodes.push(Vec::new());
            nodes.len() - 1
        });
        nodes[n].push(id);
    }
    for ports in &mut nodes {
        ports.sort_by_key(|&id| fabric.end_port(id).port_num);
    }
    nodes
}

fn node_prefix(e: &EndPort) -> char {
    if e.node_type == NodeType::Other {
        'R'
    } else {
        'H'
    }
}

fn speed(p: &Port) -> &str {
    match p.speed.as_deref() {
        Some(s) if is_speed(s) => s,
        _ => DEFAULT_SPEED,
    }
}

/// A description made safe for a quoted field.
fn clean(desc: &str) -> String {
    desc.chars()
        .map(|c| {
            if c == '"' {
                '\''
            } else if c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// `"desc" ` for a port-line comment, or nothing when ibsim would misread it.
fn remote_desc(desc: &str) -> String {
    if desc.contains('=') {
        String::new()
    } else {
        format!("\"{}\" ", clean(desc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ibnet::parse;
    use crate::model::{FabricBuilder, SwitchId};

    fn sample() -> Fabric {
        let mut b = FabricBuilder::new();
        let l = b.add_switch(0x10, "leaf \"0\"", 8).unwrap();
        let s = b.add_switch(0x20, "spine a=b", 4).unwrap();
        b.connect_switches(l, 5, s, 1).unwrap();
        b.connect_switches(l, 6, s, 2).unwrap();
        b.connect_switches(l, 7, l, 8).unwrap();
        let e1 = b.add_end_port(0x102, 0x100, "node0", 2, 2, NodeType::Compute).unwrap();
        let e0 = b.add_end_port(0x101, 0x100, "node0", 1, 2, NodeType::Compute).unwrap();
        let r = b.add_end_port(0x301, 0x300, "gw", 1, 1, NodeType::Other).unwrap();
        b.connect_end_port(e0, l, 1).unwrap();
        b.connect_end_port(e1, l, 2).unwrap();
        b.connect_end_port(r, l, 3).unwrap();
        for p in [1, 2, 3, 5, 6, 7, 8] {
            b.switch_mut(l).ports[p].speed = Some("4xEDR".into());
        }
        b.build()
    }

    #[test]
    fn exact_text() {
        let text = write(&sample());
        let body: Vec<&str> = text.lines().skip(4).collect();
        let expected = [
            "",
            "switchguid=0x10(10)",
            "Switch\t8 \"S-0000000000000010\"\t\t# \"leaf '0'\" enhanced port 0 lid 0 lmc 0",
            "[1]\t\"H-0000000000000100\"[1](101) \t\t# \"node0\" lid 0 4xEDR",
            "[2]\t\"H-0000000000000100\"[2](102) \t\t# \"node0\" lid 0 4xEDR",
            "[3]\t\"R-0000000000000300\"[1](301) \t\t# \"gw\" lid 0 4xEDR",
            "[5]\t\"S-0000000000000020\"[1]\t\t# lid 0 4xEDR",
            "[6]\t\"S-0000000000000020\"[2]\t\t# lid 0 4xEDR",
            "[7]\t\"S-0000000000000010\"[8]\t\t# \"leaf '0'\" lid 0 4xEDR",
            "[8]\t\"S-0000000000000010\"[7]\t\t# \"leaf '0'\" lid 0 4xEDR",
            "",
            "switchguid=0x20(20)",
            "Switch\t4 \"S-0000000000000020\"\t\t# \"spine a=b\" enhanced port 0 lid 0 lmc 0",
            "[1]\t\"S-0000000000000010\"[5]\t\t# \"leaf '0'\" lid 0 4xQDR",
            "[2]\t\"S-0000000000000010\"[6]\t\t# \"leaf '0'\" lid 0 4xQDR",
            "",
            "caguid=0x100",
            "Ca\t2 \"H-0000000000000100\"\t\t# \"node0\"",
            "[1](101) \t\"S-0000000000000010\"[1]\t\t# lid 0 lmc 0 \"leaf '0'\" lid 0 4xEDR",
            "[2](102) \t\"S-0000000000000010\"[2]\t\t# lid 0 lmc 0 \"leaf '0'\" lid 0 4xEDR",
            "",
            "rtguid=0x300",
            "Rt\t1 \"R-0000000000000300\"\t\t# \"gw\"",
            "[1](301) \t\"S-0000000000000010\"[3]\t\t# lid 0 lmc 0 \"leaf '0'\" lid 0 4xEDR",
        ];
        assert_eq!(body, expected);
    }

    #[test]
    fn reads_back_with_documented_normalisations() {
        let f = sample();
        let p = parse(&write(&f), "w").unwrap();
        let g = &p.fabric;
        assert_eq!(g.switch(SwitchId(0)).desc, "leaf '0'");
        assert_eq!(g.switch(SwitchId(1)).ports[1].speed.as_deref(), Some("4xQDR"));
        // The node's ports are written together in port order: port 1 first.
        assert_eq!(g.end_ports()[0].port_guid, 0x101);
        assert_eq!(g.end_ports()[2].node_type, NodeType::Other);
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings); // the self-loop
    }
}
