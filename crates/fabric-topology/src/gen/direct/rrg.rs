//! Random regular graphs for property tests: a connected simple `k`-regular graph on `n`
//! switches, deterministic for a seed (ChaCha8).
//!
//! Start from the circulant graph (switch `i` cabled to `i ± 1, .., i ± ⌊k/2⌋`, and to `i + n/2`
//! when `k` is odd), which is connected and `k`-regular; then apply `10·n·k/2` random double-edge
//! swaps (`{a,b}, {c,d}` → `{a,d}, {c,b}`, refused when they would make a loop or a parallel
//! cable), which keep the degrees and mix toward a uniform random regular graph. If the result is
//! disconnected, another `n·k/2` swaps are applied, up to 1000 rounds.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::build::{Graph, Link};
use crate::gen::error::GenError;

fn connected(adj: &[Vec<u32>]) -> bool {
    let mut seen = vec![false; adj.len()];
    let mut stack = vec![0u32];
    seen[0] = true;
    let mut count = 1;
    while let Some(v) = stack.pop() {
        for &w in &adj[v as usize] {
            if !seen[w as usize] {
                seen[w as usize] = true;
                count += 1;
                stack.push(w);
            }
        }
    }
    count == adj.len()
}

fn replace(list: &mut [u32], old: u32, new: u32) {
    if let Some(x) = list.iter_mut().find(|x| **x == old) {
        *x = new;
    }
}

/// `n > k ≥ 2`, `n·k` even (checked by the spec).
pub(super) fn graph(n: u32, k: u32, seed: u64, label: &str) -> Result<Graph, GenError> {
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity((n as usize * k as usize) / 2);
    for i in 0..n {
        for d in 1..=k / 2 {
            edges.push((i, (i + d) % n));
        }
        if k % 2 == 1 && i < n / 2 {
            edges.push((i, i + n / 2));
        }
    }
    let mut adj: Vec<Vec<u32>> = vec![Vec::with_capacity(k as usize); n as usize];
    for &(a, b) in &edges {
        adj[a as usize].push(b);
        adj[b as usize].push(a);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let m = edges.len();
    let mut swaps = 10 * m;
    let mut rounds = 0;
    loop {
        for _ in 0..swaps {
            let (i, j) = (rng.gen_range(0..m), rng.gen_range(0..m));
            if i == j {
                continue;
            }
            let (a, b) = edges[i];
            let (mut c, mut d) = edges[j];
            if rng.gen::<bool>() {
                std::mem::swap(&mut c, &mut d);
            }
            // {a,b}, {c,d} -> {a,d}, {c,b}
            if a == d || c == b || adj[a as usize].contains(&d) || adj[c as usize].contains(&b) {
                continue;
            }
            replace(&mut adj[a as usize], b, d);
            replace(&mut adj[b as usize], a, c);
            replace(&mut adj[c as usize], d, b);
            replace(&mut adj[d as usize], c, a);
            edges[i] = (a, d);
            edges[j] = (c, b);
        }
        if connected(&adj) {
            break;
        }
        rounds += 1;
        if rounds == 1000 {
            return Err(GenError::Invalid {
                spec: label.to_string(),
                reason: "no connected graph found after 1000 rounds of swaps".to_string(),
            });
        }
        swaps = m;
    }
    for list in &mut adj {
        list.sort_unstable();
    }
    let mut links: Vec<Link> = Vec::with_capacity(m);
    for a in 0..n {
        for (j, &b) in adj[a as usize].iter().enumerate() {
            if a < b {
                let back = adj[b as usize].iter().position(|&x| x == a).expect("symmetric") as u32;
                links.push(((a, j as u32), (b, back)));
            }
        }
    }
    Ok(Graph {
        digits: (0..n).map(|i| vec![i]).collect(),
        links,
    })
}
