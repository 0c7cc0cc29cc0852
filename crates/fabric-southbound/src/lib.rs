//! Southbound side of fabricd: the [`SouthboundDriver`] trait through which the daemon
//! discovers, watches and programs a fabric, and the built-in `mock` driver ([`MockFabric`]), a
//! simulated fabric that keeps real LFT bytes, traces packets and injects faults.
//!
//! Later drivers (`umad` for real InfiniBand, `oob` for BXI-like out-of-band agents) implement
//! the same trait in their own crates.
//!
//! **Architecture invariant:** drivers are addressed by GUID and never see routing algorithms;
//! the mock judges the daemon's work only from its own simulated state (installed LFT bytes,
//! LIDs, physical link state), never from the daemon's data structures.

pub mod driver;
pub mod mock;

pub use driver::{
    DriverCaps, DriverError, DriverStats, EscapeVlStatus, LftBlockWrite, SouthboundDriver, TopologyGap, WriteReport,
};
pub use mock::{
    Hop, MockConfig, MockCounters, MockFabric, ReachReport, TraceError, IB_MAX_UNICAST_LID, REACH_REPORT_MAX_LISTED,
};
