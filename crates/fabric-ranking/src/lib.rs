//! Ranking: assigns every live switch a level (leaves at 0) and validates the fat-tree shape
//! liberally, returning every diagnostic instead of stopping at the first.
//!
//! Sources: thesis §1.4.5 (Alg. 3, ranking upward from the leaves and, from known top switches,
//! downward with levels swapped as `(l, h - l - 1)`), thesis Annex 2 (Alg. 14, the resilient
//! statistical top-switch criterion), Bogdański et al., *Discovery and Routing of Degraded
//! Fat-Trees*, §V (liberal validation, flipped switches, switch roles).
//!
//! # Policy
//!
//! Only live equipment counts: live switches, live switch-to-switch links
//! ([`Fabric::port_groups`](fabric_topology::Fabric::port_groups)) and live end ports. Each
//! connected component of live switches is ranked on its own:
//!
//! 1. **Configuration.** A GUID in [`RankOptions::roots`] or with role [`Role::Root`] is a
//!    configured top switch. The *leaf set* is every live switch with a live end port, minus
//!    switches with role spine or root, plus every switch with role leaf (this is the fix of the
//!    *flipped leaf*: a leaf that lost all its end nodes is otherwise ranked two levels up, above
//!    the spines, without any inconsistency to detect).
//! 2. **Configured roots.** If the component holds a configured top switch, it is ranked downward
//!    from the configured tops: BFS distance `d`, level `h - 1 - d` with `h - 1` the largest
//!    distance; tops are pinned at the top level and role-leaf switches at level 0.
//! 3. **Upward (default).** Otherwise the component is ranked upward from its leaf set (Alg. 3):
//!    leaves at 0, every other switch at its BFS distance from the nearest leaf. On a fat-tree
//!    (complete or degraded) this is exact for every switch with a live down path to a leaf,
//!    and never inconsistent: levels change by one per link, so distances to level 0 have the
//!    parity of the level and neighbours always differ by exactly one.
//! 4. **Leaves at different heights.** If upward ranking (after the repair of step 5) leaves any
//!    inconsistent link, the top switches are determined by the statistical criterion (Alg. 14)
//!    and the component is ranked downward from them as in step 2. The downward ranking is kept
//!    only if it has *strictly fewer* inconsistent neighbour pairs than the upward one: Alg. 14
//!    can pick wrong tops on some topologies (e.g. two top-level subtrees: a middle switch's
//!    histogram ties between its own half and the other half, and ties go to the smaller
//!    distance), and a miscabled link is as well explained by upward ranking, which trusts the
//!    leaves (facts: they carry nodes). Typical wins of the downward ranking: leaves cabled
//!    straight to top switches, or a spine carrying a few hosts (upward ranking makes it a leaf
//!    cabled to every other leaf; role spine is the explicit fix).
//! 5. **Repair.** A BFS can only produce same-level inconsistencies: one miscabled link (a leaf
//!    cabled to a top switch) pulls its far end one level too close. After each BFS, a switch
//!    with an inconsistent link moves to the level that puts strictly more of its neighbours
//!    exactly one level away. Pinned switches (leaves ranking upward, tops and role-leaf switches
//!    ranking downward) never move, and since a shortcut only shortens distances, switches only
//!    move up from their distance ranking upward and only down ranking downward. Each
//!    move strictly increases the number of consistent neighbour pairs, so it terminates, and it
//!    is a no-op on consistent rankings. The miscabled link is then reported as skipping levels.
//! 6. A component with no leaf and no configured top is unranked (`None`, one
//!    [`DiagKind::Unranked`] per switch). A dead switch is `None` without a diagnostic.
//!
//! No automatic fix of flipped leaves is attempted: any local criterion ("a switch without
//! nodes whose neighbours are all below it") also matches legitimately degraded top switches.
//! Roles are the fix specified by Bogdański et al.; a downward ranking (configured roots)
//! also places a flipped leaf correctly.
//!
//! # Diagnostics
//!
//! * [`DiagKind::SameLevelLink`] / [`DiagKind::SkipLevelLink`]: once per cable (each parallel cable
//!   separately), reported at its lower end (same level: the end with the smaller GUID, then
//!   port), naming the remote GUID and port in the message.
//! * [`DiagKind::SelfLoop`]: once per looped cable, at its lower port number.
//! * [`DiagKind::UnknownGuid`]: a configured root or role GUID that is not a switch of the fabric.
//! * [`DiagKind::Irregular`]: leaves ranked above level 0 (leaves at different heights), end
//!   ports on a switch configured as spine or root, a switch moved by the repair or pinned by a
//!   role against its BFS level, a component ranked by the statistical criterion, a GUID both
//!   listed as root and given another role, a component without configured root while others
//!   have one, configured roots that are all down.
//! * [`DiagKind::Unranked`]: a live switch connected to no leaf and no configured root.
//!
//! # Cost
//!
//! Building the adjacency, BFS, repair and diagnostics are linear in switches plus ports (flat
//! arrays, dense ids). The statistical criterion runs only when needed; it is a bit-parallel
//! BFS from 64 leaves at a time, parallel over batches (see `statistical`).

