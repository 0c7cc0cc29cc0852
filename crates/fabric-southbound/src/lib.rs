//! Southbound side of fabricd: the [`SouthboundDriver`] trait through which the daemon
//! discovers, watches and programs a fabric, and the types it speaks.
//!
//! The drivers implement the trait in their own crates: `fabric-mock` (the built-in simulated
//! fabric), `fabric-umad` (real InfiniBand), `fabric-oob` (BXI-like out-of-band agents). This
//! crate depends on none of them. A driver whose fabric is simulated also answers packet-level
//! questions through [`PacketSimulator`] (traces, all-pairs reachability).
//!
//! **Architecture invariant:** drivers are addressed by GUID and never see routing algorithms.

pub mod driver;
pub mod simulator;

pub use driver::{
    DriverCaps, DriverError, DriverStats, EscapeVlStatus, LftBlockWrite, SouthboundDriver, TopologyGap, WriteReport,
};
pub use simulator::{Hop, PacketSimulator, ReachReport, TraceError, REACH_REPORT_MAX_LISTED};
