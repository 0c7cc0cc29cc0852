//! SA records (IBA vol. 1 15.2.5): one module per record type, each with its wire image
//! (`decode`/`encode`, sizes of table 207), its component-mask bits and the match of a
//! template under a mask.
//!
//! Decoders never panic: a short buffer is a [`DecodeError`].

/// Why a record image could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{record}: {len} bytes, the record needs {need}")]
pub struct DecodeError {
    pub record: &'static str,
    pub len: usize,
    pub need: usize,
}

/// A record type of the SA.
pub trait Record: Sized {
    /// AttributeID.
    const ATTR: u16;
    /// Bytes of the wire image (AttributeOffset × 8 in a table answer).
    const SIZE: usize;
    /// Name in logs and errors ("PathRecord").
    const NAME: &'static str;
    /// Reads the wire image.
    fn decode(b: &[u8]) -> Result<Self, DecodeError>;
    /// Writes the wire image into `out[..SIZE]`.
    fn encode(&self, out: &mut [u8]);
    /// Whether `self` matches `template` on every component selected by `mask` (bit i =
    /// component i of the record's table in IBA 15.2.5).
    fn matches(&self, template: &Self, mask: u64) -> bool;
}

/// Checks the length of a record image.
pub fn need(record: &'static str, b: &[u8], need: usize) -> Result<(), DecodeError> {
    if b.len() < need {
        Err(DecodeError {
            record,
            len: b.len(),
            need,
        })
    } else {
        Ok(())
    }
}
