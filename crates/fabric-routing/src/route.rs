//! Engine selection ([`EngineKind`], [`engine`]) and the routing of a whole snapshot
//! ([`route_all`], [`route_all_grouped`]): base LIDs by the selected engine, escape LIDs by
//! Up*/Down*. Re-exported at the crate root.

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use crate::balanced::{Balanced, BALANCED_DEFAULT_VLS, BALANCED_MAX_VLS};
use crate::bfs::BfsUpDown;
use crate::dfsssp::Dfsssp;
use crate::dmodc::{Dmodc, GroupedDmodc};
use crate::dmodc_lb::{DmodcLb, DmodcLbPod, DmodcLbRepair};
use crate::dmodk::{Dmodk, GroupedDmodk};
use crate::engine::{validate_context, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::ftree::{Directions, Ftree, FtreeVariant};
use crate::groups::NodeGroups;
use crate::layered::Layered;
use crate::lft::Lfts;
use crate::mu::MuSssp;
use crate::pqft::Pqft;
use crate::randsp::RandSp;
use crate::smodk::Smodk;
use crate::sssp::Sssp;
use crate::updown::UpDown;

/// The routing engines that can be selected for the base LIDs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    /// Dmodc (thesis §4.2), the default.
    #[default]
    Dmodc,
    /// Dmodk closed form; complete PGFTs only.
    Dmodk,
    /// Up*/Down* as OpenSM `updn` (its roots, every link oriented, shortest legal paths,
    /// balanced ports; see [`crate::updown`]); the escape routing.
    UpDown,
    /// [`EngineKind::UpDown`]'s paths with a seeded random port (Alg. 11's selection).
    UpDownRandom {
        /// Seed of the per-switch generators (ChaCha8 seeded by seed and switch GUID).
        seed: u64,
    },
    /// BFS-Dmodc exactly as the thesis (Alg. 10 directions, Alg. 12 selection).
    BfsDmodc,
    /// BFS-Random exactly as the thesis (Alg. 10 directions, Alg. 11 selection).
    BfsRandom {
        /// Seed of the per-switch generators.
        seed: u64,
    },
    /// Ftree (thesis Alg. 1), link directions from the ranking.
    Ftree,
    /// Ftree2 (thesis Alg. 9): remote switch usage before local port usage.
    Ftree2,
    /// Ftree-Random (thesis Alg. 8): Ftree's traversal with seeded random choices.
    FtreeRandom {
        /// Seed of the random choices.
        seed: u64,
    },
    /// BFS-Ftree (thesis §5.1.3): Ftree on the BFS link directions of Alg. 10.
    BfsFtree,
    /// BFS-Ftree2 (thesis §5.1.3): Ftree2 on the BFS link directions of Alg. 10.
    BfsFtree2,
    /// BFS-Ftree-Random (thesis §5.1.3): Ftree-Random on the BFS link directions of Alg. 10.
    BfsFtreeRandom {
        /// Seed of the random choices.
        seed: u64,
    },
    /// RandSP (thesis §1.4.4): seeded uniformly random choice among shortest paths.
    RandSp {
        /// Seed of the random choices.
        seed: u64,
    },
    /// Smodk (thesis §1.4.3): the source-based counterpart of Dmodk.
    Smodk,
    /// SSSP: balanced shortest paths on any topology.
    Sssp,
    /// PQFT (QFT paper Sec. IV–V): closed-form routing of quasi fat-trees, fault-resilient.
    Pqft,
    /// Load-aware Dmodc: Dmodc's closed form where the fabric is intact, balanced by load where
    /// it is not.
    DmodcLb,
    /// Load-aware Dmodc followed by its repair pass (moves of single up-routes off the ports
    /// of largest estimated random-permutation tail, guarded by the shift congestion).
    /// Name `dmodc-lb:repair`.
    DmodcLbRepair,
    /// Load-aware Dmodc followed by the pod-coalesced balancing of three-level fat-trees
    /// (per source pod and destination one coalesced path, chosen by the estimated
    /// random-permutation tails in shift and all-to-all tiers). Name `dmodc-lb:pod`.
    DmodcLbPod,
    /// DFSSSP: SSSP's shortest paths on any topology, deadlock-free over virtual layers.
    Dfsssp,
    /// Layered multipath routing (Slim Fly paper, seed 003 §4.2–4.3, Alg. 1; §5.1 LID offsets):
    /// `k` layers, layer `i` on LID offset `i` of every end port (`k ≤ 2^LMC − 1`, see
    /// [`crate::lid`]). Name `layered:K[:SEED]` (`layered` alone: 4 layers).
    Layered {
        /// Number of layers (1..=128).
        k: u8,
        /// Seed of Algorithm 1's order within a priority.
        seed: u64,
    },
    /// Load-balanced routing of any topology, deadlock-free within `vls` virtual lanes
    /// (Nue-like, HPDC'16; [`crate::balanced`]). Name `balanced[:V]` (`balanced` alone:
    /// [`BALANCED_DEFAULT_VLS`]).
    Balanced {
        /// VL budget (1..=8): destinations are dealt to this many VLs.
        vls: u8,
    },
    /// Routing of any topology that minimises the all-to-all congestion `mu` (source- or
    /// destination-pure channels; [`crate::mu`]), deadlock-free with DFSSSP's layering.
    /// Name `mu-sssp`.
    MuSssp,
}

