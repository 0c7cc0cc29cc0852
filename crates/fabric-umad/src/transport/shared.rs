//! What the transport thread shares with its users, lock-free: its counters ([`Stats`]), the
//! SMInfo the manager answers with ([`SmIdentity`]) and the Subnet Administration service it
//! answers SA MADs with once the driver attaches one ([`SaSlot`]).

use std::sync::atomic::{AtomicU16, AtomicU64, AtomicU8};
use std::sync::{Arc, OnceLock};

/// The SA service of the transport thread: empty until the driver attaches one (set once;
/// read lock-free by the thread every round).
pub type SaSlot = OnceLock<Arc<dyn super::sa_agent::SaEndpoint>>;

/// Counters of the transport thread.
#[derive(Debug, Default)]
pub struct Stats {
    /// SMPs written (including re-sends).
    pub sent: AtomicU64,
    /// Re-sends after a lost or bounced SMP.
    pub retries: AtomicU64,
    /// SMPs given up after all attempts.
    pub failures: AtomicU64,
    /// PerfMgt MADs written (port counters; re-sends included). Not counted in `sent`.
    pub perf_sent: AtomicU64,
    /// Re-sends of PerfMgt MADs.
    pub perf_retries: AtomicU64,
    /// PerfMgt MADs given up after all attempts.
    pub perf_failures: AtomicU64,
    /// Unsolicited MADs received (traps).
    pub traps: AtomicU64,
    /// TrapRepress MADs sent back to the trap senders.
    pub trap_represses: AtomicU64,
    /// Requests addressed to the manager's port that it answered (SubnGet/SubnSet(SMInfo), LID
    /// routed or directed route, from `sminfo` or another subnet manager).
    pub sm_requests: AtomicU64,
    /// Of those, the SubnSet(SMInfo) (HANDOVER, ACKNOWLEDGE, DISABLE, STANDBY, DISCOVER from
    /// another subnet manager), answered with this manager's SMInfo unchanged.
    pub sm_set_requests: AtomicU64,
    /// Subnet Administration requests (class 0x03, `saquery` and other SA clients) answered:
    /// by the attached SA service, or "not supported" while none is attached ([`crate::sa`]).
    pub sa_requests: AtomicU64,
    /// GSI MADs addressed to the manager's port that got no answer: other GSI classes,
    /// responses nobody waits for, runts, what the SA service does not answer.
    pub gsi_dropped: AtomicU64,
    /// SA requests dropped because the service is not serving (standby manager).
    pub sa_dropped_standby: AtomicU64,
    /// GetTable/GetMulti answered ERR_NO_RESOURCES: too many RMPP transfers in flight.
    pub sa_busy: AtomicU64,
    /// RMPP transfers started (answers of GetTable / GetMulti).
    pub rmpp_started: AtomicU64,
    /// RMPP transfers whose last segment the requester acknowledged.
    pub rmpp_completed: AtomicU64,
    /// RMPP transfers ended otherwise: STOP or ABORT from the requester, ABORT after the last
    /// resend, replaced by the requester's repeated request.
    pub rmpp_aborted: AtomicU64,
    /// RMPP DATA segments sent (resends included).
    pub rmpp_segments_sent: AtomicU64,
    /// Of those, segments resent after an ACK timeout.
    pub rmpp_segments_resent: AtomicU64,
    /// RMPP ACK/STOP/ABORT MADs matching no transfer in flight (late or stray).
    pub rmpp_unmatched: AtomicU64,
    /// Requests sent as several RMPP segments (not reassembled yet) or in another RMPP
    /// version, refused with ABORT.
    pub rmpp_requests_refused: AtomicU64,
    /// Reports (InformInfo subscriptions' notices) sent, first attempts.
    pub reports_sent: AtomicU64,
    /// Reports sent again for lack of a ReportResp.
    pub reports_resent: AtomicU64,
    /// Reports acknowledged by the subscriber's ReportResp.
    pub reports_acknowledged: AtomicU64,
    /// Reports given up (no ReportResp after every resend, or too many pending).
    pub reports_given_up: AtomicU64,
}

/// What the manager answers to SMInfo requests addressed to its port (`sminfo`, other SMs):
/// shared between the driver, which updates it, and the transport thread, which answers.
/// ActCount is the number of SMPs sent.
#[derive(Debug, Default)]
pub struct SmIdentity {
    /// Port GUID of the manager (0 until the first discovery).
    pub guid: AtomicU64,
    /// Priority (0..=15).
    pub priority: AtomicU8,
    /// SMState (`mad::SM_STATE_*`).
    pub state: AtomicU8,
    /// SM_Key of the manager (0: none configured).
    pub sm_key: AtomicU64,
    /// M_Key of the manager's port (0: none; the driver programs no M_Key). SMInfo answers
    /// carry the SM_Key only to a request that passes the M_Key check (its M_Key equals this
    /// one, or this one is 0); everyone else reads SM_Key 0.
    pub m_key: AtomicU64,
    /// M_KeyProtectBits the driver writes with [`SmIdentity::m_key`].
    pub m_key_protect: AtomicU8,
    /// M_KeyLeasePeriod (seconds) the driver writes with [`SmIdentity::m_key`].
    pub m_key_lease_s: AtomicU16,
}

impl SmIdentity {
    /// The M_Key protection every outgoing SMP carries (see [`crate::mad::stamp_m_key`]).
    pub fn m_key_protection(&self) -> crate::mad::MKeyProtection {
        crate::mad::MKeyProtection {
            key: self.m_key.load(std::sync::atomic::Ordering::Relaxed),
            protect: self.m_key_protect.load(std::sync::atomic::Ordering::Relaxed),
            lease_s: self.m_key_lease_s.load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}
