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

mod support;

use criterion::{criterion_group, criterion_main, Criterion};

use fabric_ranking::{rank, RankOptions, Ranking};
use fabric_routing::{
    assign_lids, check_and_repair, route_all, EngineKind, Guid2Lid, LidPlan, RoutingContext, IB_MAX_UNICAST_LID,
};
use fabric_topology::{Fabric, FabricEvent};
use support::{fabric, pool, PGFT_8640};

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

fn setup(f: &Fabric) -> (Ranking, LidPlan) {
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).expect("lids");
    (ranking, lids)
}

fn bench(c: &mut Criterion) {
    for (name, f) in [
        ("8640_complete", fabric(PGFT_8640, 0)),
        ("8640_minus2pct_links", fabric(PGFT_8640, 2)),
        ("8640_two_leaves_split", split_two_leaves(&fabric(PGFT_8640, 0))),
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
