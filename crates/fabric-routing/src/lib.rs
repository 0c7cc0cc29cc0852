//! Routing core: LID plan ([`lid`]), linear forwarding tables and their diffs ([`lft`]),
//! routing engines (Dmodc, Dmodk, Up*/Down*), validity / deadlock checks ([`check`]) and the
//! OpenSM LFT dump format ([`opensm`]).
//!
//! * [`Dmodc`] (default): thesis §4.2 — costs, dividers, topological NIDs, closer port groups
//!   ordered by remote GUID; every route is up*-down* for the ranking.
//! * [`Dmodk`]: the closed form on complete PGFTs (thesis §1.4.2); equal to Dmodc there.
//! * [`UpDown`]: Up*/Down* over a BFS spanning tree (thesis §5.1.3, Alg. 10) with Dmodc-style
//!   (Alg. 12) or seeded random (Alg. 11) selection; deadlock-free on one VL for any topology.
//!   It routes the escape LIDs.
//!
//! [`route_all`] routes a snapshot: base LIDs (and switch LIDs) by the selected engine, escape
//! LIDs by Up*/Down* when LMC = 1. [`route_all_checked`] also checks every connected pair
//! (linear in the tables) and re-routes the destinations the engine left unreachable by
//! Up*/Down* ([`fallback`]).
//!
//! **Architecture invariant:** synchronous, deterministic and free of I/O (parsing/formatting
//! of OpenSM file formats works on strings); parallelism is rayon only, over switches, and
//! every LFT row is written by one task, so the bytes never depend on the thread count.

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use fabric_ranking::Ranking;
use fabric_topology::{fmt_guid, Fabric, Guid, Lid, PortNum};

pub mod check;
mod deadlock;
mod dmodc;
mod dmodk;
pub mod fallback;
mod fastdiv;
mod fill;
mod groups;
mod hops;
pub mod lft;
pub mod lid;
pub mod opensm;
mod prep;
mod swlid;
#[cfg(test)]
mod testutil;
mod updown;

pub use check::{trace, TraceEnd, TraceError};
pub use dmodc::{Dmodc, GroupedDmodc};
pub use dmodk::{Dmodk, GroupedDmodk};
pub use fallback::{check_and_repair, route_all_checked, Fallback, RoutingCheck};
pub use groups::NodeGroups;
pub use lft::{LftBlockDiff, Lfts, BLOCK_SIZE, NO_ROUTE};
pub use lid::{assign_lids, Guid2Lid, LidError, LidOwner, LidOwners, LidPlan, IB_MAX_UNICAST_LID};
pub use opensm::{parse_opensm_lfts, write_opensm_lfts, LftDumpError, OpensmLfts, SwitchLftDump};
pub use updown::UpDown;

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
            _ => match t.strip_prefix("updown-random:").map(|x| x.parse::<u64>()) {
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

/// Which destination LIDs a routing pass fills.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LidSet {
    /// End-port base LIDs (`2k`, or the only LID with LMC 0) and switch LIDs.
    Base,
    /// End-port escape LIDs (`2k + 1`); LMC 1 only.
    Escape,
}

impl LidSet {
    /// Offset of this set's LID from an end port's base LID.
    pub fn offset(self) -> Lid {
        match self {
            LidSet::Base => 0,
            LidSet::Escape => 1,
        }
    }
}

/// Everything an engine reads.
#[derive(Copy, Clone)]
pub struct RoutingContext<'a> {
    /// The snapshot to route (live state: port groups, live end ports).
    pub fabric: &'a Fabric,
    /// Switch levels (link directions for Dmodc; ignored by Up*/Down* and Dmodk).
    pub ranking: &'a Ranking,
    /// LIDs of the end ports and switches.
    pub lids: &'a LidPlan,
}

