//! The switch tree and the blocks of a ranked fabric (what `render` writes).

use std::collections::{BTreeMap, BTreeSet};

use fabric_ranking::Ranking;
use fabric_topology::{Fabric, Guid, SwitchId};

use crate::hostlist::compress;
use crate::names::{switch_names, Hosts};

/// One switch line of topology/tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmSwitch {
    pub name: String,
    /// The fabric switch (for `<sw>-hosts`, the switch carrying the hosts).
    pub guid: Guid,
    /// Level in the fabric (leaves at 0; a `<sw>-hosts` child is one below its switch).
    pub level: u32,
    /// Host names (leaves), sorted.
    pub nodes: Vec<String>,
    /// Child switch names (above the leaves), sorted.
    pub switches: Vec<String>,
}

/// One block of topology/block: the hosts of one leaf switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// `b-<leaf switch name>`.
    pub name: String,
    pub leaf: String,
    /// Host names, sorted.
    pub nodes: Vec<String>,
}

/// What Slurm is told about the fabric, and what was left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmTopology {
    /// Tree switches, bottom-up (level, then name).
    pub switches: Vec<SlurmSwitch>,
    /// Blocks in aggregation order.
    pub blocks: Vec<Block>,
    /// Every host written (live), sorted.
    pub hosts: Vec<String>,
    /// Everything left out or odd, one sentence each (also written as comments).
    pub warnings: Vec<String>,
}

/// `names` as a hostlist, for messages.
fn list(names: &BTreeSet<String>) -> String {
    compress(names.iter().map(String::as_str))
}

impl SlurmTopology {
    /// Builds the tree and the blocks from the live part of `fabric`, ranked by `ranking`.
    pub fn build(fabric: &Fabric, ranking: &Ranking) -> SlurmTopology {
        let hosts = Hosts::of(fabric);
        let sw_names = switch_names(fabric);
        let mut warnings: Vec<String> = hosts.warning().into_iter().collect();

        // Live hosts per switch, and the leaves of every host.
        let mut on_switch: BTreeMap<SwitchId, BTreeSet<String>> = BTreeMap::new();
        let mut leaves_of: BTreeMap<&str, Vec<SwitchId>> = BTreeMap::new();
        let mut dead_hosts: BTreeSet<String> = BTreeSet::new();
        for (name, ports) in &hosts.ports {
            let mut live = false;
            for &ep in ports {
                if !fabric.end_port_live(ep) {
                    continue;
                }
                live = true;
                let (sw, _) = fabric.end_port(ep).attach.expect("a live end port is attached");
                if on_switch.entry(sw).or_default().insert(name.clone()) {
                    leaves_of.entry(name).or_default().push(sw);
                }
            }
            if !live {
                dead_hosts.insert(name.clone());
            }
        }
        if !dead_hosts.is_empty() {
            warnings.push(format!(
                "{} host{} without a live end port (node, link or switch down), left out: {}",
                dead_hosts.len(),
                if dead_hosts.len() == 1 { "" } else { "s" },
                list(&dead_hosts)
            ));
        }
        let down: BTreeSet<String> = fabric
            .switch_ids()
            .filter(|&s| !fabric.switch(s).up)
            .map(|s| sw_names[s.idx()].clone())
            .collect();
        if !down.is_empty() {
            warnings.push(format!("{} switch(es) down, left out: {}", down.len(), list(&down)));
        }
        let unranked: BTreeSet<String> = fabric
            .switch_ids()
            .filter(|&s| fabric.switch(s).up && ranking.level_of(s).is_none())
            .map(|s| sw_names[s.idx()].clone())
            .collect();
        if !unranked.is_empty() {
            warnings.push(format!(
                "{} live switch(es) without a level (connected to no leaf), left out: {}",
                unranked.len(),
                list(&unranked)
            ));
        }

        let (switches, tree_warnings) = tree(fabric, ranking, &sw_names, &on_switch);
        warnings.extend(tree_warnings);
        let components = components(fabric, ranking, &on_switch);
        if components > 1 {
            warnings.push(format!(
                "the live fabric is in {components} disconnected parts: Slurm jobs cannot span them"
            ));
        }
        let (blocks, block_warnings) = blocks(fabric, ranking, &sw_names, &leaves_of);
        warnings.extend(block_warnings);
        let written: BTreeSet<String> = switches.iter().flat_map(|s| s.nodes.iter().cloned()).collect();
        let unplaced: BTreeSet<String> = leaves_of
            .keys()
            .filter(|h| !written.contains(**h))
            .map(|h| (*h).to_string())
            .collect();
        if !unplaced.is_empty() {
            warnings.push(format!(
                "{} live host(s) only on switches without a level, left out: {}",
                unplaced.len(),
                list(&unplaced)
            ));
        }
        let hosts: Vec<String> = written.into_iter().collect();
        SlurmTopology {
            switches,
            blocks,
            hosts,
            warnings,
        }
    }
}

