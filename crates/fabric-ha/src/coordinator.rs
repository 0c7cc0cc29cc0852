//! The coordinator: the standby loop and the election (see the crate documentation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions};
use tokio::sync::watch;

use crate::blocking::BlockingWorker;
use crate::client::{build_client, connect_options, epoch_of};
use crate::leader::Leadership;
use crate::shared::Shared;
use crate::{now_unix_ms, Fence, HaConfig, HaError, HaStatus, LeaderInfo, Role};

/// The HA coordinator of one manager (cheap to clone).
#[derive(Clone)]
pub struct Coordinator {
    pub(crate) shared: Arc<Shared>,
}

/// The outcome of one election attempt.
enum Attempt {
    Elected(Leadership),
    /// Someone leads; watch the key from `revision + 1`.
    Observed {
        leader: LeaderInfo,
        revision: i64,
    },
}

impl Coordinator {
    /// Builds the etcd client and checks that etcd answers (an error names the endpoints).
    /// The status starts as standby. `fence` is the one the driver checks (give it
    /// [`Fence::standby`]).
    pub async fn connect(cfg: HaConfig, fence: Arc<Fence>) -> Result<Coordinator, HaError> {
        cfg.validate()?;
        let opts = connect_options(&cfg)?;
        let client = build_client(&cfg, opts.clone()).await?;
        let blocking = BlockingWorker::start(&cfg, opts).await?;
        let status = HaStatus {
            node_name: cfg.node_name.clone(),
            lease_ttl_s: cfg.lease_ttl.as_secs(),
            etcd_reachable: true,
            message: "standby: not campaigning yet".into(),
            ..HaStatus::default()
        };
        let shared = Arc::new(Shared {
            endpoints: cfg.endpoints_text(),
            leader_key: cfg.leader_key(),
            cfg,
            client,
            fence,
            status: watch::Sender::new(status),
            blocking,
        });
        let mut kv = shared.client.kv_client();
        shared
            .call("get of the leader key", kv.get(shared.leader_key.clone(), None))
            .await?;
        tracing::info!(
            node = %shared.cfg.node_name,
            endpoints = %shared.endpoints,
            "HA: connected to etcd (leader key {})", shared.leader_key
        );
        Ok(Coordinator { shared })
    }

    /// The HA status (updated on every transition; `lease_remaining_ms` every 200 ms while
    /// leading).
    pub fn status(&self) -> watch::Receiver<HaStatus> {
        self.shared.status.subscribe()
    }

    /// The configuration.
    pub fn config(&self) -> &HaConfig {
        &self.shared.cfg
    }

    /// Standby (observing the leader key, status updated) until this node is elected.
    /// An unreachable etcd is retried with backoff (status: `etcd_reachable = false`); the
    /// only errors are etcd's refusals that retrying cannot fix (permissions, ...).
    /// One campaign at a time per coordinator.
    pub async fn campaign(&self) -> Result<Leadership, HaError> {
        let min = Duration::from_millis(100);
        let max = (self.shared.cfg.lease_ttl / 4).max(min);
        let mut backoff = min;
        loop {
            let step = match self.attempt().await {
                Ok(Attempt::Elected(l)) => return Ok(l),
                Ok(Attempt::Observed { leader, revision }) => {
                    backoff = min;
                    self.wait_until_gone(leader, revision).await
                }
                Err(e) => Err(e),
            };
            match step {
                Ok(()) => {}
                Err(e) if e.is_transient() => {
                    self.shared.unreachable(&e, backoff);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(max);
                }
                Err(e) => {
                    tracing::error!(node = %self.shared.cfg.node_name, "HA: campaign failed: {e}");
                    self.shared.update(|s| {
                        s.role = Role::Standby;
                        s.message = format!("standby: campaign failed: {e}");
                    });
                    return Err(e);
                }
            }
        }
    }

