//! Renderings of the daemon's replies: the JSON contracts of `--json` and the text lines they
//! share with the tables.

use fabric_proto::v1 as pb;
use serde_json::{json, Value};

use super::output::guid;
use crate::human::num;

pub(super) fn phase_name(p: i32) -> &'static str {
    match pb::Phase::try_from(p).unwrap_or(pb::Phase::Unspecified) {
        pb::Phase::Idle => "idle",
        pb::Phase::Prepare => "prepare",
        pb::Phase::Unpath => "unpath",
        pb::Phase::Update => "update",
        pb::Phase::Repath => "repath",
        pb::Phase::Commit => "commit",
        pb::Phase::Unspecified => "unknown",
    }
}

fn timings_json(t: &pb::RerouteTimings) -> Value {
    json!({
        "generation": t.generation,
        "routed_ms": t.routed_ms,
        "committed_ms": t.committed_ms,
        "coalesce_ms": t.coalesce_ms,
        "compute_ms": t.compute_ms,
        "upload_ms": t.upload_ms,
        "blocks_written": t.blocks_written,
        "retries": t.retries,
        "faults": t.faults,
        "committed_at_unix_ms": t.committed_at_unix_ms,
        "driver_smps_sent": t.driver_smps_sent,
    })
}

/// JSON of a status reply.
pub fn status_json(s: &pb::Status) -> Value {
    json!({
        "generation": s.generation,
        "phase": phase_name(s.phase),
        "engine": s.engine,
        "job_aware": s.job_aware,
        "driver": s.driver,
        "switches": s.switches,
        "switches_up": s.switches_up,
        "nodes": s.nodes,
        "nodes_up": s.nodes_up,
        "links": s.links,
        "links_up": s.links_up,
        "levels": s.levels,
        "lmc": s.lmc,
        "top_lid": s.top_lid,
        "pending_faults": s.pending_faults,
        "virtual_faults": s.virtual_faults,
        "discarded_generations": s.discarded_generations,
        "ranking_diagnostics": s.ranking_diagnostics,
        "last_error": s.last_error,
        "uptime_s": s.uptime_s,
        "last_reroute": s.last_reroute.as_ref().map(timings_json),
        "dual_lids": s.dual_lids,
        "subscribers": s.subscribers,
        "missed_acks": s.missed_acks,
        "update_restarts": s.update_restarts,
        "escape_vl_ready": s.escape_vl_ready,
        "escape_vl_pending": s.escape_vl_pending,
        "escape_vl_error": s.escape_vl_error,
        "escape_vl_ready_at_unix_ms": s.escape_vl_ready_at_unix_ms,
        "driver_smps_sent": s.driver_smps_sent,
        "driver_smp_retries": s.driver_smp_retries,
        "driver_smp_failures": s.driver_smp_failures,
        "ready": s.ready,
        "not_ready_reason": s.not_ready_reason,
        "tables_installed": s.tables_installed,
        "blocks_pending": s.blocks_pending,
        "unprogrammed_switch_count": s.unprogrammed_switch_count,
        "unprogrammed_switches": unprogrammed_json(s),
        "persistence_error": s.persistence_error,
        "topology_incomplete": s.topology_incomplete,
        "routing_valid": s.routing_valid,
        "fallback_destinations": s.fallback_destinations,
        "routing_fallback_reason": s.routing_fallback_reason,
        "unreachable_pairs": s.unreachable_pairs,
        "disconnected_pairs": s.disconnected_pairs,
        "topology_mode": s.topology_mode,
        "fat_tree_found": s.fat_tree_found,
        "routed_by": s.routed_by,
        "topology_setting": s.topology_setting,
        "vl_layers": s.vl_layers,
        "data_vls": s.data_vls,
        "data_vl_capacity": s.data_vl_capacity,
        "ha": s.ha.as_ref().map(ha_json),
    })
}

/// Lower-case name of an HA role (`standby`, `leader`, `stepping-down`).
pub fn ha_role_name(r: i32) -> &'static str {
    match pb::HaRole::try_from(r).unwrap_or(pb::HaRole::Unspecified) {
        pb::HaRole::Standby => "standby",
        pb::HaRole::Leader => "leader",
        pb::HaRole::SteppingDown => "stepping-down",
        pb::HaRole::Unspecified => "unknown",
    }
}

