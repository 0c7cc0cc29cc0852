//! High availability (`[ha]`, oob driver): what the daemon builds on `fabric-ha`.
//!
//! * [`ha_config`]: `[ha]` as the coordinator's configuration;
//! * [`HaView`]: the coordinator's status and the write fence, read by Status (gRPC), the
//!   Prometheus metrics, `/ready` and the standby's refusals;
//! * [`EtcdMirror`]: the [`StateMirror`] that records the shared state files in etcd
//!   (`SharedState::put_blocking`, guarded by the leader's epoch) before the local file;
//! * [`adopt_shared_state`]: what a newly elected leader does with the state directory: the
//!   shared state from etcd becomes the local cache (or, when etcd holds none yet, the local
//!   files are uploaded, so that turning HA on keeps the LIDs).

use std::sync::Arc;

use fabric_ha::{Fence, FenceState, HaStatus, Role, SharedState};
use fabric_proto::v1 as pb;
use tokio::sync::watch;

use crate::config::HaConfig;
use crate::persist::{PersistError, StateDir, StateMirror};
use crate::telemetry::HaGauges;

/// The coordinator's configuration from `[ha]` (validated by the configuration).
pub fn ha_config(c: &HaConfig) -> fabric_ha::HaConfig {
    fabric_ha::HaConfig {
        endpoints: c.etcd_endpoints.clone(),
        key_prefix: c.key_prefix.clone(),
        lease_ttl: c.lease_ttl(),
        node_name: c.effective_node_name(),
        advertise: c.advertise.clone(),
        tls: c.tls_ca.as_ref().map(|ca| fabric_ha::HaTls {
            ca: ca.clone(),
            cert: c.tls_cert.clone(),
            key: c.tls_key.clone(),
        }),
        request_timeout: c.request_timeout(),
    }
}

/// The HA state as the daemon shows it: the coordinator's status and the fence.
#[derive(Clone, Debug)]
pub struct HaView {
    status: watch::Receiver<HaStatus>,
    fence: Arc<Fence>,
}

impl HaView {
    pub fn new(status: watch::Receiver<HaStatus>, fence: Arc<Fence>) -> HaView {
        HaView { status, fence }
    }

    /// The coordinator's current status.
    pub fn status(&self) -> HaStatus {
        self.status.borrow().clone()
    }

    /// The write fence.
    pub fn fence(&self) -> &Arc<Fence> {
        &self.fence
    }

    /// Whether switch writes are refused now (a standby, or a leader fenced).
    pub fn fenced(&self) -> bool {
        !matches!(self.fence.state(), FenceState::Open | FenceState::Leading { .. })
    }

    /// The leader as known: (node, advertise, epoch); the node is empty when none is known.
    fn leader(s: &HaStatus) -> (String, String, u64) {
        match &s.leader {
            Some(l) => (l.node_name.clone(), l.advertise.clone(), l.epoch),
            None => (String::new(), String::new(), s.epoch),
        }
    }

    /// What a standby answers to the calls it cannot serve:
    /// `standby: the leader is <node> (epoch N)`.
    pub fn standby_message(&self) -> String {
        let s = self.status();
        match Self::leader(&s) {
            (node, _, epoch) if !node.is_empty() => format!("standby: the leader is {node} (epoch {epoch})"),
            _ if !s.etcd_reachable => format!("standby: no leader known (etcd unreachable): {}", s.message),
            _ => "standby: no leader known (an election is running)".into(),
        }
    }

    /// Why this manager may not write now, as `/ready` and Status say it; `None` while it
    /// leads with its fence open.
    pub fn not_ready(&self) -> Option<String> {
        let state = self.fence.state();
        if state != FenceState::Open && self.status.borrow().role == Role::Standby {
            return Some(self.standby_message());
        }
        match state {
            FenceState::Open | FenceState::Leading { .. } => None,
            FenceState::Standby => Some(self.standby_message()),
            FenceState::Expired { epoch } => Some(format!(
                "fenced: the lease of epoch {epoch} was not renewed in time (etcd unreachable or without quorum): \
                 switch writes refused, the tables in force are kept; writes resume when a renewal gets through"
            )),
            FenceState::Lost { epoch, by: 0 } => {
                Some(format!("fenced: leadership of epoch {epoch} lost: stepping down"))
            }
            FenceState::Lost { epoch, by } => Some(format!(
                "fenced: leadership of epoch {epoch} lost: a switch follows the newer epoch {by}: stepping down"
            )),
        }
    }

