//! Traps 64 (GID in service) and 65 (GID out of service), the only traps fabricd generates:
//! which end ports changed between two snapshots, their Notices, and the subscribers each
//! Notice is reported to.
//!
//! An end port (a CA port, or port 0 of a switch) is **in service** when it has a LID and its
//! PortState is Active. Between the previous and the new snapshot, every port GID that left
//! that set gives a trap 65, every one that entered it a trap 64 (65s first, each kind in
//! GUID order). A snapshot without any node (the service's initial empty one, a driver that
//! published nothing yet) is no information: no trap is derived from or to it, so the first
//! publish generates none.
//!
//! The Notice is OpenSM's (`state_mgr_report_new_ports`, `osm_drop_mgr.c`): IsGeneric 1,
//! Type 3 (subnet management), ProducerType 4 (class manager: the SM issues these traps),
//! IssuerLID the SM's LID, IssuerGID the SM port's GID, the port GID at DataDetails bytes
//! 6..22. Subscribers are matched as OpenSM's `match_notice_to_inf_rec`: a subscription GID,
//! or LID range, is compared with the **issuer** (the SM) — for these two traps the port is
//! in the data, not the issuer; Type, TrapNumber and ProducerType match when equal or all
//! ones. A subscriber whose LID is not an end port in service in the new snapshot gets nothing.

use std::collections::BTreeSet;

use fabric_topology::Guid;

use super::{Registry, Subscription};
use crate::records::inform_info::{ALL_LIDS, ANY, ANY_PRODUCER};
use crate::records::notice::{TRAP_GID_IN_SERVICE, TRAP_GID_OUT_OF_SERVICE};
use crate::records::{Gid, Notice, Record};
use crate::subnet::{Port, Subnet};
use crate::wire::{self, RmppHeader, SaHeader, MAD_SIZE, SA_HEADER_SIZE};

/// PortInfo PortState Active.
const PORT_STATE_ACTIVE: u8 = 4;

/// The end ports of `subnet` in service (see the module documentation), by port GUID.
pub fn in_service_end_ports(subnet: &Subnet) -> BTreeSet<Guid> {
    subnet
        .ports
        .iter()
        .filter(|p| in_service(subnet, p))
        .map(|p| p.guid)
        .collect()
}

/// Whether `p` is an end port in service: a CA port or switch port 0, with a LID, Active.
fn in_service(subnet: &Subnet, p: &Port) -> bool {
    let Some(node) = subnet.nodes.get(p.node as usize) else {
        return false;
    };
    let end_port = !node.is_switch() || p.port_num == 0;
    end_port && p.lid() != 0 && p.port_info[32] & 0x0f == PORT_STATE_ACTIVE
}

/// The Notice of trap `trap` (64 or 65) about port `guid`, issued by the SM of `subnet`
/// ([`Notice::gid_in_out_of_service`]).
pub fn gid_notice(subnet: &Subnet, trap: u16, guid: Guid) -> Notice {
    let prefix = subnet.subnet_prefix;
    Notice::gid_in_out_of_service(
        trap,
        Gid::new(prefix, guid),
        subnet.sm.lid,
        Gid::new(prefix, subnet.sm.guid),
    )
}

/// The Notices owed for the change from `old` to `new`: traps 65, then traps 64.
pub fn gid_change_notices(old: &Subnet, new: &Subnet) -> Vec<Notice> {
    if old.nodes.is_empty() || new.nodes.is_empty() {
        return Vec::new();
    }
    let (before, after) = (in_service_end_ports(old), in_service_end_ports(new));
    let out = before
        .difference(&after)
        .map(|&g| gid_notice(new, TRAP_GID_OUT_OF_SERVICE, g));
    let inn = after
        .difference(&before)
        .map(|&g| gid_notice(new, TRAP_GID_IN_SERVICE, g));
    out.chain(inn).collect()
}

/// Whether subscription `s` asks for `notice` (OpenSM's `match_notice_to_inf_rec`).
pub fn subscription_matches(s: &Subscription, notice: &Notice) -> bool {
    let ii = &s.inform_info;
    if ii.gid != Gid::default() {
        if ii.gid != notice.issuer_gid {
            return false;
        }
    } else if ii.lid_range_begin != ALL_LIDS {
        let end = if ii.lid_range_end == 0 {
            ii.lid_range_begin
        } else {
            ii.lid_range_end
        };
        if !(ii.lid_range_begin..=end).contains(&notice.issuer_lid) {
            return false;
        }
    }
    if (ii.is_generic != 0) != (notice.is_generic != 0) {
        return false;
    }
    if ii.trap_type != ANY && ii.trap_type != u16::from(notice.notice_type) {
        return false;
    }
    (ii.trap_number == ANY || ii.trap_number == notice.trap_number)
        && (ii.producer_type == ANY_PRODUCER || ii.producer_type == notice.producer_type)
}

impl Registry {
    /// The subscriptions `notice` is reported to (see [`subscribers_for`]).
    pub fn subscribers_for<'a>(
        &'a self,
        notice: &'a Notice,
        subnet: &'a Subnet,
    ) -> impl Iterator<Item = &'a Subscription> + 'a {
        subscribers_for(&self.subscriptions, notice, subnet)
    }
}

/// The subscriptions of `subscriptions` that `notice` is reported to: those asking for it
/// whose subscriber LID is an end port in service in `subnet` (the snapshot the notice is
/// about).
pub fn subscribers_for<'a>(
    subscriptions: &'a [Subscription],
    notice: &'a Notice,
    subnet: &'a Subnet,
) -> impl Iterator<Item = &'a Subscription> + 'a {
    subscriptions.iter().filter(move |s| {
        subnet.port_by_lid(s.lid).is_some_and(|p| in_service(subnet, p)) && subscription_matches(s, notice)
    })
}

/// The Report MAD carrying `notice` (SubnAdm class, version 2, method Report, attribute
/// Notice, transaction id `tid`), as OpenSM's `send_report` builds it.
pub fn report_mad(notice: &Notice, tid: u64) -> [u8; MAD_SIZE] {
    let mut b = [0u8; MAD_SIZE];
    let h = SaHeader {
        class_version: wire::SA_CLASS_VERSION,
        method: wire::METHOD_REPORT,
        status: 0,
        tid,
        attr_id: wire::attr::NOTICE,
        attr_mod: 0,
        rmpp: RmppHeader::default(),
        sm_key: 0,
        attr_offset: 0,
        component_mask: 0,
    };
    h.encode(&mut b);
    notice.encode(&mut b[SA_HEADER_SIZE..SA_HEADER_SIZE + Notice::SIZE]);
    b
}
