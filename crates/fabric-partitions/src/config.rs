//! The parsed partition configuration.

use fabric_topology::Guid;
use serde::{Deserialize, Serialize};

use crate::ipoib::IpoibGroup;
use crate::pkey::{DEFAULT_PKEY, PKEY_BASE_MASK};

/// The name OpenSM gives the default partition.
pub const DEFAULT_PARTITION_NAME: &str = "Default";
/// The configuration OpenSM uses when there is no partitions file.
pub const OPENSM_DEFAULT_TEXT: &str = "Default=0x7fff, ipoib : ALL=full ;";
/// Most partitions a configuration can hold: every 15-bit P_Key except the invalid 0.
pub const MAX_PARTITIONS: usize = 0x7fff;

/// How a port is a member of a partition.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Membership {
    /// Limited member (bit 15 clear): talks only to full members.
    Limited,
    /// Full member (bit 15 set).
    Full,
    /// Both entries; OpenSM adds the limited entry only with `allow_both_pkeys`, which is off by
    /// default, so this resolves to [`Membership::Full`] (as OpenSM's default).
    Both,
}

impl Membership {
    /// Whether the port gets the full-member entry (OpenSM without `allow_both_pkeys`).
    pub fn is_full(self) -> bool {
        !matches!(self, Membership::Limited)
    }
}

/// Which ports a member entry names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MemberSpec {
    /// `ALL`: every end port and every switch management port 0.
    All,
    /// `ALL_CAS`: every channel adapter port (every end port of the fabric model).
    AllCas,
    /// `ALL_SWITCHES`: every switch management port 0.
    AllSwitches,
    /// `ALL_ROUTERS`: every router port (the fabric model has no routers: none).
    AllRouters,
    /// `SELF`: the subnet manager's port.
    SelfPort,
    /// One port GUID.
    Guid(Guid),
}

/// One member entry of a statement, in file order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Which ports.
    pub spec: MemberSpec,
    /// Membership (the entry's `=full|limited|both`, else the statement's `defmember`).
    pub membership: Membership,
    /// Whether the statement had `indx0` (the P_Key goes to index 0 of these ports' tables).
    pub indx0: bool,
    /// 1-based line of the entry in the file (0 for built-in entries).
    pub line: u32,
}

/// One partition: every statement with its P_Key merged, in file order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// The first statement's name (OpenSM's rule), or the P_Key as 4 hex digits without a name.
    pub name: String,
    /// The 15-bit P_Key (bit 15 clear).
    pub pkey: u16,
    /// The IPoIB broadcast groups (`ipoib` flag): one per scope, the first statement giving a
    /// scope wins (OpenSM finds the existing group and keeps its parameters).
    pub ipoib: Vec<IpoibGroup>,
    /// Member entries of all statements, in file order (a later entry overrides an earlier one
    /// for the same port, as OpenSM's "will overwrite").
    pub members: Vec<Member>,
    /// 1-based line of the first statement (0 for the built-in default partition).
    pub line: u32,
}

/// A parsed `partitions.conf`.
///
/// The default partition (`Default`, P_Key 0x7fff) always exists, first: as OpenSM, before the
/// file every port is a limited member and the SM port a full member of it; the file's
/// `Default` statements then add to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionConfig {
    /// Partitions in order of first definition (the default partition first).
    pub partitions: Vec<Partition>,
}

impl PartitionConfig {
    /// The partition with this P_Key (bit 15 ignored).
    pub fn partition(&self, pkey: u16) -> Option<&Partition> {
        let base = pkey & PKEY_BASE_MASK;
        self.partitions.iter().find(|p| p.pkey == base)
    }

    /// Every IPoIB broadcast group the configuration asks for, in partition order then scope
    /// order. OpenSM drops the groups of partitions that end up without a member:
    /// `PartitionTables::ipoib_groups` gives the list after resolution.
    pub fn ipoib_groups(&self) -> Vec<IpoibGroup> {
        self.partitions.iter().flat_map(|p| p.ipoib.iter().cloned()).collect()
    }
}

impl Partition {
    /// The default partition before the file: every port limited, the SM port full.
    pub(crate) fn builtin_default() -> Partition {
        let member = |spec, membership| Member {
            spec,
            membership,
            indx0: false,
            line: 0,
        };
        Partition {
            name: DEFAULT_PARTITION_NAME.to_string(),
            pkey: DEFAULT_PKEY,
            ipoib: Vec::new(),
            members: vec![
                member(MemberSpec::All, Membership::Limited),
                member(MemberSpec::SelfPort, Membership::Full),
            ],
            line: 0,
        }
    }
}
