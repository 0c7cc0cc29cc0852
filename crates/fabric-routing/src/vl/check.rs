//! Per-layer deadlock check of a [`VlLayering`]: each layer's channel-dependency graph, built
//! from the routes the layering puts in it, is acyclic (the existing CDG check's Kahn pass,
//! [`crate::deadlock`], run per layer).

use fabric_topology::{Fabric, Lid};

use super::routes::ChannelMap;
use super::VlLayering;
use crate::deadlock::edges_acyclic;
use crate::lft::{Lfts, NO_ROUTE};

/// Whether each layer of `layering` has an acyclic CDG (index = layer; `num_layers` entries).
/// Every route of `tables` from a live switch to a LID of `dlids` is walked through the tables
/// and its dependencies (consecutive switch-to-switch channels, as in
/// [`crate::check::cdg_acyclic`]) are added to the CDG of the layer the layering gives it. A
/// route that loops makes its layer fail. Independent of how the layering was computed.
pub fn cdg_acyclic_per_layer(fabric: &Fabric, tables: &[&Lfts], dlids: &[Lid], layering: &VlLayering) -> Vec<bool> {
    let nl = layering.num_layers as usize;
    let mut ok = vec![true; nl];
    let mut edges: Vec<Vec<(u32, u32)>> = vec![Vec::new(); nl];
    let cm = ChannelMap::new(fabric);
    let mut path = Vec::new();
    for (ti, t) in tables.iter().enumerate() {
        for &d in dlids {
            if !t.covers(d) {
                continue;
            }
            for s in fabric.switch_ids().filter(|&s| fabric.switch(s).up) {
                if s.idx() >= t.num_switches() {
                    continue;
                }
                let p = t.get(s, d);
                if p == 0 || p == NO_ROUTE {
                    continue;
                }
                let l = layering.layer_of(ti, s, d) as usize;
                if l >= nl {
                    // A layer beyond the count: report it as a failure of the last layer.
                    if let Some(last) = ok.last_mut() {
                        *last = false;
                    }
                    continue;
                }
                path.clear();
                if cm.walk(t, s.0, d, |c| path.push(c)).is_err() {
                    ok[l] = false;
                    continue;
                }
                edges[l].extend(path.windows(2).map(|w| (w[0], w[1])));
            }
        }
    }
    for (l, e) in edges.iter_mut().enumerate() {
        e.sort_unstable();
        e.dedup();
        ok[l] = ok[l] && edges_acyclic(cm.nchan, e);
    }
    ok
}
