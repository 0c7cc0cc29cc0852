//! The `oob` southbound driver: out-of-band (BXI-like) management, one gRPC agent per switch.
//!
//! Each switch runs a management agent ([`proto::switch_agent_server::SwitchAgent`], defined in
//! `proto/fabric/agent/v1/agent.proto`) reachable over the management network, as in BXI where
//! the fabric manager programs the switches out of band instead of with in-band MADs (thesis
//! §1.1–1.2). An [`Inventory`] file maps switch GUIDs (or names) to agent addresses;
//! [`OobDriver`] implements [`fabric_southbound::SouthboundDriver`] on top of it:
//!
//! * **discovery** asks every agent for its description and port table concurrently and builds
//!   the fabric from the LLDP-like neighbour tables, cross-checking both ends of every
//!   switch-to-switch cable (mismatches are reported by [`OobDriver::discovery_warnings`] and the
//!   cable is left out); end ports are the CA neighbours of the leaves;
//! * **LFT uploads** go to all switches concurrently, at most `max_connections` requests in
//!   flight, each retried with exponential backoff;
//! * **health**: every agent's port-event stream is watched; an agent that stays unreachable
//!   past `unreachable_deadline` is reported as [`FabricEvent::SwitchDown`](fabric_topology::FabricEvent)
//!   and `SwitchUp` when it answers again (also a switch discovery returned down, and one
//!   whose requests were given up); port events become `LinkDown`/`LinkUp` (once per cable)
//!   or `EndPortDown`/`EndPortUp`;
//! * **one switch down fails only that switch**: addresses are set up per switch (again before
//!   the switch's next LFT write when its agent did not take them), and the GUID → agent map
//!   comes from the inventory and is refreshed when an agent answers;
//! * **addresses** are `u32`: `max_lid` may exceed InfiniBand's 16 bits (e.g. `0xFFFFFF`);
//! * **SL-to-VL**: with the addresses, every switch gets one SL-to-VL table (`SetSlToVl`, per
//!   switch rather than per port pair as in InfiniBand): SL 0 (base LIDs) on data VL 0, SL 1
//!   (escape LIDs) on the escape VL `n - 1`, `n` the smallest VL count the switches report
//!   ([`OobDriver::escape_vl`], also in `caps().escape_vl`). End nodes choose the SL of a packet
//!   (`GetPath`); their NIC's own SL-to-VL mapping is the host's business;
//! * **multicast**: MFT blocks ([`fabric_southbound::MftBlockWrite`]) go through the same
//!   per-switch batching, bounded concurrency and retries as the LFT blocks (`WriteMftBlocks`,
//!   `ReadMftBlock`); P_Key tables are not supported (BXI has no partitions:
//!   `write_pkey_blocks` answers [`DriverError::Unsupported`](fabric_southbound::DriverError));
//! * **management key** (`management_key`, `management_key_protect` in [`OobConfig`]): set on
//!   every agent at discovery and again on an agent that was lost, carried by every write, so
//!   that another manager without it can no longer change a switch; an agent protected by
//!   someone else's key is reported naming the switch
//!   ([`OobDriver::management_key_refusals`], [`OobDriver::configuration_warnings`]);
//! * **write fencing** (high availability, [`OobDriver::set_fence`]): every request carries the
//!   manager epoch (request metadata [`MANAGER_EPOCH_METADATA`]); every write is checked against
//!   the [`Fence`](fabric_southbound::Fence) right before it is sent and refused locally
//!   ([`DriverError::Fenced`](fabric_southbound::DriverError)) once this manager may not write; a
//!   switch that has seen a newer epoch refuses the write and closes the fence;
//! * **port counters** (`ReadPortCounters`): the asked switch ports grouped per agent, one
//!   request per agent, at most `max_counter_reads` in flight (a limit of their own, so the
//!   port-health poll never delays an upload); an agent that does not answer fails only its
//!   own ports; end ports answer `Unsupported` (the agents manage switch ports only).
//!
//! The generated protocol code (client and server) is in [`proto`]; the agent simulator
//! (`fabric-agent-sim`) serves it.

pub mod fds;
pub mod inventory;
pub mod proto;

mod driver;

pub use driver::{
    sl_to_vl_table, OobConfig, OobDriver, ESCAPE_SL, MANAGER_EPOCH_METADATA, MAX_MANAGEMENT_KEY_PROTECT,
    READ_KEY_METADATA,
};
pub use inventory::{AgentKey, Inventory, InventoryEntry, InventoryError};
