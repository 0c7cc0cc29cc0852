//! Write fencing of a manager that holds leadership on a lease (high availability, `[ha]`).
//!
//! With two managers on one out-of-band fabric, the elected leader holds a lease in a
//! coordination service (etcd) and an **epoch**: a number that grows with every election (the
//! etcd revision at which the leader key was created). The [`Fence`] is what the coordinator
//! and the driver share:
//!
//! * the coordinator (`fabric-ha`) [`grant`](Fence::grant)s the epoch when elected and
//!   [`renew`](Fence::renew)s the local lease deadline at every keep-alive it sends (the
//!   deadline is the send instant plus the TTL the server granted: the server's own expiry is
//!   never earlier), and [`revoke`](Fence::revoke)s when the lease is lost;
//! * the driver calls [`check`](Fence::check) before every write: it answers the epoch to
//!   carry in the request, or refuses ([`DriverError::Fenced`]) once the lease deadline passed,
//!   the lease was revoked, or an agent reported a newer epoch; a refusal is counted;
//! * when an agent refuses a write because it has seen a newer epoch, the driver calls
//!   [`superseded`](Fence::superseded): the fence closes at once, and the coordinator steps
//!   down when it sees [`superseded_by`](Fence::superseded_by).
//!
//! Without `[ha]` the driver has no fence (or an [`open`](Fence::open) one: epoch 0, never
//! refuses), and nothing changes.
//!
//! **Test failpoint.** [`set_self_fencing(false)`](Fence::set_self_fencing) makes a leader
//! ignore its own lease deadline and revocation (only an agent's refusal closes the fence):
//! what a manager whose clock or lease check failed would do. fabricd sets it only from the
//! environment variable `FABRICD_TEST_HA_NO_SELF_FENCE=1`, with a warning, so that the tests
//! can show the agents' epoch check stopping such a manager. Never in production.
//!
//! Time is `std::time::Instant` (monotonic, and it advances while the process is stopped: a
//! leader frozen by SIGSTOP past its deadline is fenced the moment it runs again).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::DriverError;

/// Why a fence refuses writes (see [`Fence::state`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FenceState {
    /// No leadership at all (HA not configured: epoch 0, writes allowed).
    Open,
    /// Leader with epoch `epoch`; writes allowed until `deadline`.
    Leading { epoch: u64, deadline: Instant },
    /// Was leader with `epoch`; the lease was not renewed in time (etcd unreachable or
    /// without quorum). Writes refused until a renewal arrives.
    Expired { epoch: u64 },
    /// Leadership lost for good: lease revoked or expired at the server, or an agent has seen
    /// a newer epoch (`by`, 0 when unknown). Writes refused; the coordinator steps down.
    Lost { epoch: u64, by: u64 },
    /// Not the leader (a standby, before the first election).
    Standby,
}

#[derive(Debug)]
struct Inner {
    /// `None`: open (no HA). `Some(None)`: standby. `Some(Some(deadline))`: leading.
    lease: Option<Option<Instant>>,
    revoked: bool,
}

/// The shared write fence of one manager process (cheap to check: one mutex, no I/O).
#[derive(Debug)]
pub struct Fence {
    epoch: AtomicU64,
    superseded_by: AtomicU64,
    superseded: AtomicBool,
    refused: AtomicU64,
    self_fencing: AtomicBool,
    inner: Mutex<Inner>,
}

impl Fence {
    /// A fence that never refuses (no HA): epoch 0.
    pub fn open() -> Fence {
        Fence {
            epoch: AtomicU64::new(0),
            superseded_by: AtomicU64::new(0),
            superseded: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            self_fencing: AtomicBool::new(true),
            inner: Mutex::new(Inner {
                lease: None,
                revoked: false,
            }),
        }
    }

    /// A closed fence: a standby that holds no lease yet.
    pub fn standby() -> Fence {
        let f = Fence::open();
        f.lock().lease = Some(None);
        f
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Elected with `epoch`; writes allowed until `deadline` (renewed by [`renew`](Self::renew)).
    pub fn grant(&self, epoch: u64, deadline: Instant) {
        let mut g = self.lock();
        self.epoch.store(epoch, Ordering::SeqCst);
        self.superseded.store(false, Ordering::SeqCst);
        self.superseded_by.store(0, Ordering::SeqCst);
        g.revoked = false;
        g.lease = Some(Some(deadline));
    }

    /// A keep-alive sent at `sent` was answered with `ttl`: writes allowed until `sent + ttl`
    /// (never moves the deadline backwards).
    pub fn renew(&self, sent: Instant, ttl: Duration) {
        let mut g = self.lock();
        if let Some(Some(d)) = g.lease.as_mut() {
            let new = sent + ttl;
            if new > *d {
                *d = new;
            }
        }
    }

    /// Leadership lost for good (lease gone at the server, step-down): writes refused.
    pub fn revoke(&self) {
        self.lock().revoked = true;
    }

    /// An agent refused a write because it has seen epoch `by` (newer than ours).
    pub fn superseded(&self, by: u64) {
        self.superseded_by.fetch_max(by, Ordering::SeqCst);
        self.superseded.store(true, Ordering::SeqCst);
    }

    /// The newer epoch an agent reported (`Some(0)` when superseded without a number), if any.
    pub fn superseded_by(&self) -> Option<u64> {
        self.superseded
            .load(Ordering::SeqCst)
            .then(|| self.superseded_by.load(Ordering::SeqCst))
    }

    /// The epoch writes carry (0: no HA, or never elected).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Writes refused by [`check`](Self::check) so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::SeqCst)
    }

