//! The engine interface: what an engine reads ([`RoutingContext`]), which destination LIDs
//! it fills ([`LidSet`]), the [`RoutingEngine`] trait, the errors of routing and the entry
//! checks every engine runs. Re-exported at the crate root.

use fabric_ranking::Ranking;
use fabric_topology::{fmt_guid, Fabric, Guid, Lid, PortNum};

use crate::lft::Lfts;
use crate::lid::{LidPlan, PlanMismatch};

/// Which destination LIDs a routing pass fills.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LidSet {
    /// End-port base LIDs and switch LIDs. An engine fills offset 0 of every end port (the
    /// base LID, or the only LID with LMC 0); the checks cover every layer offset
    /// `0..`[`LidPlan::layer_offsets`] (with LMC ≥ 2 [`crate::route_all`] fills offsets 1.. from
    /// offset 0 or from the layers of a layered routing).
    Base,
    /// End-port escape LIDs: the last offset `2^LMC − 1` (`2k + 1` with LMC 1); LMC ≥ 1 only.
    Escape,
}

impl LidSet {
    /// Offset from an end port's base LID of the LID an engine fills for this set: 0 for
    /// [`LidSet::Base`], [`LidPlan::escape_offset`] (`2^LMC − 1`) for [`LidSet::Escape`].
    pub fn offset(self, lids: &LidPlan) -> Lid {
        match self {
            LidSet::Base => 0,
            LidSet::Escape => lids.escape_offset().unwrap_or(1),
        }
    }

    /// Every offset of this set (what the checks walk): `0..layer_offsets` for
    /// [`LidSet::Base`], the escape offset alone for [`LidSet::Escape`] (empty with LMC 0).
    pub fn offsets(self, lids: &LidPlan) -> std::ops::Range<Lid> {
        match self {
            LidSet::Base => 0..lids.layer_offsets(),
            LidSet::Escape => match lids.escape_offset() {
                Some(o) => o..o + 1,
                None => 0..0,
            },
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
/// unreachable destinations get [`NO_ROUTE`](crate::NO_ROUTE) and
/// [`check::validity`](crate::check::validity) reports them.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RoutingError {
    #[error(transparent)]
    /// The LID plan was made for another fabric.
    PlanMismatch(#[from] PlanMismatch),
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
    #[error("{engine} cannot route this fabric: {reason}")]
    /// The engine does not route this kind of fabric (e.g. PQFT on a fabric that is not a
    /// quasi fat-tree); `reason` says what it needs.
    Unsupported { engine: &'static str, reason: String },
    #[error("Dmodk needs a complete PGFT: {0}")]
    /// Dmodk was asked to route a fabric that is not a complete PGFT (why; recognised from its
    /// structure, [`fabric_topology::gen::PgftLayout::recognize_structure`]).
    NotCompletePgft(String),
}

/// A routing engine: fills the LFT entries of one LID set.
pub trait RoutingEngine: Send + Sync {
    /// Engine name as accepted by [`EngineKind::from_str`](crate::EngineKind).
    fn name(&self) -> &'static str;
    /// Fill the LFT entries for the destination LIDs of `set` (end-port base or escape LIDs, plus
    /// switch LIDs when set == Base) on every switch; leaves other entries untouched.
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError>;
}

/// Checks that the plan, ranking and LFTs fit the fabric.
pub(crate) fn validate_context(ctx: &RoutingContext<'_>) -> Result<(), RoutingError> {
    let f = ctx.fabric;
    let ns = f.num_switches();
    ctx.lids.check_covers(f)?;
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
