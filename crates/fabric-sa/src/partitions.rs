//! Partitions as the SA sees them: per end port its P_Key table (bit 15 = full member) and the
//! IPoIB broadcast groups the configuration asks for. The daemon builds a [`Partitions`] from
//! its partitions file (the `fabric-partitions` crate; this crate does not depend on it) and
//! hands it to [`crate::SaService::set_partitions`].
//!
//! The membership rules are OpenSM's (`osm_pkey.c`):
//! * two ports **share** a P_Key when both tables hold an entry of the same base (the low 15
//!   bits) and at least one of the two entries is a full member (`match_pkey`): limited with
//!   limited never communicate;
//! * a port **has** a P_Key when its table holds an entry of that base, whatever the
//!   membership (`osm_physp_has_pkey`);
//! * the **common** P_Key of two ports is the first shared one in OpenSM's order of the bases
//!   (its map is keyed by the base in network byte order compared as a host integer, i.e. the
//!   byte-reversed base on x86), answered as the first port's entry.
//!
//! Without a [`Partitions`] (none set yet) every end port is a full member of the default
//! partition 0xFFFF only.

use std::collections::HashMap;

use fabric_topology::Guid;

/// The default P_Key (full member of the default partition).
pub const DEFAULT_PKEY: u16 = 0xffff;
/// The membership bit of a P_Key (set: full member; clear: limited member).
pub const PKEY_FULL: u16 = 0x8000;
/// OpenSM's default IPoIB broadcast group Q_Key.
pub const IPOIB_QKEY: u32 = 0x0000_0b1b;
/// Multicast scope "link-local" (IBA 4.1.1).
pub const SCOPE_LINK_LOCAL: u8 = 0x2;

/// The partition of a P_Key (its low 15 bits).
pub fn pkey_base(pkey: u16) -> u16 {
    pkey & 0x7fff
}

/// Whether a P_Key is a full-membership one.
pub fn is_full(pkey: u16) -> bool {
    pkey & PKEY_FULL != 0
}

/// An invalid P_Key (base 0: 0x0000 or 0x8000), as OpenSM's `ib_pkey_is_invalid`.
pub fn pkey_invalid(pkey: u16) -> bool {
    pkey_base(pkey) == 0
}

/// One IPoIB group the configuration asks for (OpenSM creates them at start and keeps them
/// without members: "well-known" groups).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpoibGroupSpec {
    /// The partition's P_Key (the group's P_Key has the full-member bit set, as OpenSM).
    pub pkey: u16,
    /// The groups' MGIDs; their scope nibble is replaced by `scope`. Empty: the IPv4
    /// broadcast group of the partition ([`ipv4_broadcast_mgid`]).
    pub mgids: Vec<[u8; 16]>,
    /// MTU code (IBA: 1 = 256 … 5 = 4096).
    pub mtu: u8,
    /// Rate code (IBA table 205).
    pub rate: u8,
    pub sl: u8,
    /// Multicast scope (0: link-local, OpenSM's default).
    pub scope: u8,
    pub qkey: u32,
    pub tclass: u8,
    pub flow_label: u32,
}

impl IpoibGroupSpec {
    /// The scope the groups are created in (0 means link-local).
    pub fn effective_scope(&self) -> u8 {
        if self.scope == 0 {
            SCOPE_LINK_LOCAL
        } else {
            self.scope & 0x0f
        }
    }

    /// The MGIDs of the groups this spec creates, scope set.
    pub fn group_mgids(&self) -> Vec<[u8; 16]> {
        let scope = self.effective_scope();
        if self.mgids.is_empty() {
            return vec![ipv4_broadcast_mgid(self.pkey, scope)];
        }
        self.mgids
            .iter()
            .map(|m| {
                let mut m = *m;
                m[1] = (m[1] & 0xf0) | scope;
                m
            })
            .collect()
    }
}

/// The IPv4 IPoIB broadcast MGID of partition `pkey` in `scope`:
/// `ff1S:401b:PPPP:0000:0000:0000:ffff:ffff` (RFC 4391), P_Key with the full bit set.
pub fn ipv4_broadcast_mgid(pkey: u16, scope: u8) -> [u8; 16] {
    let mut m = [0u8; 16];
    m[0] = 0xff;
    m[1] = 0x10 | (scope & 0x0f);
    m[2] = 0x40;
    m[3] = 0x1b;
    m[4..6].copy_from_slice(&(pkey | PKEY_FULL).to_be_bytes());
    m[12..16].fill(0xff);
    m
}

/// The IPoIB signature of an MGID (bytes 2..4: 0x401B IPv4, 0x601B IPv6), if it has one.
pub fn ipoib_signature(mgid: &[u8; 16]) -> Option<u16> {
    let sig = u16::from_be_bytes([mgid[2], mgid[3]]);
    matches!(sig, 0x401b | 0x601b).then_some(sig)
}

/// The partitions the SA enforces: per end-port GUID its P_Key table and the IPoIB groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Partitions {
    /// Per end-port GUID (CA port, switch port 0) its P_Key table, index = P_Key index (0 =
    /// an unused entry). A port absent from the map has no P_Key at all: no path, no join.
    pub tables: HashMap<Guid, Vec<u16>>,
    /// The IPoIB groups to create (well-known groups).
    pub ipoib_groups: Vec<IpoibGroupSpec>,
}

/// The table of every port when no [`Partitions`] was set.
static DEFAULT_TABLE: [u16; 1] = [DEFAULT_PKEY];

