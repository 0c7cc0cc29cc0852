//! Is the ranked fabric a fat-tree at all? The criterion of the topology-agnostic mode
//! (issue #19): on a fat-tree, complete or degraded, ranking puts every switch-to-switch cable
//! between adjacent levels (thesis §1.4.5: levels change by one per link) and only miscabled
//! links are reported as same-level or skip-level; on a direct topology (Slim Fly, Dragonfly,
//! HyperX, random regular graphs: every switch carries end nodes, Slim Fly paper §2) every
//! switch is a leaf and almost every cable joins two leaves.

use fabric_topology::Fabric;

use crate::{DiagKind, Ranking};

/// The verdict of [`fat_tree_shape`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TopologyShape {
    /// Live switch-to-switch cables (each cable once, self-loops excluded).
    pub switch_cables: usize,
    /// Cables the ranking reports as same-level or skip-level links.
    pub inconsistent_cables: usize,
    /// Live switches the ranking could not rank (no leaf, no configured root).
    pub unranked_switches: usize,
    /// The ranking found a fat-tree: at most a minority of the cables (strictly less than half)
    /// join switches that are not on adjacent levels, and every live switch is ranked.
    pub fat_tree: bool,
}

/// Classifies `fabric` from its `ranking` (linear in switches plus ports).
///
/// Criterion: a fat-tree has at least as many consistent cables (adjacent levels) as
/// inconsistent ones and no unranked switch. A fat-tree with a few miscabled links stays a
/// fat-tree (Dmodc routes it, the fallback repairs what it cannot); a fabric without
/// switch-to-switch cables (one switch) is a fat-tree of height 1.
pub fn fat_tree_shape(fabric: &Fabric, ranking: &Ranking) -> TopologyShape {
    let mut switch_cables = 0;
    for sid in fabric.switch_ids() {
        for (pn, _) in fabric.switch(sid).external_ports() {
            if let Some((r, rp)) = fabric.switch_link_live(sid, pn) {
                if (r.0, rp) > (sid.0, pn) {
                    switch_cables += 1;
                }
            }
        }
    }
    let inconsistent_cables = ranking.diagnostics_of(DiagKind::SameLevelLink).count()
        + ranking.diagnostics_of(DiagKind::SkipLevelLink).count();
    let unranked_switches = ranking.diagnostics_of(DiagKind::Unranked).count();
    TopologyShape {
        switch_cables,
        inconsistent_cables,
        unranked_switches,
        fat_tree: unranked_switches == 0 && 2 * inconsistent_cables <= switch_cables,
    }
}
