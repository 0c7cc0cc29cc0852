//! Engine selection ([`EngineKind`], [`engine`]) and the routing of a whole snapshot
//! ([`route_all`], [`route_all_grouped`]): base LIDs by the selected engine, escape LIDs by
//! Up*/Down*. Re-exported at the crate root.

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use crate::dmodc::{Dmodc, GroupedDmodc};
use crate::dmodk::{Dmodk, GroupedDmodk};
use crate::engine::{validate_context, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::groups::NodeGroups;
use crate::lft::Lfts;
use crate::updown::UpDown;

/// The routing engines that can be selected for the base LIDs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    /// Dmodc (thesis §4.2), the default.
    #[default]
    Dmodc,
    /// Dmodk closed form; complete PGFTs only.
    Dmodk,
    /// Up*/Down* over a BFS spanning tree with Dmodc-style selection (Alg. 12).
    UpDown,
    /// Up*/Down* over a BFS spanning tree with seeded random selection (Alg. 11).
    UpDownRandom {
        /// Seed of the per-switch generators (ChaCha8 seeded by seed and switch GUID).
        seed: u64,
    },
}

/// Error of [`EngineKind::from_str`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown routing engine `{0}` (expected dmodc, dmodk, updown, updown-random or updown-random:SEED)")]
pub struct UnknownEngine(
    /// The text that was not recognised.
    pub String,
);

impl FromStr for EngineKind {
    type Err = UnknownEngine;
    /// `dmodc`, `dmodk`, `updown`, `updown-random` (seed 0) or `updown-random:SEED`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "dmodc" => Ok(EngineKind::Dmodc),
            "dmodk" => Ok(EngineKind::Dmodk),
            "updown" | "updn" | "bfs-dmodc" => Ok(EngineKind::UpDown),
            "updown-random" | "bfs-random" => Ok(EngineKind::UpDownRandom { seed: 0 }),
            _ => match t.strip_prefix("updown-random:").map(str::parse::<u64>) {
                Some(Ok(seed)) => Ok(EngineKind::UpDownRandom { seed }),
                _ => Err(UnknownEngine(s.to_string())),
            },
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineKind::Dmodc => write!(f, "dmodc"),
            EngineKind::Dmodk => write!(f, "dmodk"),
            EngineKind::UpDown => write!(f, "updown"),
            EngineKind::UpDownRandom { seed: 0 } => write!(f, "updown-random"),
            EngineKind::UpDownRandom { seed } => write!(f, "updown-random:{seed}"),
        }
    }
}

/// The engine for `kind`.
pub fn engine(kind: EngineKind) -> Box<dyn RoutingEngine> {
    match kind {
        EngineKind::Dmodc => Box::new(Dmodc),
        EngineKind::Dmodk => Box::new(Dmodk),
        EngineKind::UpDown => Box::new(UpDown { random_seed: None }),
        EngineKind::UpDownRandom { seed } => Box::new(UpDown {
            random_seed: Some(seed),
        }),
    }
}

/// The LFTs of one snapshot, with the time spent on each LID set.
#[derive(Clone, Debug)]
pub struct RoutedFabric {
    /// Every switch's table over LIDs `0..=top` of the plan.
    pub lfts: Lfts,
    /// Base LIDs and switch LIDs, by the selected engine (milliseconds).
    pub base_ms: f64,
    /// Escape LIDs, by Up*/Down* (milliseconds; 0 with LMC 0).
    pub escape_ms: f64,
}

/// Whole routing for a snapshot: base LIDs by `kind`, escape LIDs (when lmc == 1) by Up*/Down*
/// (BFS, Dmodc-style selection). The tables cover LIDs `0..=lids.top()`; every other entry is
/// [`NO_ROUTE`](crate::NO_ROUTE).
pub fn route_all(ctx: &RoutingContext<'_>, kind: EngineKind) -> Result<RoutedFabric, RoutingError> {
    route_all_grouped(ctx, kind, None)
}

/// [`route_all`] with node groups (thesis §3.4, Alg. 4): the base LIDs of Dmodc and Dmodk are
/// routed on group-reindexed NIDs ([`GroupedDmodc`], [`GroupedDmodk`]); Up*/Down* ignores
/// groups, and the escape LIDs are routed as always.
pub fn route_all_grouped(
    ctx: &RoutingContext<'_>,
    kind: EngineKind,
    groups: Option<&NodeGroups>,
) -> Result<RoutedFabric, RoutingError> {
    validate_context(ctx)?;
    let mut lfts = Lfts::new(ctx.fabric.num_switches(), ctx.lids.top());
    let t = Instant::now();
    match (kind, groups) {
        (EngineKind::Dmodc, Some(g)) => GroupedDmodc(g).route(ctx, LidSet::Base, &mut lfts)?,
        (EngineKind::Dmodk, Some(g)) => GroupedDmodk(g).route(ctx, LidSet::Base, &mut lfts)?,
        _ => engine(kind).route(ctx, LidSet::Base, &mut lfts)?,
    }
    let base_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut escape_ms = 0.0;
    if ctx.lids.lmc >= 1 {
        let t = Instant::now();
        UpDown { random_seed: None }.route(ctx, LidSet::Escape, &mut lfts)?;
        escape_ms = t.elapsed().as_secs_f64() * 1e3;
    }
    Ok(RoutedFabric {
        lfts,
        base_ms,
        escape_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_kind_parses_and_prints() {
        for (s, k) in [
            ("dmodc", EngineKind::Dmodc),
            ("Dmodk", EngineKind::Dmodk),
            ("updown", EngineKind::UpDown),
            ("updown-random", EngineKind::UpDownRandom { seed: 0 }),
            ("updown-random:42", EngineKind::UpDownRandom { seed: 42 }),
        ] {
            let got: EngineKind = s.parse().unwrap();
            assert_eq!(got, k);
            assert_eq!(got.to_string().parse::<EngineKind>().unwrap(), k);
        }
        assert_eq!("ftree".parse::<EngineKind>(), Err(UnknownEngine("ftree".into())));
        assert!("updown-random:x".parse::<EngineKind>().is_err());
        assert_eq!(engine(EngineKind::Dmodc).name(), "dmodc");
    }
}
