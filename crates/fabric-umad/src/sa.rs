//! Subnet Administration (management class 0x03) and the other GSI classes that can reach the
//! manager's port.
//!
//! The manager's node is where clients send their SA queries (`saquery`, IPoIB, MPI path
//! lookups: SubnAdm MADs on QP1 to the MasterSMLID of their port). Once the driver attaches a
//! [`fabric_sa::SaService`] (`Transport::set_sa`), the transport thread's SA agent
//! (`transport::sa_agent`) answers them with it, RMPP included. Until then, [`GsiResponder`]
//! answers every SA request with MAD status 0x000C ("method/attribute combination not
//! supported", IBA vol. 1 13.4.7): the client gets a clean error at once instead of waiting
//! for its timeout. The response follows OpenSM's `osm_sa_send_error`: the request echoed with
//! the status, method Set answered as GetResp and every other request method with its
//! response bit set, SM_Key 0 (C15-0.1.5), AttributeOffset 0, a MultiPathRecord query answered
//! as PathRecord. The agent also uses [`GsiResponder`] for the guard classes.
//!
//! Why the agent must exist at all: the ibsim preload shim (umad2sim) looks up the receiving
//! descriptor of every MAD by its class and dereferences a null pointer when no agent of the
//! process registered that class (`pthread_mutex_lock(mutex=0x30)`: the process dies). ibsim
//! forwards to the client attached at a port every MAD it does not answer itself, i.e. every
//! GSI class but the PerfMgt attributes it simulates. So the device also registers, with an
//! empty method mask, the GSI classes of [`GUARD_CLASSES`]: under the shim their MADs are
//! delivered (and dropped here, logged once per class); on a real HCA an agent without methods
//! receives no unsolicited MAD, so nothing changes there.
//!
//! # Seam
//!
//! This module sees nothing of the driver: it depends on [`crate::mad`] only, and the driver's
//! records (`driver::state`) and locks are not reachable from here. Its whole interface is:
//!
//! * in: [`GsiResponder::answer`], called by the transport thread's SA agent with each GSI MAD
//!   addressed to the manager's port that no attached SA service answers (the received bytes,
//!   at most 232 valid) and the requester's LID;
//! * out: a [`GsiAnswer`], the MAD the thread sends back to the requester (same LID and QP,
//!   QP1's Q_Key, from the agent of the MAD's class: `transport::encode_gsi`) or nothing;
//! * the agents: the device registers [`CLASS_SUBN_ADM`] (version [`SA_CLASS_VERSION`], the
//!   request methods above, without kernel RMPP: RMPP is done in user space by the agent, the
//!   same on a real HCA and under the shim) and [`GUARD_CLASSES`] from the constants here.
//!
//! The SA service gets the subnet the same way, as data handed in (a read-only snapshot the
//! driver publishes after each sweep and LID configuration), never by reaching into the
//! driver's state or taking its locks: the answer runs on the transport thread, which must
//! never block on the driver.

use std::collections::HashSet;

use fabric_sa::request::unsupported;
use fabric_sa::wire::{SaHeader, METHOD_RESPONSE};

use crate::mad::MAD_SIZE;

/// Subnet Administration (SubnAdm) management class and class version (`fabric_sa::wire`'s;
/// the method and status constants are used from there too).
pub use fabric_sa::wire::{CLASS_SUBN_ADM, SA_CLASS_VERSION};
/// The well-known Q_Key of QP1 (GSI), used to answer GSI requests.
pub const QP1_QKEY: u32 = 0x8001_0000;

/// GSI classes (class, class version) registered with no methods so that the simulator shim has
/// a receiver for them: PerfMgt (attributes ibsim does not simulate; the same agent sends the
/// driver's own PerfMgt requests and gets their answers, matched by TID), BM, DevMgt, CM, SNMP
/// tunnelling, congestion control.
pub const GUARD_CLASSES: [(u8, u8); 6] = [(0x04, 1), (0x05, 1), (0x06, 1), (0x07, 2), (0x08, 1), (0x21, 2)];