/// JSON of the HA part of a status reply.
fn ha_json(h: &pb::HaStatus) -> Value {
    json!({
        "role": ha_role_name(h.role),
        "node_name": h.node_name,
        "leader_node": h.leader_node,
        "leader_advertise": h.leader_advertise,
        "epoch": h.epoch,
        "lease_id": h.lease_id,
        "lease_ttl_s": h.lease_ttl_s,
        "lease_remaining_ms": h.lease_remaining_ms,
        "etcd_reachable": h.etcd_reachable,
        "fenced": h.fenced,
        "fenced_writes": h.fenced_writes,
        "leader_changes": h.leader_changes,
        "leader_since_unix_ms": h.leader_since_unix_ms,
        "message": h.message,
    })
}

/// The `HA:` line of `fabricctl status` (`None` without `[ha]`): role, this node, the leader,
/// epoch, lease, etcd, fence.
pub fn ha_text(s: &pb::Status) -> Option<String> {
    let h = s.ha.as_ref()?;
    let leader = if h.leader_node.is_empty() {
        "none known".to_string()
    } else if h.leader_advertise.is_empty() {
        h.leader_node.clone()
    } else {
        format!("{} ({})", h.leader_node, h.leader_advertise)
    };
    let lease = if h.lease_id != 0 {
        format!(
            "lease {:x} ({} s TTL, {:.1} s left)",
            h.lease_id,
            h.lease_ttl_s,
            h.lease_remaining_ms as f64 / 1000.0
        )
    } else {
        format!("no lease ({} s TTL)", h.lease_ttl_s)
    };
    let mut t = format!(
        "{} on {}, leader {leader}, epoch {}, {lease}, etcd {}, {}",
        ha_role_name(h.role),
        h.node_name,
        h.epoch,
        if h.etcd_reachable { "reachable" } else { "UNREACHABLE" },
        if h.fenced {
            "FENCED (switch writes refused)"
        } else {
            "writes allowed"
        },
    );
    if h.fenced_writes > 0 {
        t.push_str(&format!(", {} writes refused", h.fenced_writes));
    }
    t.push_str(&format!(", {} leader changes", h.leader_changes));
    if !h.message.is_empty() {
        t.push_str(&format!(": {}", h.message));
    }
    Some(t)
}

/// JSON of the unprogrammed switches of a status reply.
fn unprogrammed_json(s: &pb::Status) -> Vec<Value> {
    s.unprogrammed_switches
        .iter()
        .map(|u| {
            json!({
                "guid": guid(u.guid),
                "name": u.name,
                "blocks_pending": u.blocks_pending,
                "last_error": u.last_error,
            })
        })
        .collect()
}

/// The `installed` line of `fabricctl status`: whether the committed generation is on every
/// switch (idle with every table installed, or blocks pending).
pub fn installed_text(s: &pb::Status) -> String {
    if s.generation == 0 {
        "no generation installed".into()
    } else if s.tables_installed {
        format!("every table of generation {} on every live switch", s.generation)
    } else {
        format!(
            "incomplete: unprogrammed switches {}, LFT blocks pending {}",
            s.unprogrammed_switch_count, s.blocks_pending
        )
    }
}

/// The `routing` line of `fabricctl status`: validity of the installed routing and the
/// fallback the engine's routing needed (`None` before the first generation).
pub fn routing_validity_text(s: &pb::Status) -> Option<String> {
    if s.generation == 0 {
        return None;
    }
    let mut t = if s.routing_valid {
        "valid".to_string()
    } else {
        format!("INVALID: {} connected pairs unreachable", s.unreachable_pairs)
    };
    if s.fallback_destinations > 0 {
        t.push_str(&format!(
            ", {} destinations routed by the Up*/Down* fallback",
            s.fallback_destinations
        ));
    }
    if s.disconnected_pairs > 0 {
        t.push_str(&format!(
            " ({} pairs disconnected: no path in the fabric)",
            s.disconnected_pairs
        ));
    }
    Some(t)
}

