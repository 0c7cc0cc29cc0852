//! Parsing plus ranking of a 34 992-end-node 4-level fat-tree file
//! (`PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)`, 6 804 switches), the foundation issue's 1 s budget.
//! A baseline measured in the same run: parsing alone, so the ratio shows ranking's share.

use criterion::{criterion_group, criterion_main, Criterion};
use fabric_ranking::{rank, RankOptions};
use fabric_topology::{gen, ibnet};

fn parse_rank(c: &mut Criterion) {
    let fabric = gen::generate_str("PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)", None).expect("spec");
    let text = ibnet::write(&fabric);
    let mut g = c.benchmark_group("pgft4_34992");
    g.sample_size(10);
    g.bench_function("parse", |b| b.iter(|| ibnet::parse(&text, "bench").expect("parse")));
    g.bench_function("parse_and_rank", |b| {
        b.iter(|| {
            let p = ibnet::parse(&text, "bench").expect("parse");
            let r = rank(&p.fabric, &RankOptions::default());
            assert_eq!(r.height, 4);
            r
        });
    });
    let parsed = ibnet::parse(&text, "bench").expect("parse").fabric;
    g.bench_function("rank", |b| b.iter(|| rank(&parsed, &RankOptions::default())));
    g.finish();
}

criterion_group!(benches, parse_rank);
criterion_main!(benches);