/// Default number of layers of `layered` without `:K`.
pub const LAYERED_DEFAULT_K: u8 = 4;

/// Every engine name [`EngineKind::from_str`] accepts, seeded ones without their `:SEED`.
pub const ENGINE_NAMES: &[&str] = &[
    "dmodc",
    "dmodk",
    "updown",
    "updown-random",
    "bfs-dmodc",
    "bfs-random",
    "ftree",
    "ftree2",
    "ftree-random",
    "bfs-ftree",
    "bfs-ftree2",
    "bfs-ftree-random",
    "randsp",
    "smodk",
    "sssp",
    "pqft",
    "dmodc-lb",
    "dmodc-lb:repair",
    "dmodc-lb:pod",
    "dfsssp",
    "layered",
    "balanced",
    "mu-sssp",
];

/// Error of [`EngineKind::from_str`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "unknown routing engine `{0}` (expected one of dmodc, dmodk, updown, updown-random, bfs-dmodc, bfs-random, \
     ftree, ftree2, ftree-random, bfs-ftree, bfs-ftree2, bfs-ftree-random, randsp, smodk, sssp, pqft, dmodc-lb, dmodc-lb:repair, dmodc-lb:pod, dfsssp, \
     layered:K[:SEED] (K = 1..=128 layers), balanced[:V] (V = 1..=8 VLs), mu-sssp; the random ones take an optional `:SEED`)"
)]
pub struct UnknownEngine(
    /// The text that was not recognised.
    pub String,
);

impl EngineKind {
    /// The seed of a seeded engine (`None` for deterministic engines).
    pub fn seed(self) -> Option<u64> {
        match self {
            EngineKind::UpDownRandom { seed }
            | EngineKind::BfsRandom { seed }
            | EngineKind::FtreeRandom { seed }
            | EngineKind::BfsFtreeRandom { seed }
            | EngineKind::RandSp { seed }
            | EngineKind::Layered { seed, .. } => Some(seed),
            _ => None,
        }
    }

    /// The same engine with `seed` (unchanged for deterministic engines).
    pub fn with_seed(self, seed: u64) -> Self {
        match self {
            EngineKind::UpDownRandom { .. } => EngineKind::UpDownRandom { seed },
            EngineKind::BfsRandom { .. } => EngineKind::BfsRandom { seed },
            EngineKind::FtreeRandom { .. } => EngineKind::FtreeRandom { seed },
            EngineKind::BfsFtreeRandom { .. } => EngineKind::BfsFtreeRandom { seed },
            EngineKind::RandSp { .. } => EngineKind::RandSp { seed },
            EngineKind::Layered { k, .. } => EngineKind::Layered { k, seed },
            k => k,
        }
    }

