//! Resolution of a [`PartitionConfig`] on a fabric to P_Key tables (OpenSM's `osm_prtn.c` and
//! `osm_pkey_mgr.c`).

use std::collections::{BTreeMap, HashMap};

use fabric_topology::{Fabric, Guid, PortNum};
use serde::{Deserialize, Serialize};

use crate::config::{MemberSpec, PartitionConfig};
use crate::ipoib::IpoibGroup;
use crate::pkey::FULL_MEMBER_BIT;

mod order;
mod query;

pub use query::blocks;

/// Entries of one PartitionTable block.
pub const PKEY_BLOCK_ENTRIES: usize = 32;

/// Capacities the fabric model does not know (NodeInfo.PartitionCap, SwitchInfo
/// PartitionEnforcementCap): the daemon sets them from its configuration or discovery.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolveOptions {
    /// P_Key table entries of an end port or a switch management port 0 (PartitionCap);
    /// rounded up to whole 32-entry blocks as OpenSM does.
    pub partition_cap: u16,
    /// P_Key table entries of a switch external port (PartitionEnforcementCap); 0: the switches
    /// do not enforce partitions and get no enforcement tables.
    pub enforcement_cap: u16,
}

impl Default for ResolveOptions {
    /// One block (32 entries) each: the smallest table a partition-capable port has.
    fn default() -> Self {
        ResolveOptions {
            partition_cap: 32,
            enforcement_cap: 32,
        }
    }
}

/// Something the resolution could not do as the file asked (OpenSM logs these and goes on).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResolveIssue {
    /// A port GUID of the file is not a port of the fabric (ignored, as OpenSM).
    UnknownGuid {
        /// The partition's 15-bit P_Key.
        pkey: u16,
        /// The GUID of the file.
        guid: Guid,
        /// Its line (for `SELF`: the SM port GUID given to the resolution).
        line: u32,
    },
    /// `SELF` without an SM port (ignored).
    SelfWithoutSmPort {
        /// The partition's 15-bit P_Key.
        pkey: u16,
        /// The line of `SELF`.
        line: u32,
    },
    /// A partition without any member port: dropped with its IPoIB groups (as OpenSM).
    EmptyPartition {
        /// Its 15-bit P_Key.
        pkey: u16,
        /// Its name.
        name: String,
    },
    /// A port is in more partitions than its table holds: these P_Keys were left out.
    TableFull {
        /// The port (a switch's port 0 by the switch GUID).
        port_guid: Guid,
        /// Its table capacity in entries.
        capacity: usize,
        /// The entries left out (bit 15 = full), ascending.
        dropped: Vec<u16>,
    },
    /// The end port's table does not fit the switch port's enforcement table: not enforced there.
    NotEnforced {
        /// The switch.
        switch_guid: Guid,
        /// Its external port facing the end port.
        port: PortNum,
        /// Entries of the end port's table.
        needed: usize,
        /// The enforcement table's capacity in entries.
        capacity: usize,
    },
}

/// The members of one partition after resolution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedPartition {
    /// 15-bit P_Key.
    pub pkey: u16,
    /// Name.
    pub name: String,
    /// Member port GUIDs with `true` for a full member, ascending by GUID.
    pub members: Vec<(Guid, bool)>,
}

/// The P_Key tables of a fabric: the result of [`resolve`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionTables {
    /// Per port GUID (end ports, switch management ports 0 by the switch GUID), ascending: its
    /// table (index order; bit 15 = full member; 0 = an unused entry between used ones).
    pub(crate) ports: Vec<(Guid, Vec<u16>)>,
    /// Per switch external port facing an end port, ascending: its enforcement table.
    pub(crate) switch_ports: Vec<((Guid, PortNum), Vec<u16>)>,
    /// Non-empty partitions, ascending by P_Key.
    pub(crate) partitions: Vec<ResolvedPartition>,
    /// IPoIB groups of the non-empty partitions.
    pub(crate) ipoib: Vec<IpoibGroup>,
    /// What could not be done as asked.
    pub(crate) issues: Vec<ResolveIssue>,
}

