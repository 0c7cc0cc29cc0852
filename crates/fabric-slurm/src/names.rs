//! Host names from node descriptions and switch names valid for Slurm.
//!
//! **Hosts.** An end node's NodeDescription is `"<host> <device>"` by the ibnetdiscover / OpenSM
//! convention (`"node017 HCA-1"`, `"r-ufm216 HCA-2"`; rdma-ndd's default `"%h %d"` gives
//! `"node017 mlx5_0"`): the host is the first word when the description has one or two words and
//! that word is a valid host name (ASCII letters, digits, `-`, `_`, `.`, starting with a letter
//! or digit, at most 63 bytes). Every end port whose description names the same host belongs to
//! that one host (several HCAs, several ports). A description without a usable host name (the
//! firmware default `"MT25408 ConnectX Mellanox Technologies"`, a generated `"n(0,1)"`) gives the
//! name `guid-<node GUID in 16 hex digits>`, one per node, and a warning says so.
//!
//! **Switches.** The NodeDescription with every byte outside `[A-Za-z0-9._-]` replaced by `_`
//! (runs collapsed, ends trimmed): `"MF0;ib5:SX6036/U1"` → `MF0_ib5_SX6036_U1`. A description that
//! is empty, or that several switches share after this cleaning (`"SwitchIB Mellanox
//! Technologies"` on every switch of a fabric), gives `sw-<GUID in 16 hex digits>` instead, so every
//! name is unique and free of spaces, `=`, `,`, `#`, brackets and quotes.

use std::collections::{BTreeMap, HashMap};

use fabric_topology::{EndPortId, Fabric, Guid};

/// The longest host name taken from a description.
const MAX_HOST: usize = 63;

fn host_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
}

/// The host part of a node description, when it has one (see the module docs).
pub fn host_from_desc(desc: &str) -> Option<&str> {
    let mut words = desc.split_whitespace();
    let first = words.next()?;
    if words.next().is_some() && words.next().is_some() {
        return None;
    }
    let ok = first.len() <= MAX_HOST && first.as_bytes()[0].is_ascii_alphanumeric() && first.bytes().all(host_char);
    ok.then_some(first)
}

/// The name of a node without a host name in its description.
pub fn guid_host(node_guid: Guid) -> String {
    format!("guid-{node_guid:016x}")
}

/// The hosts of a fabric: each host name with its end ports (every end port, live or not).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hosts {
    /// Host name → its end ports, in end-port id order.
    pub ports: BTreeMap<String, Vec<EndPortId>>,
    /// Host name of every end port, by end-port id.
    pub of_port: Vec<String>,
    /// Nodes named from their GUID, and one of their descriptions (for the warning).
    pub guid_named: usize,
    pub guid_named_example: Option<(String, String)>,
}

impl Hosts {
    /// Names every end port of `fabric` (see the module docs).
    pub fn of(fabric: &Fabric) -> Hosts {
        let mut h = Hosts::default();
        let mut guid_nodes = std::collections::HashSet::new();
        for id in fabric.end_port_ids() {
            let e = fabric.end_port(id);
            let name = match host_from_desc(&e.desc) {
                Some(n) => n.to_string(),
                None => {
                    let n = guid_host(e.node_guid);
                    if guid_nodes.insert(e.node_guid) {
                        h.guid_named += 1;
                        if h.guid_named_example.is_none() {
                            h.guid_named_example = Some((e.desc.clone(), n.clone()));
                        }
                    }
                    n
                }
            };
            h.ports.entry(name.clone()).or_default().push(id);
            h.of_port.push(name);
        }
        h
    }

    /// The warning about nodes named from their GUID, if any.
    pub fn warning(&self) -> Option<String> {
        let (desc, name) = self.guid_named_example.as_ref()?;
        Some(format!(
            "{} end node{} without a host name in the node description (e.g. {desc:?}): named from the node GUID (e.g. {name})",
            self.guid_named,
            if self.guid_named == 1 { "" } else { "s" }
        ))
    }
}

/// `desc` cleaned for Slurm: bytes outside `[A-Za-z0-9._-]` become `_`, runs collapsed, ends trimmed.
pub fn clean_switch_desc(desc: &str) -> String {
    let mut out = String::with_capacity(desc.len());
    for c in desc.chars() {
        let c = if c.is_ascii() && host_char(c as u8) { c } else { '_' };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    out.trim_matches('_').to_string()
}

/// The GUID form of a switch name.
pub fn guid_switch(guid: Guid) -> String {
    format!("sw-{guid:016x}")
}

/// A unique Slurm name for every switch of `fabric`, by switch id (see the module docs).
pub fn switch_names(fabric: &Fabric) -> Vec<String> {
    let cleaned: Vec<String> = fabric.switches().iter().map(|s| clean_switch_desc(&s.desc)).collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for c in &cleaned {
        *count.entry(c.as_str()).or_default() += 1;
    }
    let guid_names: std::collections::HashSet<String> = fabric.switches().iter().map(|s| guid_switch(s.guid)).collect();
    fabric
        .switches()
        .iter()
        .zip(&cleaned)
        .map(|(s, c)| {
            // A cleaned name equal to another switch's GUID form would collide: GUID form too.
            if c.is_empty() || count[c.as_str()] > 1 || (guid_names.contains(c) && *c != guid_switch(s.guid)) {
                guid_switch(s.guid)
            } else {
                c.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_from_descriptions() {
        assert_eq!(host_from_desc("node017 HCA-1"), Some("node017"));
        assert_eq!(host_from_desc("r-ufm216 HCA-2"), Some("r-ufm216"));
        assert_eq!(host_from_desc("tank2 mlx4_0"), Some("tank2"));
        assert_eq!(host_from_desc("login1.example.org"), Some("login1.example.org"));
        assert_eq!(host_from_desc("MT25408 ConnectX Mellanox Technologies"), None);
        assert_eq!(host_from_desc("n(0,1)"), None);
        assert_eq!(host_from_desc(""), None);
        assert_eq!(host_from_desc("-x HCA-1"), None);
        assert_eq!(host_from_desc("a=b HCA-1"), None);
    }

    #[test]
    fn switch_descriptions_cleaned() {
        assert_eq!(clean_switch_desc("MF0;ib5:SX6036/U1"), "MF0_ib5_SX6036_U1");
        assert_eq!(
            clean_switch_desc("Voltaire 4036 # 4036-369C"),
            "Voltaire_4036_4036-369C"
        );
        assert_eq!(clean_switch_desc("PGFT L0 S(0,3)"), "PGFT_L0_S_0_3");
        assert_eq!(clean_switch_desc(" \"=,é "), "");
    }
}
