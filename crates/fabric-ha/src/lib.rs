//! High availability of the fabric manager on etcd (`[ha]`): two (or more) managers, one
//! leader, fenced.
//!
//! * [`Coordinator::connect`] builds the etcd client (endpoints, optional TLS, timeouts);
//! * [`Coordinator::campaign`] stands by — watching the leader key `<prefix>/leader`, the
//!   status naming the current leader — until this node creates the key on its own lease
//!   (one etcd transaction: "create if absent"). The **epoch** is the key's `create_revision`:
//!   it grows with every election. The elected node [`grant`](Fence::grant)s its [`Fence`];
//! * the [`Leadership`] keeps the lease alive (every TTL/3), [`renew`](Fence::renew)s the fence
//!   at every answered keep-alive, and ends — [`revoke`](Fence::revoke) of the fence,
//!   [`Leadership::lost`] resolves — when the lease is gone at the server, the leader key was
//!   deleted or recreated by another node, or an agent reported a newer epoch. When etcd is
//!   unreachable or without quorum, the keep-alives fail: the fence closes by itself at its
//!   deadline (writes refused, tables kept) and reopens, with the same epoch, when a renewal
//!   gets through again;
//! * [`SharedState`] stores the leader's state under `<prefix>/state/<name>`, every write one
//!   transaction guarded by the leader key's `create_revision` (== our epoch) and the state
//!   key's `mod_revision` (== the one last seen): a deposed leader or a concurrent writer is
//!   refused.
//!
//! Every transition is logged with `tracing`; [`HaStatus`] is what `fabricctl status` shows.

use std::path::PathBuf;
use std::time::Duration;

mod blocking;
mod client;
mod coordinator;
mod leader;
mod shared;
mod state;

pub use coordinator::Coordinator;
pub use fabric_southbound::fence::{Fence, FenceState};
pub use leader::{Leadership, LossReason};
pub use state::SharedState;

/// The smallest lease TTL accepted (etcd's own minimum lease TTL is of this order; a shorter
/// one would be raised by the server anyway, and keep-alives every TTL/3 need some slack).
pub const MIN_LEASE_TTL: Duration = Duration::from_secs(2);

/// The `[ha]` configuration of one manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaConfig {
    /// etcd client URLs (`http://host:2379`, `https://host:2379`).
    pub endpoints: Vec<String>,
    /// Key prefix of this fabric in etcd (`/fabricd/<fabric name>`); the leader key is
    /// `<prefix>/leader`, the shared state `<prefix>/state/<name>`.
    pub key_prefix: String,
    /// Lease TTL: a dead leader is replaced within about this long (at least 2 s).
    pub lease_ttl: Duration,
    /// This manager's name (shown as the leader's identity).
    pub node_name: String,
    /// Where this manager's API is reachable (shown to the standby and to `fabricctl`).
    pub advertise: String,
    /// TLS to etcd (with `https://` endpoints).
    pub tls: Option<HaTls>,
    /// Bound of one etcd request (and of the connection attempt).
    pub request_timeout: Duration,
}

/// TLS files of the etcd client (PEM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaTls {
    /// The CA certificate(s) that sign the etcd servers' certificates.
    pub ca: PathBuf,
    /// Client certificate (etcd `--client-cert-auth`), with `key`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key.
    pub key: Option<PathBuf>,
}

