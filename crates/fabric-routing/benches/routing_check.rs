//! Cost of the always-on routing validity check ([`fabric_routing::check_and_repair`]) against
//! the routing it checks (criterion), on the 8 640-node 3-level PGFT of `dmodc.rs`:
//!
//! * `route_all/*`: ranking + Dmodc base LIDs + Up*/Down* escape LIDs, what a generation
//!   computes (the denominator);
//! * `routing_check/*`: the check of both LID sets on that valid routing (what every generation
//!   now pays: no fallback);
//! * `routing_check_fallback/*`: check + Up*/Down* fallback + CDG check + re-check on a
//!   routing with holes (two leaves cut down to one disjoint up-link each), the cost of a
//!   generation that needs the fallback.
//!
//! Complete and with 2 % of its cables removed; on 1 and 2 worker threads.

use criterion::{criterion_group, criterion_main, Criterion};

use fabric_ranking::{rank, RankOptions, Ranking};
use fabric_routing::{
    assign_lids, check_and_repair, route_all, EngineKind, Guid2Lid, LidPlan, RoutingContext, IB_MAX_UNICAST_LID,
};
use fabric_topology::gen::{degrade, generate, Degrade};
use fabric_topology::{Fabric, FabricEvent};

const PGFT_8640: &str = "PGFT(3;24,12,30;1,12,12;1,2,1)";

fn fabric(link_pct: usize) -> Fabric {
    let g = generate(&PGFT_8640.parse().expect("spec")).expect("generate").fabric;
    if link_pct == 0 {
        return g;
    }
    let links = g.count_links().0 * link_pct / 100;
    degrade(
        &g,
        &Degrade {
            remove_links: links,
            remove_switches: 0,
            seed: 1,
        },
    )
    .expect("degrade")
}

/// Two leaves keep one up-link each, to different parents: Dmodc leaves them unreachable from
/// each other although the fabric stays connected.
fn split_two_leaves(f: &Fabric) -> Fabric {
    let leaves: Vec<_> = f.switch_ids().filter(|&s| f.is_leaf(s)).take(2).collect();
    let mut ev = Vec::new();
    for (i, &leaf) in leaves.iter().enumerate() {
        let guid = f.switch(leaf).guid;
        for (j, g) in f.port_groups(leaf).iter().enumerate() {
            if j != i {
                ev.extend(g.ports.iter().map(|&p| FabricEvent::LinkDown { switch: guid, port: p }));
            }
        }
    }
    f.apply(&ev).expect("apply")
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

fn setup(f: &Fabric) -> (Ranking, LidPlan) {
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).expect("lids");
    (ranking, lids)
}

fn bench(c: &mut Criterion) {
    for (name, f) in [
        ("8640_complete", fabric(0)),
        ("8640_minus2pct_links", fabric(2)),
        ("8640_two_leaves_split", split_two_leaves(&fabric(0))),
    ] {
        let (ranking, lids) = setup(&f);
        let ctx = RoutingContext {
            fabric: &f,
            ranking: &ranking,
            lids: &lids,
        };
        let routed = route_all(&ctx, EngineKind::Dmodc).expect("route");
        let probe = check_and_repair(&ctx, "dmodc", &mut routed.lfts.clone()).expect("check");
        eprintln!(
            "{name}: fallback {} ({} destinations, engine left {} pairs), valid after {}",
            probe.fallback.name(),
            probe.fallback_destinations,
            probe.engine_unreachable_pairs,
            probe.valid
        );
        let group = if probe.fallback == fabric_routing::Fallback::None {
            "routing_check"
        } else {
            "routing_check_fallback"
        };
        for threads in [1, 2] {
            let p = pool(threads);
            let mut g = c.benchmark_group("route_all");
            g.sample_size(10);
            g.bench_function(format!("{name}/t{threads}"), |b| {
                p.install(|| {
                    b.iter(|| {
                        let ranking = rank(&f, &RankOptions::default());
                        let ctx = RoutingContext {
                            fabric: &f,
                            ranking: &ranking,
                            lids: &lids,
                        };
                        route_all(&ctx, EngineKind::Dmodc).expect("route")
                    });
                });
            });
            g.finish();
            let mut g = c.benchmark_group(group);
            g.sample_size(10);
            g.bench_function(format!("{name}/t{threads}"), |b| {
                p.install(|| {
                    b.iter_batched_ref(
                        || routed.lfts.clone(),
                        |lfts| check_and_repair(&ctx, "dmodc", lfts).expect("check"),
                        criterion::BatchSize::LargeInput,
                    );
                });
            });
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
