//! Cost of writing OpenSM's `opensm-lfts.dump` ([`fabric_routing::OpensmLftWriter`]) into a
//! byte-counting sink, against routing the same fabric (criterion):
//!
//! * `lft_dump/8640`: the 8 640-node 3-level PGFT, LMC 1 (~1.1 GB of text);
//! * `lft_dump/34992`: the 34 992-node 4-level PGFT, LMC 0 (~19 GB of text, 6 804 switches ×
//!   41 796 LIDs of tables: the issue #17 goal is ≤ 5 s).
//!
//! Throughput is in dump bytes. Run one with `cargo bench -p fabric-routing --bench lft_dump --
//! 8640`.

mod support;

use std::io::{self, Write};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{
    assign_lids, route_all, EngineKind, Guid2Lid, OpensmLftWriter, RoutingContext, IB_MAX_UNICAST_LID,
};
use support::{fabric, PGFT_34992, PGFT_8640};

/// Counts the bytes written (the dump goes nowhere).
struct Count(u64);

impl Write for Count {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn bench(c: &mut Criterion) {
    for (name, spec, lmc) in [("8640", PGFT_8640, 1), ("34992", PGFT_34992, 0)] {
        let f = fabric(spec, 0);
        let ranking = rank(&f, &RankOptions::default());
        let lids = assign_lids(&f, &Guid2Lid::default(), lmc, IB_MAX_UNICAST_LID).expect("lids");
        let ctx = RoutingContext {
            fabric: &f,
            ranking: &ranking,
            lids: &lids,
        };
        let lfts = route_all(&ctx, EngineKind::Dmodc).expect("route").lfts;
        let mut n = Count(0);
        OpensmLftWriter::new(&f, &lids, &lfts).write_all(&mut n).expect("dump");
        eprintln!(
            "{name}: {} switches × {} LIDs = {} table bytes, dump {} bytes",
            f.num_switches(),
            lids.top() + 1,
            lfts.as_bytes().len(),
            n.0
        );
        let mut g = c.benchmark_group("lft_dump");
        g.sample_size(10);
        g.throughput(Throughput::Bytes(n.0));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut n = Count(0);
                OpensmLftWriter::new(&f, &lids, &lfts).write_all(&mut n).expect("dump");
                n.0
            });
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