    /// The engine's name without its seed.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Dmodc => "dmodc",
            EngineKind::Dmodk => "dmodk",
            EngineKind::UpDown => "updown",
            EngineKind::UpDownRandom { .. } => "updown-random",
            EngineKind::BfsDmodc => "bfs-dmodc",
            EngineKind::BfsRandom { .. } => "bfs-random",
            EngineKind::Ftree => "ftree",
            EngineKind::Ftree2 => "ftree2",
            EngineKind::FtreeRandom { .. } => "ftree-random",
            EngineKind::BfsFtree => "bfs-ftree",
            EngineKind::BfsFtree2 => "bfs-ftree2",
            EngineKind::BfsFtreeRandom { .. } => "bfs-ftree-random",
            EngineKind::RandSp { .. } => "randsp",
            EngineKind::Smodk => "smodk",
            EngineKind::Sssp => "sssp",
            EngineKind::Pqft => "pqft",
            EngineKind::DmodcLb => "dmodc-lb",
            EngineKind::DmodcLbRepair => "dmodc-lb:repair",
            EngineKind::DmodcLbPod => "dmodc-lb:pod",
            EngineKind::Dfsssp => "dfsssp",
            EngineKind::Layered { .. } => "layered",
            EngineKind::Balanced { .. } => "balanced",
            EngineKind::MuSssp => "mu-sssp",
        }
    }

    /// Number of tables the engine builds, one per layer offset: `k` for `layered:K`, 1 for
    /// every other engine (its routes are repeated on every layer offset).
    pub fn layers(self) -> usize {
        match self {
            EngineKind::Layered { k, .. } => usize::from(k),
            _ => 1,
        }
    }
}

/// `layered`, `layered:K` or `layered:K:SEED` (lower case, trimmed); `None`: another name.
fn parse_layered(t: &str) -> Option<Result<EngineKind, ()>> {
    let rest = t.strip_prefix("layered")?;
    if rest.is_empty() {
        return Some(Ok(EngineKind::Layered {
            k: LAYERED_DEFAULT_K,
            seed: 0,
        }));
    }
    let rest = rest.strip_prefix(':')?;
    let (k, seed) = match rest.split_once(':') {
        None => (rest, "0"),
        Some(x) => x,
    };
    Some(match (k.parse::<u8>(), seed.parse::<u64>()) {
        (Ok(k), Ok(seed)) if (1..=128).contains(&k) => Ok(EngineKind::Layered { k, seed }),
        _ => Err(()),
    })
}

/// `balanced` or `balanced:V` (lower case, trimmed); `None`: another name.
fn parse_balanced(t: &str) -> Option<Result<EngineKind, ()>> {
    let rest = t.strip_prefix("balanced")?;
    if rest.is_empty() {
        return Some(Ok(EngineKind::Balanced {
            vls: BALANCED_DEFAULT_VLS,
        }));
    }
    let v = rest.strip_prefix(':')?;
    Some(match v.parse::<u8>() {
        Ok(vls) if (1..=BALANCED_MAX_VLS).contains(&vls) => Ok(EngineKind::Balanced { vls }),
        _ => Err(()),
    })
}

