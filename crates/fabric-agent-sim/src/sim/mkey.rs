//! The management key (InfiniBand's M_Key for the agent protocol): what an agent checks before
//! it applies a write or, at protect level 2, answers a read.
//!
//! Key 0 (the initial state) means no protection. With a non-zero key every write call must
//! carry it (request field `management_key`) at every protect level; protect level 0 leaves
//! reads open and reports the key in `Describe`, level 1 leaves reads open and never reports
//! it, level 2 also refuses every read but `Describe` without the key (request metadata
//! [`READ_KEY_METADATA`]). Refusals are PERMISSION_DENIED naming the switch, counted per agent.

use std::sync::atomic::Ordering;

use fabric_topology::fmt_guid;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::state::{lock, AgentCtl};

/// Highest protect level an agent accepts.
pub(super) const MAX_PROTECT: u8 = 2;

/// Request metadata entry carrying the key of a read call (16 hex digits, `0x` optional).
pub(super) const READ_KEY_METADATA: &str = "fabric-management-key";

/// The management key of one switch and its protect level.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ManagementKey {
    /// 0: no key (nothing is checked).
    pub(super) key: u64,
    /// 0..=[`MAX_PROTECT`].
    pub(super) protect: u8,
}

/// Never shows the key.
impl std::fmt::Debug for ManagementKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagementKey")
            .field("key", &if self.key == 0 { "none" } else { "<redacted>" })
            .field("protect", &self.protect)
            .finish()
    }
}

impl ManagementKey {
    /// Whether a write presenting `presented` is allowed.
    pub(super) fn allows_write(&self, presented: u64) -> bool {
        self.key == 0 || presented == self.key
    }

    /// Whether a read presenting `presented` (`None`: no key in the metadata) is allowed.
    pub(super) fn allows_read(&self, presented: Option<u64>) -> bool {
        self.key == 0 || self.protect < 2 || presented == Some(self.key)
    }

    /// The key as `Describe` reports it: itself at protect level 0, else 0.
    pub(super) fn reported(&self) -> u64 {
        if self.protect == 0 {
            self.key
        } else {
            0
        }
    }
}

/// Parses the key of a read call's metadata: `None` when absent or not a 64-bit hex number.
pub(super) fn read_key(md: &MetadataMap) -> Option<u64> {
    let v = md.get(READ_KEY_METADATA)?.to_str().ok()?.trim();
    let v = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")).unwrap_or(v);
    u64::from_str_radix(v, 16).ok()
}

fn refusal(a: &AgentCtl, what: &str, protect: u8) -> Status {
    Status::permission_denied(format!(
        "switch {}: {what} refused: management key missing or wrong (protect level {protect})",
        fmt_guid(a.guid)
    ))
}

/// Refuses (and counts) a write call that does not present the switch's key.
pub(super) fn check_write(a: &AgentCtl, what: &str, presented: u64) -> Result<(), Status> {
    let k = *lock(&a.mkey);
    if k.allows_write(presented) {
        return Ok(());
    }
    a.refused_writes.fetch_add(1, Ordering::SeqCst);
    Err(refusal(a, what, k.protect))
}

/// Refuses (and counts) a read call at protect level 2 whose metadata lacks the switch's key.
pub(super) fn check_read(a: &AgentCtl, what: &str, md: &MetadataMap) -> Result<(), Status> {
    let k = *lock(&a.mkey);
    if k.allows_read(read_key(md)) {
        return Ok(());
    }
    a.refused_reads.fetch_add(1, Ordering::SeqCst);
    Err(refusal(a, what, k.protect))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tonic::metadata::MetadataValue;

    #[test]
    fn read_key_metadata_parses_hex_with_or_without_prefix() {
        let mut md = MetadataMap::new();
        assert_eq!(read_key(&md), None);
        md.insert(READ_KEY_METADATA, MetadataValue::from_static("0x00000000000000ab"));
        assert_eq!(read_key(&md), Some(0xab));
        md.insert(READ_KEY_METADATA, MetadataValue::from_static("FFFFFFFFFFFFFFFF"));
        assert_eq!(read_key(&md), Some(u64::MAX));
        md.insert(READ_KEY_METADATA, MetadataValue::from_static("not hex"));
        assert_eq!(read_key(&md), None);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let k = ManagementKey {
            key: 0x1234_5678_9abc_def0,
            protect: 1,
        };
        let s = format!("{k:?}");
        assert!(
            !s.contains("123456789abcdef0") && !s.to_lowercase().contains("9abc"),
            "{s}"
        );
    }

    proptest! {
        /// The protect levels: key 0 opens everything; a non-zero key is needed by every write
        /// at every level and by reads at level 2 only; only level 0 reports the key.
        #[test]
        fn protect_levels(key in any::<u64>(), protect in 0u8..=MAX_PROTECT, presented in any::<u64>()) {
            let k = ManagementKey { key, protect };
            let right = key == 0 || presented == key;
            prop_assert_eq!(k.allows_write(presented), right);
            prop_assert!(k.allows_write(key));
            prop_assert_eq!(k.allows_read(Some(presented)), protect < 2 || right);
            prop_assert_eq!(k.allows_read(None), key == 0 || protect < 2);
            prop_assert_eq!(k.reported(), if protect == 0 { key } else { 0 });
        }
    }
}
