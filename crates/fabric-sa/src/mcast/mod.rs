//! Multicast groups (MCMemberRecord, IBA 15.2.5.17): creation and joins (`join`), leaves and
//! queries (`answer`), MLID allocation, the IPoIB well-known groups a [`Partitions`] asks for,
//! and the removal of members whose port went out of service.
//!
//! Behaviour follows OpenSM 3.3.23 (`osm_sa_mcmember_record.c`, `osm_multicast.c`,
//! `osm_prtn.c`) except where `docs/multicast-partitions.md` ("Subnet Administration") says
//! otherwise. The state ([`McastState`]) lives in the [`crate::registry::Registry`] (it is
//! persisted with it) and is changed under the registry lock by [`crate::SaService`].
//!
//! Invariants (checked by the tests): every group has a distinct MLID in
//! `MLID_START..MLID_START + limit`; a group that is not well-known has at least one full
//! member (it is deleted, its MLID released, when its last full member leaves, as OpenSM's
//! `osm_mgrp_remove_port`: the remaining non-members leave with it); no member has JoinState 0.

mod answer;
mod join;

use std::collections::BTreeMap;

use fabric_topology::Guid;

pub(crate) use answer::{change, query};

use crate::partitions::{self, Partitions, PkeyTables};
use crate::records::{Gid, McMemberRecord};
use crate::request::Request;
use crate::subnet::Subnet;

/// What an MCMemberRecord request is answered against.
pub(crate) struct Ctx<'a, 'r> {
    pub subnet: &'a Subnet,
    pub pkeys: PkeyTables<'a>,
    pub req: &'a Request<'r>,
}

/// The port a request came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequesterPort {
    /// Not from the wire (LID 0: the daemon's gRPC): acts as the port a request is about.
    Local,
    /// The end port of the requester's GID (GRH) or LID.
    Port(Guid),
    /// A LID or GID of no end port of the snapshot.
    Unknown,
}

impl Ctx<'_, '_> {
    pub fn requester(&self) -> RequesterPort {
        let from = &self.req.from;
        if let Some(gid) = from.gid {
            let guid = u64::from_be_bytes(gid[8..16].try_into().unwrap_or_default());
            return match self.subnet.port_index_by_guid(guid) {
                Some(_) => RequesterPort::Port(guid),
                None => RequesterPort::Unknown,
            };
        }
        if from.lid == 0 {
            return RequesterPort::Local;
        }
        match self.subnet.port_by_lid(from.lid) {
            Some(p) => RequesterPort::Port(p.guid),
            None => RequesterPort::Unknown,
        }
    }
}

/// The first multicast LID.
pub const MLID_START: u16 = 0xc000;
/// The last multicast LID (0xFFFF is the permissive LID).
pub const MLID_END: u16 = 0xfffe;
/// MLIDs usable when no switch of the snapshot reports its MulticastFDBCap.
pub const DEFAULT_MCAST_FDB_CAP: usize = 1024;
/// At most this many groups (one MLID each).
pub const MAX_GROUPS: usize = (MLID_END - MLID_START + 1) as usize;

/// JoinState bits (IBA table 175).
pub mod join_state {
    pub const FULL: u8 = 0x1;
    pub const NON: u8 = 0x2;
    pub const SEND_ONLY_NON: u8 = 0x4;
    /// SendOnlyFullMember (IBA 1.3): stored and cleared like any bit; as in OpenSM 3.3.23 it
    /// neither creates a group nor keeps one alive.
    pub const SEND_ONLY_FULL: u8 = 0x8;
}

/// A multicast group as the daemon sees it (routing, `fabricctl mcast`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct McGroup {
    pub mgid: Gid,
    pub mlid: u16,
    pub pkey: u16,
    pub qkey: u32,
    /// MTU code (1 = 256 … 5 = 4096).
    pub mtu: u8,
    /// Rate code (IBA table 205).
    pub rate: u8,
    pub sl: u8,
    /// An IPoIB group of the partitions configuration: kept without members.
    pub well_known: bool,
    /// In port-GUID order.
    pub members: Vec<McMember>,
}

/// One member of a [`McGroup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct McMember {
    pub port_guid: Guid,
    /// JoinState bits ([`join_state`]): receivers have FULL or NON, senders only SEND_ONLY_*.
    pub join_state: u8,
}

/// One member as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub port_gid: Gid,
    pub join_state: u8,
    /// Joined by another port on its behalf (a trusted proxy).
    pub proxy: bool,
}