    /// Test failpoint (see the module documentation): `false` ignores the lease deadline and
    /// revocation; only [`superseded`](Self::superseded) closes the fence.
    pub fn set_self_fencing(&self, on: bool) {
        self.self_fencing.store(on, Ordering::SeqCst);
    }

    /// Whether the leader fences itself on its own lease (true but under the test failpoint).
    pub fn self_fencing(&self) -> bool {
        self.self_fencing.load(Ordering::SeqCst)
    }

    /// The state at `now`.
    pub fn state_at(&self, now: Instant) -> FenceState {
        let g = self.lock();
        let epoch = self.epoch();
        let own = self.self_fencing();
        match g.lease {
            None => FenceState::Open,
            Some(None) => FenceState::Standby,
            Some(Some(deadline)) => {
                if self.superseded.load(Ordering::SeqCst) || (own && g.revoked) {
                    FenceState::Lost {
                        epoch,
                        by: self.superseded_by.load(Ordering::SeqCst),
                    }
                } else if own && now >= deadline {
                    FenceState::Expired { epoch }
                } else {
                    FenceState::Leading { epoch, deadline }
                }
            }
        }
    }

    /// The state now.
    pub fn state(&self) -> FenceState {
        self.state_at(Instant::now())
    }

    /// Before a write of `op` to `switch`: the epoch to carry, or [`DriverError::Fenced`]
    /// (counted) when this manager may not write.
    pub fn check(&self, op: &'static str) -> Result<u64, DriverError> {
        let reason = match self.state() {
            FenceState::Open => return Ok(0),
            FenceState::Leading { epoch, .. } => return Ok(epoch),
            FenceState::Standby => "not the leader (standby)".to_string(),
            FenceState::Expired { epoch } => {
                format!("the lease of epoch {epoch} was not renewed in time (etcd unreachable or without quorum)")
            }
            FenceState::Lost { epoch, by: 0 } => format!("leadership of epoch {epoch} lost"),
            FenceState::Lost { epoch, by } => {
                format!("leadership of epoch {epoch} lost: a switch has seen the newer epoch {by}")
            }
        };
        self.refused.fetch_add(1, Ordering::SeqCst);
        Err(DriverError::Fenced { op, reason })
    }
}

impl Default for Fence {
    fn default() -> Self {
        Fence::open()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_fence_never_refuses() {
        let f = Fence::open();
        assert_eq!(f.check("write").unwrap(), 0);
        assert_eq!(f.refused(), 0);
    }

    #[test]
    fn standby_refuses_and_counts() {
        let f = Fence::standby();
        let e = f.check("write LFT blocks").unwrap_err().to_string();
        assert!(e.contains("standby") && e.contains("write LFT blocks"), "{e}");
        assert_eq!(f.refused(), 1);
    }

    #[test]
    fn leader_writes_until_deadline_then_renewal_reopens() {
        let f = Fence::standby();
        let t0 = Instant::now();
        f.grant(42, t0 + Duration::from_secs(60));
        assert_eq!(f.check("w").unwrap(), 42);
        assert_eq!(
            f.state_at(t0 + Duration::from_secs(61)),
            FenceState::Expired { epoch: 42 }
        );
        // A late renewal never moves the deadline back.
        f.renew(t0, Duration::from_secs(1));
        assert!(matches!(
            f.state_at(t0 + Duration::from_secs(59)),
            FenceState::Leading { .. }
        ));
        f.renew(t0 + Duration::from_secs(30), Duration::from_secs(60));
        assert!(matches!(
            f.state_at(t0 + Duration::from_secs(61)),
            FenceState::Leading { .. }
        ));
    }

    #[test]
    fn expired_lease_refuses() {
        let f = Fence::standby();
        f.grant(7, Instant::now());
        let e = f.check("w").unwrap_err().to_string();
        assert!(e.contains("epoch 7") && e.contains("not renewed"), "{e}");
    }

    #[test]
    fn superseded_and_revoked_are_lost() {
        let f = Fence::standby();
        f.grant(7, Instant::now() + Duration::from_secs(60));
        f.superseded(9);
        assert_eq!(f.superseded_by(), Some(9));
        let e = f.check("w").unwrap_err().to_string();
        assert!(e.contains("newer epoch 9"), "{e}");
        // A new election clears it.
        f.grant(11, Instant::now() + Duration::from_secs(60));
        assert_eq!(f.check("w").unwrap(), 11);
        f.revoke();
        assert_eq!(f.state(), FenceState::Lost { epoch: 11, by: 0 });
    }

    #[test]
    fn without_self_fencing_only_an_agent_closes_the_fence() {
        let f = Fence::standby();
        f.set_self_fencing(false);
        f.grant(3, Instant::now());
        f.revoke();
        assert_eq!(f.check("w").unwrap(), 3);
        f.superseded(4);
        assert!(f.check("w").is_err());
    }
}
