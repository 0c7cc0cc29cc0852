//! The modules of the `fabric-saquery` binary (`src/bin/fabric-saquery.rs` includes this
//! directory by path): [`templates`] builds each command's SA request, [`output`] prints the
//! JSON answer, [`decode`] turns record images into fields, [`bench`] measures an SA.

pub mod bench;
pub mod decode;
pub mod output;
pub mod templates;