/// [`resolve_with`] with [`ResolveOptions::default`] and no previous tables.
pub fn resolve(config: &PartitionConfig, fabric: &Fabric, sm_port: Option<Guid>) -> PartitionTables {
    resolve_with(config, fabric, sm_port, &ResolveOptions::default(), None)
}

/// Resolves `config` on `fabric` (`sm_port`: the port GUID `SELF` names; the SM port is always a
/// full member of the default partition).
///
/// Every port of the model is resolved, live or not (a port coming back gets its table). Table
/// order: the `indx0` P_Key, else the default partition, at index 0; with `previous` tables every
/// P_Key a port keeps stays at its index (as OpenSM, which keeps the indices the port has); the
/// other P_Keys fill the free entries in ascending P_Key order. The same inputs give the same
/// tables.
pub fn resolve_with(
    config: &PartitionConfig,
    fabric: &Fabric,
    sm_port: Option<Guid>,
    options: &ResolveOptions,
    previous: Option<&PartitionTables>,
) -> PartitionTables {
    let mut issues = Vec::new();
    let ports = Universe::new(fabric);
    // Member entries in file order (the built-in default entries, line 0, first).
    let mut events: Vec<(u32, usize, usize)> = Vec::new();
    for (pi, p) in config.partitions.iter().enumerate() {
        for (mi, m) in p.members.iter().enumerate() {
            events.push((m.line, pi, mi));
        }
    }
    events.sort_unstable();
    let mut membership: Vec<BTreeMap<Guid, bool>> = vec![BTreeMap::new(); config.partitions.len()];
    let mut indx0: HashMap<Guid, u16> = HashMap::new();
    for &(_, pi, mi) in &events {
        let p = &config.partitions[pi];
        let m = &p.members[mi];
        let mut apply = |g: Guid| {
            membership[pi].insert(g, m.membership.is_full());
            if m.indx0 {
                indx0.insert(g, p.pkey);
            } else if indx0.get(&g) == Some(&p.pkey) {
                indx0.remove(&g);
            }
        };
        match m.spec {
            MemberSpec::All => ports.all.iter().for_each(|&g| apply(g)),
            MemberSpec::AllCas => ports.cas.iter().for_each(|&g| apply(g)),
            MemberSpec::AllSwitches => ports.switches.iter().for_each(|&g| apply(g)),
            MemberSpec::AllRouters => {}
            MemberSpec::SelfPort => match sm_port {
                Some(g) if ports.contains(g) => apply(g),
                Some(guid) => issues.push(ResolveIssue::UnknownGuid {
                    pkey: p.pkey,
                    guid,
                    line: m.line,
                }),
                None if m.line == 0 => {}
                None => issues.push(ResolveIssue::SelfWithoutSmPort {
                    pkey: p.pkey,
                    line: m.line,
                }),
            },
            MemberSpec::Guid(g) if ports.contains(g) => apply(g),
            MemberSpec::Guid(guid) => issues.push(ResolveIssue::UnknownGuid {
                pkey: p.pkey,
                guid,
                line: m.line,
            }),
        }
    }

    // Non-empty partitions, their IPoIB groups; per port its wanted entries.
    let mut partitions = Vec::new();
    let mut ipoib = Vec::new();
    let mut wanted: HashMap<Guid, Vec<u16>> = HashMap::new();
    for (p, members) in config.partitions.iter().zip(membership) {
        if members.is_empty() {
            issues.push(ResolveIssue::EmptyPartition {
                pkey: p.pkey,
                name: p.name.clone(),
            });
            continue;
        }
        for (&g, &full) in &members {
            wanted
                .entry(g)
                .or_default()
                .push(p.pkey | if full { FULL_MEMBER_BIT } else { 0 });
        }
        ipoib.extend(p.ipoib.iter().cloned());
        partitions.push(ResolvedPartition {
            pkey: p.pkey,
            name: p.name.clone(),
            members: members.into_iter().collect(),
        });
    }
    partitions.sort_by_key(|p| p.pkey);

    let capacity = whole_blocks(options.partition_cap);
    let mut tables: Vec<(Guid, Vec<u16>)> = Vec::with_capacity(wanted.len());
    for (g, entries) in wanted {
        let prev = previous.and_then(|t| t.table(g));
        let (table, dropped) = order::order_table(&entries, indx0.get(&g).copied(), prev, capacity);
        if !dropped.is_empty() {
            issues.push(ResolveIssue::TableFull {
                port_guid: g,
                capacity,
                dropped,
            });
        }
        tables.push((g, table));
    }
    tables.sort_unstable_by_key(|(g, _)| *g);

    let mut switch_ports = Vec::new();
    if options.enforcement_cap > 0 {
        let cap = whole_blocks(options.enforcement_cap);
        for ep in fabric.end_ports() {
            let Some((sw, port)) = ep.attach else { continue };
            let Ok(i) = tables.binary_search_by_key(&ep.port_guid, |(g, _)| *g) else {
                continue;
            };
            let table = &tables[i].1;
            let switch_guid = fabric.switch(sw).guid;
            if table.len() > cap {
                issues.push(ResolveIssue::NotEnforced {
                    switch_guid,
                    port,
                    needed: table.len(),
                    capacity: cap,
                });
                continue;
            }
            switch_ports.push(((switch_guid, port), table.clone()));
        }
        switch_ports.sort_unstable_by_key(|(k, _)| *k);
    }
    PartitionTables {
        ports: tables,
        switch_ports,
        partitions,
        ipoib,
        issues,
    }
}

