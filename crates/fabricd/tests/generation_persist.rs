//! Routing generation numbers survive daemon restarts (real `fabricd` processes on the mock
//! driver, real sockets): the state directory's `generation.json` holds the last committed
//! generation, and a daemon started on it numbers its first generation last + 1. Everything that
//! reports a generation agrees with the continued numbering: `GetStatus` (and its last reroute),
//! `WatchEvents`, the Unpath/Repath notices a subscriber acks, the `InjectFault` reply, the
//! Prometheus gauge, the log and the file itself.
//!
//! A generation file that cannot be parsed stops the start with an error naming the file (the
//! documented policy, docs/operations.md "State directory"); writing the last number seen into
//! it, as the message says, lets the daemon start and continue from there.
//!
//! The `kill -9` mid-update case (the recovery generation comes after the interrupted one) is
//! checked in `crash_kill9.rs`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;
use tonic::Streaming;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";

/// The daemon's `generation.json`, parsed.
fn generation_file(d: &Daemon) -> serde_json::Value {
    let path = d.state.join("generation.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

/// The value of `fabricd_generation` on the Prometheus endpoint.
fn gauge(port: u16) -> u64 {
    let m = http_get(port, "/metrics");
    m.lines()
        .find_map(|l| l.strip_prefix("fabricd_generation "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no fabricd_generation gauge in:\n{m}"))
}

async fn wait_generation(d: &Daemon, c: &mut fabric_proto::Client, g: u64) -> pb::Status {
    let t = Instant::now();
    loop {
        let s = status(c).await;
        if s.generation >= g && s.phase == pb::Phase::Idle as i32 {
            assert_eq!(s.generation, g, "one generation per fault");
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "generation {g} not committed (status {s:?}); log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `WatchEvents` notices up to the commit of a generation: (phase notices as (generation,
/// phase), the committed generation and its timings' generation).
async fn until_commit(watch: &mut Streaming<pb::FabricNotice>) -> (Vec<(u64, i32)>, (u64, u64)) {
    let mut phases = Vec::new();
    loop {
        let n = tokio::time::timeout(Duration::from_secs(20), watch.message())
            .await
            .expect("a WatchEvents notice within 20 s")
            .expect("watch stream")
            .expect("stream open");
        match n.notice {
            Some(pb::fabric_notice::Notice::PhaseChanged(p)) => phases.push((p.generation, p.phase)),
            Some(pb::fabric_notice::Notice::GenerationCommitted(g)) => {
                let t = g.timings.map_or(0, |t| t.generation);
                return (phases, (g.generation, t));
            }
            _ => {}
        }
    }
}

#[test]
fn generation_numbers_continue_after_sigterm_and_restart() {
    run_with_deadline(150, async {
        let dir = test_dir("generation-restart");
        let port = free_port();
        let mut opts = Opts::new(SMALL);
        opts.extra = format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n");

        // First life: generation 1 at start, then two faults: generations 2 and 3.
        let mut d = Daemon::spawn(&dir, &opts, &[]);
        let mut c = d.ready().await;
        assert_eq!(status(&mut c).await.generation, 1, "a new state directory starts at 1");
        let topo = topology(&mut c).await;
        let links = switch_links(&topo);
        for (i, &(sw, port)) in links[..2].iter().enumerate() {
            let r = c
                .inject_fault(link_req(sw, port, false, false, true))
                .await
                .expect("InjectFault")
                .into_inner();
            assert_eq!(r.generation, i as u64 + 2);
        }
        let s = wait_generation(&d, &mut c, 3).await;
        assert_eq!(gauge(port), 3);
        let committed_at = s.last_reroute.expect("timings").committed_at_unix_ms;
        drop(c);
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_exit(Duration::from_secs(30)), Some(0), "SIGTERM exits with 0");
        let f = generation_file(&d);
        assert_eq!(
            f,
            serde_json::json!({"version": 1, "generation": 3, "committed_at_unix_ms": committed_at}),
            "the last commit, with the time status reported"
        );

        // Second life on the same state directory: the first generation reported is 4.
        let d = Daemon::spawn_with_config(&dir, &d.config.clone(), &[]);
        let mut c = d.ready().await;
        let s = status(&mut c).await;
        assert_eq!(s.generation, 4, "the first generation after the restart is last + 1");
        assert_eq!(s.last_reroute.as_ref().map(|t| t.generation), Some(4));
        assert_eq!(s.virtual_faults, 2, "the faults of generation 3 are kept");
        assert_eq!(topology(&mut c).await.generation, 4);
        assert_eq!(lfts(&mut c).await.0, 4);
        assert_eq!(gauge(port), 4);
        assert_eq!(generation_file(&d)["generation"], 4);

        // A subscriber and a WatchEvents stream see the next generation as 5.
        let mut watch = c
            .watch_events(pb::WatchEventsRequest {})
            .await
            .expect("WatchEvents")
            .into_inner();
        let mut sc = d.client().await;
        let (mut stream, first) = subscribe(&mut sc, "job-after-restart", &topo.end_ports[0].name).await;
        assert_eq!(
            (first.generation, first.phase),
            (4, pb::Phase::Idle as i32),
            "the first notice names the installed generation"
        );
        let (sw, lp) = links[2];
        let inject = {
            let mut c = c.clone();
            tokio::spawn(async move { c.inject_fault(link_req(sw, lp, false, false, true)).await })
        };
        let unpath = tokio::time::timeout(Duration::from_secs(20), stream.message())
            .await
            .expect("an UNPATH notice")
            .expect("stream")
            .expect("open");
        assert_eq!((unpath.generation, unpath.phase), (5, pb::Phase::Unpath as i32));
        ack_update(&mut sc, &mut stream, first.subscriber_id, 5).await;
        let r = inject.await.expect("join").expect("InjectFault").into_inner();
        assert_eq!(r.generation, 5, "InjectFault with wait names the continued generation");
        let (phases, committed) = until_commit(&mut watch).await;
        assert_eq!(committed, (5, 5), "WatchEvents commit notice and its timings");
        let want: Vec<i32> = [
            pb::Phase::Prepare,
            pb::Phase::Unpath,
            pb::Phase::Update,
            pb::Phase::Repath,
            pb::Phase::Commit,
        ]
        .iter()
        .map(|&p| p as i32)
        .collect();
        assert_eq!(
            phases,
            want.iter().map(|&p| (5, p)).collect::<Vec<_>>(),
            "the phases of generation 5"
        );
        let s = wait_generation(&d, &mut c, 5).await;
        assert_eq!(s.last_reroute.map(|t| t.generation), Some(5));
        assert_eq!(gauge(port), 5);
        assert_eq!(generation_file(&d)["generation"], 5);
        let log = d.log_text();
        let second_life = log
            .rsplit_once("fabricd starting")
            .map_or(log.as_str(), |(_, tail)| tail);
        assert!(
            second_life.contains("routing generation numbers continue from the previous run"),
            "{second_life}"
        );
        let committed: Vec<&str> = second_life
            .lines()
            .filter(|l| l.contains("generation committed"))
            .collect();
        assert_eq!(committed.len(), 2, "{committed:?}");
        assert!(committed[0].contains("generation=4"), "{}", committed[0]);
        assert!(committed[1].contains("generation=5"), "{}", committed[1]);
        assert!(
            second_life.contains("fabricd ready generation=4"),
            "the ready line names the continued generation:\n{second_life}"
        );
    });
}

#[test]
fn a_corrupt_generation_file_stops_the_start_and_names_the_file() {
    run_with_deadline(120, async {
        let dir = test_dir("generation-corrupt");
        let opts = Opts::new(SMALL);
        let state = dir.join("state");
        std::fs::create_dir_all(&state).expect("state dir");
        let file = state.join("generation.json");
        std::fs::write(&file, "{\"version\": 1, \"generation\": ").expect("write a torn file");

        let mut d = Daemon::spawn(&dir, &opts, &[]);
        let code = d.wait_exit(Duration::from_secs(30));
        assert_eq!(code, Some(1), "refuses to start; log:\n{}", d.log_text());
        let log = d.log_text();
        assert!(log.contains(&file.display().to_string()), "the file is named:\n{log}");
        assert!(log.contains("remove the file"), "the message says what to do:\n{log}");
        assert!(!d.socket.exists(), "nothing was served");
        assert!(
            std::fs::read_to_string(&file).expect("file kept") == "{\"version\": 1, \"generation\": ",
            "the daemon leaves the file for the operator"
        );

        // The remedy the message gives: write the last number seen.
        std::fs::write(&file, "{\"version\": 1, \"generation\": 41}\n").expect("repair");
        let d = Daemon::spawn_with_config(&dir, &d.config.clone(), &[]);
        let mut c = d.ready().await;
        assert_eq!(status(&mut c).await.generation, 42);
        assert_eq!(generation_file(&d)["generation"], 42);
    });
}
