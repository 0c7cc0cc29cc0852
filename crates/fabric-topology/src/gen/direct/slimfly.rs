//! The Slim Fly switch graph: the McKay–Miller–Širáň graph of a prime power `q` (Slim Fly paper
//! Appendix A.2–A.3, eqs. 1–3; generator sets of Besta & Hoefler, SC'14, §II-B).

use super::build::{Graph, Link};
use super::field::Field;
use super::slimfly_delta;
use crate::gen::error::GenError;

/// The generator sets `(X, X')` of `F_q`, in exponent order (see the [module docs](super)).
pub(crate) fn generator_sets(f: &Field) -> (Vec<u32>, Vec<u32>) {
    let q = f.q();
    let (xs, xps): (Vec<u32>, Vec<u32>) = match slimfly_delta(q) {
        Some(1) => ((0..q - 1).step_by(2).collect(), (1..q - 1).step_by(2).collect()),
        Some(-1) => {
            let w = (q + 1) / 4;
            let x: Vec<u32> = (0..w).map(|i| 2 * i).chain((0..w).map(|i| 2 * w - 1 + 2 * i)).collect();
            let xp = x.iter().map(|e| e + 1).collect();
            (x, xp)
        }
        _ => ((0..q).step_by(2).collect(), (1..q).step_by(2).collect()),
    };
    let pow = |es: Vec<u32>| es.into_iter().map(|e| f.xi_pow(e)).collect();
    (pow(xs), pow(xps))
}

/// The MMS graph: switch `(s,x,y)` has id `s·q² + x·q + y`.
pub(super) fn graph(q: u32, label: &str) -> Result<Graph, GenError> {
    let invalid = |reason: String| GenError::Invalid {
        spec: label.to_string(),
        reason,
    };
    let f = Field::new(q).ok_or_else(|| invalid(format!("q = {q} is not a prime power")))?;
    let (x, xp) = generator_sets(&f);
    // The sets must be symmetric (so that eqs. 1–2 are undirected) and free of 0 and repeats.
    for set in [&x, &xp] {
        let mut sorted = set.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != set.len() || sorted.contains(&0) || set.iter().any(|&e| !set.contains(&f.neg(e))) {
            return Err(invalid(format!("no MMS generator sets for q = {q} (internal)")));
        }
    }
    let qq = q * q;
    let id = |s: u32, a: u32, b: u32| s * qq + a * q + b;
    let mut digits = Vec::with_capacity(2 * qq as usize);
    for s in 0..2 {
        for a in 0..q {
            for b in 0..q {
                digits.push(vec![s, a, b]);
            }
        }
    }
    let half = x.len() as u32; // |X| = |X'|
    let index = |set: &[u32], e: u32| set.iter().position(|&v| v == e).expect("symmetric set") as u32;
    let mut links: Vec<Link> = Vec::with_capacity((qq as usize) * (q as usize + half as usize));
    for (s, set) in [(0u32, &x), (1u32, &xp)] {
        // Eqs. 1–2: (s,a,b) ~ (s,a,b + e) for e in the set, each cable from its lower id.
        for a in 0..q {
            for b in 0..q {
                for (j, &e) in set.iter().enumerate() {
                    let b2 = f.add(b, e);
                    if b < b2 {
                        links.push(((id(s, a, b), j as u32), (id(s, a, b2), index(set, f.neg(e)))));
                    }
                }
            }
        }
    }
    // Eq. 3: (0,x,y) ~ (1,m,c) iff y = m·x + c; port toward rack m on (0,x,y), rack x on (1,m,c).
    for a in 0..q {
        for y in 0..q {
            for m in 0..q {
                let c = f.sub(y, f.mul(m, a));
                links.push(((id(0, a, y), half + m), (id(1, m, c), half + a)));
            }
        }
    }
    Ok(Graph { digits, links })
}