    /// Status.ha.
    pub fn pb(&self) -> pb::HaStatus {
        let s = self.status();
        let (leader_node, leader_advertise, epoch) = Self::leader(&s);
        let role = match s.role {
            Role::Standby => pb::HaRole::Standby,
            Role::Leader => pb::HaRole::Leader,
            Role::SteppingDown => pb::HaRole::SteppingDown,
        };
        let fenced = self.fenced();
        let message = match (fenced, self.not_ready()) {
            (true, Some(why)) if s.role == Role::Leader => why,
            _ => s.message.clone(),
        };
        pb::HaStatus {
            role: role as i32,
            node_name: s.node_name.clone(),
            leader_node,
            leader_advertise,
            epoch,
            lease_id: s.lease_id,
            lease_ttl_s: s.lease_ttl_s,
            lease_remaining_ms: s.lease_remaining_ms,
            etcd_reachable: s.etcd_reachable,
            fenced,
            fenced_writes: self.fence.refused(),
            leader_changes: s.leader_changes,
            message,
            leader_since_unix_ms: s.leader.as_ref().map_or(0, |l| l.since_unix_ms),
        }
    }

    /// The values of the `fabricd_ha_*` metrics.
    pub fn gauges(&self) -> HaGauges {
        let s = self.status();
        HaGauges {
            leader: s.role == Role::Leader,
            epoch: Self::leader(&s).2,
            lease_remaining_s: s.lease_remaining_ms as f64 / 1000.0,
            fenced: self.fenced(),
            etcd_reachable: s.etcd_reachable,
            fenced_writes: self.fence.refused(),
            leader_changes: s.leader_changes,
            not_ready: self.not_ready(),
        }
    }

    /// The one-line state for logs and systemd's STATUS.
    pub fn summary(&self) -> String {
        let s = self.status();
        let (node, _, epoch) = Self::leader(&s);
        format!(
            "HA {} on {} (leader {}, epoch {epoch}{})",
            s.role,
            s.node_name,
            if node.is_empty() { "unknown" } else { node.as_str() },
            if self.fenced() { ", fenced" } else { "" }
        )
    }
}

/// The shared state files recorded in etcd before the local file (see [`StateMirror`]).
#[derive(Clone)]
pub struct EtcdMirror {
    state: SharedState,
}

impl EtcdMirror {
    pub fn new(state: SharedState) -> EtcdMirror {
        EtcdMirror { state }
    }
}

impl std::fmt::Debug for EtcdMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdMirror").finish_non_exhaustive()
    }
}

impl StateMirror for EtcdMirror {
    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.state.put_blocking(name, bytes).map_err(|e| e.to_string())
    }

    fn delete(&self, name: &str) -> Result<(), String> {
        self.state.delete_blocking(name).map_err(|e| e.to_string())
    }
}

/// Errors of [`adopt_shared_state`].
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error("cannot load the shared state from etcd: {0}")]
    Load(fabric_ha::HaError),
    #[error("cannot upload {name} of the state directory to etcd: {source}")]
    Upload { name: String, source: fabric_ha::HaError },
    #[error("state directory: {0}")]
    Local(#[from] PersistError),
}

/// What [`adopt_shared_state`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Adopted {
    /// etcd's shared state was written into the state directory (these files).
    FromEtcd(Vec<String>),
    /// etcd held none: the state directory's shared files were uploaded (these).
    Uploaded(Vec<String>),
}

/// A newly elected leader's state: etcd's shared files replace the local ones (atomically
/// each; local shared files etcd lacks are removed); when etcd holds no shared state yet, the
/// local shared files are uploaded first (turning HA on keeps the LIDs). The local `m-key`
/// and other private files are never touched.
pub async fn adopt_shared_state(state: &SharedState, dir: &StateDir) -> Result<Adopted, AdoptError> {
    let loaded = state.load().await.map_err(AdoptError::Load)?;
    let loaded: std::collections::BTreeMap<String, Vec<u8>> = loaded
        .into_iter()
        .filter(|(name, _)| {
            let shared = crate::persist::is_shared_file(name);
            if !shared {
                tracing::warn!(key = %name, "HA: ignoring a shared-state key that is not a state file of this fabricd");
            }
            shared
        })
        .collect();
    if loaded.is_empty() {
        let local = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || dir.read_shared_files())
                .await
                .map_err(|e| {
                    AdoptError::Local(PersistError::Io {
                        path: std::path::PathBuf::new(),
                        source: std::io::Error::other(e.to_string()),
                    })
                })??
        };
        for (name, bytes) in &local {
            state.put(name, bytes).await.map_err(|source| AdoptError::Upload {
                name: name.clone(),
                source,
            })?;
        }
        return Ok(Adopted::Uploaded(local.into_keys().collect()));
    }
    let names = loaded.keys().cloned().collect();
    let dir = dir.clone();
    tokio::task::spawn_blocking(move || dir.replace_shared_files(&loaded))
        .await
        .map_err(|e| {
            AdoptError::Local(PersistError::Io {
                path: std::path::PathBuf::new(),
                source: std::io::Error::other(e.to_string()),
            })
        })??;
    Ok(Adopted::FromEtcd(names))
}
