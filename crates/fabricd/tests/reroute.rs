//! Acceptance: link faults through the real daemon on 648- and 3456-node fabrics, and a fault
//! storm. Every check reads the simulated fabric (VerifyReachability) or the daemon's installed
//! tables (GetLft) and, for the storm, compares with a from-scratch routing computed here with
//! the library crates.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;
use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all, EngineKind, Guid2Lid, RoutingContext};
use fabric_topology::{gen, FabricEvent};
use rand::{Rng, SeedableRng};

/// Link down then up on a leaf uplink, physically (the simulated fabric loses the link).
async fn link_fault_round_trip(generator: &str, name: &str) {
    let dir = test_dir(name);
    let d = Daemon::spawn(&dir, &Opts::new(generator), &[]);
    let mut c = d.ready().await;
    let s0 = status(&mut c).await;
    let (g0, before) = lfts(&mut c).await;
    assert_eq!(g0, s0.generation);
    let nodes = u64::from(s0.nodes);
    let v = verify(&mut c).await;
    assert_eq!(v.unreachable_count, 0, "initial routing: {:?}", v.unreachable.first());
    assert_eq!(v.pairs_checked, nodes * (nodes - 1));

    let t = topology(&mut c).await;
    let (sw, port) = switch_links(&t)[0];
    let (first, last) = (&t.end_ports[0], &t.end_ports[t.end_ports.len() - 1]);
    let tr = c
        .trace(pb::TraceRequest {
            src: first.name.clone(),
            dst: format!("0x{:016x}", last.guid),
            escape: false,
        })
        .await
        .expect("trace")
        .into_inner();
    assert!(tr.reached, "{}", tr.error);
    assert_eq!(tr.dlid, last.base_lid);
    assert!(tr.hops.len() >= 2, "different leaves: at least two switches");
    assert_eq!(tr.hops[0].switch_guid, first.switch_guid);
    assert_eq!(tr.hops.last().expect("hop").switch_guid, last.switch_guid);
    let r = c
        .inject_fault(link_req(sw, port, false, true, true))
        .await
        .expect("link-down")
        .into_inner();
    assert!(r.event.starts_with("link-down"), "{}", r.event);
    assert_eq!(r.generation, g0 + 1, "one fault, one generation");
    let s1 = status(&mut c).await;
    assert_eq!(s1.generation, g0 + 1);
    assert_eq!(s1.links_up + 1, s0.links_up);
    let (_, after) = lfts(&mut c).await;
    let changed = changed_blocks(&before, &after);
    let last = s1.last_reroute.expect("timings");
    assert!(changed > 0, "a dead uplink must change some routes");
    assert_eq!(
        last.blocks_written, changed as u64,
        "exactly the changed blocks are written"
    );
    assert_eq!(last.faults, 1);
    let v = verify(&mut c).await;
    assert_eq!(v.generation, g0 + 1);
    assert_eq!(v.unreachable_count, 0, "after link-down: {:?}", v.unreachable.first());
    assert_eq!(v.pairs_checked, nodes * (nodes - 1), "every pair is still connected");

    let r = c
        .inject_fault(link_req(sw, port, true, true, true))
        .await
        .expect("link-up")
        .into_inner();
    assert_eq!(r.generation, g0 + 2);
    let (_, back) = lfts(&mut c).await;
    assert!(back == before, "link-up restores the original LFTs byte for byte");
    let s2 = status(&mut c).await;
    assert_eq!(s2.last_reroute.expect("timings").blocks_written, changed as u64);
    assert_eq!(verify(&mut c).await.unreachable_count, 0);
}

#[test]
fn link_fault_648_nodes() {
    run_with_deadline(120, link_fault_round_trip("PGFT(2;18,36;1,18;1,1)", "link648"));
}

#[test]
fn link_fault_3456_nodes() {
    // 216 leaves x 16 nodes, three levels, 456 switches.
    run_with_deadline(240, link_fault_round_trip("PGFT(3;16,12,18;1,8,12;1,1,1)", "link3456"));
}

