//! The five-phase property-preserving routing update over dual LIDs (Domke & Hoefler,
//! *Scheduling-Aware Routing for Supercomputers*; design brief §7).
//!
//! Every end port has two LIDs (LMC 1): the base LID (`2k`), routed by the selected engine on
//! the data VLs, and the escape LID (`2k + 1`; with LMC ≥ 2 the last offset `base + 2^LMC − 1`,
//! every other offset being a base LID), routed by Up*/Down* on the escape VL (`n - 1`).
//! Going from routing generation `g` to `g + 1` preserves three properties:
//!
//! 1. each routing is itself deadlock-free;
//! 2. every flow sees exactly one routing at any time (per-flow consistency, no reordering);
//! 3. flows of both routings in flight together cannot deadlock (disjoint VL sets, each acyclic).
//!
//! * [`protocol`]: the pure state machine ([`Protocol::on`] turns [`Input`]s into [`Action`]s).
//! * [`stage`]: splitting the changed LFT blocks into the escape stage and the base stage.
//!
//! This crate does no I/O: the daemon's event loop drives it.

pub mod protocol;
pub mod stage;

pub use protocol::{
    Action, AttemptId, DeadlinePolicy, Ignored, Input, Missed, Phase, Progress, Protocol, ProtocolConfig, Report,
    SubscriberId,
};
pub use stage::{split_writes, EscapeMask, Stages};

#[cfg(test)]
mod protocol_tests;
