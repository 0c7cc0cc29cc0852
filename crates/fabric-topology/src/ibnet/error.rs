//! [`ParseError`] and the tolerated oddities ([`Warning`]) of the topology reader.

/// Malformed topology text (or an unreadable file): where and why.
///
/// Displays as `"{file}:{line}: {reason}"`. `line` is 1-based; it is 0 when the whole file is at
/// fault (it cannot be read, or is not UTF-8 text before the first line break).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {reason}")]
pub struct ParseError {
    /// The source name given to [`parse`](super::parse), or the path given to
    /// [`read_file`](super::read_file).
    pub file: String,
    /// 1-based line number of the offending line (0: the file as a whole).
    pub line: usize,
    /// What is wrong, in words.
    pub reason: String,
}

/// A tolerated oddity, before it is formatted as `file:line: message`.
pub(crate) struct Warning {
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl ParseError {
    pub(crate) fn new(file: &str, line: usize, reason: impl Into<String>) -> Self {
        ParseError {
            file: file.to_string(),
            line,
            reason: reason.into(),
        }
    }
}
