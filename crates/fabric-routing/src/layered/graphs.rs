//! Test fabrics of direct topologies: Slim Fly from MMS graphs (Besta & Hoefler 2014; seed 003
//! §3.2 and Appendix A), seeded random regular graphs, and 2-D tori. Test-only: the production
//! generators are `fabric_topology::gen`'s (issue #19, deliverable 1).

use fabric_topology::{Fabric, FabricBuilder, NodeType, SwitchId};
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Switches with `ports` network ports (from port `p + 1`) and `p` end ports each (ports
/// `1..=p`), cabled by `edges` (switch index pairs).
fn build(n: usize, p: u32, edges: &[(usize, usize)]) -> Fabric {
    let mut deg = vec![0u32; n];
    for &(a, b) in edges {
        deg[a] += 1;
        deg[b] += 1;
    }
    let radix = p + deg.iter().copied().max().unwrap_or(0);
    let mut b = FabricBuilder::new();
    let s: Vec<SwitchId> = (0..n)
        .map(|i| b.add_switch(0x5000 + i as u64, format!("s{i}"), radix as u8).unwrap())
        .collect();
    let mut next = vec![p + 1; n];
    for &(x, y) in edges {
        b.connect_switches(s[x], next[x] as u8, s[y], next[y] as u8).unwrap();
        next[x] += 1;
        next[y] += 1;
    }
    for (i, &sw) in s.iter().enumerate() {
        for k in 0..p {
            let id = u64::from(i as u32 * p + k);
            let e = b
                .add_end_port(
                    0x9000_0000 + id,
                    0x8000_0000 + id,
                    format!("n{id}"),
                    1,
                    1,
                    NodeType::Compute,
                )
                .unwrap();
            b.connect_end_port(e, sw, 1 + k as u8).unwrap();
        }
    }
    b.build()
}

/// A primitive root of the prime `q`.
fn primitive_root(q: u32) -> u32 {
    (2..q)
        .find(|&g| {
            let mut x = 1;
            (1..q - 1).all(|_| {
                x = x * g % q;
                x != 1
            })
        })
        .unwrap_or(1)
}

/// The MMS graph of prime `q = 4w + δ` (δ ∈ {−1, 0, 1}; δ = 0 needs a field of characteristic 2,
/// not built here): switches (0, x, y) and (1, m, c) over F_q; (0, x, y) ~ (0, x, y') iff
/// y − y' ∈ X, (1, m, c) ~ (1, m, c') iff c − c' ∈ X', (0, x, y) ~ (1, m, c) iff y = m·x + c
/// (Besta & Hoefler, SC'14, §3.1; seed 003 Appendix A). Switch index: (0, x, y) at x·q + y,
/// (1, m, c) at q² + m·q + c. Returns the edges.
pub fn mms_edges(q: u32) -> Vec<(usize, usize)> {
    let xi = primitive_root(q);
    let pw = |e: u32| (0..e).fold(1u32, |a, _| a * xi % q);
    let (x, xp): (Vec<u32>, Vec<u32>) = match q % 4 {
        1 => {
            let w = (q - 1) / 4;
            (
                (0..2 * w).map(|i| pw(2 * i)).collect(),
                (0..2 * w).map(|i| pw(2 * i + 1)).collect(),
            )
        }
        3 => {
            let w = (q + 1) / 4;
            let mut x: Vec<u32> = (0..w).map(|i| pw(2 * i)).collect();
            x.extend((w..2 * w).map(|i| pw(2 * i - 1)));
            let mut xp: Vec<u32> = (0..w).map(|i| pw(2 * i + 1)).collect();
            xp.extend((w..2 * w).map(|i| pw(2 * i)));
            (x, xp)
        }
        _ => panic!("q = {q}: only odd primes are built here"),
    };
    let q = q as usize;
    let mut e = Vec::new();
    for a in 0..q {
        for y in 0..q {
            for y2 in y + 1..q {
                let d = ((y2 + q - y) % q) as u32;
                if x.contains(&d) {
                    e.push((a * q + y, a * q + y2));
                }
                if xp.contains(&d) {
                    e.push((q * q + a * q + y, q * q + a * q + y2));
                }
            }
        }
    }
    for xx in 0..q {
        for y in 0..q {
            for m in 0..q {
                let c = (y + q * q - m * xx % q) % q;
                e.push((xx * q + y, q * q + m * q + c));
            }
        }
    }
    e
}

/// Slim Fly SF(q) with `p` end ports per switch (full global bandwidth: p = ⌈k'/2⌉).
pub fn slim_fly(q: u32, p: u32) -> Fabric {
    build(2 * (q * q) as usize, p, &mms_edges(q))
}

/// A connected random `k`-regular graph on `n` switches (pairing model, seeded; retried until
/// simple and connected), `p` end ports per switch.
pub fn rrg(n: usize, k: usize, p: u32, seed: u64) -> Fabric {
    assert!((n * k).is_multiple_of(2) && k < n);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    loop {
        let mut stubs: Vec<usize> = (0..n).flat_map(|i| std::iter::repeat_n(i, k)).collect();
        stubs.shuffle(&mut rng);
        let mut edges: Vec<(usize, usize)> = stubs.chunks(2).map(|c| (c[0].min(c[1]), c[0].max(c[1]))).collect();
        if edges.iter().any(|&(a, b)| a == b) {
            continue;
        }
        edges.sort_unstable();
        if edges.windows(2).any(|w| w[0] == w[1]) {
            continue;
        }
        let f = build(n, p, &edges);
        if connected(&f) {
            return f;
        }
    }
}

/// A `w × h` 2-D torus (wrap-around links), one end port per switch.
pub fn torus(w: usize, h: usize) -> Fabric {
    let mut e = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            if w > 2 || x + 1 < w {
                e.push((i, y * w + (x + 1) % w));
            }
            if h > 2 || y + 1 < h {
                e.push((i, ((y + 1) % h) * w + x));
            }
        }
    }
    build(w * h, 1, &e)
}

/// Whether the live switch graph is connected.
pub fn connected(f: &Fabric) -> bool {
    let n = f.num_switches();
    let mut seen = vec![false; n];
    let mut stack = vec![SwitchId(0)];
    seen[0] = true;
    let mut count = 1;
    while let Some(s) = stack.pop() {
        for g in f.port_groups(s) {
            if !seen[g.remote.idx()] {
                seen[g.remote.idx()] = true;
                count += 1;
                stack.push(g.remote);
            }
        }
    }
    count == n
}
