//! Multicast routing benchmark (criterion): every MFT of 1 000 groups on the 8 640-node
//! `PGFT(3;24,12,30;1,12,12;1,2,1)` (864 switches, 144 top switches), complete and with 2 % of
//! its cables removed, on 1 and 2 worker threads (`t1`, `t2`).
//!
//! The groups: one all-nodes broadcast group (as IPoIB's), then 999 groups of 2..=512 random
//! members (seeded), ~1 in 8 with one to four send-only members. `route_multicast` is timed
//! (roots, trees, masks, table allocation); `mft_diff/*` times the diff against empty tables
//! (the first programming) and `flood_broadcast` one reference flood of the broadcast group.

mod support;

use criterion::{criterion_group, criterion_main, Criterion};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{flood, mft_diff, route_multicast, McastGroup, Mfts};
use fabric_topology::{EndPortId, Fabric};
use support::{fabric, pool, PGFT_8640};

/// One broadcast group and `n - 1` groups of 2..=512 random members.
fn groups(f: &Fabric, n: usize, seed: u64) -> Vec<McastGroup> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let all: Vec<EndPortId> = f.end_port_ids().collect();
    let mut out = vec![McastGroup {
        mlid: 0xC000,
        receivers: all.clone(),
        senders: Vec::new(),
    }];
    for i in 1..n {
        let size = rng.gen_range(2..=512usize);
        let receivers: Vec<EndPortId> = all.choose_multiple(&mut rng, size).copied().collect();
        let senders = if rng.gen_range(0..8) == 0 {
            let k = rng.gen_range(1..=4usize);
            all.choose_multiple(&mut rng, k).copied().collect()
        } else {
            Vec::new()
        };
        out.push(McastGroup {
            mlid: 0xC000 + i as u32,
            receivers,
            senders,
        });
    }
    out
}

fn bench_mcast(c: &mut Criterion) {
    let mut g = c.benchmark_group("mcast_1000_groups");
    g.sample_size(10);
    for (name, pct) in [("8640_complete", 0), ("8640_minus2pct", 2)] {
        let f = fabric(PGFT_8640, pct);
        let ranking = rank(&f, &RankOptions::default());
        let gs = groups(&f, 1000, 42);
        for threads in [1, 2] {
            let p = pool(threads);
            g.bench_function(format!("{name}/t{threads}"), |b| {
                p.install(|| b.iter(|| route_multicast(&f, &ranking, &gs)));
            });
        }
        let out = pool(2).install(|| route_multicast(&f, &ranking, &gs));
        let unreachable: usize = out.trees.iter().map(|t| t.unreachable.len()).sum();
        let entries: usize = f
            .switch_ids()
            .map(|s| out.mfts.row(s).iter().filter(|m| **m != [0; 4]).count())
            .sum();
        let top = ranking.level.iter().flatten().max().copied();
        let per_top: Vec<usize> = f
            .switch_ids()
            .filter(|s| ranking.level[s.idx()] == top)
            .map(|s| out.trees.iter().filter(|t| t.root == Some(s)).count())
            .collect();
        eprintln!(
            "{name}: {} trees, roots per top switch {}..={} ({} tops), {} rejected, {unreachable} unreachable members, {entries} non-empty MFT entries, {} blocks to write from empty",
            out.trees.len(),
            per_top.iter().min().unwrap_or(&0),
            per_top.iter().max().unwrap_or(&0),
            per_top.len(),
            out.rejected.len(),
            mft_diff(&Mfts::default(), &out.mfts, &f).len()
        );
        g.bench_function(format!("{name}/mft_diff_from_empty"), |b| {
            b.iter(|| mft_diff(&Mfts::default(), &out.mfts, &f));
        });
        g.bench_function(format!("{name}/flood_broadcast"), |b| {
            b.iter(|| flood(&f, &out.mfts, EndPortId(0), 0xC000).expect("flood"));
        });
    }
    g.finish();
}

criterion_group!(benches, bench_mcast);
criterion_main!(benches);
