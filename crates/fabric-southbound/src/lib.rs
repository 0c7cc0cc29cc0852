//! Southbound side of fabricd: the [`SouthboundDriver`] trait through which the daemon
//! discovers, watches and programs a fabric, and the types it speaks.
//!
//! The drivers implement the trait in their own crates: `fabric-mock` (the built-in simulated
//! fabric), `fabric-umad` (real InfiniBand), `fabric-oob` (BXI-like out-of-band agents). This
//! crate depends on none of them. A driver whose fabric is simulated also answers packet-level
//! questions through [`PacketSimulator`] (traces, all-pairs reachability).
//!
//! **Architecture invariant:** drivers are addressed by GUID and never see routing algorithms.

pub mod counters;
pub mod driver;
pub mod fence;
pub mod simulator;

pub use counters::{Counter, CounterPort, CountersReading, PortCounters};
pub use driver::{
    DataVlPlan, DriverCaps, DriverError, DriverStats, EscapeVlStatus, LftBlockWrite, MftBlockWrite, PkeyBlockWrite,
    PkeyPort, SouthboundDriver, TopologyGap, WriteReport, MFT_BLOCK_SIZE, MFT_PORTS_PER_POSITION, MLID_BASE,
    PKEY_BLOCK_SIZE,
};
pub use fence::{Fence, FenceState};
pub use simulator::{Hop, McastDelivery, PacketSimulator, ReachReport, TraceError, REACH_REPORT_MAX_LISTED};
