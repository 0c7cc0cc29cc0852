//! `fabricd`, the fabric manager daemon, as a library (the binary is a thin `main` over
//! [`daemon::run`]; integration tests start the real binary).
//!
//! * [`config`]: the TOML configuration, validated as a whole (every error with its line and
//!   key path), and what a `SIGHUP` reload may change.
//! * [`event_loop`]: the single owner of the live state; coalesces faults into generations,
//!   computes them on rayon ([`compute`]), uploads the changed LFT blocks ([`upload`]) and
//!   commits them.
//! * [`grpc`]: the `fabricd.v1.FabricManager` service over [`state::Published`] snapshots.
//! * [`persist`]: the state directory (guid2lid, jobs, virtual faults), written atomically.
//! * [`sa`]: the Subnet Administration service of the daemon and, for drivers that do not keep
//!   it, the snapshots it answers from.
//! * [`sa_store`]: the SA registry (ServiceRecords, InformInfo subscriptions) in the state
//!   directory.
//! * [`notify`], [`telemetry`], [`logging`]: systemd notifications, Prometheus metrics,
//!   tracing.
//! * [`authority`]: the `:authority` of gRPC clients on the Unix socket made acceptable.
//! * [`connlimit`]: bounds on the gRPC listeners' connections (count, idle time).
//! * [`daemon`]: wiring of all of the above.
//!
//! **Architecture invariant:** the event loop is the only writer of the live state; ranking
//! and routing never run on a tokio worker thread; readers never lock.

pub mod authority;
pub mod compute;
pub mod config;
pub mod connlimit;
pub mod daemon;
pub mod dashboard;
pub mod event_loop;
pub mod grpc;
pub mod ha;
pub mod health;
pub mod logging;
pub mod mcast;
pub mod notify;
pub mod partitions;
pub mod persist;
pub mod pkeys;
pub mod sa;
pub mod sa_store;
pub mod slurm;
pub mod state;
pub mod telemetry;
pub mod topology_mode;
pub mod upload;
pub mod vl_plan;