impl HaConfig {
    /// Checks the values (called by [`Coordinator::connect`]); the error names the field.
    pub fn validate(&self) -> Result<(), HaError> {
        let bad = |field: &'static str, reason: String| Err(HaError::Config { field, reason });
        if self.endpoints.is_empty() {
            return bad("etcd_endpoints", "at least one etcd endpoint is needed".into());
        }
        for e in &self.endpoints {
            if e.trim().is_empty() || e.contains(char::is_whitespace) {
                return bad("etcd_endpoints", format!("invalid endpoint {e:?}"));
            }
        }
        if self.key_prefix.is_empty() || !self.key_prefix.starts_with('/') {
            return bad(
                "key_prefix",
                format!("{:?}: must start with '/' (e.g. \"/fabricd/fabric0\")", self.key_prefix),
            );
        }
        if self.key_prefix.len() > 1 && self.key_prefix.ends_with('/') {
            return bad("key_prefix", format!("{:?}: must not end with '/'", self.key_prefix));
        }
        if self.lease_ttl < MIN_LEASE_TTL {
            return bad(
                "lease_ttl",
                format!(
                    "{:?} is below etcd's minimum lease TTL: use at least {} s",
                    self.lease_ttl,
                    MIN_LEASE_TTL.as_secs()
                ),
            );
        }
        if self.lease_ttl.subsec_nanos() != 0 {
            return bad(
                "lease_ttl",
                format!("{:?}: etcd leases have whole seconds", self.lease_ttl),
            );
        }
        if self.node_name.trim().is_empty() {
            return bad("node_name", "must not be empty".into());
        }
        if self.request_timeout.is_zero() {
            return bad("request_timeout", "must be positive".into());
        }
        if self.request_timeout >= self.lease_ttl {
            return bad(
                "request_timeout",
                format!(
                    "{:?} must be shorter than lease_ttl ({:?})",
                    self.request_timeout, self.lease_ttl
                ),
            );
        }
        if let Some(tls) = &self.tls {
            if tls.cert.is_some() != tls.key.is_some() {
                return bad("tls", "client certificate and key go together".into());
            }
        }
        Ok(())
    }

    /// `<prefix>/leader`.
    pub fn leader_key(&self) -> String {
        format!("{}/leader", self.key_prefix.trim_end_matches('/'))
    }

    /// `<prefix>/state/`.
    pub fn state_prefix(&self) -> String {
        format!("{}/state/", self.key_prefix.trim_end_matches('/'))
    }

    pub(crate) fn endpoints_text(&self) -> String {
        self.endpoints.join(", ")
    }
}

/// Role of this manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Role {
    /// Not the leader: watching the leader key.
    #[default]
    Standby,
    /// Elected: holds the lease and the leader key.
    Leader,
    /// Leadership lost: the fence is revoked, the manager stops writing.
    SteppingDown,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Standby => "standby",
            Role::Leader => "leader",
            Role::SteppingDown => "stepping down",
        })
    }
}

/// Who leads (the value of the leader key, plus its epoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderInfo {
    /// The leader's `node_name`.
    pub node_name: String,
    /// The leader's `advertise` address.
    pub advertise: String,
    /// Its epoch (the leader key's `create_revision`).
    pub epoch: u64,
    /// When it was elected (Unix milliseconds, its clock).
    pub since_unix_ms: i64,
}

/// What is stored in the leader key (JSON); the epoch is the key's create revision.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct LeaderValue {
    pub(crate) node_name: String,
    pub(crate) advertise: String,
    pub(crate) since_unix_ms: i64,
}

impl LeaderInfo {
    pub(crate) fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&LeaderValue {
            node_name: self.node_name.clone(),
            advertise: self.advertise.clone(),
            since_unix_ms: self.since_unix_ms,
        })
        .unwrap_or_default()
    }

    /// Parses a leader key's value; an unreadable value still names the epoch.
    pub(crate) fn from_kv(value: &[u8], epoch: u64) -> LeaderInfo {
        match serde_json::from_slice::<LeaderValue>(value) {
            Ok(v) => LeaderInfo {
                node_name: v.node_name,
                advertise: v.advertise,
                epoch,
                since_unix_ms: v.since_unix_ms,
            },
            Err(_) => LeaderInfo {
                node_name: format!("<unreadable leader value: {}>", String::from_utf8_lossy(value)),
                advertise: String::new(),
                epoch,
                since_unix_ms: 0,
            },
        }
    }
}

/// The HA state of this manager, for status, metrics and logs.
#[derive(Clone, Debug, Default)]
pub struct HaStatus {
    /// Standby, leader or stepping down.
    pub role: Role,
    /// This manager's name.
    pub node_name: String,
    /// The current leader as last seen (this node when leading), `None` when unknown/none.
    pub leader: Option<LeaderInfo>,
    /// The epoch this node leads with, or the leader's epoch as seen by a standby (0: none).
    pub epoch: u64,
    /// Our lease (0 when not leading).
    pub lease_id: i64,
    /// The TTL the server granted (configured TTL before).
    pub lease_ttl_s: u64,
    /// Until the fence's deadline (0 when not leading or fenced).
    pub lease_remaining_ms: u64,
    /// Whether the last etcd request succeeded.
    pub etcd_reachable: bool,
    /// Leader whose fence refuses writes (lease not renewed in time, or lost).
    pub fenced: bool,
    /// Leader changes this node has seen.
    pub leader_changes: u64,
    /// One human line (`fabricctl status`, logs).
    pub message: String,
}

