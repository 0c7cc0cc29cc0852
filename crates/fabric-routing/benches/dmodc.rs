//! Dmodc and escape-routing benchmarks (criterion).
//!
//! * `dmodc_full/*`: ranking + costs + dividers + topological NIDs + base LFTs (end-port base
//!   LIDs and switch LIDs), into a table allocated once (as a daemon reuses its buffers; the
//!   first-touch cost of a fresh table is reported separately by `lft_alloc/*`).
//!   - `PGFT(3;24,12,30;1,12,12;1,2,1)`: 8 640 nodes, 864 switches, 48-port leaves (no 3-level
//!     RLFT of a common radix has exactly 8 640 nodes; this is the 3-level PGFT of that size),
//!     complete and with 2 % of its cables removed;
//!   - `PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)`: 34 992 nodes, 6 804 switches, LMC 0 (with LMC 1
//!     it needs 76 788 LIDs, more than InfiniBand's 49 151).
//! * `escape_updown/*`: Up*/Down* (BFS, Alg. 10 + 12) on the escape LIDs, timed separately.
//! * Each on 1 and 2 worker threads (`t1`, `t2`) for the parallel speed-up.
//!
//! Before the benchmarks, one routing of the 34 992-node fabric reports the memory: LFT bytes
//! (switches × LIDs) and the peak resident memory growth (`VmHWM`, reset through
//! `/proc/self/clear_refs`), and one-shot timings of the validity and CDG checks.

mod support;

use criterion::{criterion_group, criterion_main, Criterion};

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{
    assign_lids, engine, EngineKind, GroupedDmodc, Guid2Lid, Lfts, LidPlan, LidSet, NodeGroups, RoutingContext,
    RoutingEngine, IB_MAX_UNICAST_LID,
};
use fabric_topology::Fabric;
use support::{fabric, pool, PGFT_34992, PGFT_8640};

/// Ranking + Dmodc base routing, the unit of work of one generation.
fn dmodc_full(f: &Fabric, lids: &LidPlan, lfts: &mut Lfts) {
    let ranking = rank(f, &RankOptions::default());
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids,
    };
    engine(EngineKind::Dmodc)
        .route(&ctx, LidSet::Base, lfts)
        .expect("route");
}

fn bench_dmodc(c: &mut Criterion) {
    let mut g = c.benchmark_group("dmodc_full");
    g.sample_size(10);
    for (name, spec, pct, lmc) in [
        ("8640_complete", PGFT_8640, 0, 1),
        ("8640_minus2pct_links", PGFT_8640, 2, 1),
        ("34992_lmc0", PGFT_34992, 0, 0),
    ] {
        let f = fabric(spec, pct);
        let lids = assign_lids(&f, &Guid2Lid::default(), lmc, IB_MAX_UNICAST_LID).expect("lids");
        let mut lfts = Lfts::new(f.num_switches(), lids.top());
        for threads in [1, 2] {
            let p = pool(threads);
            g.bench_function(format!("{name}/t{threads}"), |b| {
                p.install(|| b.iter(|| dmodc_full(&f, &lids, &mut lfts)));
            });
        }
    }
    g.finish();
}

/// Ranking + Gdmodc (job-aware) base routing with 8 jobs of 512 end ports spread over the
/// fabric (every 17th end port from 8 different offsets), against `dmodc_full` of the same
/// fabric in the same run.
fn bench_grouped(c: &mut Criterion) {
    let mut g = c.benchmark_group("gdmodc_full");
    g.sample_size(10);
    let f = fabric(PGFT_8640, 0);
    let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).expect("lids");
    let n = f.num_end_ports();
    let jobs: Vec<Vec<fabric_topology::EndPortId>> = (0..8)
        .map(|j| {
            (0..512)
                .map(|i| fabric_topology::EndPortId(((j + i * 17) % n) as u32))
                .collect()
        })
        .collect();
    let groups = NodeGroups::from_sets(n, &jobs);
    let mut lfts = Lfts::new(f.num_switches(), lids.top());
    let p = pool(2);
    g.bench_function("8640_complete_8jobs/t2", |b| {
        p.install(|| {
            b.iter(|| {
                let ranking = rank(&f, &RankOptions::default());
                let ctx = RoutingContext {
                    fabric: &f,
                    ranking: &ranking,
                    lids: &lids,
                };
                GroupedDmodc(&groups)
                    .route(&ctx, LidSet::Base, &mut lfts)
                    .expect("route");
            });
        });
    });
    g.finish();
}

