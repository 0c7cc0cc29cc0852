//! ListMulticastGroups, VerifyMulticast and ListPartitions: the SA's multicast groups with the
//! trees the committed generation programmed, the multicast data plane of the simulated
//! fabric, and the partitions in force.

use std::collections::BTreeMap;
use std::sync::Arc;

use fabric_proto::v1 as pb;
use fabric_southbound::PacketSimulator;
use fabric_topology::{fmt_guid, Fabric, Guid};
use tonic::{Request, Response, Status};

use super::FabricService;
use crate::mcast::RECEIVING_JOIN_STATES;
use crate::state::{Generation, Published};

/// At most this many failure lines in a VerifyMulticast answer (all are counted).
const MAX_LISTED_FAILURES: usize = 100;

/// The node description of an end port (its node's), or empty.
fn port_name(f: &Fabric, port: Guid) -> String {
    f.end_port_by_guid(port)
        .map(|e| f.end_port(e).desc.clone())
        .unwrap_or_default()
}

/// Why multicast or partitions are not (wholly) programmed: the driver cannot program them,
/// or tables it could program are still pending.
fn not_programmed(p: &Published, unsupported: &Option<String>, pending: &Option<String>) -> String {
    let mut why = Vec::new();
    if let Some(e) = unsupported {
        why.push(format!("driver {} cannot program them: {e}", p.driver));
    }
    why.extend(pending.iter().cloned());
    why.join("; ")
}

fn tree_of(g: &Generation, mlid: u16) -> Option<pb::McastTree> {
    let t = g.mcast.tree(u32::from(mlid))?;
    let f = &g.fabric;
    let root = t.root.map(|r| f.switch(r));
    Some(pb::McastTree {
        root_guid: root.map_or(0, |s| s.guid),
        root_name: root.map(|s| s.desc.clone()).unwrap_or_default(),
        switches: t
            .switches
            .iter()
            .map(|&sw| pb::McastTreeSwitch {
                guid: f.switch(sw).guid,
                name: f.switch(sw).desc.clone(),
                level: g.ranking.level_of(sw).unwrap_or(0),
                ports: g.mcast.mfts.ports(sw, u32::from(mlid)).map(u32::from).collect(),
            })
            .collect(),
        unreachable: t.unreachable.iter().map(|&e| f.end_port(e).port_guid).collect(),
    })
}

impl FabricService {
    fn sa_service(&self) -> Result<Arc<fabric_sa::SaService>, Status> {
        self.shared
            .sa
            .clone()
            .ok_or_else(|| Status::failed_precondition("this fabricd has no subnet administrator"))
    }

    pub(super) async fn handle_list_multicast_groups(
        &self,
        req: Request<pb::ListMulticastGroupsRequest>,
    ) -> Result<Response<pb::ListMulticastGroupsResponse>, Status> {
        let r = req.into_inner();
        if r.mlid != 0 && !(0xC000..=0xFFFE).contains(&r.mlid) {
            return Err(Status::invalid_argument(format!(
                "mlid {:#x} is not a multicast LID (0xc000..=0xfffe, or 0 for every group)",
                r.mlid
            )));
        }
        let sa = self.sa_service()?;
        let p = self.snapshot();
        let groups = sa.mcast_groups();
        let current = p.current.clone();
        let names: &Fabric = current.as_ref().map_or(&p.cabling, |g| &g.fabric);
        let mut out = Vec::new();
        for grp in groups.iter().filter(|g| r.mlid == 0 || u32::from(g.mlid) == r.mlid) {
            out.push(pb::McastGroup {
                mgid: fabric_partitions::fmt_mgid(&grp.mgid.0),
                mlid: u32::from(grp.mlid),
                pkey: u32::from(grp.pkey),
                qkey: grp.qkey,
                mtu: u32::from(grp.mtu),
                rate: u32::from(grp.rate),
                sl: u32::from(grp.sl),
                well_known: grp.well_known,
                members: grp
                    .members
                    .iter()
                    .map(|m| pb::McastMember {
                        port_guid: m.port_guid,
                        name: port_name(names, m.port_guid),
                        join_state: u32::from(m.join_state),
                    })
                    .collect(),
                tree: if r.trees {
                    current.as_ref().and_then(|g| tree_of(g, grp.mlid))
                } else {
                    None
                },
            });
        }
        if r.mlid != 0 && out.is_empty() {
            return Err(Status::not_found(format!(
                "no multicast group with MLID {:#06x}",
                r.mlid
            )));
        }
        Ok(Response::new(pb::ListMulticastGroupsResponse {
            generation: p.generation(),
            groups: out,
            not_programmed: if p.side.multicast {
                not_programmed(&p, &p.side.mft_unsupported, &p.side.mft_pending)
            } else {
                "multicast routing is disabled ([multicast] enabled = false)".into()
            },
            enabled: p.side.multicast,
        }))
    }