/// Errors of the HA coordinator and of the shared state.
#[derive(Debug, thiserror::Error)]
pub enum HaError {
    /// A bad `[ha]` value.
    #[error("[ha] {field}: {reason}")]
    Config {
        /// The configuration key.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A TLS file cannot be read or parsed.
    #[error("[ha] tls: cannot use {what} {}: {reason}", path.display())]
    TlsFile {
        /// Which file (CA certificate, client certificate, client key).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No etcd endpoint answered (connection refused, timeout, no quorum).
    #[error("etcd unreachable at {endpoints}: {reason}")]
    Unreachable {
        /// The configured endpoints.
        endpoints: String,
        /// The last error.
        reason: String,
    },
    /// etcd answered with an error.
    #[error("etcd {op} at {endpoints} failed: {reason}")]
    Etcd {
        /// The operation (`lease grant`, `txn on <key>`, ...).
        op: String,
        /// The configured endpoints.
        endpoints: String,
        /// The error.
        reason: String,
    },
    /// A shared-state write by a node that is no longer the leader.
    #[error("not the leader any more: {key} refused (our epoch {epoch}, {current})")]
    NotLeader {
        /// The state key.
        key: String,
        /// The epoch we led with.
        epoch: u64,
        /// Who leads now ("no leader", "leader n2 with epoch 42").
        current: String,
    },
    /// A shared-state key was changed by someone else since we last read or wrote it.
    #[error(
        "{key} was changed by someone else at revision {revision} (expected revision {expected}; load the state again)"
    )]
    Conflict {
        /// The state key.
        key: String,
        /// Its current mod revision (0: deleted).
        revision: i64,
        /// The revision we last saw (0: absent).
        expected: i64,
    },
    /// The coordinator's dedicated thread is gone or did not answer in time.
    #[error("fabric-ha blocking call: {0}")]
    Blocking(String),
}

impl HaError {
    /// Whether retrying later may help (etcd unreachable or without quorum, a timeout).
    pub fn is_transient(&self) -> bool {
        matches!(self, HaError::Unreachable { .. } | HaError::Blocking(_))
    }
}

pub(crate) fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> HaConfig {
        HaConfig {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            key_prefix: "/fabricd/f0".into(),
            lease_ttl: Duration::from_secs(5),
            node_name: "n1".into(),
            advertise: "n1:7070".into(),
            tls: None,
            request_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn validation_names_the_field() {
        assert!(cfg().validate().is_ok());
        let mut c = cfg();
        c.lease_ttl = Duration::from_secs(1);
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("lease_ttl") && e.contains("minimum"), "{e}");
        let mut c = cfg();
        c.endpoints.clear();
        assert!(c.validate().unwrap_err().to_string().contains("etcd_endpoints"));
        let mut c = cfg();
        c.key_prefix = "fabricd".into();
        assert!(c.validate().unwrap_err().to_string().contains("key_prefix"));
        let mut c = cfg();
        c.request_timeout = Duration::from_secs(5);
        assert!(c.validate().unwrap_err().to_string().contains("request_timeout"));
        assert_eq!(cfg().leader_key(), "/fabricd/f0/leader");
        assert_eq!(cfg().state_prefix(), "/fabricd/f0/state/");
    }

    #[test]
    fn leader_value_round_trip() {
        let l = LeaderInfo {
            node_name: "n1".into(),
            advertise: "a:1".into(),
            epoch: 9,
            since_unix_ms: 5,
        };
        assert_eq!(LeaderInfo::from_kv(&l.to_json(), 9), l);
        assert!(LeaderInfo::from_kv(b"junk", 3).node_name.contains("unreadable"));
    }
}