/// The P_Key tables in force: a [`Partitions`], or the default (every port full member of
/// 0xFFFF only).
#[derive(Clone, Copy, Debug, Default)]
pub struct PkeyTables<'a> {
    parts: Option<&'a Partitions>,
}

impl<'a> PkeyTables<'a> {
    /// The tables of `parts`, or the default ones for `None`.
    pub fn new(parts: Option<&'a Partitions>) -> Self {
        PkeyTables { parts }
    }

    /// Whether these are the default tables (no partitions set).
    pub fn is_default(&self) -> bool {
        self.parts.is_none()
    }

    /// The P_Key table of end port `guid` (empty when it has none).
    pub fn table(&self, guid: Guid) -> &'a [u16] {
        match self.parts {
            None => &DEFAULT_TABLE,
            Some(p) => p.tables.get(&guid).map_or(&[], Vec::as_slice),
        }
    }

    /// The entry of port `guid` in the partition of `pkey` (any membership), if any.
    pub fn entry(&self, guid: Guid, pkey: u16) -> Option<u16> {
        find_base(self.table(guid), pkey)
    }

    /// Whether port `guid` is in the partition of `pkey` (OpenSM's `osm_physp_has_pkey`).
    pub fn has_pkey(&self, guid: Guid, pkey: u16) -> bool {
        self.entry(guid, pkey).is_some()
    }

    /// Whether ports `a` and `b` share the partition of `pkey`, one at least as a full member
    /// (OpenSM's `osm_physp_share_this_pkey`).
    pub fn share_this_pkey(&self, a: Guid, b: Guid, pkey: u16) -> bool {
        match (self.entry(a, pkey), self.entry(b, pkey)) {
            (Some(x), Some(y)) => is_full(x) || is_full(y),
            _ => false,
        }
    }

    /// The first P_Key ports `a` and `b` share (OpenSM's `osm_physp_find_common_pkey`), as
    /// `a`'s entry; `None` when they share none.
    pub fn common_pkey(&self, a: Guid, b: Guid) -> Option<u16> {
        common_pkey_of(self.table(a), self.table(b))
    }

    /// Whether ports `a` and `b` share any partition.
    pub fn share_any(&self, a: Guid, b: Guid) -> bool {
        self.common_pkey(a, b).is_some()
    }
}

/// The entry of `table` in the partition of `pkey`.
fn find_base(table: &[u16], pkey: u16) -> Option<u16> {
    let base = pkey_base(pkey);
    if base == 0 {
        return None;
    }
    // A full-member entry wins over a limited one of the same partition.
    let mut found = None;
    for &e in table {
        if pkey_base(e) == base {
            if is_full(e) {
                return Some(e);
            }
            found = Some(e);
        }
    }
    found
}

/// See [`PkeyTables::common_pkey`].
fn common_pkey_of(a: &[u16], b: &[u16]) -> Option<u16> {
    a.iter()
        .filter(|&&e| !pkey_invalid(e))
        .filter_map(|&e| {
            let x = find_base(a, e)?;
            let y = find_base(b, e)?;
            (is_full(x) || is_full(y)).then_some(x)
        })
        .min_by_key(|&x| pkey_base(x).swap_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(tables: &[(Guid, &[u16])]) -> Partitions {
        Partitions {
            tables: tables.iter().map(|(g, t)| (*g, t.to_vec())).collect(),
            ipoib_groups: Vec::new(),
        }
    }

    #[test]
    fn limited_with_limited_never_shares_full_with_either_does() {
        let p = parts(&[(1, &[0x7fff, 0x8001]), (2, &[0xffff, 0x0001]), (3, &[0x0001]), (4, &[])]);
        let t = PkeyTables::new(Some(&p));
        assert!(t.share_this_pkey(1, 2, 0x7fff));
        assert!(t.share_this_pkey(1, 3, 0x0001));
        assert!(!t.share_this_pkey(2, 3, 0x8001), "limited with limited");
        assert!(!t.share_this_pkey(1, 4, 0xffff), "no table");
        assert_eq!(t.common_pkey(2, 3), None);
        assert!(t.has_pkey(3, 0x8001), "membership of any kind");
        assert!(!t.has_pkey(4, 0xffff));
        // The first shared base in OpenSM's (byte-reversed) order: 0x0001 → 0x0100 comes
        // before 0x7fff → 0xff7f; answered as the first port's entry.
        assert_eq!(t.common_pkey(1, 2), Some(0x8001));
        assert_eq!(t.common_pkey(2, 1), Some(0x0001));
        // Default tables: every port full member of 0xFFFF.
        let d = PkeyTables::new(None);
        assert_eq!(d.common_pkey(7, 8), Some(0xffff));
        assert!(d.share_this_pkey(7, 8, 0x7fff));
        assert!(!d.share_this_pkey(7, 8, 0x0002));
    }

    #[test]
    fn broadcast_mgids_carry_the_full_pkey_and_the_scope() {
        let m = ipv4_broadcast_mgid(0x7fff, SCOPE_LINK_LOCAL);
        assert_eq!(
            crate::records::Gid(m).to_string(),
            "ff12:401b:ffff::ffff:ffff",
            "OpenSM's default group"
        );
        let spec = IpoibGroupSpec {
            pkey: 0x0002,
            mgids: vec![ipv4_broadcast_mgid(0x0002, 2)],
            scope: 5,
            ..Default::default()
        };
        assert_eq!(spec.group_mgids()[0][1], 0x15);
        assert_eq!(ipoib_signature(&m), Some(0x401b));
        assert_eq!(ipoib_signature(&[0xff; 16]), None);
    }
}