    pub(super) async fn handle_verify_multicast(
        &self,
        _req: Request<pb::VerifyMulticastRequest>,
    ) -> Result<Response<pb::VerifyMulticastResponse>, Status> {
        let simulator = self.simulator()?.clone();
        let sa = self.sa_service()?;
        let groups = sa.mcast_groups();
        let r = tokio::task::spawn_blocking(move || verify_groups(simulator.as_ref(), &groups))
            .await
            .map_err(|e| Status::internal(format!("verification task failed: {e}")))?;
        Ok(Response::new(r))
    }

    pub(super) async fn handle_list_partitions(
        &self,
        _req: Request<pb::ListPartitionsRequest>,
    ) -> Result<Response<pb::ListPartitionsResponse>, Status> {
        let p = self.snapshot();
        let Some(g) = p.current.clone() else {
            return Err(Status::failed_precondition(
                "no generation installed yet: the partitions are resolved with the first one",
            ));
        };
        let settings = &p.side.partitions;
        let ipoib: BTreeMap<u16, ()> = g
            .partitions
            .ipoib_groups()
            .iter()
            .map(|i| (i.pkey & fabric_partitions::PKEY_BASE_MASK, ()))
            .collect();
        let partitions = g
            .partitions
            .partitions()
            .iter()
            .map(|rp| pb::Partition {
                name: rp.name.clone(),
                pkey: u32::from(rp.pkey),
                ipoib: ipoib.contains_key(&rp.pkey),
                members: rp
                    .members
                    .iter()
                    .map(|&(guid, full)| pb::PartitionMember {
                        port_guid: guid,
                        name: port_name(&g.fabric, guid),
                        full,
                    })
                    .collect(),
            })
            .collect();
        Ok(Response::new(pb::ListPartitionsResponse {
            source: settings
                .file
                .as_ref()
                .map_or_else(|| "default".to_string(), |f| f.display().to_string()),
            enforce_switch_ports: settings.enforce_switch_ports,
            partitions,
            not_programmed: not_programmed(&p, &p.side.pkey_unsupported, &p.side.pkey_pending),
            generation: g.number,
            issues: g.partitions.issues().iter().map(ToString::to_string).collect(),
        }))
    }
}

/// Floods a packet from every member of every group with members through the simulator and
/// checks each delivery: every receiving member but the sender gets exactly one copy, no other
/// end port gets one.
pub fn verify_groups(sim: &dyn PacketSimulator, groups: &[fabric_sa::McGroup]) -> pb::VerifyMulticastResponse {
    let mut out = pb::VerifyMulticastResponse::default();
    let mut failures = 0usize;
    let mut fail = |out: &mut pb::VerifyMulticastResponse, line: String| {
        failures += 1;
        if out.failures.len() < MAX_LISTED_FAILURES {
            out.failures.push(line);
        }
    };
    for g in groups.iter().filter(|g| !g.members.is_empty()) {
        out.groups_checked += 1;
        let receivers: BTreeMap<Guid, ()> = g
            .members
            .iter()
            .filter(|m| m.join_state & RECEIVING_JOIN_STATES != 0)
            .map(|m| (m.port_guid, ()))
            .collect();
        for sender in &g.members {
            let d = match sim.flood_multicast(sender.port_guid, u32::from(g.mlid)) {
                Ok(d) => d,
                Err(e) => {
                    fail(
                        &mut out,
                        format!("MLID {:#06x} from {}: {e}", g.mlid, fmt_guid(sender.port_guid)),
                    );
                    continue;
                }
            };
            let got: BTreeMap<Guid, u32> = d.received.iter().copied().collect();
            for r in receivers.keys().filter(|&&r| r != sender.port_guid) {
                out.deliveries_checked += 1;
                match got.get(r).copied().unwrap_or(0) {
                    1 => {}
                    0 => fail(
                        &mut out,
                        format!(
                            "MLID {:#06x} from {}: member {} got nothing",
                            g.mlid,
                            fmt_guid(sender.port_guid),
                            fmt_guid(*r)
                        ),
                    ),
                    n => fail(
                        &mut out,
                        format!(
                            "MLID {:#06x} from {}: member {} got {n} copies",
                            g.mlid,
                            fmt_guid(sender.port_guid),
                            fmt_guid(*r)
                        ),
                    ),
                }
            }
            for (port, n) in &got {
                if *port == sender.port_guid {
                    fail(
                        &mut out,
                        format!(
                            "MLID {:#06x}: {n} cop(ies) came back to the sender {}",
                            g.mlid,
                            fmt_guid(*port)
                        ),
                    );
                } else if !receivers.contains_key(port) {
                    fail(
                        &mut out,
                        format!(
                            "MLID {:#06x} from {}: end port {} is not a receiving member but got {n} cop{}",
                            g.mlid,
                            fmt_guid(sender.port_guid),
                            fmt_guid(*port),
                            if *n == 1 { "y" } else { "ies" }
                        ),
                    );
                }
            }
        }
    }
    if failures > out.failures.len() {
        out.failures
            .push(format!("... and {} more failures", failures - out.failures.len()));
    }
    out
}
