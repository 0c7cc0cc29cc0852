//! Routing core: LID plan ([`lid`]), linear forwarding tables and their diffs ([`lft`]),
//! routing engines (Dmodc, Dmodk, Up*/Down*) and validity / deadlock checks.
//!
//! **Architecture invariant:** synchronous and free of I/O (parsing/formatting of OpenSM file
//! formats works on strings); parallelism is rayon only.

pub mod lft;
pub mod lid;

pub use lft::{LftBlockDiff, Lfts, BLOCK_SIZE, NO_ROUTE};
pub use lid::{LidError, LidPlan};