/// The `escape VL` line of `fabricctl status`: whether the escape VL (SL-to-VL tables) is
/// programmed, which the five-phase update waits for.
pub fn escape_vl_text(s: &pb::Status) -> String {
    if !s.dual_lids {
        "not used (one LID per end port)".to_string()
    } else if s.escape_vl_ready {
        "ready".to_string()
    } else if !s.escape_vl_error.is_empty() {
        format!(
            "not ready: {} table(s) unwritten, first: {}",
            s.escape_vl_pending, s.escape_vl_error
        )
    } else if s.escape_vl_pending > 0 {
        format!("not ready: {} SL-to-VL table(s) being programmed", s.escape_vl_pending)
    } else {
        "not ready (programmed in the background after the first generation)".to_string()
    }
}

/// The `driver SMPs` line of `fabricctl status`, for drivers that send SMPs.
pub fn driver_smps_text(s: &pb::Status) -> Option<String> {
    (s.driver_smps_sent > 0).then(|| {
        format!(
            "{} sent, {} retries, {} failures",
            s.driver_smps_sent, s.driver_smp_retries, s.driver_smp_failures
        )
    })
}

/// JSON of a topology reply.
pub fn topology_json(t: &pb::Topology) -> Value {
    let switches: Vec<Value> = t
        .switches
        .iter()
        .map(|s| {
            let ports: Vec<Value> = s
                .ports
                .iter()
                .filter(|p| p.remote_kind != pb::RemoteKind::None as i32)
                .map(|p| {
                    json!({
                        "port": p.port,
                        "remote_kind": if p.remote_kind == pb::RemoteKind::Switch as i32 { "switch" } else { "end_port" },
                        "remote_guid": guid(p.remote_guid),
                        "remote_port": p.remote_port,
                        "state": if p.state == pb::PortState::Up as i32 { "up" } else { "down" },
                        "excluded": p.excluded,
                    })
                })
                .collect();
            json!({
                "guid": guid(s.guid),
                "name": s.name,
                "level": s.level,
                "lid": s.lid,
                "up": s.up,
                "ports": ports,
            })
        })
        .collect();
    let end_ports: Vec<Value> = t
        .end_ports
        .iter()
        .map(|e| {
            json!({
                "guid": guid(e.guid),
                "node_guid": guid(e.node_guid),
                "name": e.name,
                "port": e.port_num,
                "base_lid": e.base_lid,
                "escape_lid": e.escape_lid,
                "switch_guid": guid(e.switch_guid),
                "switch_port": e.switch_port,
                "up": e.up,
                "live": e.live,
            })
        })
        .collect();
    json!({ "generation": t.generation, "switches": switches, "end_ports": end_ports, "diagnostics": t.diagnostics })
}

/// JSON of an `mu_rp` floor (null when absent).
pub(super) fn rp_floor_json(f: Option<pb::RpFloor>) -> Value {
    f.map_or(Value::Null, |f| {
        json!({
            "median": f.median,
            "p_above_median": f.p_above_median,
            "measured_p_above_median": f.measured_p_above_median,
        })
    })
}

/// JSON of a metrics reply (the keys of `fabricctl analyze --json`, plus generation and jobs).
pub fn metrics_json(m: &pb::MetricsReport) -> Value {
    let rp = m.mu_rp.unwrap_or_default();
    json!({
        "generation": m.generation,
        "valid": m.valid,
        "unreachable_pairs": m.unreachable_pairs,
        "deadlock_free": m.deadlock_free,
        "mu_sp": m.mu_sp,
        "mu_rp": { "median": rp.median, "q1": rp.q1, "q39": rp.q39 },
        "mu_rp_floor": rp_floor_json(m.mu_rp_floor),
        "mu_a2a": m.mu_a2a,
        "xi": m.xi,
        "nu": m.nu,
        "route_ms": m.route_ms,
        "jobs": m.jobs.iter().map(|j| json!({
            "job_id": j.job_id,
            "end_ports": j.end_ports,
            "effective_xi": j.effective_xi,
            "dark_share": j.dark_share,
            "mu_sp": j.mu_sp,
            "worst_shift": j.worst_shift,
        })).collect::<Vec<_>>(),
    })
}

