//! What the coordinator, its leadership tasks and the shared state share.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::Client;
use tokio::sync::watch;
use tokio::time::timeout;

use crate::blocking::BlockingWorker;
use crate::client::classify;
use crate::{Fence, HaConfig, HaError, HaStatus, LeaderInfo, Role};

/// What the coordinator, its leadership tasks and the shared state share.
pub(crate) struct Shared {
    pub(crate) cfg: HaConfig,
    pub(crate) client: Client,
    pub(crate) fence: Arc<Fence>,
    pub(crate) status: watch::Sender<HaStatus>,
    pub(crate) endpoints: String,
    pub(crate) leader_key: String,
    pub(crate) blocking: BlockingWorker,
}

impl Shared {
    /// `Unreachable` for transport errors and timeouts, `Etcd` for the server's refusals.
    pub(crate) fn etcd_error(&self, op: &str, e: &etcd_client::Error) -> HaError {
        classify(&self.endpoints, op, e)
    }

    pub(crate) fn timeout_error(&self, op: &str) -> HaError {
        HaError::Unreachable {
            endpoints: self.endpoints.clone(),
            reason: format!("{op}: no answer within {:?}", self.cfg.request_timeout),
        }
    }

    /// One etcd request bounded by `request_timeout`.
    pub(crate) async fn call<T, F>(&self, op: &str, f: F) -> Result<T, HaError>
    where
        F: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        match timeout(self.cfg.request_timeout, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.etcd_error(op, &e)),
            Err(_) => Err(self.timeout_error(op)),
        }
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut HaStatus)) {
        self.status.send_modify(f);
    }

    /// Records the leader seen (`leader_changes` counts changes of epoch).
    pub(crate) fn saw_leader(&self, info: Option<LeaderInfo>, message: String) {
        self.update(|s| {
            let epoch = info.as_ref().map_or(0, |l| l.epoch);
            if epoch != 0 && epoch != s.epoch {
                s.leader_changes += 1;
            }
            if s.message != message {
                tracing::info!(node = %s.node_name, "HA: {message}");
            }
            s.role = Role::Standby;
            s.epoch = epoch;
            s.leader = info;
            s.lease_id = 0;
            s.lease_remaining_ms = 0;
            s.etcd_reachable = true;
            s.fenced = false;
            s.message = message;
        });
    }

    pub(crate) fn unreachable(&self, e: &HaError, retry_in: Duration) {
        self.update(|s| {
            let message = format!("standby: {e}; retrying in {retry_in:?}");
            if s.etcd_reachable {
                tracing::warn!(node = %s.node_name, "HA: {message}");
            }
            s.role = Role::Standby;
            s.etcd_reachable = false;
            s.message = message;
        });
    }
}
