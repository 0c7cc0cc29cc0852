//! The answers to the SMPs addressed to the manager's port (SMInfo from `sminfo` and other
//! subnet managers), given on the transport thread.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::{SmIdentity, Stats};
use crate::mad::{
    sminfo_modifier_name, SmInfo, Smp, ATTR_SM_INFO, CLASS_SMP_DR, CLASS_SMP_LID, METHOD_SET, PERMISSIVE_LID,
    SMP_DATA_SIZE, STATUS_UNSUPPORTED_ATTR,
};

/// Requesters remembered for the log-once messages (beyond that, nothing more is logged).
const MAX_REMEMBERED_REQUESTERS: usize = 1024;

/// Answers the requests addressed to the manager's port (on the transport thread).
///
/// SubnGet(SMInfo) and SubnSet(SMInfo) get this manager's SMInfo: its port GUID, SM_Key (0 to
/// a requester that fails the M_Key check), ActCount (SMPs sent), priority and SMState. A Set (HANDOVER, ACKNOWLEDGE, DISABLE, STANDBY or DISCOVER from another subnet
/// manager) changes nothing: this manager is the single master and does not hand over, so it
/// answers like a Get and logs the request once per requester GUID and modifier. Any other
/// attribute is answered "unsupported". LID-routed requests are answered to their source LID,
/// directed-route ones back along their return path ([`Smp::dr_response`]).
pub(super) struct SmResponder {
    sm: Arc<SmIdentity>,
    stats: Arc<Stats>,
    /// (requester GUID, modifier) of the SubnSet(SMInfo) already logged.
    pub(super) sets_logged: HashSet<(u64, u32)>,
    /// (class, return path) of the directed-route and (class, source LID bytes) of the
    /// LID-routed SMInfo pollers already logged.
    pollers_logged: HashSet<(u8, Vec<u8>)>,
}

impl SmResponder {
    pub(super) fn new(sm: Arc<SmIdentity>, stats: Arc<Stats>) -> SmResponder {
        SmResponder {
            sm,
            stats,
            sets_logged: HashSet::new(),
            pollers_logged: HashSet::new(),
        }
    }

    /// The manager's SMInfo as `req` (a SubnGet/SubnSet(SMInfo)) may see it: the SM_Key is
    /// returned only when the request passes the M_Key check of the manager's port (IBA vol. 1
    /// ch. 14, SMInfo: SM_Key reads 0 to an unauthenticated requester; OpenSM applies the same
    /// rule and, with a key of its own, ignores a master whose SMInfo carries another key).
    fn sm_info(&self, req: &Smp) -> SmInfo {
        let m_key = self.sm.m_key.load(Ordering::Relaxed);
        let authenticated = m_key == 0 || req.m_key() == m_key;
        SmInfo {
            guid: self.sm.guid.load(Ordering::Relaxed),
            sm_key: if authenticated {
                self.sm.sm_key.load(Ordering::Relaxed)
            } else {
                0
            },
            act_count: self.stats.sent.load(Ordering::Relaxed) as u32,
            priority: self.sm.priority.load(Ordering::Relaxed),
            state: self.sm.state.load(Ordering::Relaxed),
        }
    }

    /// The GetResp to `req` (received from source LID `slid`) and the LID to address it to:
    /// the source LID for a LID-routed request; for a directed-route one the permissive LID
    /// (the return path steers it), or `slid` when the request's directed part ended at a
    /// switch and a LID-routed part (DrDLID) brought it here.
    pub(super) fn answer(&mut self, req: &Smp, slid: u16) -> (Smp, u16) {
        self.stats.sm_requests.fetch_add(1, Ordering::Relaxed);
        let to = if req.class() == CLASS_SMP_DR && req.dr_dlid() == PERMISSIVE_LID {
            PERMISSIVE_LID
        } else {
            slid
        };
        if req.attr_id() != ATTR_SM_INFO {
            return (req.response(STATUS_UNSUPPORTED_ATTR, &[0u8; SMP_DATA_SIZE]), to);
        }
        let dr = req.class() == CLASS_SMP_DR;
        if req.method() == METHOD_SET {
            self.stats.sm_set_requests.fetch_add(1, Ordering::Relaxed);
            let from = SmInfo::decode(req.data());
            let modifier = req.attr_mod();
            if self.sets_logged.len() < MAX_REMEMBERED_REQUESTERS && self.sets_logged.insert((from.guid, modifier)) {
                tracing::warn!(
                    requester_guid = %format!("0x{:016x}", from.guid),
                    requester_priority = from.priority,
                    requester_state = from.state,
                    modifier = sminfo_modifier_name(modifier),
                    directed_route = dr,
                    "another subnet manager sent SubnSet(SMInfo); this manager stays master (no handover) and \
                     answers with its current SMInfo"
                );
            }
        } else {
            let key = if dr {
                (CLASS_SMP_DR, req.return_path().to_vec())
            } else {
                (CLASS_SMP_LID, slid.to_be_bytes().to_vec())
            };
            if self.pollers_logged.len() < MAX_REMEMBERED_REQUESTERS && self.pollers_logged.insert(key) {
                tracing::info!(
                    source_lid = slid,
                    directed_route = dr,
                    return_path = ?req.return_path(),
                    "SMInfo polled on the manager's port (sminfo or another subnet manager); answering as {}",
                    if self.sm.state.load(Ordering::Relaxed) == crate::mad::SM_STATE_MASTER {
                        "master"
                    } else {
                        "not yet master"
                    }
                );
            }
        }
        (req.response(0, &self.sm_info(req).encode()), to)
    }
}
