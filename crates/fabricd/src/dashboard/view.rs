//! The JSON documents of the dashboard's `/api/*` routes, built from the published snapshot.

use std::collections::HashMap;

use fabric_topology::{fmt_guid, Fabric, Guid, LinkState, PortNum, Remote};
use serde::Serialize;

use crate::state::{Generation, Published, RerouteTimings};

/// `GET /api/status`: the daemon at a glance.
#[derive(Serialize)]
pub struct StatusView {
    pub generation: u64,
    pub phase: &'static str,
    /// Generation being prepared or installed when `phase` is not `idle`.
    pub phase_generation: u64,
    pub engine: String,
    pub driver: &'static str,
    pub uptime_s: u64,
    pub pending_faults: usize,
    pub last_error: String,
    pub ready: bool,
    pub not_ready_reason: String,
    pub virtual_faults: usize,
    pub routing_valid: bool,
    pub unreachable_pairs: u64,
    pub subscribers: usize,
    pub job_aware: bool,
    pub levels: u32,
    pub switches: usize,
    pub switches_up: usize,
    pub end_ports: usize,
    pub end_ports_up: usize,
    pub links: usize,
    pub links_up: usize,
    pub last_reroute: Option<TimingsView>,
}

/// Timings of a committed generation, ms.
#[derive(Clone, Debug, Serialize)]
pub struct TimingsView {
    pub generation: u64,
    pub faults: u32,
    pub routed_ms: f64,
    pub committed_ms: f64,
    pub coalesce_ms: f64,
    pub compute_ms: f64,
    pub upload_ms: f64,
    pub blocks_written: u64,
    pub committed_at_unix_ms: i64,
}

impl From<&RerouteTimings> for TimingsView {
    fn from(t: &RerouteTimings) -> Self {
        TimingsView {
            generation: t.generation,
            faults: t.faults,
            routed_ms: t.routed_ms,
            committed_ms: t.committed_ms,
            coalesce_ms: t.coalesce_ms,
            compute_ms: t.compute_ms,
            upload_ms: t.upload_ms,
            blocks_written: t.blocks_written,
            committed_at_unix_ms: t.committed_at_unix_ms,
        }
    }
}

/// The fabric the page shows: the routed one, or the cabling before the first generation.
fn shown_fabric(p: &Published) -> &Fabric {
    p.current.as_ref().map_or(&p.cabling, |g| &g.fabric)
}

pub fn status(p: &Published) -> StatusView {
    let f = shown_fabric(p);
    let g = p.current.as_ref();
    let (links, links_up) = f.count_links();
    StatusView {
        generation: p.generation(),
        phase: p.phase.name(),
        phase_generation: p.phase_generation,
        engine: p.engine.clone(),
        driver: p.driver,
        uptime_s: p.started.elapsed().as_secs(),
        pending_faults: p.pending_faults,
        last_error: p.last_error.clone(),
        ready: p.installation.not_ready.is_none(),
        not_ready_reason: p.installation.not_ready.clone().unwrap_or_default(),
        virtual_faults: p.virtual_faults,
        routing_valid: g.is_some_and(|g| g.routing_check.valid),
        unreachable_pairs: g.map_or(0, |g| {
            g.routing_check.unreachable_pairs + g.routing_check.escape_unreachable_pairs
        }),
        subscribers: p.subscribers,
        job_aware: p.job_aware,
        levels: g.map_or(0, |g| g.ranking.height),
        switches: f.num_switches(),
        switches_up: f.switches().iter().filter(|s| s.up).count(),
        end_ports: f.num_end_ports(),
        end_ports_up: f.end_port_ids().filter(|&e| f.end_port_live(e)).count(),
        links,
        links_up,
        last_reroute: g.map(|g| TimingsView::from(&g.timings)),
    }
}

/// One external port of a switch.
#[derive(Serialize)]
pub struct PortView {
    pub port: PortNum,
    /// `switch`, `end_port` or `none` (not cabled).
    pub remote: &'static str,
    pub remote_guid: String,
    pub remote_name: String,
    pub remote_port: PortNum,
    /// `up`, `down` or `unconnected`.
    pub state: &'static str,
    /// Excluded from routing by a virtual fault (an isolated port).
    pub excluded: bool,
    /// Errors per second of the port, from the port-health monitor (absent while no monitor
    /// reports; see [`super::Dashboard::set_port_error_rates`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
}

#[derive(Serialize)]
pub struct SwitchView {
    pub guid: String,
    pub name: String,
    pub lid: u32,
    pub up: bool,
    pub ports: Vec<PortView>,
}

#[derive(Serialize)]
pub struct LevelView {
    /// Level (leaves at 0); `None`: switches never ranked (dead since the daemon started).
    pub level: Option<u32>,
    pub switches: Vec<SwitchView>,
}

/// `GET /api/fabric`: the switches by level, top level first, with their port states.
#[derive(Serialize)]
pub struct FabricView {
    pub generation: u64,
    pub levels: Vec<LevelView>,
}

