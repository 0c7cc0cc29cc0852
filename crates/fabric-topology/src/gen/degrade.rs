//! Random degradation: removal of non-leaf switches and inter-switch cables.

use std::collections::HashSet;

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::error::GenError;
use crate::model::{Fabric, FabricBuilder, PortNum, Remote, SwitchId};

/// How to degrade a fabric: how many inter-switch cables and non-leaf switches to remove, with
/// which seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Degrade {
    /// Inter-switch cables to remove (each parallel cable counts; self-loops are never chosen).
    pub remove_links: usize,
    /// Non-leaf switches to remove (a leaf is a switch with an end node cabled to it).
    pub remove_switches: usize,
    /// Seed of the ChaCha8 generator that picks them.
    pub seed: u64,
}

/// Removes random inter-switch cables / non-leaf switches (cables really removed: they are absent
/// from the returned fabric and its file). Deterministic for a seed.
///
/// First `remove_switches` distinct non-leaf switches are drawn uniformly (a non-leaf switch has
/// no end node cabled, whatever its state) and removed with all their cables; then
/// `remove_links` distinct cables are drawn uniformly among the remaining inter-switch cables
/// (self-loops excluded) and removed. Everything else is kept as it is (GUIDs, names, port
/// counts, states, speeds, end-port order); the kept switches keep their relative order, so
/// their [`SwitchId`]s shift down past removed ones. The result has the input's generation.
pub fn degrade(generated: &Fabric, d: &Degrade) -> Result<Fabric, GenError> {
    degrade_impl(generated, d, false)
}

/// [`degrade`] for direct topologies (Slim Fly, Dragonfly, HyperX, RRG), where every switch has
/// end nodes: the `remove_switches` switches are drawn uniformly among all switches and removed
/// with their cables and their end nodes (absent from the result, the remaining end ports keep
/// their relative order); the cables are then drawn as in [`degrade`]. Deterministic for a seed.
pub fn degrade_direct(generated: &Fabric, d: &Degrade) -> Result<Fabric, GenError> {
    degrade_impl(generated, d, true)
}

fn degrade_impl(generated: &Fabric, d: &Degrade, any_switch: bool) -> Result<Fabric, GenError> {
    let f = generated;
    let mut rng = ChaCha8Rng::seed_from_u64(d.seed);

    let non_leaves: Vec<usize> = f
        .switches()
        .iter()
        .enumerate()
        .filter(|(_, s)| any_switch || !s.external_ports().any(|(_, p)| matches!(p.remote, Remote::EndPort(_))))
        .map(|(i, _)| i)
        .collect();
    if d.remove_switches > non_leaves.len() {
        return Err(GenError::TooManySwitches {
            requested: d.remove_switches,
            available: non_leaves.len(),
        });
    }
    let mut removed = vec![false; f.num_switches()];
    for i in sample(&mut rng, non_leaves.len(), d.remove_switches) {
        removed[non_leaves[i]] = true;
    }

    // Each remaining cable once, by its lower (switch, port) end, in fabric order.
    let mut cables: Vec<(usize, PortNum)> = Vec::new();
    for (i, s) in f.switches().iter().enumerate() {
        if removed[i] {
            continue;
        }
        for (pn, p) in s.external_ports() {
            if let Remote::Switch { sw, port: _ } = p.remote {
                if sw.idx() > i && !removed[sw.idx()] {
                    cables.push((i, pn));
                }
            }
        }
    }
    if d.remove_links > cables.len() {
        return Err(GenError::TooManyLinks {
            requested: d.remove_links,
            available: cables.len(),
        });
    }
    let cut: HashSet<(usize, PortNum)> = sample(&mut rng, cables.len(), d.remove_links)
        .into_iter()
        .map(|i| cables[i])
        .collect();

    let mut b = FabricBuilder::new();
    let mut new_id: Vec<Option<SwitchId>> = vec![None; f.num_switches()];
    for (i, s) in f.switches().iter().enumerate() {
        if !removed[i] {
            let id = b.add_switch(s.guid, s.desc.clone(), s.nports)?;
            b.switch_mut(id).up = s.up;
            new_id[i] = Some(id);
        }
    }
    for e in f.end_ports() {
        // Direct topologies: the end nodes of a removed switch go with it.
        if e.attach.is_some_and(|(sw, _)| removed[sw.idx()]) {
            continue;
        }
        let id = b.add_end_port(
            e.port_guid,
            e.node_guid,
            e.desc.clone(),
            e.port_num,
            e.node_ports,
            e.node_type,
        )?;
        b.end_port_mut(id).up = e.up;
        if let Some((sw, port)) = e.attach {
            // End ports hang on leaves, which are never removed.
            if let Some(nsw) = new_id[sw.idx()] {
                b.connect_end_port(id, nsw, port)?;
                b.switch_mut(nsw).ports[port as usize] = f.switch(sw).ports[port as usize].clone();
                b.switch_mut(nsw).ports[port as usize].remote = Remote::EndPort(id);
            }
        }
    }
    for (i, s) in f.switches().iter().enumerate() {
        let Some(a) = new_id[i] else { continue };
        for (pn, p) in s.external_ports() {
            let Remote::Switch { sw, port } = p.remote else {
                continue;
            };
            // Each cable once (self-loops: from their lower port).
            if (sw.idx(), port) <= (i, pn) || cut.contains(&(i, pn)) {
                continue;
            }
            let Some(bid) = new_id[sw.idx()] else { continue };
            b.connect_switches(a, pn, bid, port)?;
            let far = &f.switch(sw).ports[port as usize];
            let (state, speed) = (p.state, p.speed.clone());
            let near_port = &mut b.switch_mut(a).ports[pn as usize];
            near_port.state = state;
            near_port.speed = speed;
            let far_port = &mut b.switch_mut(bid).ports[port as usize];
            far_port.state = far.state;
            far_port.speed = far.speed.clone();
        }
    }
    Ok(b.build().with_generation(f.generation()))
}
