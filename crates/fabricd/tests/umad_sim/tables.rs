//! LFTs read back from ibsim's switches: directed-route paths to every switch (so that reading
//! does not depend on the routes checked) and a hop-by-hop walk of the read-back tables over a
//! fabric file's cables.

use std::collections::{BTreeMap, HashMap};

use fabric_topology::{Fabric, Remote};

/// Walks the `ibroute` tables from every switch to every destination LID over the cables of
/// `f`; returns the failures `(source switch GUID, LID, why)`.
pub fn walk_all(
    f: &Fabric,
    tables: &HashMap<u64, BTreeMap<u64, u64>>,
    dests: &HashMap<u64, u64>,
) -> Vec<(u64, u64, String)> {
    let mut bad = Vec::new();
    for src in f.switch_ids() {
        for (&lid, &want) in dests {
            let mut at = src;
            let mut hops = 0;
            let why = loop {
                let g = f.switch(at).guid;
                if g == want {
                    break None; // a switch's own LID
                }
                let Some(&port) = tables.get(&g).and_then(|t| t.get(&lid)) else {
                    break Some(format!("no entry on 0x{g:016x}"));
                };
                match f
                    .switch(at)
                    .external_ports()
                    .find(|(pn, _)| u64::from(*pn) == port)
                    .map(|(_, p)| p.remote)
                {
                    Some(Remote::Switch { sw, .. }) => at = sw,
                    Some(Remote::EndPort(e)) if f.end_port(e).port_guid == want => break None,
                    other => break Some(format!("0x{g:016x} port {port} leads to {other:?}")),
                }
                hops += 1;
                if hops > 16 {
                    break Some("loop".to_string());
                }
            };
            if let Some(why) = why {
                bad.push((f.switch(src).guid, lid, why));
            }
        }
    }
    bad
}

/// Directed-route paths (`0,1,p,...`) from the SM's HCA (`f`'s end port 0, its port 1) to every
/// switch, by BFS over the file's cables: the tables are read by directed route, so reading
/// does not depend on the routes being checked.
pub fn dr_paths(f: &Fabric) -> HashMap<u64, String> {
    let e = f.end_port(fabric_topology::EndPortId(0));
    let first = f
        .switch_ids()
        .find(|&s| {
            f.switch(s)
                .external_ports()
                .any(|(_, p)| matches!(p.remote, Remote::EndPort(x) if f.end_port(x).port_guid == e.port_guid))
        })
        .expect("the SM's switch");
    let mut out = HashMap::from([(f.switch(first).guid, "0,1".to_string())]);
    let mut queue = std::collections::VecDeque::from([first]);
    while let Some(at) = queue.pop_front() {
        let path = out[&f.switch(at).guid].clone();
        for (pn, p) in f.switch(at).external_ports() {
            if let Remote::Switch { sw, .. } = p.remote {
                let g = f.switch(sw).guid;
                if let std::collections::hash_map::Entry::Vacant(v) = out.entry(g) {
                    v.insert(format!("{path},{pn}"));
                    queue.push_back(sw);
                }
            }
        }
    }
    out
}

/// Every LID an end port answers to (base and escape), with its port GUID.
pub fn end_port_lids(topo: &fabric_proto::v1::Topology) -> HashMap<u64, u64> {
    topo.end_ports
        .iter()
        .flat_map(|e| [(u64::from(e.base_lid), e.guid), (u64::from(e.escape_lid), e.guid)])
        .collect()
}

/// Every switch's table as the switch holds it: `ibroute -n -D` over [`dr_paths`] (LID → port),
/// by switch GUID.
pub fn read_back(sim: &fabric_ibsim_harness::Ibsim, f: &Fabric) -> HashMap<u64, BTreeMap<u64, u64>> {
    let paths = dr_paths(f);
    f.switches()
        .iter()
        .map(|s| {
            (
                s.guid,
                fabric_ibsim_harness::ibroute(sim, &["-n", "-D", &paths[&s.guid]]),
            )
        })
        .collect()
}