impl FromStr for EngineKind {
    type Err = UnknownEngine;
    /// An engine name of [`ENGINE_NAMES`] (or an alias: `updn`/`bfs-dmodc` for `updown`,
    /// `bfs-random` for `updown-random`, `rand-sp` for `randsp`), seeded engines with an
    /// optional `:SEED` (default 0).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        if let Some(r) = parse_layered(&t).or_else(|| parse_balanced(&t)) {
            return r.map_err(|()| UnknownEngine(s.to_string()));
        }
        if t == "dmodc-lb:repair" {
            return Ok(EngineKind::DmodcLbRepair);
        }
        if t == "dmodc-lb:pod" {
            return Ok(EngineKind::DmodcLbPod);
        }
        let (name, seed) = match t.split_once(':') {
            None => (t.as_str(), None),
            Some((n, v)) => match v.parse::<u64>() {
                Ok(v) => (n, Some(v)),
                Err(_) => return Err(UnknownEngine(s.to_string())),
            },
        };
        let kind = match name {
            "dmodc" => EngineKind::Dmodc,
            "dmodk" => EngineKind::Dmodk,
            "updown" | "updn" => EngineKind::UpDown,
            "updown-random" => EngineKind::UpDownRandom { seed: 0 },
            "bfs-dmodc" => EngineKind::BfsDmodc,
            "bfs-random" => EngineKind::BfsRandom { seed: 0 },
            "ftree" => EngineKind::Ftree,
            "ftree2" => EngineKind::Ftree2,
            "ftree-random" => EngineKind::FtreeRandom { seed: 0 },
            "bfs-ftree" => EngineKind::BfsFtree,
            "bfs-ftree2" => EngineKind::BfsFtree2,
            "bfs-ftree-random" => EngineKind::BfsFtreeRandom { seed: 0 },
            "randsp" | "rand-sp" => EngineKind::RandSp { seed: 0 },
            "smodk" => EngineKind::Smodk,
            "sssp" => EngineKind::Sssp,
            "pqft" => EngineKind::Pqft,
            "dmodc-lb" => EngineKind::DmodcLb,
            "dfsssp" => EngineKind::Dfsssp,
            "mu-sssp" => EngineKind::MuSssp,
            _ => return Err(UnknownEngine(s.to_string())),
        };
        match seed {
            None => Ok(kind),
            Some(v) if kind.seed().is_some() => Ok(kind.with_seed(v)),
            Some(_) => Err(UnknownEngine(s.to_string())),
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let EngineKind::Layered { k, seed } = *self {
            return match seed {
                0 => write!(f, "layered:{k}"),
                _ => write!(f, "layered:{k}:{seed}"),
            };
        }
        if let EngineKind::Balanced { vls } = *self {
            return write!(f, "balanced:{vls}");
        }
        match self.seed() {
            None | Some(0) => write!(f, "{}", self.name()),
            Some(seed) => write!(f, "{}:{seed}", self.name()),
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
        EngineKind::BfsDmodc => Box::new(BfsUpDown { random_seed: None }),
        EngineKind::BfsRandom { seed } => Box::new(BfsUpDown {
            random_seed: Some(seed),
        }),
        EngineKind::Ftree => Box::new(Ftree::new(FtreeVariant::Ftree, Directions::Ranking)),
        EngineKind::Ftree2 => Box::new(Ftree::new(FtreeVariant::Ftree2, Directions::Ranking)),
        EngineKind::FtreeRandom { seed } => Box::new(Ftree::new(FtreeVariant::Random { seed }, Directions::Ranking)),
        EngineKind::BfsFtree => Box::new(Ftree::new(FtreeVariant::Ftree, Directions::Bfs)),
        EngineKind::BfsFtree2 => Box::new(Ftree::new(FtreeVariant::Ftree2, Directions::Bfs)),
        EngineKind::BfsFtreeRandom { seed } => Box::new(Ftree::new(FtreeVariant::Random { seed }, Directions::Bfs)),
        EngineKind::RandSp { seed } => Box::new(RandSp { seed }),
        EngineKind::Smodk => Box::new(Smodk),
        EngineKind::Sssp => Box::new(Sssp),
        EngineKind::Pqft => Box::new(Pqft),
        EngineKind::DmodcLb => Box::new(DmodcLb),
        EngineKind::DmodcLbRepair => Box::new(DmodcLbRepair),
        EngineKind::DmodcLbPod => Box::new(DmodcLbPod),
        EngineKind::Dfsssp => Box::new(Dfsssp),
        EngineKind::Layered { k, seed } => Box::new(Layered {
            k: usize::from(k),
            seed,
        }),
        EngineKind::Balanced { vls } => Box::new(Balanced { vls }),
        EngineKind::MuSssp => Box::new(MuSssp),
    }
}

