//! Metrics at scale (issue #17): `mu_sp` over all shifts, `mu_rp(1000)`, all-to-all and the
//! validity scan on the 34 992-end-port `PGFT(4; 18,3,18,36; 1,3,18,18; 1,6,1,1)` (6 804
//! switches, closed-form Dmodk tables of `support`), on 1 and 2 threads; plus, as the in-run
//! baseline, the straightforward implementation (`reference`) against the fast one on the
//! 8 640-end-port `XGFT(3; 24,18,20; 1,6,18)` of the `mu_sp` bench.
//!
//! One timed run per figure (a criterion sample of the 35k fabric would take minutes): the
//! numbers are wall-clock seconds of this process, to be read with the machine load.
//!
//! Run: `cargo bench -p fabric-metrics --bench scale` (`SCALE_SKIP_BASELINE=1` skips the
//! reference runs on the 8 640-node fabric, which take a few minutes; `SCALE_ONLY=rp,sp` runs
//! only some 35k figures: `validity`, `scan`, `sp`, `rp`, `a2a`; `SCALE_THREADS=2` only some
//! thread counts).

use std::time::Instant;

use fabric_metrics::reference::compute_reference;
use fabric_metrics::{compute, MetricsOptions};
use fabric_routing::check;

mod support;

fn only(shifts: bool, random_perms: usize, all_to_all: bool) -> MetricsOptions {
    MetricsOptions {
        random_perms,
        seed: 1,
        all_to_all,
        shifts,
    }
}

fn timed<T>(what: &str, threads: usize, f: impl FnOnce() -> T + Send) -> (f64, T)
where
    T: Send,
{
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    let start = Instant::now();
    let out = pool.install(f);
    let s = start.elapsed().as_secs_f64();
    eprintln!("{what:>36} [{threads} thread(s)]: {s:>8.2} s");
    (s, out)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let t = support::pgft(&[24, 18, 20], &[1, 6, 18], &[1, 1, 1]);
    let lfts = support::dmodk(&t);
    eprintln!("8640-node XGFT: {} switches", t.fabric.num_switches());
    let (fast8, m) = timed("fast mu_sp 8640", 2, || {
        compute(&t.fabric, &t.lids, &lfts, &only(true, 0, false))
    });
    eprintln!("  mu_sp {} worst shift {}", m.mu_sp, m.worst_shift);
    if std::env::var_os("SCALE_SKIP_BASELINE").is_none() {
        let (slow8, r) = timed("reference mu_sp 8640", 2, || {
            compute_reference(&t.fabric, &t.lids, &lfts, &only(true, 0, false))
        });
        assert_eq!((r.mu_sp, r.worst_shift), (m.mu_sp, m.worst_shift));
        eprintln!("  reference / fast on 8640: {:.1}x", slow8 / fast8);
        let (fast_rp, m) = timed("fast mu_rp(1000) 8640", 2, || {
            compute(&t.fabric, &t.lids, &lfts, &only(false, 1000, false))
        });
        let (slow_rp, r) = timed("reference mu_rp(1000) 8640", 2, || {
            compute_reference(&t.fabric, &t.lids, &lfts, &only(false, 1000, false))
        });
        assert_eq!(r.mu_rp.counts, m.mu_rp.counts);
        eprintln!("  reference / fast mu_rp on 8640: {:.1}x", slow_rp / fast_rp);
    }
    drop((t, lfts));

    let t = support::pgft(&[18, 3, 18, 36], &[1, 3, 18, 18], &[1, 6, 1, 1]);
    let lfts = support::dmodk(&t);
    eprintln!(
        "35k PGFT: {} end ports, {} switches",
        t.fabric.num_end_ports(),
        t.fabric.num_switches()
    );
    let only_env = std::env::var("SCALE_ONLY").unwrap_or_default();
    let wanted = |what: &str| only_env.is_empty() || only_env.split(',').any(|w| w.trim() == what);
    let threads_env = std::env::var("SCALE_THREADS").unwrap_or_default();
    let thread_counts: Vec<usize> = if threads_env.is_empty() {
        vec![2, 1]
    } else {
        threads_env.split(',').filter_map(|t| t.trim().parse().ok()).collect()
    };
    for threads in thread_counts {
        if wanted("validity") {
            let (_, v) = timed("validity (check::validity)", threads, || {
                check::validity(&t.fabric, &t.lids, &lfts)
            });
            eprintln!("  valid {} unreachable {}", v.valid, v.unreachable_count);
        }
        if wanted("scan") {
            let (_, m) = timed("nu + routed pairs (path scan)", threads, || {
                compute(&t.fabric, &t.lids, &lfts, &only(false, 0, false))
            });
            eprintln!("  nu {:.4} unrouted {}", m.nu, m.unrouted_pairs);
        }
        if wanted("sp") {
            let (_, m) = timed("mu_sp (all 34991 shifts)", threads, || {
                compute(&t.fabric, &t.lids, &lfts, &only(true, 0, false))
            });
            eprintln!("  mu_sp {} worst shift {}", m.mu_sp, m.worst_shift);
        }
        if wanted("rp") {
            let (_, m) = timed("mu_rp(1000)", threads, || {
                compute(&t.fabric, &t.lids, &lfts, &only(false, 1000, false))
            });
            eprintln!(
                "  mu_rp median {} q1 {} q39 {}",
                m.mu_rp.median, m.mu_rp.q1, m.mu_rp.q39
            );
        }
        if wanted("a2a") {
            let (_, m) = timed("mu_a2a + xi", threads, || {
                compute(&t.fabric, &t.lids, &lfts, &only(false, 0, true))
            });
            eprintln!("  mu_a2a {} xi {}", m.mu_a2a, m.xi);
        }
    }
}
