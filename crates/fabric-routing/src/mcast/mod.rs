//! Multicast routing: one spanning tree per MLID, the multicast forwarding tables (MFTs) and
//! their block diff, the reference data plane, and deadlock freedom together with unicast.
//!
//! * [`route_multicast`]: per group ([`McastGroup`]) a tree over the live switches and links,
//!   oriented by the ranking (the one Dmodc uses, through the same `prep::Oriented`
//!   preprocessing): every tree link goes up from child to parent, so every path between two
//!   members goes up then down (up*-down*) and cannot close a cycle with up*-down* unicast
//!   routes on the same VL. The root is a top switch reaching every member leaf downwards (on
//!   a degraded fabric, the highest level that does; failing that, the switches reaching the
//!   most member leaves); among the candidates the least loaded so far, the most constrained
//!   groups first (fewest candidates, then MLID), so groups spread over the top switches. A
//!   group whose members all sit on one leaf is rooted at that leaf (no uplink is used). Each
//!   switch climbs to a parent chosen by a hash of (MLID, switch) among its up-neighbours
//!   inside the root's down-closure (and a port among parallel cables the same way),
//!   spreading groups over the middle levels.
//! * Masks: a receiver's leaf port bit; for each tree link, the parent's down port when the
//!   child's subtree holds a receiver, and the child's up port when a receiver is outside it.
//!   A send-only member's port bit is never set, but its leaf is in the tree.
//! * Members that no tree reaches are listed in [`McastTree::unreachable`]; groups with an
//!   invalid MLID, an unknown end port or a repeated MLID in [`McastRouting::rejected`].
//!
//! Deterministic: the trees are built in parallel (rayon, over groups) but each from its own
//! input and the root choice is sequential in a fixed order, so the bytes do not depend on the
//! thread count.

mod cdg;
mod flood;
mod mft;
mod tree;

use fabric_topology::{EndPortId, Lid, PortNum, SwitchId};

pub use cdg::mcast_deadlock_free;
pub use flood::{flood, FloodError, FLOOD_MAX_COPIES};
pub use mft::{
    has_port, is_mlid, mask_ports, mft_diff, num_positions, MftBlockDiff, Mfts, PortMask, MFT_BLOCK_SIZE,
    MFT_POSITION_PORTS, MLID_BASE, MLID_MAX,
};
pub use tree::route_multicast;

/// A multicast group to route.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct McastGroup {
    /// Its multicast LID (`0xC000..=0xFFFE`).
    pub mlid: Lid,
    /// Full and non members: their CA port's bit is set in their leaf switch's MFT.
    pub receivers: Vec<EndPortId>,
    /// Send-only members: the tree reaches their leaf, their port bit is not set. An end port
    /// listed in both is a receiver.
    pub senders: Vec<EndPortId>,
}

/// One link of a tree, from a child switch up to its parent.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct McastTreeLink {
    /// The lower switch.
    pub child: SwitchId,
    /// The child's port of the link (its "up" port in the tree).
    pub child_port: PortNum,
    /// The higher switch.
    pub parent: SwitchId,
    /// The parent's port of the link.
    pub parent_port: PortNum,
}

/// The tree of one MLID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McastTree {
    /// The group's MLID.
    pub mlid: Lid,
    /// The root switch; `None` when no member is reachable at all.
    pub root: Option<SwitchId>,
    /// The switches of the tree (root included), by id.
    pub switches: Vec<SwitchId>,
    /// One link per non-root switch of the tree, by child id.
    pub links: Vec<McastTreeLink>,
    /// Members (receivers and senders) the tree does not reach: down, not cabled, on an
    /// unranked leaf or on a leaf the root cannot reach downwards. By id.
    pub unreachable: Vec<EndPortId>,
}

/// A group that was not routed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum McastInputError {
    /// The MLID is outside `0xC000..=0xFFFE`.
    #[error("MLID {mlid:#x} is not a multicast LID (0xc000..=0xfffe)")]
    MlidOutOfRange { mlid: Lid },
    /// A member is not an end port of the fabric.
    #[error("MLID {mlid:#x}: member {end_port:?} is not an end port (the fabric has {end_ports})")]
    UnknownEndPort {
        mlid: Lid,
        end_port: EndPortId,
        end_ports: usize,
    },
    /// The MLID was given again (the first group with it, in input order, is routed).
    #[error("MLID {mlid:#x} is given to more than one group; the later ones are ignored")]
    DuplicateMlid { mlid: Lid },
}

/// The result of [`route_multicast`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McastRouting {
    /// The tables: every switch × MLIDs `0xC000 ..=` the highest routed MLID.
    pub mfts: Mfts,
    /// One tree per routed group, by MLID.
    pub trees: Vec<McastTree>,
    /// Groups not routed, and why.
    pub rejected: Vec<McastInputError>,
}

impl McastRouting {
    /// The tree of `mlid`, if it was routed.
    pub fn tree(&self, mlid: Lid) -> Option<&McastTree> {
        self.trees
            .binary_search_by_key(&mlid, |t| t.mlid)
            .ok()
            .map(|i| &self.trees[i])
    }
}

#[cfg(test)]
mod tests;