impl Member {
    fn is_full(&self) -> bool {
        self.join_state & join_state::FULL != 0
    }
}

/// One group as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    /// The group's record: MGID, Q_Key, MLID, MTU, TClass, P_Key, rate, packet lifetime (the
    /// selectors "exactly"), SL, FlowLabel, HopLimit, Scope, the creator's JoinState; PortGID
    /// and ProxyJoin zero.
    pub rec: McMemberRecord,
    pub well_known: bool,
    pub members: BTreeMap<Guid, Member>,
}

impl Group {
    fn full_members(&self) -> usize {
        self.members.values().filter(|m| m.is_full()).count()
    }
}

/// Every multicast group, by MGID, and the MLIDs they hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McastState {
    pub(crate) groups: BTreeMap<Gid, Group>,
    /// MLID → MGID of the group holding it.
    pub(crate) mlids: BTreeMap<u16, Gid>,
    /// Counter of the MGIDs the SA assigns (MGID 0 in a create).
    pub(crate) next_mgid: u32,
}

/// Why a group could not be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AddError {
    /// No MLID left under the limit.
    NoMlid,
}

impl McastState {
    /// No group at all.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups, in MLID order, as the daemon sees them.
    pub fn groups(&self) -> Vec<McGroup> {
        self.mlids
            .values()
            .filter_map(|mgid| self.groups.get(mgid))
            .map(|g| McGroup {
                mgid: g.rec.mgid,
                mlid: g.rec.mlid,
                pkey: g.rec.pkey,
                qkey: g.rec.qkey,
                mtu: g.rec.mtu,
                rate: g.rec.rate,
                sl: g.rec.sl,
                well_known: g.well_known,
                members: g
                    .members
                    .iter()
                    .map(|(&port_guid, m)| McMember {
                        port_guid,
                        join_state: m.join_state,
                    })
                    .collect(),
            })
            .collect()
    }

    /// How many MLIDs are allocated (one per group).
    pub fn mlids_in_use(&self) -> usize {
        self.mlids.len()
    }

    /// The lowest free MLID among the first `limit` ones.
    pub(crate) fn free_mlid(&self, limit: usize) -> Option<u16> {
        let limit = limit.min(MAX_GROUPS);
        let mut want = MLID_START;
        for &m in self.mlids.keys() {
            if m != want {
                break;
            }
            want += 1;
        }
        (usize::from(want - MLID_START) < limit).then_some(want)
    }

