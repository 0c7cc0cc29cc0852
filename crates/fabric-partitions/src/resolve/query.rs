//! Queries on resolved [`PartitionTables`].

use fabric_topology::{Guid, PortNum};

use crate::ipoib::IpoibGroup;
use crate::pkey::{base, FULL_MEMBER_BIT, PKEY_BASE_MASK};
use crate::resolve::{PartitionTables, ResolveIssue, ResolvedPartition, PKEY_BLOCK_ENTRIES};

/// A table cut in 32-entry PartitionTable blocks (block `i` = entries `32·i ..`), zero-padded;
/// at least one block (an empty table is one block of zeros, which clears the port).
pub fn blocks(table: &[u16]) -> Vec<[u16; PKEY_BLOCK_ENTRIES]> {
    let n = table.len().div_ceil(PKEY_BLOCK_ENTRIES).max(1);
    let mut out = vec![[0u16; PKEY_BLOCK_ENTRIES]; n];
    for (i, &e) in table.iter().enumerate() {
        out[i / PKEY_BLOCK_ENTRIES][i % PKEY_BLOCK_ENTRIES] = e;
    }
    out
}

/// Whether two table entries let their ports talk (IBA 10.9.3): same partition, neither the
/// invalid P_Key, at least one full member.
fn entries_match(a: u16, b: u16) -> bool {
    base(a) != 0 && base(a) == base(b) && (a & FULL_MEMBER_BIT != 0 || b & FULL_MEMBER_BIT != 0)
}

impl PartitionTables {
    /// The P_Key table of a port (an end port by its port GUID, a switch's management port 0 by
    /// the switch GUID), in index order; `None` for a port in no partition.
    pub fn table(&self, port_guid: Guid) -> Option<&[u16]> {
        self.ports
            .binary_search_by_key(&port_guid, |(g, _)| *g)
            .ok()
            .map(|i| self.ports[i].1.as_slice())
    }

    /// The enforcement table of a switch external port facing an end port (the end port's table,
    /// as OpenSM's partition enforcement); `None` for other ports or without enforcement.
    pub fn switch_port_table(&self, node_guid: Guid, port: PortNum) -> Option<&[u16]> {
        self.switch_ports
            .binary_search_by_key(&(node_guid, port), |(k, _)| *k)
            .ok()
            .map(|i| self.switch_ports[i].1.as_slice())
    }

    /// Every port table, ascending by port GUID.
    pub fn port_tables(&self) -> impl Iterator<Item = (Guid, &[u16])> + '_ {
        self.ports.iter().map(|(g, t)| (*g, t.as_slice()))
    }

    /// Every enforcement table, ascending by (switch GUID, port).
    pub fn switch_port_tables(&self) -> impl Iterator<Item = (Guid, PortNum, &[u16])> + '_ {
        self.switch_ports.iter().map(|((g, p), t)| (*g, *p, t.as_slice()))
    }

    /// The partitions with at least one member port, ascending by P_Key.
    pub fn partitions(&self) -> &[ResolvedPartition] {
        &self.partitions
    }

    /// Members of the partition `pkey` (bit 15 ignored): (port GUID, full member), ascending by
    /// GUID; empty for an unknown or empty partition.
    pub fn members(&self, pkey: u16) -> Vec<(Guid, bool)> {
        let b = pkey & PKEY_BASE_MASK;
        self.partitions
            .binary_search_by_key(&b, |p| p.pkey)
            .map(|i| self.partitions[i].members.clone())
            .unwrap_or_default()
    }

    /// The IPoIB broadcast groups to create: those of the partitions with a member.
    pub fn ipoib_groups(&self) -> &[IpoibGroup] {
        &self.ipoib
    }

    /// What the resolution could not do as the file asked.
    pub fn issues(&self) -> &[ResolveIssue] {
        &self.issues
    }

    /// The partitions `a` and `b` can talk in (both in it, at least one a full member), as 15-bit
    /// P_Keys in the order OpenSM's PathRecord search meets them (see [`Self::shared_pkey`]).
    pub fn shared_pkeys(&self, a: Guid, b: Guid) -> Vec<u16> {
        let (Some(ta), Some(tb)) = (self.table(a), self.table(b)) else {
            return Vec::new();
        };
        let mut out: Vec<u16> = ta
            .iter()
            .filter(|&&ea| tb.iter().any(|&eb| entries_match(ea, eb)))
            .map(|&e| base(e))
            .collect();
        out.sort_unstable_by_key(|&p| opensm_order(p));
        out.dedup();
        out
    }

    /// The P_Key (15 bits, bit 15 clear) a path between `a` and `b` uses when the query names
    /// none: OpenSM's `osm_physp_find_common_pkey` takes the first shared partition of its
    /// per-port P_Key map, keyed by the P_Key in network byte order; on the little-endian hosts
    /// OpenSM runs on that is ascending order of the byte-swapped P_Key. Limited–limited is not
    /// shared. Symmetric.
    pub fn shared_pkey(&self, a: Guid, b: Guid) -> Option<u16> {
        self.shared_pkeys(a, b).first().copied()
    }

    /// The P_Key of a PathRecord from `src` to `dst` as OpenSM fills it: `src`'s own table entry
    /// (bit 15 = `src`'s membership) of [`Self::shared_pkey`].
    pub fn path_pkey(&self, src: Guid, dst: Guid) -> Option<u16> {
        let p = self.shared_pkey(src, dst)?;
        self.table(src)?.iter().copied().find(|&e| base(e) == p)
    }

    /// Whether `a` and `b` may talk with P_Key `pkey` (bit 15 ignored): both in the partition,
    /// at least one a full member (a query naming a P_Key; OpenSM's `osm_physp_share_this_pkey`).
    pub fn shares_pkey(&self, a: Guid, b: Guid, pkey: u16) -> bool {
        let b15 = pkey & PKEY_BASE_MASK;
        let find = |g: Guid| {
            self.table(g)
                .and_then(|t| t.iter().copied().find(|&e| b15 != 0 && base(e) == b15))
        };
        match (find(a), find(b)) {
            (Some(ea), Some(eb)) => entries_match(ea, eb),
            _ => false,
        }
    }

    /// Whether `port` is a full member of `pkey` (bit 15 ignored); `None` if not a member.
    pub fn is_full_member(&self, port: Guid, pkey: u16) -> Option<bool> {
        let b = pkey & PKEY_BASE_MASK;
        self.table(port)?
            .iter()
            .find(|&&e| b != 0 && base(e) == b)
            .map(|&e| e & FULL_MEMBER_BIT != 0)
    }
}

/// The order of OpenSM's P_Key maps on little-endian hosts (network-order key read as a host
/// integer).
fn opensm_order(pkey: u16) -> u16 {
    pkey.swap_bytes()
}
