//! The elected leader: lease keep-alive, the fence's renewals, the watch of the leader key
//! and the step-down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{EventType, LeaseKeepAliveStream, LeaseKeeper, WatchOptions};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client::epoch_of;
use crate::shared::Shared;
use crate::state::SharedState;
use crate::{FenceState, HaError, LeaderInfo, Role};

/// Why leadership ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LossReason {
    /// A keep-alive was answered "lease not found": the lease expired (or was revoked) at
    /// the server.
    LeaseExpired {
        /// Our lease.
        lease_id: i64,
    },
    /// The leader key was deleted (lease expired or revoked, or removed by hand).
    KeyDeleted,
    /// The leader key now belongs to another election.
    KeyTaken {
        /// The new leader.
        leader: LeaderInfo,
    },
    /// An agent refused a write: it has seen the newer epoch `by` (0: unknown).
    Superseded {
        /// The newer epoch.
        by: u64,
    },
}

impl std::fmt::Display for LossReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LossReason::LeaseExpired { lease_id } => {
                write!(
                    f,
                    "lease {lease_id:x} expired at the server (keep-alive answered: not found)"
                )
            }
            LossReason::KeyDeleted => f.write_str("the leader key was deleted (lease expired or revoked)"),
            LossReason::KeyTaken { leader } => write!(
                f,
                "the leader key was taken by {} ({}) with epoch {}",
                leader.node_name, leader.advertise, leader.epoch
            ),
            LossReason::Superseded { by: 0 } => {
                f.write_str("a switch refused a write: it follows a newer manager epoch")
            }
            LossReason::Superseded { by } => {
                write!(f, "a switch refused a write: it follows the newer manager epoch {by}")
            }
        }
    }
}

/// What the leadership tasks share.
struct Ctx {
    shared: Arc<Shared>,
    me: LeaderInfo,
    lease_id: i64,
    ttl: Duration,
    lost: watch::Sender<Option<LossReason>>,
    renewal: Mutex<Renewal>,
    /// Resigned or dropped: the tasks stop touching the status.
    stopped: AtomicBool,
    /// Leadership is ending (set once, by the first loss).
    ending: AtomicBool,
}

struct Renewal {
    /// Send instant of the last answered keep-alive.
    last_ok: Instant,
    /// The current failure, if renewals fail.
    failing: Option<String>,
    /// Logged: the fence closed by its deadline.
    fenced_logged: bool,
    /// Logged: a loss ignored under the test failpoint.
    ignored_logged: bool,
}

impl Ctx {
    fn is_lost(&self) -> bool {
        self.stopped.load(Ordering::SeqCst) || self.ending.load(Ordering::SeqCst)
    }

    fn renewal(&self) -> std::sync::MutexGuard<'_, Renewal> {
        self.renewal.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Leadership lost: revoke the fence, status stepping down. Under the test failpoint
    /// (no self-fencing) only a superseded epoch ends leadership. Returns whether it ended.
    fn lose(self: &Arc<Self>, reason: LossReason) -> bool {
        let fence = &self.shared.fence;
        if !fence.self_fencing() && !matches!(reason, LossReason::Superseded { .. }) {
            let mut r = self.renewal();
            if !r.ignored_logged {
                r.ignored_logged = true;
                tracing::warn!(
                    node = %self.me.node_name,
                    "HA TEST FAILPOINT (no self-fencing): ignoring the loss of leadership of epoch {}: {reason}",
                    self.me.epoch
                );
            }
            return false;
        }
        if self.stopped.load(Ordering::SeqCst) {
            return true;
        }
        // The first caller ends leadership: fence revoked and status updated before `lost()`
        // resolves.
        if !self.ending.swap(true, Ordering::SeqCst) {
            fence.revoke();
            tracing::warn!(
                node = %self.me.node_name,
                "HA: leadership of epoch {} lost: {reason}; stepping down",
                self.me.epoch
            );
            self.shared.update(|s| {
                s.role = Role::SteppingDown;
                s.fenced = true;
                s.lease_remaining_ms = 0;
                if let LossReason::KeyTaken { leader } = &reason {
                    s.leader = Some(leader.clone());
                    s.leader_changes += 1;
                } else {
                    s.leader = None;
                }
                s.message = format!("stepping down from epoch {}: {reason}", self.me.epoch);
            });
            self.lost.send_replace(Some(reason));
            // Give the lease back (if it still exists) so that the key goes at once.
            let sh = Arc::clone(&self.shared);
            let id = self.lease_id;
            tokio::spawn(async move {
                let mut lease = sh.client.lease_client();
                let _ = sh.call("lease revoke", lease.revoke(id)).await;
            });
        }
        true
    }

