//! Subnet Administration (SA, management class 0x03): what the master subnet manager answers
//! when the fabric's clients ask it questions (`saquery`, `rdma_cm` path resolution, IPoIB,
//! `ibacm`, health checks).
//!
//! **Pure:** no I/O, no clock, no threads. The transport (the umad driver's SA agent, the
//! daemon's gRPC `SaQuery`) hands in MAD bytes, the requester and the current time, and sends
//! what comes back. Wire formats follow IBA vol. 1 ch. 15 (SA) and 13.6 (RMPP); what was
//! verified against OpenSM and `saquery` is recorded in `docs/subnet-administration.md`.
//!
//! Layout:
//! * [`wire`]: the SA MAD header, the RMPP header, methods, attributes, status codes.
//! * [`records`]: one module per record type: decode/encode of the wire image and the
//!   component-mask match of a template.
//! * [`subnet`]: [`Subnet`], the read-only snapshot of the fabric the answers are built from
//!   (raw SMP attributes per node and port, LIDs, the installed LFTs), and
//!   [`subnet::from_model`] for drivers that read no SMP attributes.
//! * [`partitions`]: [`Partitions`], the P_Key tables and IPoIB groups the SA enforces, and
//!   OpenSM's membership rules (share, has, common P_Key).
//! * [`mcast`]: multicast groups (MCMemberRecord joins, leaves, queries), MLIDs, the IPoIB
//!   well-known groups.
//! * [`path`]: PathRecords and MultiPathRecords by walking the installed LFTs.
//! * [`registry`]: what clients register (ServiceRecords with leases, InformInfo
//!   subscriptions), its persisted form, and the Reports of traps 64/65 it owes subscribers.
//! * [`request`]: the decoded request, the response and the builders every attribute uses.
//! * [`query`]: one request → one answer (status + records), for every attribute and method.
//! * [`rmpp`]: the RMPP sender and receiver state machines (segments, window, ACK, timeouts).
//! * [`service`]: [`SaService`], the object transports share: the current snapshot (arc-swap,
//!   answering never waits for the event loop), the registry, the counters.

pub mod lft_table;
pub mod mcast;
pub mod partitions;
pub mod path;
pub mod query;
pub mod records;
pub mod registry;
pub mod request;
pub mod rmpp;
pub mod service;
pub mod subnet;
pub mod wire;

pub use lft_table::LftTable;
pub use mcast::{McGroup, McMember};
pub use partitions::{IpoibGroupSpec, Partitions};
pub use request::{Request, Requester, SaResponse};
pub use service::{SaCounters, SaService};
pub use subnet::{PathSls, Subnet};