    /// Reads the leader key; when free, grants a lease and creates the key on it.
    async fn attempt(&self) -> Result<Attempt, HaError> {
        let sh = &self.shared;
        let mut kv = sh.client.kv_client();
        let got = sh
            .call("get of the leader key", kv.get(sh.leader_key.clone(), None))
            .await?;
        if let Some(k) = got.kvs().first() {
            let leader = LeaderInfo::from_kv(k.value(), epoch_of(k.create_revision()));
            let revision = got.header().map_or(0, etcd_client::ResponseHeader::revision);
            return Ok(Attempt::Observed { leader, revision });
        }
        let mut lease = sh.client.lease_client();
        let ttl = i64::try_from(sh.cfg.lease_ttl.as_secs()).unwrap_or(i64::MAX);
        let sent = Instant::now();
        let granted = sh.call("lease grant", lease.grant(ttl, None)).await?;
        let lease_id = granted.id();
        let granted_ttl = Duration::from_secs(u64::try_from(granted.ttl()).unwrap_or(0));
        let mut me = LeaderInfo {
            node_name: sh.cfg.node_name.clone(),
            advertise: sh.cfg.advertise.clone(),
            epoch: 0,
            since_unix_ms: now_unix_ms(),
        };
        let txn = Txn::new()
            .when([Compare::create_revision(sh.leader_key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                sh.leader_key.clone(),
                me.to_json(),
                Some(PutOptions::new().with_lease(lease_id)),
            )])
            .or_else([TxnOp::get(sh.leader_key.clone(), None)]);
        let resp = match sh.call("election txn on the leader key", kv.txn(txn)).await {
            Ok(r) => r,
            Err(e) => {
                // Outcome unknown: give the lease back (if the key was created on it, it goes).
                self.revoke_in_background(lease_id);
                return Err(e);
            }
        };
        let revision = resp.header().map_or(0, etcd_client::ResponseHeader::revision);
        if !resp.succeeded() {
            self.revoke_in_background(lease_id);
            for r in resp.op_responses() {
                if let TxnOpResponse::Get(g) = r {
                    if let Some(k) = g.kvs().first() {
                        let leader = LeaderInfo::from_kv(k.value(), epoch_of(k.create_revision()));
                        return Ok(Attempt::Observed { leader, revision });
                    }
                }
            }
            // Created and deleted in between: try again at once.
            return Ok(Attempt::Observed {
                leader: LeaderInfo {
                    node_name: "<gone>".into(),
                    advertise: String::new(),
                    epoch: 0,
                    since_unix_ms: 0,
                },
                revision: 0,
            });
        }
        me.epoch = epoch_of(revision);
        sh.fence.grant(me.epoch, sent + granted_ttl);
        Ok(Attempt::Elected(Leadership::start(
            Arc::clone(sh),
            me,
            lease_id,
            granted_ttl,
            sent,
        )))
    }

    fn revoke_in_background(&self, lease_id: i64) {
        let sh = Arc::clone(&self.shared);
        tokio::spawn(async move {
            let mut lease = sh.client.lease_client();
            if let Err(e) = sh.call("lease revoke", lease.revoke(lease_id)).await {
                tracing::debug!("HA: revoking unused lease {lease_id:x}: {e}");
            }
        });
    }

    /// Standby: watches the leader key from `revision + 1` until it is deleted.
    async fn wait_until_gone(&self, leader: LeaderInfo, revision: i64) -> Result<(), HaError> {
        let sh = &self.shared;
        if revision == 0 {
            return Ok(());
        }
        sh.saw_leader(
            Some(leader.clone()),
            format!(
                "standby: leader is {} ({}) with epoch {}",
                leader.node_name, leader.advertise, leader.epoch
            ),
        );
        let mut w = sh.client.watch_client();
        let opts = WatchOptions::new().with_start_revision(revision + 1);
        let mut stream = sh
            .call("watch of the leader key", w.watch(sh.leader_key.clone(), Some(opts)))
            .await?;
        loop {
            let msg = stream
                .message()
                .await
                .map_err(|e| sh.etcd_error("watch of the leader key", &e))?;
            let Some(msg) = msg else {
                return Err(HaError::Unreachable {
                    endpoints: sh.endpoints.clone(),
                    reason: "watch of the leader key: stream closed".into(),
                });
            };
            if msg.canceled() {
                if msg.compact_revision() > 0 {
                    return Ok(()); // read the key again
                }
                return Err(HaError::Unreachable {
                    endpoints: sh.endpoints.clone(),
                    reason: format!("watch of the leader key canceled: {}", msg.cancel_reason()),
                });
            }
            for ev in msg.events() {
                match ev.event_type() {
                    EventType::Delete => {
                        tracing::info!(
                            node = %sh.cfg.node_name,
                            "HA: the leader key of {} (epoch {}) was deleted: campaigning",
                            leader.node_name, leader.epoch
                        );
                        return Ok(());
                    }
                    EventType::Put => {
                        if let Some(k) = ev.kv() {
                            let l = LeaderInfo::from_kv(k.value(), epoch_of(k.create_revision()));
                            sh.saw_leader(
                                Some(l.clone()),
                                format!(
                                    "standby: leader is {} ({}) with epoch {}",
                                    l.node_name, l.advertise, l.epoch
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
}