    /// Status of a leader that holds its lease (called every 200 ms and at every renewal).
    fn refresh(&self) {
        if self.is_lost() {
            return;
        }
        let now = Instant::now();
        let state = self.shared.fence.state_at(now);
        let mut r = self.renewal();
        let since = now.saturating_duration_since(r.last_ok);
        let (fenced, remaining) = match state {
            FenceState::Leading { deadline, .. } => (false, deadline.saturating_duration_since(now)),
            _ => (true, Duration::ZERO),
        };
        let epoch = self.me.epoch;
        let message = match (&r.failing, fenced) {
            (_, true) => format!(
                "leader, fenced: lease not renewed for {:.1} s (etcd unreachable or without quorum); \
                 epoch {epoch} kept, writes resume when a renewal gets through",
                since.as_secs_f64()
            ),
            (Some(why), false) => format!(
                "leader with epoch {epoch}: lease renewal failing for {:.1} s ({why}); fenced in {:.1} s",
                since.as_secs_f64(),
                remaining.as_secs_f64()
            ),
            (None, false) => format!(
                "leader with epoch {epoch} (lease {:x}, TTL {} s)",
                self.lease_id,
                self.ttl.as_secs()
            ),
        };
        if fenced && !r.fenced_logged {
            r.fenced_logged = true;
            tracing::error!(node = %self.me.node_name, "HA: {message}");
        } else if !fenced && r.fenced_logged {
            r.fenced_logged = false;
            tracing::warn!(node = %self.me.node_name, "HA: {message} (fence reopened)");
        }
        let reachable = r.failing.is_none();
        drop(r);
        let message = if self.shared.fence.self_fencing() {
            message
        } else {
            format!("TEST FAILPOINT (no self-fencing, only a switch's refusal fences): {message}")
        };
        self.shared.update(|s| {
            // Serialized with the step-down's update (the status lock): never overwrite it.
            if self.is_lost() {
                return;
            }
            s.role = Role::Leader;
            s.epoch = epoch;
            s.lease_id = self.lease_id;
            s.lease_ttl_s = self.ttl.as_secs();
            s.lease_remaining_ms = u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX);
            s.etcd_reachable = reachable;
            s.fenced = fenced;
            s.message = message;
        });
    }

    fn renewed(&self, sent: Instant, ttl: Duration) {
        self.shared.fence.renew(sent, ttl);
        {
            let mut r = self.renewal();
            if sent > r.last_ok {
                r.last_ok = sent;
            }
            if let Some(why) = r.failing.take() {
                tracing::info!(
                    node = %self.me.node_name,
                    "HA: lease renewals of epoch {} get through again (they failed: {why})",
                    self.me.epoch
                );
            }
        }
        self.refresh();
    }

    fn renew_failed(&self, e: &HaError) {
        {
            let mut r = self.renewal();
            if r.failing.is_none() {
                tracing::warn!(
                    node = %self.me.node_name,
                    "HA: lease renewal of epoch {} failed: {e}",
                    self.me.epoch
                );
            }
            r.failing = Some(e.to_string());
        }
        self.refresh();
    }
}

/// This node's leadership: the lease kept alive, the fence renewed, until lost or resigned.
/// Dropping it without [`resign`](Self::resign) stops the keep-alives, revokes the fence and
/// gives the lease back in the background (inside a tokio runtime; otherwise the lease
/// expires at the server within its TTL).
pub struct Leadership {
    /// The epoch (the leader key's create revision).
    pub epoch: u64,
    /// Our etcd lease.
    pub lease_id: i64,
    ctx: Arc<Ctx>,
    lost: watch::Receiver<Option<LossReason>>,
    tasks: Vec<JoinHandle<()>>,
    state: SharedState,
}

