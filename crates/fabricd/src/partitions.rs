//! Partitions in the daemon: the resolved P_Key tables handed to the SA (PathRecord,
//! MultiPathRecord and MCMemberRecord answer only within a partition, and the IPoIB broadcast
//! groups of every IPoIB partition exist).

use std::sync::Arc;

use fabric_partitions::PartitionTables;

/// What the SA needs of the partitions in force: every port's P_Key table (end ports and
/// switch management ports) and the IPoIB groups to create: per IPoIB partition with members,
/// its IPv4 broadcast group (`ff12:401b:<pkey>::ffff:ffff`, as OpenSM) and its IPv6 all-nodes
/// group (`ff12:601b:<pkey>::1`, which OpenSM leaves to the first join).
pub fn sa_partitions(tables: &PartitionTables) -> fabric_sa::Partitions {
    fabric_sa::Partitions {
        tables: tables.port_tables().map(|(g, t)| (g, t.to_vec())).collect(),
        ipoib_groups: tables
            .ipoib_groups()
            .iter()
            .map(|g| fabric_sa::IpoibGroupSpec {
                pkey: g.pkey,
                mgids: vec![g.broadcast_mgid(), g.ipv6_all_nodes_mgid()],
                mtu: g.mtu,
                rate: g.rate,
                sl: g.sl,
                scope: g.scope,
                qkey: g.qkey,
                tclass: g.tclass,
                flow_label: g.flow_label,
            })
            .collect(),
    }
}

/// The partitions in force and where they come from.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionSettings {
    pub config: Arc<fabric_partitions::PartitionConfig>,
    /// The file read, or `None` for OpenSM's default partition.
    pub file: Option<std::path::PathBuf>,
    /// Program the switch ports facing end ports too (partition enforcement).
    pub enforce_switch_ports: bool,
}

impl Default for PartitionSettings {
    fn default() -> Self {
        PartitionSettings {
            config: Arc::new(fabric_partitions::PartitionConfig::default_opensm()),
            file: None,
            enforce_switch_ports: true,
        }
    }
}
