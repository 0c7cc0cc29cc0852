//! Topology-agnostic mode (issue #19, deliverable 2): `[routing] topology`, the mode a
//! generation was routed in, and which engine really routed it.
//!
//! The mode comes from the generation's own ranking ([`fabric_ranking::fat_tree_shape`]: a
//! fat-tree has at most a minority of cables between switches that are not on adjacent levels
//! and no unranked switch; on Slim Fly, Dragonfly, HyperX or a random regular graph every
//! switch carries end nodes, so every switch is a leaf and every cable is same-level). In the
//! agnostic mode the base LIDs are routed by Up*/Down* (`updown`, deadlock-free on any connected
//! graph) instead of the configured engine, unless that engine is topology-agnostic itself (`dfsssp`,
//! deadlock-free with its VL layering, or `updown`): with `topology = "auto"` when the fabric about to be
//! routed ranks as no fat-tree (decided by `compute::compute` from the generation's own snapshot
//! and ranking, [`crate::compute::ComputeInput::detect_topology`]), with `topology = "any"` always. The escape LIDs are Up*/Down* in both modes, so the five-phase update is unchanged.

use std::fmt;
use std::str::FromStr;

use fabric_ranking::{fat_tree_shape, TopologyShape};
use fabric_routing::{EngineKind, Fallback};
use serde::{Deserialize, Serialize};

/// `[routing] topology`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopologySetting {
    /// The generation's ranking decides (fat-tree or agnostic).
    #[default]
    Auto,
    /// Always the fat-tree mode: the configured engine, the fallback repairs what it cannot
    /// route, and the status says fat-tree even when ranking finds none.
    FatTree,
    /// Always the agnostic mode: the base LIDs are routed by Up*/Down*.
    Any,
}

impl TopologySetting {
    /// The name as written in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            TopologySetting::Auto => "auto",
            TopologySetting::FatTree => "fat-tree",
            TopologySetting::Any => "any",
        }
    }

    /// The engine that routes the base LIDs: `updown` when the agnostic mode is forced, unless
    /// the configured engine is itself topology-agnostic ([`EngineKind::is_topology_agnostic`]:
    /// Up*/Down*, DFSSSP with its VL layering).
    pub fn engine(self, configured: EngineKind) -> EngineKind {
        match self {
            TopologySetting::Any if !configured.is_topology_agnostic() => EngineKind::UpDown,
            _ => configured,
        }
    }
}

impl fmt::Display for TopologySetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TopologySetting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" => Ok(TopologySetting::Auto),
            "fat-tree" => Ok(TopologySetting::FatTree),
            "any" => Ok(TopologySetting::Any),
            o => Err(format!("unknown topology `{o}` (expected auto, fat-tree or any)")),
        }
    }
}

/// The mode a committed generation was routed in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyMode {
    /// Ranking found a fat-tree.
    pub fat_tree_found: bool,
    /// Routed in the topology-agnostic mode (no fat-tree found with `auto`, or `any`).
    pub agnostic: bool,
    /// The ranking's verdict in numbers.
    pub shape: TopologyShape,
    /// Which engine produced the installed base routes: the engine's name, `updown (fallback
    /// for every destination)` or `ENGINE + updown fallback for N destinations`.
    pub routed_by: String,
}

impl TopologyMode {
    /// The mode of a generation (its fabric, ranking and routing check) under `setting`.
    pub fn of(
        fabric: &fabric_topology::Fabric,
        ranking: &fabric_ranking::Ranking,
        c: &fabric_routing::RoutingCheck,
        setting: TopologySetting,
    ) -> TopologyMode {
        let shape = fat_tree_shape(fabric, ranking);
        let agnostic = match setting {
            TopologySetting::Auto => !shape.fat_tree,
            TopologySetting::FatTree => false,
            TopologySetting::Any => true,
        };
        let routed_by = match c.fallback {
            Fallback::None => c.engine.clone(),
            Fallback::AllBase => "updown (fallback for every destination)".to_string(),
            Fallback::Spliced => format!(
                "{} + updown fallback for {} destinations",
                c.engine, c.fallback_destinations
            ),
        };
        TopologyMode {
            fat_tree_found: shape.fat_tree,
            agnostic,
            shape,
            routed_by,
        }
    }

    /// `fat-tree` or `agnostic`.
    pub fn name(&self) -> &'static str {
        if self.agnostic {
            "agnostic"
        } else {
            "fat-tree"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn routing_topology_parses_and_rejects_unknown_values() {
        assert_eq!(Config::default().routing.topology, TopologySetting::Auto);
        for (text, want) in [
            ("auto", TopologySetting::Auto),
            ("fat-tree", TopologySetting::FatTree),
            ("any", TopologySetting::Any),
        ] {
            let c = Config::parse(&format!("[routing]\ntopology = \"{text}\"\n"), "t.toml").expect(text);
            assert_eq!(c.routing.topology, want);
            assert_eq!(text.parse::<TopologySetting>(), Ok(want));
            assert_eq!(want.name(), text);
        }
        let e = Config::parse("[routing]\ntopology = \"mesh\"\n", "t.toml").expect_err("mesh");
        assert!(e.to_string().contains("topology"), "{e}");
        assert!("mesh".parse::<TopologySetting>().is_err());
    }

    #[test]
    fn any_replaces_the_engine_and_the_others_keep_it() {
        assert_eq!(TopologySetting::Any.engine(EngineKind::Dmodc), EngineKind::UpDown);
        assert_eq!(TopologySetting::Auto.engine(EngineKind::Dmodc), EngineKind::Dmodc);
        assert_eq!(TopologySetting::FatTree.engine(EngineKind::Ftree), EngineKind::Ftree);
    }

    #[test]
    fn the_mode_metrics_follow_the_last_commit() {
        let t = crate::telemetry::Telemetry::new();
        t.topology_mode(true, false);
        let s = t.encode();
        assert!(s.contains("fabricd_routing_topology_agnostic 1"), "{s}");
        assert!(s.contains("fabricd_routing_fat_tree_found 0"), "{s}");
        t.topology_mode(false, true);
        let s = t.encode();
        assert!(s.contains("fabricd_routing_topology_agnostic 0"), "{s}");
        assert!(s.contains("fabricd_routing_fat_tree_found 1"), "{s}");
    }
}
