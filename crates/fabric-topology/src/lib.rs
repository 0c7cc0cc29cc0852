//! The fabric model of fabricd.
//!
//! * [`model`]: switches, end ports, links with state, port groups, dense ids plus GUID maps,
//!   immutable snapshots ([`Fabric`]) and the events that produce the next generation.
//! * [`ibnet`]: the ibnetdiscover / ibsim text topology format (reader and writer).
//! * [`gen`]: fat-tree generators (PGFT, XGFT, k-ary n-tree, QFT) and degraded variants.
//! * [`textfile`]: bounded reading of text files (size limit, regular files only, UTF-8 errors
//!   with their line).
//! * [`validate`]: cabling validation (expected vs. discovered cabling: missing, extra, miswired).
//!
//! **Architecture invariant:** this crate does no I/O beyond reading/writing the strings and
//! files it is handed, and never renumbers ids: a switch or end port that goes down keeps its id.

pub mod gen;
pub mod ibnet;
pub mod model;
pub mod textfile;
pub mod validate;

pub use model::*;
