//! The modules of the `fabric-saquery` binary (`src/bin/fabric-saquery.rs` includes this
//! directory by path): [`templates`] builds each command's SA request, [`output`] prints the
//! JSON answer, [`decode`] turns record images into fields, [`bench`] measures an SA,
//! [`fake_sa`] is the hidden `serve-table` test tool (an SA that sends a known RMPP table),
//! [`mcast`] the multicast joins and leaves (`join`, `leave`, `mcast-cycles`).

pub mod bench;
pub mod decode;
pub mod fake_sa;
pub mod mcast;
pub mod output;
pub mod templates;