    /// Adds group `rec` (its MLID allocated here), empty.
    pub(crate) fn add_group(
        &mut self,
        mut rec: McMemberRecord,
        well_known: bool,
        limit: usize,
    ) -> Result<(), AddError> {
        let mlid = self.free_mlid(limit).ok_or(AddError::NoMlid)?;
        rec.mlid = mlid;
        self.mlids.insert(mlid, rec.mgid);
        self.groups.insert(
            rec.mgid,
            Group {
                rec,
                well_known,
                members: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// Deletes group `mgid` and releases its MLID.
    pub(crate) fn remove_group(&mut self, mgid: &Gid) {
        if let Some(g) = self.groups.remove(mgid) {
            self.mlids.remove(&g.rec.mlid);
        }
    }

    /// Removes the bits `leave` of member `guid` of group `mgid` (OpenSM's
    /// `osm_mgrp_remove_port`): the member stays while it keeps FullMember, or keeps some
    /// bit while another full member remains; when the group's last full member left, every
    /// member goes and the group is deleted (MLID released) unless it is well-known.
    /// Returns the member's JoinState after the leave.
    pub(crate) fn leave(&mut self, mgid: &Gid, guid: Guid, leave: u8) -> u8 {
        let Some(g) = self.groups.get_mut(mgid) else {
            return 0;
        };
        let Some(m) = g.members.get(&guid).copied() else {
            return 0;
        };
        let full_before = g.full_members();
        let new = m.join_state & !leave & 0x0f;
        let others_full = full_before - usize::from(m.is_full());
        let left = if new & join_state::FULL != 0 || (new != 0 && others_full > 0) {
            if let Some(x) = g.members.get_mut(&guid) {
                x.join_state = new;
            }
            new
        } else {
            g.members.remove(&guid);
            0
        };
        if m.is_full() && new & join_state::FULL == 0 && full_before == 1 {
            g.members.clear();
            if !g.well_known {
                self.remove_group(mgid);
            }
        }
        left
    }

    /// Removes every membership of the ports in `gone` (ports that went out of service);
    /// whether anything changed.
    pub(crate) fn remove_ports(&mut self, gone: &std::collections::BTreeSet<Guid>) -> bool {
        let mut changed = false;
        let hits: Vec<(Gid, Guid)> = self
            .groups
            .iter()
            .flat_map(|(mgid, g)| g.members.keys().filter(|k| gone.contains(k)).map(move |&k| (*mgid, k)))
            .collect();
        for (mgid, guid) in hits {
            self.leave(&mgid, guid, 0x0f);
            changed = true;
        }
        changed
    }

    /// Applies a partitions configuration: creates its IPoIB groups that do not exist yet
    /// (well-known, without members; an existing group of that MGID becomes well-known and
    /// keeps its parameters, as OpenSM's `osm_mcmr_rcv_find_or_create_new_mgrp`); a
    /// well-known group no longer configured becomes an ordinary group, deleted at once when
    /// it has no full member; members whose port is no longer in a group's partition leave
    /// it. Returns whether anything changed and the MGIDs that could not be created (no MLID
    /// left).
    pub(crate) fn apply_partitions(&mut self, parts: &Partitions, limit: usize) -> (bool, Vec<Gid>) {
        let mut changed = false;
        let mut failed = Vec::new();
        let mut wanted = std::collections::BTreeSet::new();
        for spec in &parts.ipoib_groups {
            for mgid in spec.group_mgids() {
                let mgid = Gid(mgid);
                wanted.insert(mgid);
                if let Some(g) = self.groups.get_mut(&mgid) {
                    if !g.well_known {
                        g.well_known = true;
                        changed = true;
                    }
                    continue;
                }
                let scope = spec.effective_scope();
                let rec = McMemberRecord {
                    mgid,
                    qkey: spec.qkey,
                    mtu_selector: 2,
                    mtu: spec.mtu,
                    tclass: spec.tclass,
                    pkey: spec.pkey | partitions::PKEY_FULL,
                    rate_selector: 2,
                    rate: spec.rate,
                    pkt_life_selector: 2,
                    pkt_life: crate::path::PACKET_LIFE_TIME,
                    sl: spec.sl,
                    flow_label: spec.flow_label,
                    hop_limit: if scope == partitions::SCOPE_LINK_LOCAL { 0 } else { 0xff },
                    scope,
                    join_state: join_state::FULL,
                    ..Default::default()
                };
                match self.add_group(rec, true, limit) {
                    Ok(()) => changed = true,
                    Err(AddError::NoMlid) => failed.push(mgid),
                }
            }
        }
        let unlisted: Vec<Gid> = self
            .groups
            .iter()
            .filter(|(m, g)| g.well_known && !wanted.contains(m))
            .map(|(m, _)| *m)
            .collect();
        for mgid in unlisted {
            changed = true;
            let Some(g) = self.groups.get_mut(&mgid) else { continue };
            g.well_known = false;
            if g.full_members() == 0 {
                self.remove_group(&mgid);
            }
        }
        // Members whose port left the group's partition.
        let pk = PkeyTables::new(Some(parts));
        let outside: Vec<(Gid, Guid)> = self
            .groups
            .iter()
            .flat_map(|(mgid, g)| {
                let pkey = g.rec.pkey;
                g.members
                    .keys()
                    .filter(move |&&k| !pk.has_pkey(k, pkey))
                    .map(move |&k| (*mgid, k))
            })
            .collect();
        for (mgid, guid) in outside {
            self.leave(&mgid, guid, 0x0f);
            changed = true;
        }
        (changed, failed)
    }
}

/// How many MLIDs the switches of `subnet` can hold: the least MulticastFDBCap (SwitchInfo
/// bytes 4..6) of the switches reporting one, [`DEFAULT_MCAST_FDB_CAP`] when none does,
/// never more than the multicast LID space.
pub fn mlid_limit(subnet: &Subnet) -> usize {
    subnet
        .nodes
        .iter()
        .filter(|n| n.is_switch())
        .filter_map(|n| n.switch_info.as_ref())
        .map(|si| usize::from(u16::from_be_bytes([si[4], si[5]])))
        .filter(|&c| c != 0)
        .min()
        .unwrap_or(DEFAULT_MCAST_FDB_CAP)
        .min(MAX_GROUPS)
}