/// Only the first 232 MAD bytes of a packet received through the simulator are valid.
const VALID_RX: usize = 232;
/// (class, source LID, method, attribute) combinations logged (beyond that, only counted).
const MAX_LOGGED: usize = 1024;

/// What [`GsiResponder::answer`] decided for one GSI MAD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GsiAnswer {
    /// Send this MAD back to the requester (same LID and QP, QP1's Q_Key).
    Reply(Box<[u8; MAD_SIZE]>),
    /// Nothing to send (a response, a Trap/Report/Send, a guard class, a runt).
    Drop,
}

/// Answers the GSI MADs (SA and the guard classes) that reach the manager's port; runs on the
/// transport thread.
#[derive(Debug, Default)]
pub struct GsiResponder {
    logged: HashSet<(u8, u16, u8, u16)>,
}

impl GsiResponder {
    /// The answer to `mad` (the received MAD bytes) from source LID `slid`.
    pub fn answer(&mut self, mad: &[u8], slid: u16) -> GsiAnswer {
        if mad.len() < 24 || mad[0] != 1 {
            return GsiAnswer::Drop;
        }
        let (class, method) = (mad[1], mad[3]);
        let attr = u16::from_be_bytes([mad[16], mad[17]]);
        if method & METHOD_RESPONSE != 0 {
            return GsiAnswer::Drop;
        }
        if class != CLASS_SUBN_ADM {
            self.log_once(class, slid, method, attr, None);
            return GsiAnswer::Drop;
        }
        // The request as received (at most 232 valid bytes), zero-filled to a whole MAD.
        let mut req = [0u8; MAD_SIZE];
        let n = mad.len().min(VALID_RX);
        req[..n].copy_from_slice(&mad[..n]);
        let Some(resp) = SaHeader::decode(&req).ok().and_then(|h| unsupported(&h, &req)) else {
            // Send, Trap, Report, TrapRepress.
            self.log_once(class, slid, method, attr, None);
            return GsiAnswer::Drop;
        };
        self.log_once(class, slid, method, attr, Some(resp.header.status));
        GsiAnswer::Reply(Box::new(resp.single_mad()))
    }

