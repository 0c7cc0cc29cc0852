//! Subnet manager election against other managers (IBA 14.4): the SMInfo this manager answers
//! with lives in the transport ([`crate::transport::SmIdentity`]: GUID set by discovery,
//! DISCOVERING at start, MASTER once the LIDs are configured); here the manager finds a master
//! with precedence among the CA ports advertising IsSM, stands by while it answers, and takes
//! over when it stops ([`SouthboundDriver::standby_while_master`]). SubnSet(SMInfo) from other
//! managers is answered by the transport thread, never obeyed (no handover).
//!
//! [`SouthboundDriver::standby_while_master`]: fabric_southbound::SouthboundDriver::standby_while_master

use std::sync::atomic::Ordering;
use std::time::Duration;

use fabric_southbound::DriverError;

use super::inner::{lock, submit, Inner, ZERO};
use super::sa_snapshot;
use super::state::dr;
use crate::config::UmadConfig;
use crate::mad::*;
use crate::transport::{self, Transport};

/// Sets the identity the transport answers SMInfo with before the first sweep: the configured
/// priority, SM_Key and M_Key protection (carried by every SMP from now on), state DISCOVERING.
pub(super) fn init_identity(tp: &Transport, cfg: &UmadConfig) {
    let sm = tp.sm_identity();
    sm.priority.store(cfg.sm_priority, Ordering::Relaxed);
    sm.sm_key.store(cfg.sm_key, Ordering::Relaxed);
    sm.m_key.store(cfg.m_key, Ordering::Relaxed);
    sm.m_key_protect.store(cfg.m_key_protect, Ordering::Relaxed);
    sm.m_key_lease_s.store(cfg.m_key_lease_s, Ordering::Relaxed);
    sm.state.store(SM_STATE_DISCOVERING, Ordering::Relaxed);
}

/// [`SouthboundDriver::standby_while_master`](fabric_southbound::SouthboundDriver::standby_while_master):
/// `Ok(false)` at once when no master with precedence answers; else stands by (no sweep,
/// nothing written), polling the master, and returns `Ok(true)` once it stopped answering.
pub(super) async fn standby_while_master(
    inner: &Inner,
    on_standby: &(dyn Fn(String) + Send + Sync),
) -> Result<bool, DriverError> {
    let Some((master, path)) = find_master(inner).await else {
        return Ok(false);
    };
    let sm = inner.tp.sm_identity();
    inner.standby.store(true, Ordering::Relaxed);
    sm.state.store(SM_STATE_STANDBY, Ordering::Relaxed);
    // A standby manager's SA does not answer (the master's does).
    sa_snapshot::sync_serving(inner);
    let cfg = &inner.cfg;
    on_standby(format!(
        "standby: subnet manager 0x{:016x} (priority {}) is master; polling its SMInfo every {} ms, taking over after {} unanswered polls",
        master.guid, master.priority, cfg.sm_poll_interval_ms, cfg.sm_poll_retries
    ));
    let mut misses = 0;
    while misses < cfg.sm_poll_retries {
        tokio::time::sleep(Duration::from_millis(cfg.sm_poll_interval_ms)).await;
        match sminfo_at(inner, &path).await {
            Some(i) if i.state == SM_STATE_MASTER => misses = 0,
            _ => misses += 1,
        }
    }
    on_standby(format!(
        "master subnet manager 0x{:016x} lost ({} polls unanswered): taking the subnet over",
        master.guid, cfg.sm_poll_retries
    ));
    inner.standby.store(false, Ordering::Relaxed);
    sm.state.store(SM_STATE_DISCOVERING, Ordering::Relaxed);
    // Not serving until this manager has configured the LIDs (then at once: `configure_lids`).
    sa_snapshot::sync_serving(inner);
    Ok(true)
}

/// SMInfo of the manager at the end of directed route `path` (`None`: no answer).
async fn sminfo_at(inner: &Inner, path: &[u8]) -> Option<SmInfo> {
    let rx = submit(&inner.tp, &dr(path), METHOD_GET, ATTR_SM_INFO, 0, &ZERO).ok()?;
    let r = transport::wait(rx).await.ok()?;
    (r.smp.status() == 0).then(|| SmInfo::decode(r.smp.data()))
}

/// A master subnet manager with precedence over this one among the CA ports the last
/// discovery found with IsSM (IBA 14.4.1: higher priority, or equal priority and lower
/// GUID), with the directed route to it.
async fn find_master(inner: &Inner) -> Option<(SmInfo, Vec<u8>)> {
    let (candidates, own) = {
        let st = lock(&inner.state);
        let own = st.local_guid();
        let c: Vec<Vec<u8>> = st
            .cas
            .iter()
            .filter(|c| c.port_guid != own && c.up && c.info.capability_mask() & CAP_IS_SM != 0)
            .map(|c| c.path.clone())
            .collect();
        (c, own)
    };
    let mine = inner.cfg.sm_priority;
    for path in candidates {
        if let Some(i) = sminfo_at(inner, &path).await {
            let outranks = i.priority > mine || (i.priority == mine && i.guid < own);
            if i.state == SM_STATE_MASTER && outranks {
                return Some((i, path));
            }
        }
    }
    None
}
