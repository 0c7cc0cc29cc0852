//! [`GenError`]: the errors of the generators, of the degradation and of the recognition.

use super::limits::MAX_SWITCH_PORTS;
use crate::model::TopologyError;

/// Errors of the generators, of [`degrade`](fn@crate::gen::degrade) and of
/// [`PgftLayout::recognize`](crate::gen::PgftLayout::recognize).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GenError {
    /// The notation string is malformed at a position (1-based character column).
    #[error("{spec}: at column {column}: {reason}")]
    Syntax {
        spec: String,
        column: usize,
        reason: String,
    },
    /// A vector of the notation has the wrong number of values.
    #[error("{spec}: expected {expected} values for {vector}, got {got}")]
    WrongLength {
        spec: String,
        vector: &'static str,
        expected: usize,
        got: usize,
    },
    /// A value of the notation is 0 (`name` is the notation name, e.g. `m2` or `h`).
    #[error("{spec}: {name} is 0, it must be at least 1")]
    Zero { spec: String, name: String },
    /// The notation is well formed but does not describe a fat-tree this generator builds.
    #[error("{spec}: {reason}")]
    Invalid { spec: String, reason: String },
    /// Switches of one level would need more ports than a switch can have.
    #[error("{spec}: level {level} switches need {ports} ports, at most {max} are supported", max = MAX_SWITCH_PORTS)]
    TooManyPorts { spec: String, level: u32, ports: u64 },
    /// The fabric would be larger than the generator limits.
    #[error("{spec}: {count} {what} exceed the generator limit of {limit}")]
    TooLarge {
        spec: String,
        what: &'static str,
        count: u128,
        limit: u64,
    },
    /// [`degrade`](fn@crate::gen::degrade) was asked to remove more inter-switch cables than there are.
    #[error("cannot remove {requested} inter-switch cables: the fabric has {available}")]
    TooManyLinks { requested: usize, available: usize },
    /// [`degrade`](fn@crate::gen::degrade) was asked to remove more non-leaf switches than there are.
    #[error("cannot remove {requested} non-leaf switches: the fabric has {available}")]
    TooManySwitches { requested: usize, available: usize },
    /// [`PgftLayout::recognize`](crate::gen::PgftLayout::recognize): the fabric is not a complete, live generated fat-tree.
    #[error("not a complete generated fat-tree: {0}")]
    NotRecognized(String),
    /// The fabric builder rejected a generated element (a generator bug, never bad input).
    #[error("fabric builder: {0}")]
    Topology(#[from] TopologyError),
}
