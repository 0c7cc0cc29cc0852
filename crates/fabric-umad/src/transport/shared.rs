//! What the transport thread shares with its users, lock-free: its counters ([`Stats`]) and
//! the SMInfo the manager answers with ([`SmIdentity`]).

use std::sync::atomic::{AtomicU64, AtomicU8};

/// Counters of the transport thread.
#[derive(Debug, Default)]
pub struct Stats {
    /// SMPs written (including re-sends).
    pub sent: AtomicU64,
    /// Re-sends after a lost or bounced SMP.
    pub retries: AtomicU64,
    /// SMPs given up after all attempts.
    pub failures: AtomicU64,
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
    /// Subnet Administration requests (class 0x03, `saquery` and other SA clients) answered
    /// "not supported" ([`crate::sa`]).
    pub sa_requests: AtomicU64,
    /// MADs of the other GSI classes that reached the manager's port (dropped).
    pub gsi_dropped: AtomicU64,
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
}
