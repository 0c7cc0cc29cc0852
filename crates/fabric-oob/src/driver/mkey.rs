//! The management key (the agent protocol's M_Key): set on every agent at discovery and when an
//! agent that was lost answers again, sent on every write (request field `management_key`) and,
//! for protect level 2, on every read (request metadata `fabric-management-key`). The key never
//! appears in a message, a log line or a `Debug` output.

use fabric_southbound::DriverError;
use fabric_topology::fmt_guid;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

use super::agents::{describe_agent, lock, Inner};
use super::epoch::with_epoch;
use crate::proto;

/// Request metadata entry carrying the key of a read call (the agents' protect level 2).
pub const READ_KEY_METADATA: &str = "fabric-management-key";

/// Whether the configured key is on an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyState {
    /// Not (or no longer known to be) set: set before the agent's next write.
    Pending,
    /// Set by this driver.
    Installed,
    /// The agent refused the key: it is protected by another manager's key.
    Refused,
    /// The agent does not implement `SetManagementKey` (left unprotected, reported).
    Unsupported,
}

impl Inner {
    /// The key every write carries (0: none configured).
    pub(super) fn write_key(&self) -> u64 {
        self.cfg.management_key
    }

    /// A read request carrying the manager `epoch` and, when one is configured, the key in
    /// its metadata.
    pub(super) fn read_request<T>(&self, msg: T, epoch: u64) -> tonic::Request<T> {
        let mut r = with_epoch(msg, epoch);
        let key = self.cfg.management_key;
        if key != 0 {
            if let Ok(v) = MetadataValue::try_from(format!("{key:016x}")) {
                r.metadata_mut().insert(READ_KEY_METADATA, v);
            }
        }
        r
    }

    /// The error of a call an agent refused for the key; the agent is recorded as protected
    /// by someone else ([`OobDriver::management_key_refusals`](crate::OobDriver::management_key_refusals)).
    pub(super) fn key_refused(&self, idx: usize, op: &'static str, s: &Status) -> DriverError {
        let a = &self.agents[idx];
        *lock(&a.key_state) = KeyState::Refused;
        let whose = if self.cfg.management_key == 0 {
            "no management key is configured ([driver.oob] management_key)"
        } else {
            "the configured management key is not the switch's"
        };
        DriverError::Protocol {
            guid: a.guid(),
            message: format!(
                "{op}: switch {} refuses the call: {whose}; it is protected by another manager (agent: {})",
                a.guid().map_or_else(|| a.key.to_string(), fmt_guid),
                s.message()
            ),
        }
    }

    /// Sets the configured key (and protect level) on agent `idx` unless it is known to be
    /// there. A refusal names the switch; an agent without the call is reported once and left
    /// unprotected.
    pub(super) async fn ensure_key(&self, idx: usize) -> Result<(), DriverError> {
        let key = self.cfg.management_key;
        if key == 0
            || matches!(
                *lock(&self.agents[idx].key_state),
                KeyState::Installed | KeyState::Unsupported
            )
        {
            return Ok(());
        }
        let req = proto::SetManagementKeyRequest {
            key,
            protect: u32::from(self.cfg.management_key_protect),
            // A fresh agent has no key (any key is accepted); one that has ours takes it again.
            management_key: key,
        };
        let (supported, _) = self
            .call_write(idx, "set management key", |mut c, epoch| {
                let r = with_epoch(req, epoch);
                async move {
                    match c.set_management_key(r).await {
                        Ok(_) => Ok(tonic::Response::new(true)),
                        Err(s) if s.code() == Code::Unimplemented => Ok(tonic::Response::new(false)),
                        Err(s) => Err(s),
                    }
                }
            })
            .await?;
        let a = &self.agents[idx];
        *lock(&a.key_state) = if supported {
            KeyState::Installed
        } else {
            KeyState::Unsupported
        };
        Ok(())
    }

    /// Forgets that the key is on agent `idx` (the agent was lost and may have restarted).
    pub(super) fn key_lost(&self, idx: usize) {
        let mut st = lock(&self.agents[idx].key_state);
        if *st == KeyState::Installed {
            *st = KeyState::Pending;
        }
    }

    /// One message per switch whose agent refused the key or cannot take one.
    pub(super) fn key_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for a in &self.agents {
            let name = a.guid().map_or_else(|| describe_agent(a), fmt_guid);
            match *lock(&a.key_state) {
                KeyState::Refused => out.push(format!(
                    "switch {name}: the agent refuses the management key (protected by another manager); the \
                     switch cannot be programmed"
                )),
                KeyState::Unsupported => out.push(format!(
                    "switch {name}: the agent does not implement SetManagementKey; the switch is not protected"
                )),
                KeyState::Pending | KeyState::Installed => {}
            }
        }
        out
    }
}