impl Leadership {
    pub(crate) fn start(
        shared: Arc<Shared>,
        me: LeaderInfo,
        lease_id: i64,
        ttl: Duration,
        granted_at: Instant,
    ) -> Leadership {
        let (tx, rx) = watch::channel(None);
        let ctx = Arc::new(Ctx {
            shared: Arc::clone(&shared),
            me: me.clone(),
            lease_id,
            ttl,
            lost: tx,
            stopped: AtomicBool::new(false),
            ending: AtomicBool::new(false),
            renewal: Mutex::new(Renewal {
                last_ok: granted_at,
                failing: None,
                fenced_logged: false,
                ignored_logged: false,
            }),
        });
        tracing::info!(
            node = %me.node_name,
            "HA: elected leader with epoch {} (lease {lease_id:x}, TTL {} s)",
            me.epoch,
            ttl.as_secs()
        );
        shared.update(|s| {
            if s.epoch != me.epoch {
                s.leader_changes += 1;
            }
            s.leader = Some(me.clone());
        });
        ctx.refresh();
        let tasks = vec![
            tokio::spawn(keepalive_loop(Arc::clone(&ctx))),
            tokio::spawn(watch_loop(Arc::clone(&ctx))),
            tokio::spawn(poll_loop(Arc::clone(&ctx))),
        ];
        Leadership {
            epoch: me.epoch,
            lease_id,
            state: SharedState::new(shared, me.epoch),
            ctx,
            lost: rx,
            tasks,
        }
    }

    /// Resolves when leadership is lost for good; the fence is revoked by then.
    pub async fn lost(&mut self) -> LossReason {
        loop {
            if let Some(r) = self.lost.borrow_and_update().clone() {
                return r;
            }
            if self.lost.changed().await.is_err() {
                // The sender lives in `ctx`, which we hold: unreachable, but never spin.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The reason, if leadership is already lost.
    pub fn lost_reason(&self) -> Option<LossReason> {
        self.lost.borrow().clone()
    }

    /// The leader's shared state (writes guarded by this epoch).
    pub fn shared_state(&self) -> SharedState {
        self.state.clone()
    }

    /// Gives leadership up: stops the keep-alives, revokes the fence and the lease (the
    /// standby sees the key deleted at once). If etcd cannot be reached, the lease expires
    /// within its TTL.
    pub async fn resign(self) {
        self.ctx.stopped.store(true, Ordering::SeqCst);
        for t in &self.tasks {
            t.abort();
        }
        let sh = &self.ctx.shared;
        sh.fence.revoke();
        let mut lease = sh.client.lease_client();
        let outcome = sh.call("lease revoke", lease.revoke(self.lease_id)).await;
        let message = match &outcome {
            Ok(_) => format!("standby: resigned the leadership of epoch {}", self.epoch),
            Err(e) => format!(
                "standby: resigned the leadership of epoch {}; the lease could not be revoked ({e}), it expires within {} s",
                self.epoch,
                self.ctx.ttl.as_secs()
            ),
        };
        tracing::info!(node = %self.ctx.me.node_name, "HA: {message}");
        sh.update(|s| {
            s.role = Role::Standby;
            s.leader = None;
            s.lease_id = 0;
            s.lease_remaining_ms = 0;
            s.fenced = false;
            s.etcd_reachable = outcome.is_ok();
            s.message = message;
        });
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let resigned = self.ctx.stopped.swap(true, Ordering::SeqCst);
        for t in &self.tasks {
            t.abort();
        }
        let sh = Arc::clone(&self.ctx.shared);
        sh.fence.revoke();
        if resigned || self.ctx.ending.load(Ordering::SeqCst) {
            return; // lease already given back (or gone) and status already set
        }
        let (epoch, id) = (self.epoch, self.lease_id);
        let message = format!("standby: leadership of epoch {epoch} given up (dropped)");
        tracing::info!(node = %self.ctx.me.node_name, "HA: {message}");
        sh.update(|s| {
            s.role = Role::Standby;
            s.leader = None;
            s.lease_id = 0;
            s.lease_remaining_ms = 0;
            s.fenced = false;
            s.message = message;
        });
        // Give the lease back when a runtime is at hand; otherwise it expires within its TTL.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let mut lease = sh.client.lease_client();
                let _ = sh.call("lease revoke", lease.revoke(id)).await;
            });
        }
    }
}

/// Keep-alive every TTL/3; renews the fence with the send instant and the answered TTL.
async fn keepalive_loop(ctx: Arc<Ctx>) {
    let period = (ctx.ttl / 3).max(Duration::from_millis(200));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    loop {
        tick.tick().await;
        if ctx.is_lost() {
            return;
        }
        let mut sent = Instant::now();
        let mut answer = keep_alive_bounded(&ctx, &mut stream).await;
        if answer.is_err() && stream.is_some() {
            // The stream's member may be gone: once more at once on a new stream.
            stream = None;
            sent = Instant::now();
            answer = keep_alive_bounded(&ctx, &mut stream).await;
        }
        match answer {
            Ok(ttl) if ttl > 0 => {
                ctx.renewed(sent, Duration::from_secs(u64::try_from(ttl).unwrap_or(0)));
            }
            Ok(_) => {
                stream = None;
                if ctx.lose(LossReason::LeaseExpired { lease_id: ctx.lease_id }) {
                    return;
                }
            }
            Err(e) => {
                stream = None;
                ctx.renew_failed(&e);
            }
        }
    }
}

