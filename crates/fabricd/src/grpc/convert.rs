//! Conversions of the daemon's model to protobuf: phases, reroute timings, notices, metric
//! statistics.

use fabric_proto::v1 as pb;

use crate::event_loop::event_kind;
use crate::state::{Notice, Phase, RerouteTimings};

pub(super) fn rp_stats(r: &fabric_metrics::RpStats) -> pb::RpStats {
    pb::RpStats {
        median: r.median,
        q1: r.q1,
        q39: r.q39,
    }
}

pub(super) fn rp_floor(f: &fabric_metrics::RpFloor, measured: &fabric_metrics::RpStats) -> pb::RpFloor {
    pb::RpFloor {
        median: f.median,
        p_above_median: f.p_at_least(f.median + 1),
        measured_p_above_median: measured.share_at_least(f.median + 1),
    }
}

pub(super) fn phase_from_pb(v: i32) -> Option<Phase> {
    match pb::Phase::try_from(v).ok()? {
        pb::Phase::Unpath => Some(Phase::Unpath),
        pb::Phase::Repath => Some(Phase::Repath),
        _ => None,
    }
}

pub(super) fn phase_pb(p: Phase) -> pb::Phase {
    match p {
        Phase::Idle => pb::Phase::Idle,
        Phase::Prepare => pb::Phase::Prepare,
        Phase::Unpath => pb::Phase::Unpath,
        Phase::Update => pb::Phase::Update,
        Phase::Repath => pb::Phase::Repath,
        Phase::Commit => pb::Phase::Commit,
    }
}

pub(super) fn timings_pb(t: &RerouteTimings) -> pb::RerouteTimings {
    pb::RerouteTimings {
        generation: t.generation,
        routed_ms: t.routed_ms,
        committed_ms: t.committed_ms,
        coalesce_ms: t.coalesce_ms,
        compute_ms: t.compute_ms,
        upload_ms: t.upload_ms,
        blocks_written: t.blocks_written,
        retries: t.retries,
        faults: t.faults,
        committed_at_unix_ms: t.committed_at_unix_ms,
        driver_smps_sent: t.driver_smps_sent,
    }
}

pub(super) fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(super) fn notice_pb(n: Notice) -> pb::FabricNotice {
    use fabric_topology::FabricEvent as E;
    use pb::fabric_notice::Notice as N;
    let notice = match n {
        Notice::TopologyChange { event, physical } => {
            let (guid, port, up) = match event {
                E::LinkDown { switch, port } => (switch, u32::from(port), false),
                E::LinkUp { switch, port } => (switch, u32::from(port), true),
                E::SwitchDown(g) => (g, 0, false),
                E::SwitchUp(g) => (g, 0, true),
                E::EndPortDown(g) => (g, 0, false),
                E::EndPortUp(g) => (g, 0, true),
            };
            let kind = match event_kind(&event) {
                "link" => pb::FaultKind::Link,
                "switch" => pb::FaultKind::Switch,
                _ => pb::FaultKind::Node,
            };
            N::TopologyChange(pb::TopologyChange {
                event: event.to_string(),
                kind: kind as i32,
                up,
                guid,
                port,
                physical,
            })
        }
        Notice::PhaseChanged { generation, phase } => N::PhaseChanged(pb::PhaseChanged {
            generation,
            phase: phase_pb(phase) as i32,
        }),
        Notice::GenerationCommitted { generation, timings } => N::GenerationCommitted(pb::GenerationCommitted {
            generation,
            timings: Some(timings_pb(&timings)),
        }),
        Notice::AcksMissed {
            generation,
            subscribers,
        } => N::AcksMissed(pb::AcksMissed {
            generation,
            subscribers,
        }),
        Notice::UpdateAborted { generation, reason } => N::UpdateAborted(pb::UpdateAborted { generation, reason }),
        Notice::UpdateRestarted {
            generation,
            attempt,
            reason,
        } => N::UpdateRestarted(pb::UpdateRestarted {
            generation,
            attempt,
            reason,
        }),
    };
    pb::FabricNotice { notice: Some(notice) }
}