#[test]
fn fault_storm_is_coalesced_and_equals_scratch_routing() {
    run_with_deadline(180, async {
        const SPEC: &str = "PGFT(2;18,36;1,18;1,1)";
        let dir = test_dir("storm");
        let mut opts = Opts::new(SPEC);
        opts.coalesce_ms = 50;
        opts.coalesce_max_ms = 300;
        let d = Daemon::spawn(&dir, &opts, &[]);
        let mut c = d.ready().await;
        let g0 = status(&mut c).await.generation;
        let t = topology(&mut c).await;
        let links = switch_links(&t);
        // 4 senders, each owning 20 links, 250 random link-down/up each: the final state of
        // every link is known whatever the interleaving.
        let tasks = 4;
        let per_task = 20;
        let mut handles = Vec::new();
        let mut watch = c
            .watch_events(pb::WatchEventsRequest {})
            .await
            .expect("watch")
            .into_inner();
        let start = Instant::now();
        for k in 0..tasks {
            let mine: Vec<(u64, u32)> = links.iter().skip(k * 37).step_by(3).take(per_task).copied().collect();
            let mut c = c.clone();
            handles.push(tokio::spawn(async move {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(k as u64);
                let mut down: BTreeSet<(u64, u32)> = BTreeSet::new();
                for i in 0..250 {
                    let l = mine[rng.gen_range(0..mine.len())];
                    let up = rng.gen_bool(0.4);
                    let last = i == 249;
                    c.inject_fault(link_req(l.0, l.1, up, false, last))
                        .await
                        .expect("inject");
                    // Spread the storm over most of a second so that faults also arrive while
                    // generations are computed and uploaded.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    if up {
                        down.remove(&l);
                    } else {
                        down.insert(l);
                    }
                }
                down
            }));
        }
        let mut expected_down = BTreeSet::new();
        for h in handles {
            expected_down.extend(h.await.expect("sender"));
        }
        let storm = start.elapsed();
        assert!(storm < Duration::from_secs(3), "1000 faults took {storm:?}");
        eprintln!("storm: 1000 faults in {storm:?}");
        let s = status(&mut c).await;
        let generations = s.generation - g0;
        assert!(generations >= 1, "the storm produced no generation");
        assert!(
            generations <= 12,
            "1000 faults in {storm:?} gave {generations} generations: not coalesced"
        );
        assert_eq!(s.virtual_faults as usize, expected_down.len(), "no fault lost");
        assert_eq!(s.pending_faults, 0);

        // Every accepted change was announced and every generation committed.
        let mut changes = 0;
        let mut commits = 0;
        let mut faults_in_commits = 0;
        while commits < generations {
            let n = tokio::time::timeout(Duration::from_secs(10), watch.message())
                .await
                .expect("notice")
                .expect("stream")
                .expect("open");
            match n.notice {
                Some(pb::fabric_notice::Notice::TopologyChange(_)) => changes += 1,
                Some(pb::fabric_notice::Notice::GenerationCommitted(g)) => {
                    commits += 1;
                    faults_in_commits += g.timings.map_or(0, |t| t.faults);
                }
                Some(pb::fabric_notice::Notice::Lagged(n)) => panic!("watcher lagged by {n}"),
                _ => {}
            }
        }
        assert!(changes > 0);
        eprintln!("storm: {changes} effective changes in {generations} generations");
        assert_eq!(
            faults_in_commits, changes,
            "every change is in exactly one committed generation"
        );

        // The daemon's view of excluded links.
        let t = topology(&mut c).await;
        let excluded: BTreeSet<(u64, u32)> = switch_links(&t)
            .into_iter()
            .filter(|&(g, p)| {
                t.switches
                    .iter()
                    .any(|s| s.guid == g && s.ports.iter().any(|q| q.port == p && q.excluded))
            })
            .collect();
        assert_eq!(excluded, expected_down);

        // Routing the final topology from scratch gives the installed tables.
        let fabric = gen::generate_str(SPEC, None).expect("generate");
        let events: Vec<FabricEvent> = expected_down
            .iter()
            .map(|&(g, p)| FabricEvent::LinkDown {
                switch: g,
                port: p as u8,
            })
            .collect();
        let fabric = fabric.apply(&events).expect("apply");
        let ranking = rank(&fabric, &RankOptions::default());
        let lids = assign_lids(&fabric, &Guid2Lid::new(), 1, 0xBFFF).expect("lids");
        let routed = route_all(
            &RoutingContext {
                fabric: &fabric,
                ranking: &ranking,
                lids: &lids,
            },
            EngineKind::Dmodc,
        )
        .expect("route");
        let (_, installed) = lfts(&mut c).await;
        let scratch: HashMap<u64, Vec<u8>> = fabric
            .switch_ids()
            .map(|s| (fabric.switch(s).guid, routed.lfts.row(s).to_vec()))
            .collect();
        assert_eq!(
            changed_blocks(&installed, &scratch),
            0,
            "installed LFTs differ from a from-scratch routing"
        );
        assert_eq!(verify(&mut c).await.unreachable_count, 0);
    });
}
