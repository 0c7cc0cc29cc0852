//! Deadlock freedom of multicast and unicast together on one VL ([`mcast_deadlock_free`]):
//! the channel-dependency graph of the unicast base LIDs ([`crate::deadlock`]) plus the
//! dependencies the MFTs create, acyclic.

use fabric_topology::{Fabric, SwitchId};

use super::mft::{mask_ports, Mfts, MLID_BASE};
use crate::deadlock::{edges_acyclic, unicast_cdg};
use crate::engine::LidSet;
use crate::lft::Lfts;
use crate::lid::LidPlan;

/// Whether the channel-dependency graph of the unicast LFTs (end-port base LIDs and switch
/// LIDs) together with the multicast forwarding of `mfts` is acyclic, i.e. both can share one
/// VL without deadlock. A multicast dependency `(s→t) → (t→u)` exists when `s`'s mask for an
/// MLID has the port to `t` and `t`'s mask for that MLID has the port to `u` (a copy arriving
/// from `s` is forwarded to `u`); it is read from the tables, not from the trees, so it checks
/// what would be programmed.
pub fn mcast_deadlock_free(fabric: &Fabric, lfts: &Lfts, lids: &LidPlan, mfts: &Mfts) -> bool {
    let mut cdg = unicast_cdg(fabric, lids, lfts, LidSet::Base);
    let ns = cdg.ns.min(mfts.num_switches());
    for s in 0..ns {
        let ssw = SwitchId(s as u32);
        for (slot, &ms) in mfts.row(ssw).iter().enumerate() {
            if ms == [0; 4] {
                continue;
            }
            let mlid = MLID_BASE + slot as u32;
            // A copy leaving s through p arrives at t through i and leaves t through every
            // other port of t's mask.
            for p in mask_ports(ms) {
                let (Some(from), Some((t, i))) = (cdg.channel(s, p), fabric.switch_link_live(ssw, p)) else {
                    continue;
                };
                for q in mfts.ports(t, mlid) {
                    if q == i {
                        continue;
                    }
                    if let Some(to) = cdg.channel(t.idx(), q) {
                        cdg.edges.push((from, to));
                    }
                }
            }
        }
    }
    edges_acyclic(cdg.nchan, &cdg.edges)
}
