//! Write fencing (high availability): the manager epoch every request carries, the local
//! [`Fence`] check before every write, and an agent's refusal of a stale epoch.
//!
//! With a fence set ([`OobDriver::set_fence`](crate::OobDriver::set_fence)), every write call
//! (`SetAddresses`, `SetSlToVl`, `SetManagementKey`, `WriteLftBlocks`, `WriteMftBlocks`,
//! `SetPortState`, `SetPower`) asks [`Fence::check`] right before each attempt is sent: a
//! refusal is [`DriverError::Fenced`] and nothing reaches the agent; otherwise the epoch goes in
//! the request metadata [`MANAGER_EPOCH_METADATA`]. Every other request (discovery, reads,
//! `WatchPorts`, counters) carries [`Fence::epoch`]. An agent that has seen a newer epoch
//! refuses the write with FAILED_PRECONDITION and the metadata entry: the driver tells the
//! fence ([`Fence::superseded`]) and answers [`DriverError::Fenced`], never retried, and the
//! agent is not counted as lost. Without a fence the epoch is 0 and no metadata is sent.

use std::sync::{Arc, PoisonError};

use fabric_southbound::{DriverError, Fence, FenceState};
use fabric_topology::fmt_guid;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

use super::agents::Inner;

/// Request metadata entry carrying the manager epoch (decimal), and the entry of an agent's
/// refusal carrying the epoch the switch follows.
pub const MANAGER_EPOCH_METADATA: &str = "fabric-manager-epoch";

/// `msg` as a request carrying `epoch` in its metadata (nothing for 0: no high availability).
pub(super) fn with_epoch<T>(msg: T, epoch: u64) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if epoch != 0 {
        r.metadata_mut()
            .insert(MANAGER_EPOCH_METADATA, MetadataValue::from(epoch));
    }
    r
}

/// The epoch an agent's refusal reports: `Some` for FAILED_PRECONDITION carrying a decimal
/// [`MANAGER_EPOCH_METADATA`].
pub(super) fn refused_epoch(s: &Status) -> Option<u64> {
    if s.code() != Code::FailedPrecondition {
        return None;
    }
    s.metadata()
        .get(MANAGER_EPOCH_METADATA)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl Inner {
    /// The fence set on the driver, if any.
    pub(super) fn fence(&self) -> Option<Arc<Fence>> {
        self.fence.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The epoch a read carries (0 without a fence).
    pub(super) fn read_epoch(&self) -> u64 {
        self.fence().map_or(0, |f| f.epoch())
    }

    /// Whether the fence lets this manager write now (no fence, or leading), without counting
    /// a refusal: what the driver writes on its own initiative (the management key at
    /// discovery and when an agent comes back) waits for the next write otherwise.
    pub(super) fn may_write(&self) -> bool {
        self.fence()
            .is_none_or(|f| matches!(f.state(), FenceState::Open | FenceState::Leading { .. }))
    }

    /// Before a write attempt of `op`: the epoch it carries, or [`DriverError::Fenced`] (then
    /// it must not be sent).
    pub(super) fn write_epoch(&self, op: &'static str) -> Result<u64, DriverError> {
        match self.fence() {
            Some(f) => f.check(op),
            None => Ok(0),
        }
    }

    /// Agent `idx` refused `op` because its switch follows the newer epoch `newer`: the fence
    /// is closed and the error says so.
    pub(super) fn epoch_refused(&self, idx: usize, op: &'static str, newer: u64, s: &Status) -> DriverError {
        let a = &self.agents[idx];
        let switch = a.guid().map_or_else(|| a.key.to_string(), fmt_guid);
        let reason = match self.fence() {
            Some(f) => {
                let ours = f.epoch();
                f.superseded(newer);
                format!(
                    "switch {switch} follows the newer manager epoch {newer} (this manager's is {ours}): another \
                     manager has taken over (agent: {})",
                    s.message()
                )
            }
            None => format!(
                "switch {switch} follows manager epoch {newer}: it is managed by a high-availability manager and \
                 this one has no [ha] (agent: {})",
                s.message()
            ),
        };
        DriverError::Fenced { op, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataMap;

    #[test]
    fn epoch_metadata_only_with_an_epoch() {
        assert!(with_epoch((), 0).metadata().get(MANAGER_EPOCH_METADATA).is_none());
        let r = with_epoch((), 12345678901234);
        assert_eq!(
            r.metadata().get(MANAGER_EPOCH_METADATA).unwrap().to_str().unwrap(),
            "12345678901234"
        );
    }

    #[test]
    fn only_a_failed_precondition_with_the_entry_is_a_refusal() {
        let mut md = MetadataMap::new();
        md.insert(MANAGER_EPOCH_METADATA, MetadataValue::from(7u64));
        let s = Status::with_metadata(Code::FailedPrecondition, "stale", md.clone());
        assert_eq!(refused_epoch(&s), Some(7));
        assert_eq!(refused_epoch(&Status::with_metadata(Code::Internal, "x", md)), None);
        assert_eq!(refused_epoch(&Status::failed_precondition("no entry")), None);
    }
}