use std::collections::HashMap;
use std::fmt;

use fabric_topology::{fmt_guid, Guid, PortNum, SwitchId};

mod config;
mod graph;
#[cfg(test)]
mod proptests;
mod ranker;
mod shape;
mod statistical;
#[cfg(test)]
mod testfab;
#[cfg(test)]
mod tests;

pub use config::{parse_roles, parse_root_guid_file, RankError};
pub use ranker::{rank, rank_report, ComponentRank, RankMethod, RankReport};
pub use shape::{fat_tree_shape, TopologyShape};
pub use statistical::statistical_top_switches;

/// A configured switch role (Bogdański et al. §V) that overrides detection.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A leaf switch: level 0, even without live end nodes (fixes the flipped leaf).
    Leaf,
    /// A switch between leaves and tops (or the top of a two-level fabric): never a leaf, even
    /// with end nodes attached (e.g. a management host on a spine).
    Spine,
    /// A top switch (no up links), like a GUID of the root GUID file.
    Root,
}

/// Inputs besides the fabric.
#[derive(Clone, Debug, Default)]
pub struct RankOptions {
    /// Top switches (OpenSM `root_guid_file`); when non-empty, rank downward from them.
    pub roots: Vec<Guid>,
    /// Roles by switch GUID (override detection).
    pub roles: HashMap<Guid, Role>,
}

/// What kind of irregularity a diagnostic reports.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum DiagKind {
    /// Link between two switches of the same level.
    SameLevelLink,
    /// Link joining switches more than one level apart.
    SkipLevelLink,
    /// A cable from a switch to itself.
    SelfLoop,
    /// A switch not reachable from the leaves/roots (unranked).
    Unranked,
    /// Leaves at different heights, or a non-leaf where a leaf is expected, etc.
    Irregular,
    /// A configured root/role GUID that is not in the fabric.
    UnknownGuid,
}

/// One finding: what is wrong and where (switch GUID and port when known).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub kind: DiagKind,
    /// GUID of the switch concerned (for a link: the end it is reported at).
    pub switch: Option<Guid>,
    /// Port of that switch (links and self-loops).
    pub port: Option<PortNum>,
    /// What is wrong, for people (names the remote GUID and port for links).
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.switch, self.port) {
            (Some(g), Some(p)) => write!(f, "{}[{p}]: {}", fmt_guid(g), self.message),
            (Some(g), None) => write!(f, "{}: {}", fmt_guid(g), self.message),
            _ => write!(f, "{}", self.message),
        }
    }
}

/// Result of ranking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranking {
    /// Level of each switch by dense id (leaves at 0); `None` for dead or unreachable switches.
    pub level: Vec<Option<u32>>,
    /// Number of levels (max level + 1; 0 for an empty fabric).
    pub height: u32,
    pub diagnostics: Vec<Diagnostic>,
}

impl Ranking {
    /// Level of a switch (`None` when dead or unranked).
    pub fn level_of(&self, sw: SwitchId) -> Option<u32> {
        self.level.get(sw.idx()).copied().flatten()
    }

    /// Switches ranked at `level`, ascending.
    pub fn switches_at(&self, level: u32) -> impl Iterator<Item = SwitchId> + '_ {
        self.level
            .iter()
            .enumerate()
            .filter(move |(_, l)| **l == Some(level))
            .map(|(i, _)| SwitchId(i as u32))
    }

    /// Diagnostics of one kind.
    pub fn diagnostics_of(&self, kind: DiagKind) -> impl Iterator<Item = &Diagnostic> + '_ {
        self.diagnostics.iter().filter(move |d| d.kind == kind)
    }
}