    fn log_once(&mut self, class: u8, slid: u16, method: u8, attr: u16, status: Option<u16>) {
        if self.logged.len() >= MAX_LOGGED || !self.logged.insert((class, slid, method, attr)) {
            return;
        }
        match status {
            Some(status) => tracing::warn!(
                source_lid = slid,
                method = %format!("{method:#04x}"),
                attribute = %format!("{attr:#06x}"),
                status = %format!("{status:#06x}"),
                "Subnet Administration request answered \"not supported\" (fabricd has no SA yet)"
            ),
            None => tracing::info!(
                class = %format!("{class:#04x}"),
                source_lid = slid,
                method = %format!("{method:#04x}"),
                attribute = %format!("{attr:#06x}"),
                "GSI MAD addressed to the manager's port dropped (class not served)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_sa::wire::attr::{MULTI_PATH_RECORD as ATTR_MULTIPATH_RECORD, PATH_RECORD as ATTR_PATH_RECORD};
    use fabric_sa::wire::status::{
        BAD_VERSION as STATUS_BAD_CLASS_VERSION, UNSUPPORTED_METHOD as STATUS_UNSUPPORTED_METHOD,
        UNSUPPORTED_METHOD_ATTR as STATUS_UNSUPPORTED_METHOD_ATTR,
    };
    use fabric_sa::wire::{
        METHOD_DELETE, METHOD_GET, METHOD_GET_MULTI, METHOD_GET_TABLE, METHOD_GET_TRACE_TABLE, METHOD_REPORT,
        METHOD_SEND, METHOD_SET, METHOD_TRAP, METHOD_TRAP_REPRESS,
    };

    /// Offsets in the SA MAD header (IBA vol. 1 15.2.1.1).
    const SM_KEY: usize = 36;
    const ATTR_OFFSET: usize = 44;

    /// A SubnAdm request as `saquery` sends it (header only; the record template after it).
    fn sa_request(version: u8, method: u8, attr: u16) -> [u8; MAD_SIZE] {
        let mut b = [0u8; MAD_SIZE];
        b[0] = 1;
        b[1] = CLASS_SUBN_ADM;
        b[2] = version;
        b[3] = method;
        b[8..16].copy_from_slice(&0x0000_0007_1234_5678u64.to_be_bytes());
        b[16..18].copy_from_slice(&attr.to_be_bytes());
        b[20..24].copy_from_slice(&7u32.to_be_bytes());
        b[SM_KEY..SM_KEY + 8].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        b[ATTR_OFFSET..ATTR_OFFSET + 2].copy_from_slice(&8u16.to_be_bytes());
        b[48..56].copy_from_slice(&0x1u64.to_be_bytes());
        b[56] = 0xab;
        b
    }

    fn reply(a: GsiAnswer) -> [u8; MAD_SIZE] {
        match a {
            GsiAnswer::Reply(b) => *b,
            GsiAnswer::Drop => panic!("expected a reply"),
        }
    }

    #[test]
    fn every_sa_query_method_gets_unsupported_with_its_response_method() {
        let mut r = GsiResponder::default();
        for (method, resp) in [
            (METHOD_GET, 0x81),
            (METHOD_SET, 0x81),
            (METHOD_GET_TABLE, 0x92),
            (METHOD_GET_TRACE_TABLE, 0x93),
            (METHOD_GET_MULTI, 0x94),
            (METHOD_DELETE, 0x95),
        ] {
            let req = sa_request(2, method, 0x0011);
            let b = reply(r.answer(&req, 5));
            assert_eq!(b[3], resp, "method {method:#04x}");
            assert_eq!(u16::from_be_bytes([b[4], b[5]]), STATUS_UNSUPPORTED_METHOD_ATTR);
            // TID, attribute and modifier echoed; SM_Key and AttributeOffset cleared.
            assert_eq!(b[8..24], req[8..24]);
            assert_eq!(b[SM_KEY..SM_KEY + 8], [0u8; 8]);
            assert_eq!(b[ATTR_OFFSET..ATTR_OFFSET + 2], [0u8; 2]);
            // Class, version, component mask and record template as received.
            assert_eq!(b[..3], req[..3]);
            assert_eq!(b[48..57], req[48..57]);
        }
    }

    #[test]
    fn bad_version_unknown_method_and_multipath_are_answered_as_iba_says() {
        let mut r = GsiResponder::default();
        let b = reply(r.answer(&sa_request(1, METHOD_GET, 0x0011), 5));
        assert_eq!(u16::from_be_bytes([b[4], b[5]]), STATUS_BAD_CLASS_VERSION);
        let b = reply(r.answer(&sa_request(2, 0x10, 0x0011), 5));
        assert_eq!(
            (b[3], u16::from_be_bytes([b[4], b[5]])),
            (0x90, STATUS_UNSUPPORTED_METHOD)
        );
        let b = reply(r.answer(&sa_request(2, METHOD_GET_MULTI, ATTR_MULTIPATH_RECORD), 5));
        assert_eq!(u16::from_be_bytes([b[16], b[17]]), ATTR_PATH_RECORD);
    }

    #[test]
    fn responses_reports_guard_classes_and_runts_are_not_answered() {
        let mut r = GsiResponder::default();
        assert_eq!(r.answer(&sa_request(2, 0x92, 0x0011), 5), GsiAnswer::Drop);
        assert_eq!(r.answer(&sa_request(2, 0x86, 0x0011), 5), GsiAnswer::Drop);
        for m in [METHOD_SEND, METHOD_TRAP, METHOD_REPORT, METHOD_TRAP_REPRESS] {
            assert_eq!(r.answer(&sa_request(2, m, 0x0011), 5), GsiAnswer::Drop);
        }
        for (class, _) in GUARD_CLASSES {
            let mut req = sa_request(1, METHOD_GET, 0x0010);
            req[1] = class;
            assert_eq!(r.answer(&req, 5), GsiAnswer::Drop);
        }
        assert_eq!(r.answer(&[1, 3, 2], 5), GsiAnswer::Drop);
    }
}
