//! Status, GetTopology and GetPath: answered from the published snapshot.

use std::sync::Arc;

use fabric_proto::v1 as pb;
use fabric_topology::{Fabric, LinkState, Remote};
use tonic::{Request, Response, Status};

use super::convert::{count, phase_pb, timings_pb};
use super::request::end_port_or_status;
use super::FabricService;

/// Service level of the base LIDs (data VLs).
pub const BASE_SL: u32 = 0;
/// Service level of the escape LIDs (mapped to the escape VL, n - 1).
pub const ESCAPE_SL: u32 = 1;

impl FabricService {
    pub(super) async fn handle_get_status(
        &self,
        _: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::Status>, Status> {
        let p = self.snapshot();
        let f: &Fabric = match &p.current {
            Some(g) => &g.fabric,
            None => &p.cabling,
        };
        let (links, links_up) = f.count_links();
        let g = p.current.as_ref();
        let (vl, stats) = match &self.shared.driver {
            Some(d) => (d.escape_vl_status(), d.driver_stats()),
            None => (
                fabric_southbound::EscapeVlStatus {
                    ready: true,
                    ..Default::default()
                },
                fabric_southbound::DriverStats::default(),
            ),
        };
        // [ha]: a standby, or a leader whose fence refuses writes, is not ready whatever its
        // tables (what /ready answers too).
        let ha_not_ready = self.shared.ha.as_ref().and_then(crate::ha::HaView::not_ready);
        let not_ready = ha_not_ready.or_else(|| p.installation.not_ready.clone());
        let setting = p.topology;
        let mode = g.map(|g| crate::topology_mode::TopologyMode::of(&g.fabric, &g.ranking, &g.routing_check, setting));
        Ok(Response::new(pb::Status {
            ha: self.shared.ha.as_ref().map(crate::ha::HaView::pb),
            generation: p.generation(),
            phase: phase_pb(p.phase) as i32,
            engine: p.engine.clone(),
            driver: p.driver.to_string(),
            switches: count(f.num_switches()),
            switches_up: count(f.switches().iter().filter(|s| s.up).count()),
            nodes: count(f.num_end_ports()),
            nodes_up: count(f.end_port_ids().filter(|&e| f.end_port_live(e)).count()),
            links: count(links),
            links_up: count(links_up),
            pending_faults: count(p.pending_faults),
            last_reroute: g.map(|g| timings_pb(&g.timings)),
            last_error: p.last_error.clone(),
            uptime_s: p.started.elapsed().as_secs(),
            lmc: u32::from(p.lmc),
            top_lid: g.map_or(0, |g| g.lids.top()),
            ranking_diagnostics: g.map_or(0, |g| count(g.ranking.diagnostics.len())),
            discarded_generations: p.discarded_generations,
            virtual_faults: count(p.virtual_faults),
            levels: g.map_or(0, |g| g.ranking.height),
            subscribers: count(p.subscribers),
            missed_acks: p.missed_acks.clone(),
            dual_lids: p.lmc >= 1,
            update_restarts: p.update_restarts.clone(),
            escape_vl_ready: vl.ready,
            escape_vl_pending: vl.pending,
            escape_vl_error: vl.error.unwrap_or_default(),
            escape_vl_ready_at_unix_ms: vl.ready_at_unix_ms,
            driver_smps_sent: stats.smps_sent,
            driver_smp_retries: stats.retries,
            driver_smp_failures: stats.failures,
            job_aware: p.job_aware,
            unprogrammed_switches: p
                .installation
                .unprogrammed
                .iter()
                .map(|u| pb::UnprogrammedSwitch {
                    guid: u.guid,
                    name: u.name.clone(),
                    blocks_pending: u.blocks_pending,
                    last_error: u.last_error.clone(),
                })
                .collect(),
            unprogrammed_switch_count: count(p.installation.unprogrammed.len()),
            blocks_pending: p.installation.blocks_pending,
            tables_installed: p.installation.tables_installed(p.generation()),
            persistence_error: p.installation.persistence_error.clone(),
            topology_incomplete: p.installation.topology_incomplete.clone(),
            ready: not_ready.is_none(),
            not_ready_reason: not_ready.unwrap_or_default(),
            routing_valid: g.is_some_and(|g| g.routing_check.valid),
            fallback_destinations: g.map_or(0, |g| g.routing_check.fallback_destinations),
            routing_fallback_reason: g.map_or_else(String::new, |g| g.routing_check.reason.clone()),
            unreachable_pairs: g.map_or(0, |g| {
                g.routing_check.unreachable_pairs + g.routing_check.escape_unreachable_pairs
            }),
            disconnected_pairs: g.map_or(0, |g| g.routing_check.disconnected_pairs),
            topology_mode: mode.as_ref().map_or_else(String::new, |m| m.name().to_string()),
            fat_tree_found: mode.as_ref().is_some_and(|m| m.fat_tree_found),
            routed_by: mode.map_or_else(String::new, |m| m.routed_by),
            topology_setting: setting.name().to_string(),
            vl_layers: g.and_then(|g| g.vl.as_ref()).map_or(0, |v| u32::from(v.layers)),
            data_vls: g.map_or(0, |g| {
                u32::from(
                    g.vl.as_ref()
                        .map_or_else(|| fabric_routing::data_vls_of_layers(1, g.lids.lmc), |v| v.data_vls),
                )
            }),
            data_vl_capacity: self
                .shared
                .driver
                .as_ref()
                .and_then(|d| d.data_vl_capacity())
                .map_or(0, u32::from),
        }))
    }

    pub(super) async fn handle_get_topology(
        &self,
        _: Request<pb::GetTopologyRequest>,
    ) -> Result<Response<pb::Topology>, Status> {
        let p = self.snapshot();
        let g = p.current.clone();
        let f: Arc<Fabric> = g.as_ref().map_or_else(|| p.cabling.clone(), |g| g.fabric.clone());
        let mut switches = Vec::with_capacity(f.num_switches());
        for sid in f.switch_ids() {
            let s = f.switch(sid);
            let mut ports = Vec::with_capacity(s.nports as usize);
            for (pn, port) in s.external_ports() {
                let (kind, rg, rp, up) = match port.remote {
                    Remote::None => (pb::RemoteKind::None, 0, 0, false),
                    Remote::Switch { sw, port: rp } => (
                        pb::RemoteKind::Switch,
                        f.switch(sw).guid,
                        u32::from(rp),
                        f.switch_link_live(sid, pn).is_some(),
                    ),
                    Remote::EndPort(ep) => {
                        let e = f.end_port(ep);
                        (
                            pb::RemoteKind::EndPort,
                            e.port_guid,
                            u32::from(e.port_num),
                            s.up && port.state == LinkState::Up,
                        )
                    }
                };
                let excluded = g.as_ref().is_some_and(|g| g.excluded_links.contains(&(s.guid, pn)));
                ports.push(pb::SwitchPort {
                    port: u32::from(pn),
                    remote_kind: kind as i32,
                    remote_guid: rg,
                    remote_port: rp,
                    state: if up { pb::PortState::Up } else { pb::PortState::Down } as i32,
                    excluded,
                    speed: port.speed.clone().unwrap_or_default(),
                });
            }
            switches.push(pb::SwitchInfo {
                guid: s.guid,
                name: s.desc.clone(),
                level: g
                    .as_ref()
                    .and_then(|g| g.ranking.level.get(sid.idx()).copied().flatten()),
                lid: g.as_ref().map_or(0, |g| g.lids.switch_lid(sid)),
                up: s.up,
                nports: u32::from(s.nports),
                ports,
            });
        }
        let end_ports = f
            .end_port_ids()
            .map(|id| {
                let e = f.end_port(id);
                let (sg, sp) = e.attach.map_or((0, 0), |(sw, p)| (f.switch(sw).guid, u32::from(p)));
                pb::EndPortInfo {
                    guid: e.port_guid,
                    node_guid: e.node_guid,
                    name: e.desc.clone(),
                    port_num: u32::from(e.port_num),
                    base_lid: g.as_ref().map_or(0, |g| g.lids.base_lid(id)),
                    escape_lid: g.as_ref().and_then(|g| g.lids.escape_lid(id)).unwrap_or(0),
                    switch_guid: sg,
                    switch_port: sp,
                    up: e.up,
                    live: f.end_port_live(id),
                }
            })
            .collect();
        let diagnostics = g.as_ref().map_or_else(Vec::new, |g| {
            g.ranking
                .diagnostics
                .iter()
                .map(std::string::ToString::to_string)
                .collect()
        });
        Ok(Response::new(pb::Topology {
            generation: p.generation(),
            switches,
            end_ports,
            diagnostics,
        }))
    }

    pub(super) async fn handle_get_path(
        &self,
        req: Request<pb::GetPathRequest>,
    ) -> Result<Response<pb::PathInfo>, Status> {
        let (_, g) = self.current()?;
        let r = req.into_inner();
        let dst = end_port_or_status(&g.fabric, &r.dst, "")?;
        let base_lid = g.lids.base_lid(dst);
        // A VL-layered routing: the SL of the route from the source's switch (the SA's rule).
        let base_sl = match (&g.vl, r.src.is_empty()) {
            (Some(v), false) => {
                let src = end_port_or_status(&g.fabric, &r.src, "src: ")?;
                let sw = g.fabric.end_port(src).attach.map(|(s, _)| g.fabric.switch(s).guid);
                sw.and_then(|sw| v.path_sls.sl(sw, base_lid as u16))
                    .map_or(BASE_SL, u32::from)
            }
            _ => BASE_SL,
        };
        Ok(Response::new(pb::PathInfo {
            base_lid,
            base_sl,
            escape_lid: g.lids.escape_lid(dst).unwrap_or(0),
            escape_sl: ESCAPE_SL,
            generation: g.number,
            base_sl_per_source: g.vl.is_some(),
        }))
    }
}