/// The tree switches bottom-up, and the warnings about switches left out.
fn tree(
    fabric: &Fabric,
    ranking: &Ranking,
    sw_names: &[String],
    on_switch: &BTreeMap<SwitchId, BTreeSet<String>>,
) -> (Vec<SlurmSwitch>, Vec<String>) {
    let mut out: Vec<SlurmSwitch> = Vec::new();
    let mut written: BTreeSet<SwitchId> = BTreeSet::new();
    let mut empty: BTreeSet<String> = BTreeSet::new();
    let mut mixed: BTreeSet<String> = BTreeSet::new();
    for level in 0..ranking.height {
        let mut at_level: Vec<SlurmSwitch> = Vec::new();
        for sw in ranking.switches_at(level) {
            let name = &sw_names[sw.idx()];
            let guid = fabric.switch(sw).guid;
            let hosts = on_switch.get(&sw);
            if level == 0 {
                match hosts {
                    Some(h) => {
                        written.insert(sw);
                        at_level.push(SlurmSwitch {
                            name: name.clone(),
                            guid,
                            level,
                            nodes: h.iter().cloned().collect(),
                            switches: Vec::new(),
                        });
                    }
                    None => {
                        empty.insert(name.clone());
                    }
                }
                continue;
            }
            let mut children: BTreeSet<String> = fabric
                .port_groups(sw)
                .iter()
                .filter(|g| ranking.level_of(g.remote) == Some(level - 1) && written.contains(&g.remote))
                .map(|g| sw_names[g.remote.idx()].clone())
                .collect();
            if let Some(h) = hosts {
                let child = format!("{name}-hosts");
                children.insert(child.clone());
                mixed.insert(child.clone());
                out.push(SlurmSwitch {
                    name: child,
                    guid,
                    level: level - 1,
                    nodes: h.iter().cloned().collect(),
                    switches: Vec::new(),
                });
            }
            if children.is_empty() {
                empty.insert(name.clone());
                continue;
            }
            written.insert(sw);
            at_level.push(SlurmSwitch {
                name: name.clone(),
                guid,
                level,
                nodes: Vec::new(),
                switches: children.into_iter().collect(),
            });
        }
        out.extend(at_level);
    }
    out.sort_by(|a, b| (a.level, &a.name).cmp(&(b.level, &b.name)));
    let mut warnings = Vec::new();
    if !empty.is_empty() {
        warnings.push(format!(
            "{} live switch(es) with no live host or switch below them, left out: {}",
            empty.len(),
            list(&empty)
        ));
    }
    if !mixed.is_empty() {
        warnings.push(format!(
            "hosts on switches above the leaves, written under a child switch of their own: {}",
            list(&mixed)
        ));
    }
    (out, warnings)
}

/// Connected parts of the live, ranked switches that carry hosts.
fn components(fabric: &Fabric, ranking: &Ranking, on_switch: &BTreeMap<SwitchId, BTreeSet<String>>) -> usize {
    let n = fabric.num_switches();
    let mut seen = vec![false; n];
    let mut parts = 0;
    for &start in on_switch.keys() {
        if seen[start.idx()] || ranking.level_of(start).is_none() {
            continue;
        }
        parts += 1;
        seen[start.idx()] = true;
        let mut stack = vec![start];
        while let Some(s) = stack.pop() {
            for g in fabric.port_groups(s) {
                if !seen[g.remote.idx()] && ranking.level_of(g.remote).is_some() {
                    seen[g.remote.idx()] = true;
                    stack.push(g.remote);
                }
            }
        }
    }
    parts
}

/// One block per switch carrying hosts, in aggregation order, each host in one block only.
fn blocks(
    fabric: &Fabric,
    ranking: &Ranking,
    sw_names: &[String],
    leaves_of: &BTreeMap<&str, Vec<SwitchId>>,
) -> (Vec<Block>, Vec<String>) {
    let mut members: BTreeMap<SwitchId, Vec<String>> = BTreeMap::new();
    let mut multi: BTreeSet<String> = BTreeSet::new();
    for (host, leaves) in leaves_of {
        let ranked: Vec<SwitchId> = leaves
            .iter()
            .copied()
            .filter(|&l| ranking.level_of(l).is_some())
            .collect();
        let Some(&first) = ranked.first() else { continue };
        if ranked.len() > 1 {
            multi.insert((*host).to_string());
        }
        members.entry(first).or_default().push((*host).to_string());
    }
    // Aggregation order: by the first (lowest id) live neighbour one level up, then by switch.
    let key = |sw: SwitchId| {
        let level = ranking.level_of(sw).unwrap_or(0);
        let up = fabric
            .port_groups(sw)
            .iter()
            .filter(|g| ranking.level_of(g.remote) == Some(level + 1))
            .map(|g| g.remote)
            .min();
        (up.map_or(u32::MAX, |s| s.0), sw.0)
    };
    let mut order: Vec<SwitchId> = members.keys().copied().collect();
    order.sort_by_key(|&s| key(s));
    let blocks = order
        .into_iter()
        .map(|sw| Block {
            name: format!("b-{}", sw_names[sw.idx()]),
            leaf: sw_names[sw.idx()].clone(),
            nodes: members.remove(&sw).unwrap_or_default(),
        })
        .collect();
    let mut warnings = Vec::new();
    if !multi.is_empty() {
        warnings.push(format!(
            "hosts with live ports on several leaves, each in the block of its first port's leaf only: {}",
            list(&multi)
        ));
    }
    (blocks, warnings)
}
