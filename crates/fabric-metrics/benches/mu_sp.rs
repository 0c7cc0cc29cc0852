//! `mu_sp` (all 8639 shifts) on an 8640-end-port fat-tree, and the other patterns.
//!
//! The fabric is `XGFT(3; 24, 18, 20; 1, 6, 18)`: 360 leaves of 24 end ports with 6 up-links
//! (blocking factor 4, like the thesis' 8640-node PGFT), 120 level-2 and 108 level-3 switches.
//! It is routed by the closed-form Dmodk of `support` (not a `fabric-routing` engine), which is
//! enough to time the metrics: the work is one LFT walk per path whatever the engine.
//!
//! Run: `cargo bench -p fabric-metrics --bench mu_sp`.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use fabric_metrics::{compute, MetricsOptions};

mod support;

fn bench(c: &mut Criterion) {
    let t = support::pgft(&[24, 18, 20], &[1, 6, 18], &[1, 1, 1]);
    let lfts = support::dmodk(&t);
    assert_eq!(t.fabric.num_end_ports(), 8640);

    let only = |shifts, random_perms, all_to_all| MetricsOptions {
        random_perms,
        seed: 1,
        all_to_all,
        shifts,
    };
    // One timed run of each pattern for the record, then criterion samples.
    for (name, o) in [
        ("nu + validity only", only(false, 0, false)),
        ("mu_sp", only(true, 0, false)),
        ("mu_rp(1000)", only(false, 1000, false)),
        ("mu_a2a + xi", only(false, 0, true)),
    ] {
        let start = Instant::now();
        let m = compute(&t.fabric, &t.lids, &lfts, &o);
        eprintln!(
            "{name:>20}: {:>8.3} s  mu_sp={} mu_rp={:?} mu_a2a={} xi={} nu={:.4} unrouted={}",
            start.elapsed().as_secs_f64(),
            m.mu_sp,
            (m.mu_rp.q1, m.mu_rp.median, m.mu_rp.q39),
            m.mu_a2a,
            m.xi,
            m.nu,
            m.unrouted_pairs
        );
    }

    let mut g = c.benchmark_group("metrics_8640");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("mu_sp", |b| {
        b.iter(|| compute(&t.fabric, &t.lids, &lfts, &only(true, 0, false)));
    });
    g.bench_function("mu_rp_1000", |b| {
        b.iter(|| compute(&t.fabric, &t.lids, &lfts, &only(false, 1000, false)));
    });
    g.bench_function("mu_a2a", |b| {
        b.iter(|| compute(&t.fabric, &t.lids, &lfts, &only(false, 0, true)));
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
