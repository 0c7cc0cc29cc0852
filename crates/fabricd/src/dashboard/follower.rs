//! The follower of the daemon's notices: timeline, SSE text, loads refresh.

use std::sync::{Arc, Weak};

use serde::Serialize;
use tokio::sync::broadcast;

use super::{view::TimingsView, Dashboard, TimelineEvent};
use crate::state::{Notice, Phase};

/// Subscribers named in one `acks-missed` event at most.
const NAMED_SUBSCRIBERS: usize = 8;

/// One server-sent event: `event: kind` and its JSON on one `data:` line.
pub(super) fn sse_text(kind: &str, data: &impl Serialize) -> Arc<str> {
    let json = serde_json::to_string(data).unwrap_or_else(|_| "{}".into());
    format!("event: {kind}\ndata: {json}\n\n").into()
}

fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The timeline event of a notice; `installed` is the generation installed when it was seen.
pub(super) fn timeline_event(n: &Notice, installed: u64, at_unix_ms: i64) -> TimelineEvent {
    let e = |kind, generation, text: String| TimelineEvent {
        at_unix_ms,
        kind,
        generation,
        phase: None,
        text,
        timings: None,
    };
    match n {
        Notice::TopologyChange { event, physical } => e(
            "fault",
            installed,
            format!("{event} ({})", if *physical { "physical" } else { "virtual" }),
        ),
        Notice::PhaseChanged { generation, phase } => TimelineEvent {
            phase: Some(phase.name()),
            ..e(
                "phase",
                *generation,
                if *phase == Phase::Idle {
                    format!("generation {generation} installed: idle")
                } else {
                    format!("generation {generation}: {}", phase.name())
                },
            )
        },
        Notice::GenerationCommitted { generation, timings } => TimelineEvent {
            timings: Some(TimingsView::from(timings)),
            ..e(
                "committed",
                *generation,
                format!(
                    "generation {generation} committed: {} change{}, {:.1} ms from the first change, {} LFT blocks written",
                    timings.faults,
                    if timings.faults == 1 { "" } else { "s" },
                    timings.committed_ms,
                    timings.blocks_written
                ),
            )
        },
        Notice::AcksMissed { generation, subscribers } => {
            let mut names: Vec<&str> = subscribers.iter().take(NAMED_SUBSCRIBERS).map(String::as_str).collect();
            let more = subscribers.len().saturating_sub(NAMED_SUBSCRIBERS);
            let extra = format!("and {more} more");
            if more > 0 {
                names.push(&extra);
            }
            e(
                "acks-missed",
                *generation,
                format!("generation {generation}: deadline missed by {}", names.join(", ")),
            )
        }
        Notice::UpdateAborted { generation, reason } => e(
            "aborted",
            *generation,
            format!("generation {generation} aborted: {reason}"),
        ),
        Notice::UpdateRestarted {
            generation,
            attempt,
            reason,
        } => e(
            "restarted",
            *generation,
            format!("generation {generation} restarted from prepare (attempt {attempt}): {reason}"),
        ),
    }
}

/// Reads the notices until the daemon drops their sender or the dashboard is gone.
pub(super) async fn run(d: Weak<Dashboard>, mut rx: broadcast::Receiver<Notice>) {
    loop {
        let r = rx.recv().await;
        let Some(d) = d.upgrade() else { return };
        let installed = d.published.load().generation();
        let ev = match r {
            Ok(n) => {
                if matches!(
                    n,
                    Notice::GenerationCommitted { .. } | Notice::PhaseChanged { phase: Phase::Idle, .. }
                ) {
                    d.refresh_loads();
                }
                timeline_event(&n, installed, now_unix_ms())
            }
            Err(broadcast::error::RecvError::Lagged(k)) => TimelineEvent {
                at_unix_ms: now_unix_ms(),
                kind: "lagged",
                generation: installed,
                phase: None,
                text: format!("{k} notices lost by the dashboard (too many at once)"),
                timings: None,
            },
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let text = sse_text("notice", &ev);
        d.push_timeline(ev);
        let _ = d.events.send(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::RerouteTimings;

    #[test]
    fn notices_read_as_timeline_events() {
        let n = Notice::TopologyChange {
            event: fabric_topology::FabricEvent::LinkDown { switch: 0x10, port: 3 },
            physical: false,
        };
        let e = timeline_event(&n, 4, 7);
        assert_eq!((e.kind, e.generation, e.at_unix_ms), ("fault", 4, 7));
        assert!(e.text.ends_with("(virtual)") && e.text.contains("[3]"), "{}", e.text);
        let c = timeline_event(
            &Notice::GenerationCommitted {
                generation: 5,
                timings: RerouteTimings {
                    faults: 1,
                    committed_ms: 12.345,
                    ..RerouteTimings::default()
                },
            },
            4,
            8,
        );
        assert_eq!(
            c.text,
            "generation 5 committed: 1 change, 12.3 ms from the first change, 0 LFT blocks written"
        );
        assert!(c.timings.is_some());
        let subscribers: Vec<String> = (0..10).map(|i| format!("s{i} (unpath)")).collect();
        let m = timeline_event(
            &Notice::AcksMissed {
                generation: 6,
                subscribers,
            },
            5,
            9,
        );
        assert!(m.text.ends_with("s7 (unpath), and 2 more"), "{}", m.text);
        let s = sse_text("notice", &m);
        assert!(
            s.starts_with("event: notice\ndata: {") && s.ends_with("}\n\n") && s.matches('\n').count() == 3,
            "{s}"
        );
    }
}