/// Whether the engine `kind` can route `fabric` at all: Dmodk needs a complete PGFT, PQFT a
/// (complete or degraded) quasi fat-tree, Smodk cannot be written into LFTs, DFSSSP and
/// `layered:K` need per-path SLs the daemon does not program yet; every other
/// engine routes any fabric (destinations it cannot reach are reported by the validity check).
/// The error says why, for a configuration check, a start or a reload.
pub fn engine_fits(kind: EngineKind, fabric: &fabric_topology::Fabric) -> Result<(), RoutingError> {
    match kind {
        EngineKind::Dmodk => Dmodk::check_fabric(fabric),
        EngineKind::Pqft => Pqft::check_fabric(fabric),
        EngineKind::Smodk => Err(RoutingError::Unsupported {
            engine: "smodk",
            reason: crate::smodk::SMODK_UNSUPPORTED.to_string(),
        }),
        _ => Ok(()),
    }
}

impl EngineKind {
    /// The engine's routes are deadlock-free only when spread over several virtual lanes (a VL
    /// layering, [`vl_layering`]): DFSSSP. Every other engine is deadlock-free on one VL (the
    /// fat-tree engines on fat-trees, Up*/Down* on any graph) or makes no such claim.
    pub fn needs_vl_layering(self) -> bool {
        matches!(
            self,
            EngineKind::Dfsssp | EngineKind::Layered { .. } | EngineKind::Balanced { .. } | EngineKind::MuSssp
        )
    }

    /// The engine routes any connected graph deadlock-free (Up*/Down*, or DFSSSP with its VL
    /// layering): the topology-agnostic mode (issue 19) keeps it instead of replacing it by
    /// Up*/Down*.
    pub fn is_topology_agnostic(self) -> bool {
        matches!(
            self,
            EngineKind::UpDown
                | EngineKind::UpDownRandom { .. }
                | EngineKind::Dfsssp
                | EngineKind::Layered { .. }
                | EngineKind::Balanced { .. }
                | EngineKind::MuSssp
        )
    }
}

/// The VL layering a routing by `kind` needs to be deadlock-free, computed on the tables
/// actually installed (`lfts`, after the validity repair): `None` for engines deadlock-free
/// on one VL; for DFSSSP the cycle breaking of DFSSSP (IPDPS 2011 §IV-B, [`crate::vl`]) over
/// the base LIDs and switch LIDs, with the **fewest layers** (no balancing of spare layers)
/// and at most the base layers `max_data_vls` data VLs offer ([`max_base_layers`]): with escape
/// LIDs (LMC ≥ 1) one VL (SL/VL [`ESCAPE_SL`](crate::vl::ESCAPE_SL)) is kept out, base layer `i`
/// using SL [`sl_of_layer`](crate::vl::sl_of_layer)`(i, lmc)` = 0, 2, 3, …; at LMC 0 layer `i`
/// is on SL `i` and every data VL is a base layer.
///
/// Errors: [`VlError::TooFewVls`](crate::vl::VlError::TooFewVls) says how many layers were
/// needed; a `max_data_vls` that leaves no base layer (0, or 1 with escape LIDs) is
/// [`VlError::BadMaximum`].
///
/// [`max_base_layers`]: crate::vl::max_base_layers
pub fn vl_layering(
    kind: EngineKind,
    fabric: &fabric_topology::Fabric,
    lids: &crate::lid::LidPlan,
    lfts: &Lfts,
    max_data_vls: u8,
) -> Result<Option<crate::vl::VlLayering>, crate::vl::VlError> {
    if !kind.needs_vl_layering() {
        return Ok(None);
    }
    let max_layers = crate::vl::max_base_layers(max_data_vls.min(crate::vl::IB_MAX_DATA_VLS), lids.lmc);
    if matches!(kind, EngineKind::MuSssp) {
        // The fewer layers of a LASH-like first fit and DFSSSP's cycle breaking.
        return crate::mu::layering(fabric, lids, lfts, max_layers).map(Some);
    }
    if let EngineKind::Balanced { vls } = kind {
        if max_layers == 0 {
            return Err(crate::vl::VlError::BadMaximum {
                got: 0,
                max: crate::vl::IB_MAX_DATA_VLS,
            });
        }
        if let Some(l) = crate::balanced::layering(fabric, lids, lfts, vls)? {
            if l.num_layers > max_layers {
                return Err(crate::vl::VlError::TooFewVls {
                    available: max_layers,
                    needed: l.num_layers,
                });
            }
            return Ok(Some(l));
        }
        // A layer is cyclic on the installed tables (the validity repair changed routes):
        // DFSSSP's cycle breaking of those tables.
    }
    crate::vl::layer_base_fewest(fabric, lids, lfts, max_layers).map(Some)
}