/// A capacity in entries rounded up to whole 32-entry blocks (OpenSM's `(cap + 31) / 32`).
fn whole_blocks(cap: u16) -> usize {
    usize::from(cap).div_ceil(PKEY_BLOCK_ENTRIES) * PKEY_BLOCK_ENTRIES
}

/// The ports `ALL`, `ALL_CAS` and `ALL_SWITCHES` name, ascending by GUID.
struct Universe {
    all: Vec<Guid>,
    cas: Vec<Guid>,
    switches: Vec<Guid>,
}

impl Universe {
    fn new(fabric: &Fabric) -> Universe {
        let mut cas: Vec<Guid> = fabric.end_ports().iter().map(|e| e.port_guid).collect();
        let mut switches: Vec<Guid> = fabric.switches().iter().map(|s| s.guid).collect();
        cas.sort_unstable();
        switches.sort_unstable();
        let mut all: Vec<Guid> = cas.iter().chain(&switches).copied().collect();
        all.sort_unstable();
        all.dedup();
        Universe { all, cas, switches }
    }
    fn contains(&self, g: Guid) -> bool {
        self.all.binary_search(&g).is_ok()
    }
}

impl std::fmt::Display for ResolveIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use fabric_topology::fmt_guid;
        match self {
            ResolveIssue::UnknownGuid { pkey, guid, line } => {
                write!(
                    f,
                    "line {line}: port {} of P_Key {pkey:#06x} is not in the fabric",
                    fmt_guid(*guid)
                )
            }
            ResolveIssue::SelfWithoutSmPort { pkey, line } => {
                write!(f, "line {line}: SELF in P_Key {pkey:#06x} but no SM port is known")
            }
            ResolveIssue::EmptyPartition { pkey, name } => {
                write!(
                    f,
                    "partition '{name}' ({pkey:#06x}) has no member port: dropped with its IPoIB groups"
                )
            }
            ResolveIssue::TableFull {
                port_guid,
                capacity,
                dropped,
            } => write!(
                f,
                "port {} is in more partitions than its {capacity}-entry P_Key table: left out {dropped:04x?}",
                fmt_guid(*port_guid)
            ),
            ResolveIssue::NotEnforced {
                switch_guid,
                port,
                needed,
                capacity,
            } => write!(
                f,
                "switch {} port {port}: the end port's {needed} P_Keys exceed the {capacity}-entry enforcement table: \
                 not enforced",
                fmt_guid(*switch_guid)
            ),
        }
    }
}
