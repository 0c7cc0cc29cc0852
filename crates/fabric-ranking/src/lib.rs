//! Ranking: assigns every live switch a level (leaves at 0) and validates the fat-tree shape
//! liberally, returning every diagnostic instead of stopping at the first.
//!
//! Methods (thesis §1.4.5, Alg. 3; Annex 2, Alg. 14; Bogdański et al. §V):
//! upward from leaves; downward from given root GUIDs; the resilient statistical top-switch
//! criterion when no roots are given and leaves sit at different heights; switch roles from
//! configuration override detection.

use std::collections::HashMap;
use std::fmt;

use fabric_topology::{fmt_guid, Guid, PortNum};

/// A configured role that overrides detection.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Leaf,
    Spine,
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
    pub switch: Option<Guid>,
    pub port: Option<PortNum>,
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