/// The data VLs a layering of `layers` base layers occupies: the highest layer's SL
/// ([`sl_of_layer`](crate::vl::sl_of_layer)) + 1, and at least the escape VL + 1 (2) with
/// escape LIDs (`lmc` ≥ 1); 1 without layering.
pub fn data_vls_of_layers(layers: u8, lmc: u8) -> u8 {
    let top = if layers == 0 {
        1
    } else {
        crate::vl::sl_of_layer(layers - 1, lmc) + 1
    };
    if lmc >= 1 {
        top.max(crate::vl::ESCAPE_SL + 1)
    } else {
        top
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
    /// Whether the escape ports were written with the base ports in one pass (Dmodc on a
    /// fat-tree whose Up*/Down* preparation is Dmodc's: [`crate::dmodc`]'s `route_with_escape`).
    pub escape_shared: bool,
}

/// Whole routing for a snapshot: base LIDs by `kind`, escape LIDs (when LMC ≥ 1) by Up*/Down*
/// (shortest legal paths, Alg. 12's selection: [`crate::updown::route_escape`]). The tables
/// cover LIDs `0..=lids.top()`; every other entry is [`NO_ROUTE`](crate::NO_ROUTE). Dmodc
/// without groups writes both LID sets in one preparation and one pass when they coincide
/// (same bytes; `RoutedFabric::escape_shared`).
///
/// **Layer offsets** (LMC ≥ 2, [`crate::lid`]): `layered:K` puts its layer `i` on offset `i`
/// (offsets `≥ K` repeat layer `i mod K`); every other engine routes offset 0 and its entries
/// are copied to offsets `1..layer_offsets` ([`repeat_layer_offsets`]): one path per pair, on
/// every LID of the port, as deterministic as the engine.
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
    route_all_reusing(ctx, kind, groups, None)
}

