//! The `umad` southbound driver: fabricd as the subnet manager of a real InfiniBand fabric,
//! over the kernel user-MAD interface (`/dev/infiniband/umadN`), in pure Rust over `libc`.
//!
//! * [`mad`]: SMP encode/decode (NodeInfo, NodeDescription, PortInfo, SwitchInfo,
//!   LinearForwardingTable, MulticastForwardingTable, PartitionTable, SLtoVLMappingTable,
//!   Notice), directed-route and LID-routed; the M_Key fields and [`mad::stamp_m_key`]; the
//!   Performance Management GMPs ([`mad::PerfMad`]: ClassPortInfo, PortCounters,
//!   PortCountersExtended).
//! * [`transport`]: one OS thread per umad descriptor, a window of outstanding SMPs, transaction
//!   ids, deadlines and retries, bridged to tokio by channels; traps on a separate channel; the
//!   device's ioctl layer (all the `unsafe` code) and the SMInfo answers of the manager's port.
//! * [`driver`]: [`UmadDriver`], the [`fabric_southbound::SouthboundDriver`], one module per
//!   subsystem over one pure state module: sweep and light sweep (trap 128), LIDs and port
//!   activation (with the M_Key protection), SL-to-VL, SM election, LFT upload and, through
//!   the same upload, MFT and P_Key tables with partition enforcement, and the port counters
//!   (PerfMgt PortCounters / PortCountersExtended on the transport's PerfMgt lane, its own small
//!   window behind the SMPs). Its locks are listed in one place
//!   ("Lock order" in [`driver`]).
//! * [`sa`]: the Subnet Administration class (0x03) on the manager's port ("not supported"
//!   until an SA service is attached; then the transport's SA agent answers with it, RMPP and
//!   Reports included) and the other GSI classes the simulator shim needs a receiver for.
//! * [`config`]: [`UmadConfig`] (embedded in the daemon config).
//! * [`client`]: [`client::SaClient`], the project's own SA client (an end node asking the
//!   master's SA; RMPP reassembled in user space), used by `fabric-saquery`.
//!
//! **Architecture invariant:** this is the only crate of the workspace with `unsafe` code, and
//! all of it is in [`transport`] (the `open`/`ioctl`/`read`/`write`/`poll`/`close` calls of its
//! `device` module), each block with a `SAFETY:` comment: the crate root denies `unsafe_code`
//! and only `mod transport` is allowed it. The umad descriptor stays a raw `c_int` (the
//! simulator shim fakes it).
//!
//! The `fabric-umad-probe` binary (crate `crates/fabric-umad-probe`) drives this library from
//! the command line; the library itself depends on neither `anyhow` nor the ranking crate.
//!
//! Construct with `UmadDriver::open(UmadConfig { device, .. })`.

#![deny(unsafe_code)]

pub mod client;
pub mod config;
pub mod driver;
pub mod mad;
pub mod sa;
#[allow(unsafe_code)]
pub mod transport;

pub use config::UmadConfig;
pub use driver::{UmadDriver, UmadStats, ESCAPE_SL, ESCAPE_VL};
