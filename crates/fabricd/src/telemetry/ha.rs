//! High-availability metrics (`fabricd_ha_*`), registered only with `[ha]` and read from the
//! coordinator's status and the write fence at every scrape.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type FloatGauge = Gauge<f64, AtomicU64>;

/// The values the `fabricd_ha_*` metrics report (one reading of the coordinator and fence).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HaGauges {
    /// This manager holds the lease.
    pub leader: bool,
    /// The leader's epoch (0: none known).
    pub epoch: u64,
    /// Leader: time left on the lease, seconds (0 otherwise).
    pub lease_remaining_s: f64,
    /// Switch writes refused now.
    pub fenced: bool,
    /// The last etcd request succeeded.
    pub etcd_reachable: bool,
    /// Switch writes refused by the fence since start.
    pub fenced_writes: u64,
    /// Leader changes seen since start.
    pub leader_changes: u64,
    /// Why `/ready` must answer 503 whatever the installation says (a standby, a fenced
    /// leader); `None`: the installation decides.
    pub not_ready: Option<String>,
}

/// Reads the current values (called at every scrape).
pub type HaSource = Arc<dyn Fn() -> HaGauges + Send + Sync>;

#[derive(Clone, Default)]
pub(super) struct HaMetrics {
    source: Arc<std::sync::OnceLock<HaSource>>,
    leader: Gauge,
    epoch: Gauge,
    lease_remaining: FloatGauge,
    fenced: Gauge,
    etcd_reachable: Gauge,
    fenced_writes: Counter,
    leader_changes: Counter,
}

impl HaMetrics {
    pub(super) fn register(r: &mut Registry) -> HaMetrics {
        let m = HaMetrics::default();
        r.register(
            "ha_leader",
            "1 while this manager is the leader (holds the etcd lease), else 0",
            m.leader.clone(),
        );
        r.register(
            "ha_epoch",
            "Epoch of the current leader (the etcd create revision of the leader key; 0 when none is known)",
            m.epoch.clone(),
        );
        r.register(
            "ha_lease_remaining_seconds",
            "Leader: time left on the etcd lease unless renewed, seconds (0 on a standby)",
            m.lease_remaining.clone(),
        );
        r.register(
            "ha_fenced",
            "1 while switch writes are refused (a standby, or a leader whose lease lapsed or was superseded)",
            m.fenced.clone(),
        );
        r.register(
            "ha_etcd_reachable",
            "1 when the last etcd request succeeded, else 0",
            m.etcd_reachable.clone(),
        );
        r.register(
            "ha_fenced_writes",
            "Switch writes refused by the write fence",
            m.fenced_writes.clone(),
        );
        r.register(
            "ha_leader_changes",
            "Leader changes this manager has seen",
            m.leader_changes.clone(),
        );
        m
    }

    pub(super) fn attach(&self, source: HaSource) {
        let _ = self.source.set(source);
    }

    /// The current values, when a source is attached.
    pub(super) fn read(&self) -> Option<HaGauges> {
        self.source.get().map(|s| s())
    }

    pub(super) fn refresh(&self) {
        let Some(v) = self.read() else { return };
        let n = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
        self.leader.set(i64::from(v.leader));
        self.epoch.set(n(v.epoch));
        self.lease_remaining.set(v.lease_remaining_s);
        self.fenced.set(i64::from(v.fenced));
        self.etcd_reachable.set(i64::from(v.etcd_reachable));
        self.fenced_writes
            .inc_by(v.fenced_writes.saturating_sub(self.fenced_writes.get()));
        self.leader_changes
            .inc_by(v.leader_changes.saturating_sub(self.leader_changes.get()));
    }
}
