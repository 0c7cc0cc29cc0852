//! The topology mode of each committed generation (issue #19): metrics at every commit, one
//! WARN line when the mode changes (and at the first generation when it is agnostic).

use crate::state::Generation;
use crate::topology_mode::TopologyMode;

use super::EventLoop;

impl EventLoop {
    /// Called with the generation about to become current (`self.current` is still the
    /// previous one).
    pub(super) fn note_topology_mode(&self, g: &Generation) {
        let setting = self.settings.topology;
        let mode = TopologyMode::of(&g.fabric, &g.ranking, &g.routing_check, setting);
        self.io.telemetry.topology_mode(mode.agnostic, mode.fat_tree_found);
        let before = self
            .current
            .as_ref()
            .map(|p| TopologyMode::of(&p.fabric, &p.ranking, &p.routing_check, setting).agnostic);
        if before == Some(mode.agnostic) || (before.is_none() && !mode.agnostic) {
            return;
        }
        if mode.agnostic {
            tracing::warn!(
                generation = g.number,
                topology = %setting,
                switch_cables = mode.shape.switch_cables,
                inconsistent_cables = mode.shape.inconsistent_cables,
                unranked_switches = mode.shape.unranked_switches,
                routed_by = %mode.routed_by,
                "topology-agnostic mode: {} (base LIDs routed by {})",
                if mode.fat_tree_found {
                    "forced by [routing] topology = \"any\"".to_string()
                } else {
                    format!(
                        "ranking finds no fat-tree ({} of {} switch cables between switches not on adjacent levels, {} switches unranked)",
                        mode.shape.inconsistent_cables, mode.shape.switch_cables, mode.shape.unranked_switches
                    )
                },
                mode.routed_by
            );
        } else {
            tracing::warn!(
                generation = g.number,
                topology = %setting,
                routed_by = %mode.routed_by,
                "fat-tree mode again: ranking finds a fat-tree"
            );
        }
    }
}
