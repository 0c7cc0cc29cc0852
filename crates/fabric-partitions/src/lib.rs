//! Partitions: OpenSM's `partitions.conf`, its IPoIB broadcast groups and its resolution to
//! P_Key tables.
//!
//! * [`parse`]: the file (statements `Name[=PKey][,flag[=value]]* : members ;`), with errors
//!   naming file, line and column ([`ParseError`]).
//! * [`PartitionConfig::default_opensm`]: what OpenSM uses without a file.
//! * [`PartitionConfig::ipoib_groups`]: the IPoIB broadcast groups OpenSM creates, with their
//!   MGIDs ([`IpoibGroup::mgids`]).
//! * [`resolve`] / [`resolve_with`]: per end port (and switch management port 0) its ordered P_Key
//!   table, per switch external port facing an end port its enforcement table, membership
//!   queries ([`PartitionTables::shared_pkey`], [`PartitionTables::members`]) and 32-entry
//!   PartitionTable [`blocks`].
//!
//! The semantics follow OpenSM (`osm_prtn_config.c`, `osm_prtn.c`, `osm_pkey_mgr.c`, the
//! `opensm(8)` section "PARTITION CONFIGURATION"); where OpenSM only logs a warning and goes on
//! (unknown flag, bad value, missing `;`), this crate refuses the file with an error.
//!
//! **Architecture invariant:** pure and synchronous: no I/O, no clock; the same configuration and
//! fabric give the same tables.

mod config;
mod ipoib;
mod parse;
mod pkey;
mod resolve;

pub use config::*;
pub use ipoib::*;
pub use parse::{parse, ParseError};
pub use pkey::{DEFAULT_PKEY, FULL_MEMBER_BIT, PKEY_BASE_MASK};
pub use resolve::*;