/// Errors of routing. A fabric that is split or not up-down connected is *not* an error: the
/// unreachable destinations get [`NO_ROUTE`] and [`check::validity`] reports them.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RoutingError {
    #[error(
        "LID plan covers {plan_switches} switches and {plan_end_ports} end ports but the fabric has {switches} and {end_ports}"
    )]
    /// The LID plan was made for another fabric.
    PlanMismatch {
        plan_switches: usize,
        plan_end_ports: usize,
        switches: usize,
        end_ports: usize,
    },
    #[error("ranking covers {ranking} switches but the fabric has {fabric}")]
    /// The ranking was made for another fabric.
    RankingMismatch { ranking: usize, fabric: usize },
    #[error("LFTs cover {have_switches} switches and LIDs 0..{have_lids} but routing needs {switches} switches and LID {top}")]
    /// The tables do not cover every switch or LID of the plan.
    LftTooSmall {
        have_switches: usize,
        have_lids: usize,
        switches: usize,
        top: Lid,
    },
    #[error("the LID plan has LMC 0: there are no escape LIDs to route")]
    /// Escape routing was asked for with LMC 0.
    NoEscapeLids,
    #[error("switch {} port {port} is cabled but port numbers above 254 cannot appear in an LFT", fmt_guid(*.guid))]
    /// A live switch uses port 255, which an LFT cannot name (255 = no route).
    PortNotAddressable { guid: Guid, port: PortNum },
    #[error("node groups cover {groups} end ports but the fabric has {end_ports}")]
    /// The node groups were made for another fabric.
    GroupsMismatch { groups: usize, end_ports: usize },
    #[error("Dmodk needs a complete PGFT: {0}")]
    /// Dmodk was asked to route a fabric that is not a complete generated PGFT (why).
    NotCompletePgft(String),
}

/// A routing engine: fills the LFT entries of one LID set.
pub trait RoutingEngine: Send + Sync {
    /// Engine name as accepted by [`EngineKind::from_str`].
    fn name(&self) -> &'static str;
    /// Fill the LFT entries for the destination LIDs of `set` (end-port base or escape LIDs, plus
    /// switch LIDs when set == Base) on every switch; leaves other entries untouched.
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError>;
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
/// [`NO_ROUTE`].
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

/// Checks that the plan, ranking and LFTs fit the fabric.
pub(crate) fn validate_context(ctx: &RoutingContext<'_>) -> Result<(), RoutingError> {
    let f = ctx.fabric;
    let (ns, ne) = (f.num_switches(), f.num_end_ports());
    if ctx.lids.switch_lid.len() != ns || ctx.lids.end_port_base.len() != ne {
        return Err(RoutingError::PlanMismatch {
            plan_switches: ctx.lids.switch_lid.len(),
            plan_end_ports: ctx.lids.end_port_base.len(),
            switches: ns,
            end_ports: ne,
        });
    }
    if ctx.ranking.level.len() != ns {
        return Err(RoutingError::RankingMismatch {
            ranking: ctx.ranking.level.len(),
            fabric: ns,
        });
    }
    for s in f.switches() {
        if s.up && s.nports == u8::MAX {
            if let Some(p) = s.ports.get(u8::MAX as usize) {
                if p.remote != fabric_topology::Remote::None {
                    return Err(RoutingError::PortNotAddressable {
                        guid: s.guid,
                        port: u8::MAX,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Checks that `lfts` can hold every LID of the plan.
pub(crate) fn check_lfts(ctx: &RoutingContext<'_>, lfts: &Lfts) -> Result<(), RoutingError> {
    let top = ctx.lids.top();
    if lfts.num_switches() != ctx.fabric.num_switches() || !lfts.covers(top) {
        return Err(RoutingError::LftTooSmall {
            have_switches: lfts.num_switches(),
            have_lids: lfts.row_len(),
            switches: ctx.fabric.num_switches(),
            top,
        });
    }
    Ok(())
}

/// Common entry checks of every engine's `route`.
pub(crate) fn check_route_args(ctx: &RoutingContext<'_>, set: LidSet, lfts: &Lfts) -> Result<(), RoutingError> {
    validate_context(ctx)?;
    check_lfts(ctx, lfts)?;
    if set == LidSet::Escape && ctx.lids.lmc == 0 {
        return Err(RoutingError::NoEscapeLids);
    }
    Ok(())
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
