//! Multicast in the daemon: the SA's groups as routing input and the MFT blocks a generation
//! writes.
//!
//! The SA ([`fabric_sa::SaService`]) owns the groups (joins, leaves, MLIDs); every change calls
//! the listener the daemon set, which wakes the event loop: the next generation routes the
//! groups ([`fabric_routing::mcast::route_multicast`], one up*-down* tree per MLID, on the
//! routing pool with the unicast routing) and uploads the MFT blocks that changed with the LFT
//! blocks.

use std::collections::BTreeSet;

use fabric_ranking::Ranking;
use fabric_routing::mcast::{mft_diff, num_positions, route_multicast, McastGroup, McastRouting, MftBlockDiff, Mfts};
use fabric_southbound::MftBlockWrite;
use fabric_topology::{Fabric, SwitchId};

/// JoinState bits that make a member receive (IBA 15.2.5.17: FullMember, NonMember); the
/// others (SendOnlyNonMember, SendOnlyFullMember) only send.
pub const RECEIVING_JOIN_STATES: u8 = 0x1 | 0x2;

/// The routing groups of the SA's groups on `fabric`: receivers and send-only members by end
/// port (members whose port the fabric does not know are left out: they are not routable).
pub fn routing_groups(fabric: &Fabric, groups: &[fabric_sa::McGroup]) -> Vec<McastGroup> {
    groups
        .iter()
        .filter(|g| !g.members.is_empty())
        .map(|g| {
            let mut receivers = Vec::new();
            let mut senders = Vec::new();
            for m in &g.members {
                let Some(e) = fabric.end_port_by_guid(m.port_guid) else {
                    continue;
                };
                if m.join_state & RECEIVING_JOIN_STATES != 0 {
                    receivers.push(e);
                } else {
                    senders.push(e);
                }
            }
            McastGroup {
                mlid: u32::from(g.mlid),
                receivers,
                senders,
            }
        })
        .collect()
}

/// Routes the SA's groups on the routed fabric; groups the routing refuses and members no
/// tree reaches are logged (and listed by `fabricctl mcast --trees`).
pub fn route(fabric: &Fabric, ranking: &Ranking, groups: &[fabric_sa::McGroup]) -> McastRouting {
    let groups = routing_groups(fabric, groups);
    if groups.is_empty() {
        // What `route_multicast` returns for no group (empty tables for every switch), without
        // its preparation of the whole fabric (~10-20 ms per generation at 35 000 nodes).
        return McastRouting {
            mfts: Mfts::new(fabric.num_switches(), 0),
            trees: Vec::new(),
            rejected: Vec::new(),
        };
    }
    let r = route_multicast(fabric, ranking, &groups);
    for e in &r.rejected {
        tracing::error!(error = %e, "multicast group not routed");
    }
    for t in r.trees.iter().filter(|t| !t.unreachable.is_empty()) {
        tracing::warn!(
            mlid = format_args!("{:#06x}", t.mlid),
            members = t.unreachable.len(),
            "multicast members unreachable by the group's tree (cut off from every root)"
        );
    }
    r
}

/// The MFT blocks of `new` to upload: those that differ from `installed` and every block of
/// the `resync` switches (up to the larger of the two tables, so stale entries are cleared);
/// switches that are physically down are skipped (returned: their whole MFT is written when
/// they are back).
pub fn select_mft_writes(
    physical: &Fabric,
    installed: &Mfts,
    new: &Mfts,
    resync: &BTreeSet<u32>,
) -> (Vec<MftBlockWrite>, Vec<u32>) {
    let mut diffs = mft_diff(installed, new, physical);
    if !resync.is_empty() {
        diffs.retain(|d| !resync.contains(&d.switch.0));
        let blocks = installed.num_blocks().max(new.num_blocks()).max(1) as u32;
        for &s in resync {
            if (s as usize) >= physical.num_switches() {
                continue;
            }
            let sw = SwitchId(s);
            for block in 0..blocks {
                for position in 0..num_positions(physical.switch(sw).nports) {
                    diffs.push(MftBlockDiff {
                        switch: sw,
                        block,
                        position,
                        entries: new.block_entries(sw, block, position),
                    });
                }
            }
        }
        diffs.sort_by_key(|d| (d.switch, d.block, d.position));
    }
    let mut writes = Vec::with_capacity(diffs.len());
    let mut skipped = BTreeSet::new();
    for d in diffs {
        let sw = physical.switch(d.switch);
        if sw.up {
            writes.push(MftBlockWrite {
                switch: sw.guid,
                block: d.block,
                position: d.position,
                entries: d.entries,
            });
        } else {
            skipped.insert(d.switch.0);
        }
    }
    (writes, skipped.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No group to route (none, or only groups without members and members the fabric does not
    /// know): the same routing as `route_multicast` itself gives, without preparing the fabric.
    #[test]
    fn no_routable_group_gives_what_route_multicast_gives() {
        let f = fabric_topology::gen::generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap();
        let r = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
        let empty = fabric_sa::McGroup {
            mgid: fabric_sa::records::Gid([0xff; 16]),
            mlid: 0xC000,
            pkey: 0xffff,
            qkey: 0,
            mtu: 4,
            rate: 3,
            sl: 0,
            well_known: true,
            members: Vec::new(),
        };
        for groups in [vec![], vec![empty]] {
            let want = route_multicast(&f, &r, &routing_groups(&f, &groups));
            assert_eq!(want.mfts.num_switches(), f.num_switches());
            assert_eq!(route(&f, &r, &groups), want);
        }
    }
}
