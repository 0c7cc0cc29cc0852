//! `fabricctl subscribe` and `fabricctl watch`: the daemon's notice streams.

use anyhow::Result;
use fabric_proto::v1 as pb;
use serde_json::json;

use super::output::{ask, status_err};
use super::render::{notice_json, notice_line, phase_name};

/// Runs `fabricctl subscribe`: prints the update notices of a new subscriber, acknowledging the
/// Unpath and Repath phases with `auto_ack` (after `delay` ms), until `count` notices.
pub async fn subscribe(
    c: &mut fabric_proto::Client,
    name: String,
    ports: Vec<String>,
    auto_ack: bool,
    delay: u64,
    count: Option<u64>,
    j: bool,
) -> Result<()> {
    let mut s = ask(c.subscribe(pb::SubscribeRequest { name, end_ports: ports })).await?;
    let mut seen = 0u64;
    while let Some(n) = s.message().await.map_err(status_err)? {
        let ackable = n.phase == pb::Phase::Unpath as i32 || n.phase == pb::Phase::Repath as i32;
        if j {
            outln!(
                "{}",
                serde_json::to_string(&json!({
                    "subscriber_id": n.subscriber_id, "generation": n.generation,
                    "phase": phase_name(n.phase), "deadline_ms": n.deadline_ms,
                }))?
            );
        } else {
            outln!(
                "notice     subscriber {} generation {} {} (deadline {} ms)",
                n.subscriber_id,
                n.generation,
                phase_name(n.phase),
                n.deadline_ms
            );
        }
        if auto_ack && ackable && seen > 0 {
            if delay > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            }
            c.ack(pb::AckRequest {
                subscriber_id: n.subscriber_id,
                generation: n.generation,
                phase: n.phase,
            })
            .await
            .map_err(status_err)?;
            if !j {
                outln!("ack        generation {} {}", n.generation, phase_name(n.phase));
            }
        }
        seen += 1;
        if count.is_some_and(|c| seen >= c) {
            break;
        }
    }
    Ok(())
}

/// Runs `fabricctl watch`: prints the daemon's fabric notices until `count` of them.
pub async fn watch(c: &mut fabric_proto::Client, count: Option<u64>, j: bool) -> Result<()> {
    let mut s = ask(c.watch_events(pb::WatchEventsRequest {})).await?;
    let mut seen = 0u64;
    while let Some(n) = s.message().await.map_err(status_err)? {
        if j {
            outln!("{}", serde_json::to_string(&notice_json(&n))?);
        } else {
            outln!("{}", notice_line(&n));
        }
        seen += 1;
        if count.is_some_and(|c| seen >= c) {
            break;
        }
    }
    Ok(())
}