async fn keep_alive_bounded(
    ctx: &Ctx,
    stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
) -> Result<i64, HaError> {
    let sh = &ctx.shared;
    tokio::time::timeout(sh.cfg.request_timeout, keep_alive_once(ctx, stream))
        .await
        .unwrap_or_else(|_| Err(sh.timeout_error("lease keep-alive")))
}

/// One keep-alive on the (re)opened stream: the answered TTL (0: lease not found).
async fn keep_alive_once(ctx: &Ctx, stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>) -> Result<i64, HaError> {
    let sh = &ctx.shared;
    let op = "lease keep-alive";
    if stream.is_none() {
        let mut lease = sh.client.lease_client();
        match lease.keep_alive(ctx.lease_id).await {
            Ok(s) => *stream = Some(s),
            Err(etcd_client::Error::LeaseKeepAliveError(m)) if m.contains("not found") => return Ok(0),
            Err(e) => return Err(sh.etcd_error(op, &e)),
        }
    }
    let Some((keeper, answers)) = stream.as_mut() else {
        return Err(sh.timeout_error(op));
    };
    keeper.keep_alive().await.map_err(|e| sh.etcd_error(op, &e))?;
    match answers.message().await {
        Ok(Some(r)) => Ok(r.ttl()),
        Ok(None) => Err(HaError::Unreachable {
            endpoints: sh.endpoints.clone(),
            reason: format!("{op}: stream closed"),
        }),
        Err(e) => Err(sh.etcd_error(op, &e)),
    }
}

/// Watches the leader key: deleted or recreated by someone else → lost.
async fn watch_loop(ctx: Arc<Ctx>) {
    let sh = Arc::clone(&ctx.shared);
    let retry = (ctx.ttl / 6).max(Duration::from_millis(100));
    while !ctx.is_lost() {
        let step = watch_once(&ctx).await;
        match step {
            Ok(Some(reason)) => {
                if ctx.lose(reason) {
                    return;
                }
                tokio::time::sleep(ctx.ttl / 3).await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(node = %sh.cfg.node_name, "HA: watch of the leader key: {e}");
                tokio::time::sleep(retry).await;
            }
        }
    }
}

/// Reads the key (ours?) then watches it until a change: `Some(reason)` when it is not ours
/// any more, `None` to read it again (compaction), `Err` on etcd errors.
async fn watch_once(ctx: &Ctx) -> Result<Option<LossReason>, HaError> {
    let sh = &ctx.shared;
    let mut kv = sh.client.kv_client();
    let got = sh
        .call("get of the leader key", kv.get(sh.leader_key.clone(), None))
        .await?;
    let Some(k) = got.kvs().first() else {
        return Ok(Some(LossReason::KeyDeleted));
    };
    if epoch_of(k.create_revision()) != ctx.me.epoch {
        let leader = LeaderInfo::from_kv(k.value(), epoch_of(k.create_revision()));
        return Ok(Some(LossReason::KeyTaken { leader }));
    }
    let revision = got.header().map_or(0, etcd_client::ResponseHeader::revision);
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
            return Err(sh.timeout_error("watch of the leader key (stream closed)"));
        };
        if msg.canceled() {
            if msg.compact_revision() > 0 {
                return Ok(None);
            }
            return Err(HaError::Unreachable {
                endpoints: sh.endpoints.clone(),
                reason: format!("watch of the leader key canceled: {}", msg.cancel_reason()),
            });
        }
        for ev in msg.events() {
            match (ev.event_type(), ev.kv()) {
                (EventType::Delete, _) => return Ok(Some(LossReason::KeyDeleted)),
                (EventType::Put, Some(k)) if epoch_of(k.create_revision()) != ctx.me.epoch => {
                    let leader = LeaderInfo::from_kv(k.value(), epoch_of(k.create_revision()));
                    return Ok(Some(LossReason::KeyTaken { leader }));
                }
                _ => {}
            }
        }
    }
}

/// Every 200 ms: an agent's refusal (superseded) ends leadership; the status follows the
/// fence (remaining lease, fenced).
async fn poll_loop(ctx: Arc<Ctx>) {
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if ctx.is_lost() {
            return;
        }
        if let Some(by) = ctx.shared.fence.superseded_by() {
            ctx.lose(LossReason::Superseded { by });
            return;
        }
        ctx.refresh();
    }
}
