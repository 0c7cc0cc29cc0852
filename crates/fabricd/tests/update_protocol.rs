//! Acceptance (issue 5) over the real binary and gRPC: a subscriber gets Unpath and Repath
//! notices of a generation and acks them, WatchEvents shows the five phases in order, status
//! counts the subscriber, GetPath gives both LIDs and SLs, malformed requests are refused, and a
//! closed stream unsubscribes.

mod common;

use std::time::Duration;

use common::*;
use fabric_proto::v1 as pb;
use tonic::Code;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";

#[test]
fn subscriber_moves_through_unpath_and_repath_of_a_generation() {
    run_with_deadline(120, async {
        let dir = test_dir("update-protocol");
        let d = Daemon::spawn(&dir, &Opts::new(SMALL), &[]);
        let mut c = d.ready().await;
        let topo = topology(&mut c).await;
        let ep = &topo.end_ports[3];

        // Malformed requests.
        let r = c
            .subscribe(pb::SubscribeRequest {
                name: "x".into(),
                end_ports: vec!["no-such-node".into()],
            })
            .await;
        assert_eq!(r.err().map(|s| s.code()), Some(Code::InvalidArgument));
        let r = c
            .ack(pb::AckRequest {
                subscriber_id: 999,
                generation: 1,
                phase: pb::Phase::Unpath as i32,
            })
            .await;
        assert_eq!(r.err().map(|s| s.code()), Some(Code::NotFound));
        let r = c
            .ack(pb::AckRequest {
                subscriber_id: 1,
                generation: 1,
                phase: pb::Phase::Update as i32,
            })
            .await;
        assert_eq!(r.err().map(|s| s.code()), Some(Code::InvalidArgument));

        // GetPath: base LID, escape LID = base + 1, SLs.
        let p = c
            .get_path(pb::GetPathRequest {
                dst: ep.name.clone(),
                ..Default::default()
            })
            .await
            .expect("path")
            .into_inner();
        assert_eq!(p.base_lid, ep.base_lid);
        assert_eq!(p.escape_lid, ep.base_lid + 1);
        assert_ne!(p.base_sl, p.escape_sl);

        let mut watch = c
            .watch_events(pb::WatchEventsRequest {})
            .await
            .expect("watch")
            .into_inner();
        let mut sc = d.client().await;
        let (mut stream, first) = subscribe(&mut sc, "e2e", &ep.name).await;
        assert_eq!(first.phase, pb::Phase::Idle as i32);
        assert_eq!(first.generation, 1);
        let id = first.subscriber_id;
        let s = status(&mut c).await;
        assert_eq!((s.subscribers, s.dual_lids), (1, true));

        // The subscriber acks what it gets.
        let acker = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Ok(Some(n)) = stream.message().await {
                got.push((n.generation, n.phase));
                sc.ack(pb::AckRequest {
                    subscriber_id: id,
                    generation: n.generation,
                    phase: n.phase,
                })
                .await
                .expect("ack");
                if n.phase == pb::Phase::Repath as i32 {
                    break;
                }
            }
            (got, stream)
        });
        let (sw, port) = switch_links(&topo)[0];
        let r = c
            .inject_fault(link_req(sw, port, false, false, true))
            .await
            .expect("link-down")
            .into_inner();
        assert_eq!(r.generation, 2);
        let (got, stream) = tokio::time::timeout(Duration::from_secs(30), acker)
            .await
            .expect("notices")
            .expect("acker");
        assert_eq!(got, vec![(2, pb::Phase::Unpath as i32), (2, pb::Phase::Repath as i32)]);
        let s = status(&mut c).await;
        assert_eq!(s.generation, 2);
        assert!(s.missed_acks.is_empty(), "{:?}", s.missed_acks);

        // WatchEvents: the phases of generation 2 in order.
        let mut phases = Vec::new();
        while phases.last() != Some(&(pb::Phase::Idle as i32)) {
            let n = tokio::time::timeout(Duration::from_secs(10), watch.message())
                .await
                .expect("a notice")
                .expect("watch")
                .expect("open");
            if let Some(pb::fabric_notice::Notice::PhaseChanged(p)) = n.notice {
                if phases.is_empty() && p.phase != pb::Phase::Prepare as i32 {
                    continue;
                }
                phases.push(p.phase);
            }
        }
        let want: Vec<i32> = [
            pb::Phase::Prepare,
            pb::Phase::Unpath,
            pb::Phase::Update,
            pb::Phase::Repath,
            pb::Phase::Commit,
            pb::Phase::Idle,
        ]
        .iter()
        .map(|p| *p as i32)
        .collect();
        assert_eq!(phases, want);
        let v = verify(&mut c).await;
        assert_eq!(v.unreachable_count, 0);

        // Closing the stream unsubscribes.
        drop(stream);
        let t = std::time::Instant::now();
        while status(&mut c).await.subscribers != 0 {
            assert!(t.elapsed() < Duration::from_secs(10), "subscriber never dropped");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// Issue 5: a fault that breaks the routing being installed restarts the generation from
/// Prepare; WatchEvents says so (`update_restarted`, naming the link), status lists it, the
/// subscriber is notified again and the generation installs both faults.
#[test]
fn a_breaking_fault_during_unpath_restarts_the_generation() {
    run_with_deadline(120, async {
        let dir = test_dir("update-restart");
        let d = Daemon::spawn(&dir, &Opts::new(SMALL), &[]);
        let mut c = d.ready().await;
        let topo = topology(&mut c).await;
        let links = switch_links(&topo);
        let (a, b) = (links[0], links[3]);
        let mut watch = c
            .watch_events(pb::WatchEventsRequest {})
            .await
            .expect("watch")
            .into_inner();
        let mut sc = d.client().await;
        let (mut stream, first) = subscribe(&mut sc, "restart", &topo.end_ports[0].name).await;
        let id = first.subscriber_id;
        let mut ic = d.client().await;
        let first = tokio::spawn(async move {
            ic.inject_fault(link_req(a.0, a.1, false, false, true))
                .await
                .expect("link-down a")
                .into_inner()
        });
        let n = next_notice(&mut stream).await;
        assert_eq!((n.generation, n.phase), (2, pb::Phase::Unpath as i32));
        // Not acked yet: the generation waits in Unpath. Link b is used by its routing.
        c.inject_fault(link_req(b.0, b.1, false, false, false))
            .await
            .expect("link-down b");
        let restarted = loop {
            let m = tokio::time::timeout(Duration::from_secs(20), watch.message())
                .await
                .expect("a notice")
                .expect("watch")
                .expect("open");
            if let Some(pb::fabric_notice::Notice::UpdateRestarted(r)) = m.notice {
                break r;
            }
        };
        assert_eq!((restarted.generation, restarted.attempt), (2, 1));
        assert!(
            restarted.reason.contains(&format!("link-down 0x{:016x}[{}]", b.0, b.1)),
            "{}",
            restarted.reason
        );
        let s = status(&mut c).await;
        assert_eq!(s.update_restarts.len(), 1, "{:?}", s.update_restarts);
        assert!(
            s.update_restarts[0].starts_with("attempt 1: "),
            "{:?}",
            s.update_restarts
        );
        // The restarted attempt notifies the subscriber again; it acks through to the commit.
        let n = next_notice(&mut stream).await;
        assert_eq!((n.generation, n.phase), (2, pb::Phase::Unpath as i32));
        for phase in [pb::Phase::Unpath, pb::Phase::Repath] {
            if phase == pb::Phase::Repath {
                let r = next_notice(&mut stream).await;
                assert_eq!((r.generation, r.phase), (2, phase as i32));
            }
            sc.ack(pb::AckRequest {
                subscriber_id: id,
                generation: 2,
                phase: phase as i32,
            })
            .await
            .expect("ack");
        }
        let r = tokio::time::timeout(Duration::from_secs(20), first)
            .await
            .expect("committed")
            .expect("task");
        assert_eq!(r.generation, 2);
        let s = status(&mut c).await;
        assert_eq!((s.generation, s.virtual_faults, s.pending_faults), (2, 2, 0));
        assert_eq!(s.update_restarts.len(), 1);
        assert_eq!(verify(&mut c).await.unreachable_count, 0);
    });
}

async fn next_notice(s: &mut tonic::Streaming<pb::UpdateNotice>) -> pb::UpdateNotice {
    tokio::time::timeout(Duration::from_secs(20), s.message())
        .await
        .expect("a notice")
        .expect("stream")
        .expect("open")
}