/// [`route_all_grouped`] in the allocation of `spare` (the tables of an earlier generation that
/// are no longer needed, of any size; their contents do not matter): the same bytes, without
/// the page faults of a fresh 0.3–0.7 GB array at 35k–65k nodes (issue #17). Dmodc without
/// groups rewrites every entry in its fill pass; the other engines start from a `NO_ROUTE`
/// reset of the reused tables.
pub fn route_all_reusing(
    ctx: &RoutingContext<'_>,
    kind: EngineKind,
    groups: Option<&NodeGroups>,
    spare: Option<Lfts>,
) -> Result<RoutedFabric, RoutingError> {
    validate_context(ctx)?;
    if let (EngineKind::Dmodc, None) = (kind, groups) {
        let mut r = crate::dmodc::route_with_escape(ctx, spare)?;
        repeat_layer_offsets(ctx.lids, &mut r.lfts);
        return Ok(RoutedFabric {
            lfts: r.lfts,
            base_ms: r.base_ms,
            escape_ms: r.escape_ms,
            escape_shared: r.escape_shared,
        });
    }
    let (ns, top) = (ctx.fabric.num_switches(), ctx.lids.top());
    let mut lfts = match spare {
        None => Lfts::new(ns, top),
        Some(l) => {
            use rayon::iter::ParallelIterator;
            let mut l = l.recycled(ns, top);
            l.par_rows_mut().for_each(|r| r.fill(crate::NO_ROUTE));
            l
        }
    };
    let t = Instant::now();
    match (kind, groups) {
        (EngineKind::Dmodc, Some(g)) => GroupedDmodc(g).route(ctx, LidSet::Base, &mut lfts)?,
        (EngineKind::Dmodk, Some(g)) => GroupedDmodk(g).route(ctx, LidSet::Base, &mut lfts)?,
        _ => engine(kind).route(ctx, LidSet::Base, &mut lfts)?,
    }
    if kind.layers() == 1 {
        repeat_layer_offsets(ctx.lids, &mut lfts);
    }
    let base_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut escape_ms = 0.0;
    if ctx.lids.lmc >= 1 {
        let t = Instant::now();
        crate::updown::route_escape(ctx, &mut lfts)?;
        escape_ms = t.elapsed().as_secs_f64() * 1e3;
    }
    Ok(RoutedFabric {
        lfts,
        base_ms,
        escape_ms,
        escape_shared: false,
    })
}

/// Copies every end port's offset-0 entry to its layer offsets `1..layer_offsets` on every
/// switch (nothing with LMC ≤ 1): the routing of a single-table engine on every layer LID.
/// One rayon task per row; the result does not depend on the thread count.
pub fn repeat_layer_offsets(lids: &crate::LidPlan, lfts: &mut Lfts) {
    let n = lids.layer_offsets() as usize;
    if n <= 1 {
        return;
    }
    use rayon::prelude::*;
    lfts.par_rows_mut().for_each(|row| {
        for &b in &lids.end_port_base {
            let b = b as usize;
            if b != 0 && b + n <= row.len() {
                let p = row[b];
                row[b + 1..b + n].fill(p);
            }
        }
    });
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
            ("ftree-random:7", EngineKind::FtreeRandom { seed: 7 }),
            ("randsp", EngineKind::RandSp { seed: 0 }),
            ("dmodc-lb", EngineKind::DmodcLb),
            ("dmodc-lb:repair", EngineKind::DmodcLbRepair),
            ("dmodc-lb:pod", EngineKind::DmodcLbPod),
            ("layered", EngineKind::Layered { k: 4, seed: 0 }),
            ("layered:3", EngineKind::Layered { k: 3, seed: 0 }),
            ("Layered:7:9", EngineKind::Layered { k: 7, seed: 9 }),
        ] {
            let got: EngineKind = s.parse().unwrap();
            assert_eq!(got, k);
            assert_eq!(got.to_string().parse::<EngineKind>().unwrap(), k);
        }
        assert_eq!("fttree".parse::<EngineKind>(), Err(UnknownEngine("fttree".into())));
        assert!("updown-random:x".parse::<EngineKind>().is_err());
        for bad in [
            "layered:0",
            "layered:129",
            "layered:x",
            "layered:2:y",
            "layered:",
            "layeredx",
        ] {
            assert!(bad.parse::<EngineKind>().is_err(), "{bad}");
        }
        assert_eq!(EngineKind::Layered { k: 3, seed: 0 }.to_string(), "layered:3");
        assert_eq!(EngineKind::Layered { k: 3, seed: 5 }.to_string(), "layered:3:5");
        assert!(
            "dmodc:3".parse::<EngineKind>().is_err(),
            "a deterministic engine takes no seed"
        );
        for name in ENGINE_NAMES {
            let k: EngineKind = name.parse().unwrap();
            assert_eq!(k.name(), *name);
            assert_eq!(engine(k).name(), *name);
        }
        assert_eq!(engine(EngineKind::Dmodc).name(), "dmodc");
    }
}
