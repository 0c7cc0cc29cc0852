//! The etcd client, the standby loop and the election (see the crate documentation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, EventType, Identity, PutOptions, TlsOptions, Txn, TxnOp,
    TxnOpResponse, WatchOptions,
};
use tokio::sync::watch;
use tokio::time::timeout;

use crate::leader::Leadership;
use crate::state::BlockingWorker;
use crate::{now_unix_ms, Fence, HaConfig, HaError, HaStatus, HaTls, LeaderInfo, Role};

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
    fn saw_leader(&self, info: Option<LeaderInfo>, message: String) {
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

    fn unreachable(&self, e: &HaError, retry_in: Duration) {
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

pub(crate) fn classify(endpoints: &str, op: &str, e: &etcd_client::Error) -> HaError {
    use etcd_client::Error as E;
    let transient = match e {
        E::TransportError(_) | E::IoError(_) => true,
        E::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::Unknown
                | tonic::Code::Cancelled
                | tonic::Code::Aborted
                | tonic::Code::ResourceExhausted
                | tonic::Code::Internal
        ),
        _ => false,
    };
    if transient {
        HaError::Unreachable {
            endpoints: endpoints.to_string(),
            reason: format!("{op}: {e}"),
        }
    } else {
        HaError::Etcd {
            op: op.to_string(),
            endpoints: endpoints.to_string(),
            reason: e.to_string(),
        }
    }
}

fn read_pem(what: &'static str, path: &std::path::Path) -> Result<Vec<u8>, HaError> {
    let err = |reason: String| HaError::TlsFile {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    if !String::from_utf8_lossy(&bytes).contains("-----BEGIN ") {
        return Err(err("not a PEM file (no \"-----BEGIN\" line)".into()));
    }
    Ok(bytes)
}

fn tls_options(tls: &HaTls) -> Result<TlsOptions, HaError> {
    let ca = read_pem("CA certificate", &tls.ca)?;
    let mut o = TlsOptions::new().ca_certificate(Certificate::from_pem(ca));
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        let c = read_pem("client certificate", cert)?;
        let k = read_pem("client key", key)?;
        o = o.identity(Identity::from_pem(c, k));
    }
    Ok(o)
}

/// The connection options of every client of `cfg` (TLS files read here).
pub(crate) fn connect_options(cfg: &HaConfig) -> Result<ConnectOptions, HaError> {
    for e in &cfg.endpoints {
        let https = e.starts_with("https://");
        if cfg.tls.is_some() && e.starts_with("http://") {
            return Err(HaError::Config {
                field: "etcd_endpoints",
                reason: format!("{e}: [ha.tls] is set, use an https:// endpoint"),
            });
        }
        if https && cfg.tls.is_none() {
            return Err(HaError::Config {
                field: "etcd_endpoints",
                reason: format!("{e}: https needs [ha.tls] (ca, and cert/key for client auth)"),
            });
        }
    }
    let mut o = ConnectOptions::new()
        .with_connect_timeout(cfg.request_timeout)
        .with_keep_alive(cfg.request_timeout, cfg.request_timeout)
        .with_keep_alive_while_idle(true)
        // A member without a raft leader answers at once (and cancels watches) instead of
        // holding requests: a partitioned member looks like an unreachable one.
        .with_require_leader(true);
    if let Some(tls) = &cfg.tls {
        o = o.with_tls(tls_options(tls)?);
    }
    Ok(o)
}

pub(crate) async fn build_client(cfg: &HaConfig, opts: ConnectOptions) -> Result<Client, HaError> {
    Client::connect(&cfg.endpoints, Some(opts))
        .await
        .map_err(|e| HaError::Config {
            field: "etcd_endpoints",
            reason: format!("{}: {e}", cfg.endpoints_text()),
        })
}

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

pub(crate) fn epoch_of(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}