/// Builds the fabric view. `known_levels` keeps the last level of every switch seen ranked, so
/// that a switch that went down stays shown (down) at its level.
pub fn fabric(
    p: &Published,
    known_levels: &mut HashMap<Guid, u32>,
    error_rates: &HashMap<(Guid, PortNum), f64>,
) -> FabricView {
    let f = shown_fabric(p);
    let g: Option<&Generation> = p.current.as_deref();
    let mut by_level: std::collections::BTreeMap<Option<u32>, Vec<SwitchView>> = Default::default();
    for sid in f.switch_ids() {
        let s = f.switch(sid);
        let ranked = g.and_then(|g| g.ranking.level_of(sid));
        if let Some(l) = ranked {
            known_levels.insert(s.guid, l);
        }
        let level = ranked.or_else(|| known_levels.get(&s.guid).copied());
        let ports = s
            .external_ports()
            .map(|(pn, port)| {
                let (remote, rg, rn, rp, up) = match port.remote {
                    Remote::None => ("none", String::new(), String::new(), 0, false),
                    Remote::Switch { sw, port: rp } => {
                        let r = f.switch(sw);
                        (
                            "switch",
                            fmt_guid(r.guid),
                            r.desc.clone(),
                            rp,
                            f.switch_link_live(sid, pn).is_some(),
                        )
                    }
                    Remote::EndPort(ep) => {
                        let e = f.end_port(ep);
                        (
                            "end_port",
                            fmt_guid(e.port_guid),
                            e.desc.clone(),
                            e.port_num,
                            s.up && port.state == LinkState::Up && e.up,
                        )
                    }
                };
                PortView {
                    port: pn,
                    remote,
                    remote_guid: rg,
                    remote_name: rn,
                    remote_port: rp,
                    state: match (remote, up) {
                        ("none", _) => "unconnected",
                        (_, true) => "up",
                        (_, false) => "down",
                    },
                    excluded: g.is_some_and(|g| g.excluded_links.contains(&(s.guid, pn))),
                    error_rate: error_rates.get(&(s.guid, pn)).copied(),
                }
            })
            .collect();
        by_level.entry(level).or_default().push(SwitchView {
            guid: fmt_guid(s.guid),
            name: s.desc.clone(),
            lid: g.map_or(0, |g| g.lids.switch_lid(sid)),
            up: s.up,
            ports,
        });
    }
    // Top level first, never-ranked switches last.
    let mut levels: Vec<LevelView> = by_level
        .into_iter()
        .map(|(level, switches)| LevelView { level, switches })
        .collect();
    levels.sort_by_key(|l| std::cmp::Reverse(l.level.map(i64::from).unwrap_or(-1)));
    FabricView {
        generation: p.generation(),
        levels,
    }
}

/// A port that is down, excluded or isolated, or a switch that is down.
#[derive(Serialize)]
pub struct ProblemView {
    pub switch_guid: String,
    pub switch_name: String,
    /// 0 for a whole switch.
    pub port: PortNum,
    pub remote_guid: String,
    pub remote_name: String,
    pub remote_port: PortNum,
    /// `switch-down`, `port-down`, `excluded`.
    pub kind: &'static str,
    /// Why a virtual fault excludes the port (the port-health policy's reason), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `GET /api/excluded`: switches down, ports down, ports excluded from routing.
#[derive(Serialize)]
pub struct ProblemsView {
    pub generation: u64,
    pub virtual_faults: usize,
    pub problems: Vec<ProblemView>,
}

/// Lists the problems of the fabric view (each link once per end that is a switch port).
pub fn problems(p: &Published, fv: &FabricView, reasons: &HashMap<(Guid, PortNum), String>) -> ProblemsView {
    let mut out = Vec::new();
    for l in &fv.levels {
        for s in &l.switches {
            if !s.up {
                out.push(ProblemView {
                    switch_guid: s.guid.clone(),
                    switch_name: s.name.clone(),
                    port: 0,
                    remote_guid: String::new(),
                    remote_name: String::new(),
                    remote_port: 0,
                    kind: "switch-down",
                    reason: None,
                });
                continue;
            }
            for pv in &s.ports {
                let kind = if pv.excluded {
                    "excluded"
                } else if pv.state == "down" {
                    "port-down"
                } else {
                    continue;
                };
                let guid = fabric_topology::parse_guid(&s.guid).unwrap_or(0);
                out.push(ProblemView {
                    switch_guid: s.guid.clone(),
                    switch_name: s.name.clone(),
                    port: pv.port,
                    remote_guid: pv.remote_guid.clone(),
                    remote_name: pv.remote_name.clone(),
                    remote_port: pv.remote_port,
                    kind,
                    reason: reasons.get(&(guid, pv.port)).cloned(),
                });
            }
        }
    }
    ProblemsView {
        generation: p.generation(),
        virtual_faults: p.virtual_faults,
        problems: out,
    }
}

#[derive(Serialize)]
pub struct JobPortView {
    pub guid: String,
    pub name: String,
}

#[derive(Serialize)]
pub struct JobView {
    pub id: String,
    pub end_ports: Vec<JobPortView>,
}

/// `GET /api/jobs`: the job mappings in force.
#[derive(Serialize)]
pub struct JobsView {
    pub job_aware: bool,
    pub jobs: Vec<JobView>,
}

pub fn jobs(p: &Published) -> JobsView {
    JobsView {
        job_aware: p.job_aware,
        jobs: p
            .jobs
            .iter()
            .map(|(id, ports)| JobView {
                id: id.clone(),
                end_ports: ports
                    .iter()
                    .map(|jp| JobPortView {
                        guid: jp.guid.clone(),
                        name: jp.name.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}
