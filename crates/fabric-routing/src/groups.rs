//! Grouped routing (thesis §3.4, "Grouped Xmodk"): Xmodk routings spread destinations by their
//! NID modulo the arities, so a subset of end ports whose NIDs share residues (one node type on
//! the same leaf port everywhere, or a job placed on such nodes) is coalesced onto few links.
//! Alg. 4 re-indexes the NIDs group by group — groups in a deterministic order, NID order inside
//! a group — and the Xmodk formula is applied to these gNIDs, which balances every group on its
//! own. Groups are given per end port: node types, or the batch scheduler's jobs.
//!
//! [`NodeGroups`] holds the groups and Alg. 4; the grouped engines stand next to their base
//! engine ([`crate::GroupedDmodc`] in `dmodc.rs`, [`crate::GroupedDmodk`] in `dmodk.rs`).

use fabric_topology::EndPortId;

use crate::engine::{RoutingContext, RoutingError};
use crate::prep::NONE;

/// A group key per end port (by [`EndPortId`]); groups are taken in increasing key order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeGroups {
    key: Vec<u32>,
}

impl NodeGroups {
    /// Groups from a key per end port id.
    pub fn new(key: Vec<u32>) -> Self {
        NodeGroups { key }
    }

    /// Groups from end-port sets (e.g. jobs, in the order given): set `i` is group `i`; an end
    /// port listed in several sets belongs to the first; end ports in no set form the last
    /// group (`sets.len()`). Ids beyond `num_end_ports` are ignored.
    pub fn from_sets<S: AsRef<[EndPortId]>>(num_end_ports: usize, sets: &[S]) -> Self {
        let rest = sets.len() as u32;
        let mut key = vec![rest; num_end_ports];
        for (i, set) in sets.iter().enumerate().rev() {
            for ep in set.as_ref() {
                if let Some(k) = key.get_mut(ep.idx()) {
                    *k = i as u32;
                }
            }
        }
        NodeGroups { key }
    }

    /// Number of end ports covered.
    pub fn len(&self) -> usize {
        self.key.len()
    }

    /// Whether no end port is covered.
    pub fn is_empty(&self) -> bool {
        self.key.is_empty()
    }

    /// Group key of an end port.
    pub fn key(&self, ep: EndPortId) -> u32 {
        self.key[ep.idx()]
    }

    /// Alg. 4: gNIDs from NIDs (per end port id; [`u32::MAX`] = no NID, kept). Groups in
    /// increasing key order, NID order inside a group, numbered from 0.
    pub fn reindex(&self, nids: &[u32]) -> Vec<u32> {
        let mut order: Vec<(u32, u32, u32)> = nids
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n != NONE)
            .map(|(i, &n)| (self.key.get(i).copied().unwrap_or(u32::MAX), n, i as u32))
            .collect();
        order.sort_unstable();
        let mut g = vec![NONE; nids.len()];
        for (x, &(_, _, i)) in order.iter().enumerate() {
            g[i as usize] = x as u32;
        }
        g
    }

    /// Whether the groups cover the fabric's end ports.
    pub(crate) fn check(&self, ctx: &RoutingContext<'_>) -> Result<(), RoutingError> {
        let n = ctx.fabric.num_end_ports();
        if self.key.len() != n {
            return Err(RoutingError::GroupsMismatch {
                groups: self.key.len(),
                end_ports: n,
            });
        }
        Ok(())
    }
}