fn bench_escape(c: &mut Criterion) {
    let mut g = c.benchmark_group("escape_updown");
    g.sample_size(10);
    for (name, pct) in [("8640_complete", 0), ("8640_minus2pct_links", 2)] {
        let f = fabric(PGFT_8640, pct);
        let ranking = rank(&f, &RankOptions::default());
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).expect("lids");
        let mut lfts = Lfts::new(f.num_switches(), lids.top());
        let ctx = RoutingContext {
            fabric: &f,
            ranking: &ranking,
            lids: &lids,
        };
        for threads in [1, 2] {
            let p = pool(threads);
            g.bench_function(format!("{name}/t{threads}"), |b| {
                p.install(|| {
                    b.iter(|| {
                        engine(EngineKind::UpDown)
                            .route(&ctx, LidSet::Escape, &mut lfts)
                            .expect("route");
                    });
                });
            });
        }
    }
    g.finish();
}

fn bench_alloc(c: &mut Criterion) {
    let mut g = c.benchmark_group("lft_alloc");
    g.sample_size(10);
    let f = fabric(PGFT_34992, 0);
    let lids = assign_lids(&f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).expect("lids");
    let p = pool(2);
    g.bench_function("34992_lmc0/t2", |b| {
        p.install(|| b.iter(|| Lfts::new(f.num_switches(), lids.top())));
    });
    g.finish();
}

/// Peak resident memory (kB) since the last reset, and a reset.
fn vm_hwm_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
fn vm_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn memory_report(_: &mut Criterion) {
    let f = fabric(PGFT_34992, 0);
    let ranking = rank(&f, &RankOptions::default());
    let lids = assign_lids(&f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).expect("lids");
    let base = vm_rss_kb();
    let reset = reset_hwm();
    let t = std::time::Instant::now();
    let routed = fabric_routing::route_all(
        &RoutingContext {
            fabric: &f,
            ranking: &ranking,
            lids: &lids,
        },
        EngineKind::Dmodc,
    )
    .expect("route");
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let lft_bytes = routed.lfts.as_bytes().len() as u64;
    let leaves = f.switch_ids().filter(|&s| f.is_leaf(s)).count() as u64;
    let costs = 2 * f.num_switches() as u64 * leaves;
    match (base, vm_hwm_kb(), reset) {
        (Some(b), Some(h), true) => eprintln!(
            "memory {PGFT_34992} LMC 0: route_all {ms:.0} ms (incl. table allocation); LFT {:.1} MB (switches x LIDs), \
             cost matrices {:.1} MB; peak RSS growth {:.1} MB = {:.2} x LFT",
            lft_bytes as f64 / 1e6,
            costs as f64 / 1e6,
            (h.saturating_sub(b) * 1024) as f64 / 1e6,
            (h.saturating_sub(b) * 1024) as f64 / lft_bytes as f64
        ),
        _ => eprintln!("memory: /proc not available; LFT {lft_bytes} bytes, cost matrices {costs} bytes"),
    }
    // One-shot timings of the checks on the same tables.
    let t = std::time::Instant::now();
    let v = fabric_routing::check::validity(&f, &lids, &routed.lfts);
    let validity_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = std::time::Instant::now();
    let dl = fabric_routing::check::deadlock_free(&f, &ranking, &lids, &routed.lfts);
    let cdg_ms = t.elapsed().as_secs_f64() * 1e3;
    eprintln!(
        "checks {PGFT_34992} LMC 0: validity {validity_ms:.0} ms (valid {}), CDG {cdg_ms:.0} ms (acyclic {dl})",
        v.valid
    );
}

criterion_group!(
    benches,
    memory_report,
    bench_dmodc,
    bench_grouped,
    bench_escape,
    bench_alloc
);
criterion_main!(benches);
