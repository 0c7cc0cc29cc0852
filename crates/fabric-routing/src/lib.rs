//! Routing core: LID plan ([`lid`]), linear forwarding tables and their diffs ([`lft`]),
//! routing engines (Dmodc, Dmodk, Up*/Down*), validity / deadlock checks ([`check`]) and the
//! OpenSM LFT dump format ([`opensm`]), and multicast trees / MFTs ([`mcast`]).
//!
//! * [`Dmodc`] (default): thesis §4.2 — costs, dividers, topological NIDs, closer port groups
//!   ordered by remote GUID; every route is up*-down* for the ranking.
//! * [`Dmodk`]: the closed form on complete PGFTs (thesis §1.4.2); equal to Dmodc there.
//! * [`UpDown`]: Up*/Down* over a BFS spanning tree (thesis §5.1.3, Alg. 10–12) on shortest
//!   legal paths (OpenSM `updn`'s rule) with balanced (OpenSM) or seeded random (Alg. 11)
//!   selection; deadlock-free on one VL for any topology.
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
//!
//! This file only declares the modules and re-exports their public items; no module imports
//! from a module that imports from it (the dependencies form a tree rooted at `route` and
//! `fallback`).

pub mod balanced;
mod bfs;
pub mod check;
mod deadlock;
mod dfsssp;
mod dmodc;
mod dmodc_lb;
mod dmodk;
mod engine;
pub mod fallback;
mod fastdiv;
mod fill;
mod ftree;
mod groups;
mod hops;
pub mod incremental;
pub mod layered;
pub mod lft;
pub mod lid;
#[cfg(test)]
mod lmc_tests;
pub mod mcast;
pub mod mu;
pub mod opensm;
mod pqft;
mod prep;
mod proof;
mod randsp;
mod route;
mod smodk;
mod sssp;
mod swlid;
#[cfg(test)]
mod testutil;
mod updown;
pub mod vl;
mod walk;

pub use bfs::BfsUpDown;
pub use check::{trace, TraceEnd, TraceError};
pub use dfsssp::Dfsssp;
pub use dmodc::{Dmodc, GroupedDmodc};
pub use dmodc_lb::{DmodcLb, DmodcLbPod, DmodcLbRepair};
pub use dmodk::{Dmodk, GroupedDmodk};
pub use engine::{LidSet, RoutingContext, RoutingEngine, RoutingError};
pub use fallback::{check_and_repair, route_all_checked, Fallback, RoutingCheck};
pub use ftree::{Directions, Ftree, FtreeVariant};
pub use groups::NodeGroups;
pub use lft::{LftBlockDiff, Lfts, BLOCK_SIZE, NO_ROUTE};
pub use lid::{assign_lids, Guid2Lid, LidError, LidOwner, LidOwners, LidPlan, PlanMismatch, IB_MAX_UNICAST_LID};
pub use mcast::{
    flood, mcast_deadlock_free, mft_diff, route_multicast, FloodError, McastGroup, McastInputError, McastRouting,
    McastTree, McastTreeLink, MftBlockDiff, Mfts,
};
pub use mu::MuSssp;
pub use opensm::{
    parse_opensm_lfts, read_opensm_lfts, write_opensm_lfts, write_opensm_lfts_to, LftDumpError, OpensmLftWriter,
    OpensmLfts, SwitchLftDump,
};
pub use pqft::{Pqft, QftTuples};
pub use randsp::RandSp;
pub use route::{
    data_vls_of_layers, engine, engine_fits, repeat_layer_offsets, route_all, route_all_grouped, route_all_reusing,
    vl_layering, EngineKind, RoutedFabric, UnknownEngine, ENGINE_NAMES, LAYERED_DEFAULT_K,
};
pub use smodk::{Smodk, SmodkPathError, SmodkPaths, SMODK_UNSUPPORTED};
pub use sssp::Sssp;
pub use updown::{route_escape, UpDown};
