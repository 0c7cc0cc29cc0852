//! What the routing benches share: the fabrics they measure and their thread pools.

#![allow(dead_code)]

use fabric_topology::gen::{degrade, generate, Degrade};
use fabric_topology::Fabric;

/// The 3-level PGFT of 8 640 nodes (864 switches, 48-port leaves).
pub const PGFT_8640: &str = "PGFT(3;24,12,30;1,12,12;1,2,1)";
/// The 4-level PGFT of 34 992 nodes (6 804 switches).
pub const PGFT_34992: &str = "PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)";

/// `spec` generated, with `link_pct` % of its links removed (seed 1).
pub fn fabric(spec: &str, link_pct: usize) -> Fabric {
    let g = generate(&spec.parse().expect("spec")).expect("generate").fabric;
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

/// A rayon pool of `threads` threads.
pub fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}