pub(super) fn notice_json(n: &pb::FabricNotice) -> Value {
    use pb::fabric_notice::Notice as N;
    match &n.notice {
        Some(N::TopologyChange(c)) => json!({
            "type": "topology_change", "event": c.event, "up": c.up, "guid": guid(c.guid), "port": c.port,
            "physical": c.physical,
        }),
        Some(N::PhaseChanged(p)) => {
            json!({ "type": "phase", "generation": p.generation, "phase": phase_name(p.phase) })
        }
        Some(N::GenerationCommitted(g)) => json!({
            "type": "commit", "generation": g.generation, "timings": g.timings.as_ref().map(timings_json),
        }),
        Some(N::Lagged(k)) => json!({ "type": "lagged", "dropped": k }),
        Some(N::AcksMissed(m)) => json!({
            "type": "acks_missed", "generation": m.generation, "subscribers": m.subscribers,
        }),
        Some(N::UpdateAborted(a)) => json!({
            "type": "update_aborted", "generation": a.generation, "reason": a.reason,
        }),
        Some(N::UpdateRestarted(r)) => json!({
            "type": "update_restarted", "generation": r.generation, "attempt": r.attempt, "reason": r.reason,
        }),
        None => json!({ "type": "unknown" }),
    }
}

pub(super) fn notice_line(n: &pb::FabricNotice) -> String {
    use pb::fabric_notice::Notice as N;
    match &n.notice {
        Some(N::TopologyChange(c)) => {
            format!(
                "change     {} ({})",
                c.event,
                if c.physical { "physical" } else { "virtual" }
            )
        }
        Some(N::PhaseChanged(p)) => format!("phase      generation {} {}", p.generation, phase_name(p.phase)),
        Some(N::GenerationCommitted(g)) => {
            let t = g.timings.unwrap_or_default();
            format!(
                "commit     generation {} faults {} routed {} ms committed {} ms blocks {}",
                g.generation,
                t.faults,
                num(t.routed_ms),
                num(t.committed_ms),
                t.blocks_written
            )
        }
        Some(N::Lagged(k)) => format!("lagged     {k} notices dropped"),
        Some(N::AcksMissed(m)) => format!(
            "missed     generation {} no ack from {}",
            m.generation,
            m.subscribers.join(", ")
        ),
        Some(N::UpdateAborted(a)) => format!("aborted    generation {}: {}", a.generation, a.reason),
        Some(N::UpdateRestarted(r)) => format!(
            "restarted  generation {} attempt {}: {}",
            r.generation, r.attempt, r.reason
        ),
        None => "unknown notice".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_has_the_contract_keys() {
        let s = pb::Status {
            generation: 3,
            phase: pb::Phase::Idle as i32,
            engine: "dmodc".into(),
            switches: 54,
            nodes: 648,
            links_up: 647,
            last_reroute: Some(pb::RerouteTimings {
                routed_ms: 1.5,
                committed_ms: 2.5,
                blocks_written: 7,
                driver_smps_sent: 16472,
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = status_json(&s);
        assert_eq!(v["generation"], 3);
        assert_eq!(v["phase"], "idle");
        assert_eq!(v["engine"], "dmodc");
        assert_eq!(v["switches"], 54);
        assert_eq!(v["nodes"], 648);
        assert_eq!(v["links_up"], 647);
        assert_eq!(v["last_reroute"]["routed_ms"], 1.5);
        assert_eq!(v["last_reroute"]["committed_ms"], 2.5);
        assert_eq!(v["last_reroute"]["blocks_written"], 7);
        assert_eq!(v["last_reroute"]["driver_smps_sent"], 16472);
        let none = status_json(&pb::Status::default());
        assert!(none["last_reroute"].is_null());
        let s = pb::Status {
            phase: pb::Phase::Unpath as i32,
            dual_lids: true,
            subscribers: 64,
            missed_acks: vec!["job-7 (unpath)".into()],
            ..Default::default()
        };
        let v = status_json(&s);
        assert_eq!(v["phase"], "unpath");
        assert_eq!(v["dual_lids"], true);
        assert_eq!(v["subscribers"], 64);
        assert_eq!(v["missed_acks"][0], "job-7 (unpath)");
    }

    #[test]
    fn the_ha_line_and_json_show_role_leader_epoch_and_fence() {
        assert_eq!(ha_text(&pb::Status::default()), None);
        assert!(status_json(&pb::Status::default())["ha"].is_null());
        let s = pb::Status {
            ha: Some(pb::HaStatus {
                role: pb::HaRole::Standby as i32,
                node_name: "mgmt2".into(),
                leader_node: "mgmt1".into(),
                leader_advertise: "mgmt1:50051".into(),
                epoch: 42,
                lease_ttl_s: 5,
                etcd_reachable: true,
                fenced: true,
                leader_changes: 1,
                ..Default::default()
            }),
            ..Default::default()
        };
        let t = ha_text(&s).unwrap();
        assert_eq!(
            t,
            "standby on mgmt2, leader mgmt1 (mgmt1:50051), epoch 42, no lease (5 s TTL), etcd reachable, \
             FENCED (switch writes refused), 1 leader changes"
        );
        let v = status_json(&s);
        assert_eq!(v["ha"]["role"], "standby");
        assert_eq!(v["ha"]["epoch"], 42);
        assert_eq!(v["ha"]["leader_node"], "mgmt1");
    }

    #[test]
    fn routing_validity_renders() {
        assert_eq!(routing_validity_text(&pb::Status::default()), None);
        let mut s = pb::Status {
            generation: 2,
            routing_valid: true,
            ..Default::default()
        };
        assert_eq!(routing_validity_text(&s).as_deref(), Some("valid"));
        s.fallback_destinations = 36;
        s.disconnected_pairs = 10;
        s.routing_fallback_reason = "dmodc left 36 destinations unreachable".into();
        assert_eq!(
            routing_validity_text(&s).as_deref(),
            Some("valid, 36 destinations routed by the Up*/Down* fallback (10 pairs disconnected: no path in the fabric)")
        );
        s.routing_valid = false;
        s.unreachable_pairs = 4;
        assert!(routing_validity_text(&s)
            .unwrap()
            .starts_with("INVALID: 4 connected pairs unreachable"));
        let v = status_json(&s);
        assert_eq!(v["routing_valid"], false);
        assert_eq!(v["fallback_destinations"], 36);
        assert_eq!(v["routing_fallback_reason"], "dmodc left 36 destinations unreachable");
        assert_eq!(v["unreachable_pairs"], 4);
        assert_eq!(v["disconnected_pairs"], 10);
    }

    #[test]
    fn escape_vl_and_smp_counters_render() {
        let mut s = pb::Status {
            dual_lids: true,
            escape_vl_ready: true,
            driver_smps_sent: 16472,
            driver_smp_retries: 3,
            driver_smp_failures: 1,
            escape_vl_ready_at_unix_ms: 1_700_000_000_123,
            ..Default::default()
        };
        assert_eq!(escape_vl_text(&s), "ready");
        assert_eq!(
            driver_smps_text(&s).as_deref(),
            Some("16472 sent, 3 retries, 1 failures")
        );
        let v = status_json(&s);
        assert_eq!(v["escape_vl_ready"], true);
        assert_eq!(v["driver_smps_sent"], 16472);
        assert_eq!(v["driver_smp_retries"], 3);
        assert_eq!(v["driver_smp_failures"], 1);
        assert_eq!(v["escape_vl_ready_at_unix_ms"], 1_700_000_000_123u64);
        s.escape_vl_ready = false;
        s.escape_vl_pending = 70;
        assert_eq!(escape_vl_text(&s), "not ready: 70 SL-to-VL table(s) being programmed");
        s.escape_vl_pending = 2;
        s.escape_vl_error = "SLtoVLMappingTable Set on switch 0x0000000000000020 input port 3 output port 5: \
                             no reply after 4 attempt(s)"
            .into();
        let t = escape_vl_text(&s);
        assert!(t.starts_with("not ready: 2 table(s) unwritten, first: SLtoVLMappingTable Set on switch"));
        assert_eq!(status_json(&s)["escape_vl_error"], s.escape_vl_error);
        s.escape_vl_error.clear();
        s.escape_vl_pending = 0;
        assert_eq!(
            escape_vl_text(&s),
            "not ready (programmed in the background after the first generation)"
        );
        s.dual_lids = false;
        assert_eq!(escape_vl_text(&s), "not used (one LID per end port)");
        // Drivers without SMPs (mock, oob) print no counter line.
        assert_eq!(driver_smps_text(&pb::Status::default()), None);
    }

    #[test]
    fn update_notices_render_in_text_and_json() {
        use pb::fabric_notice::Notice as N;
        let missed = pb::FabricNotice {
            notice: Some(N::AcksMissed(pb::AcksMissed {
                generation: 4,
                subscribers: vec!["a (unpath)".into(), "b (repath)".into()],
            })),
        };
        assert_eq!(
            notice_line(&missed),
            "missed     generation 4 no ack from a (unpath), b (repath)"
        );
        assert_eq!(notice_json(&missed)["type"], "acks_missed");
        assert_eq!(notice_json(&missed)["subscribers"][1], "b (repath)");
        let aborted = pb::FabricNotice {
            notice: Some(N::UpdateAborted(pb::UpdateAborted {
                generation: 5,
                reason: "strict".into(),
            })),
        };
        assert_eq!(notice_line(&aborted), "aborted    generation 5: strict");
        assert_eq!(notice_json(&aborted)["reason"], "strict");
        let restarted = pb::FabricNotice {
            notice: Some(N::UpdateRestarted(pb::UpdateRestarted {
                generation: 6,
                attempt: 1,
                reason: "link-down 0x0000000000000010[5]".into(),
            })),
        };
        assert_eq!(
            notice_line(&restarted),
            "restarted  generation 6 attempt 1: link-down 0x0000000000000010[5]"
        );
        assert_eq!(notice_json(&restarted)["type"], "update_restarted");
        assert_eq!(notice_json(&restarted)["attempt"], 1);
    }

    #[test]
    fn topology_json_lists_cabled_ports_with_state() {
        let t = pb::Topology {
            generation: 1,
            switches: vec![pb::SwitchInfo {
                guid: 0x10,
                name: "leaf0".into(),
                level: Some(0),
                ports: vec![
                    pb::SwitchPort {
                        port: 1,
                        remote_kind: pb::RemoteKind::Switch as i32,
                        remote_guid: 0x20,
                        remote_port: 3,
                        state: pb::PortState::Down as i32,
                        ..Default::default()
                    },
                    pb::SwitchPort {
                        port: 2,
                        remote_kind: pb::RemoteKind::None as i32,
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = topology_json(&t);
        let s = &v["switches"][0];
        assert_eq!(s["guid"], "0x0000000000000010");
        assert_eq!(s["name"], "leaf0");
        assert_eq!(s["level"], 0);
        assert_eq!(s["ports"].as_array().map(Vec::len), Some(1));
        assert_eq!(s["ports"][0]["remote_guid"], "0x0000000000000020");
        assert_eq!(s["ports"][0]["remote_port"], 3);
        assert_eq!(s["ports"][0]["state"], "down");
    }

    #[test]
    fn metrics_json_has_the_analyze_keys() {
        let m = pb::MetricsReport {
            mu_rp: Some(pb::RpStats {
                median: 2.0,
                q1: 1.0,
                q39: 3.0,
            }),
            mu_rp_floor: Some(pb::RpFloor {
                median: 2,
                p_above_median: 0.25,
                measured_p_above_median: 0.5,
            }),
            ..Default::default()
        };
        let v = metrics_json(&m);
        assert_eq!(v["mu_rp_floor"]["median"], 2);
        assert_eq!(v["mu_rp_floor"]["p_above_median"], 0.25);
        assert_eq!(v["mu_rp_floor"]["measured_p_above_median"], 0.5);
        for k in [
            "valid",
            "unreachable_pairs",
            "deadlock_free",
            "mu_sp",
            "mu_a2a",
            "xi",
            "nu",
            "route_ms",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["mu_rp"]["median"], 2.0);
        assert_eq!(v["mu_rp"]["q39"], 3.0);
    }
}
