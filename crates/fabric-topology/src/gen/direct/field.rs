//! The finite field `F_q` of a prime power `q = r^n` for the Slim Fly's MMS construction
//! (Slim Fly paper Appendix A.2: "base ring" and "primitive element").
//!
//! Elements are the integers `0..q`: the base-`r` digits of an element are the coefficients of
//! its polynomial (digit 0 = constant term). For a prime `q` this is arithmetic modulo `q`. For
//! `n > 1` the field is `F_r[x] / f` with `f` the first monic degree-`n` polynomial (coefficients
//! of `x^0..x^{n-1}` read as a base-`r` number, smallest first) for which some element generates
//! all `q - 1` nonzero elements; the primitive element `ξ` is the smallest such element. Both
//! choices are deterministic, so generated fabrics are stable. (A reducible `f` has zero
//! divisors, which no element's powers can reach, so the search only accepts fields.)

/// The prime factorisation of a prime power: `Some((r, n))` with `q = r^n`, `None` otherwise.
pub(crate) fn prime_power(q: u32) -> Option<(u32, u32)> {
    if q < 2 {
        return None;
    }
    let mut r = 2u32;
    while u64::from(r) * u64::from(r) <= u64::from(q) && !q.is_multiple_of(r) {
        r += 1;
    }
    if !q.is_multiple_of(r) {
        r = q; // q is prime
    }
    let (mut rest, mut n) = (q, 0u32);
    while rest % r == 0 {
        rest /= r;
        n += 1;
    }
    (rest == 1).then_some((r, n))
}

/// `F_q` with addition and multiplication tables (`q ≤ 254` in practice: the port limit).
#[derive(Clone, Debug)]
pub(crate) struct Field {
    q: u32,
    add: Vec<u32>,
    mul: Vec<u32>,
    neg: Vec<u32>,
    /// The primitive element `ξ`.
    pub(crate) xi: u32,
}

impl Field {
    /// The field of order `q`, or `None` if `q` is not a prime power.
    pub(crate) fn new(q: u32) -> Option<Field> {
        let (r, n) = prime_power(q)?;
        let qs = q as usize;
        let add: Vec<u32> = (0..qs * qs)
            .map(|i| {
                let (mut a, mut b) = ((i / qs) as u32, (i % qs) as u32);
                let (mut s, mut place) = (0u32, 1u32);
                for _ in 0..n {
                    s += ((a % r + b % r) % r) * place;
                    a /= r;
                    b /= r;
                    place *= r;
                }
                s
            })
            .collect();
        let neg: Vec<u32> = (0..q)
            .map(|a| (0..q).find(|&b| add[(a * q + b) as usize] == 0).unwrap_or(0))
            .collect();
        // Monic f = x^n + Σ c_i x^i, the c_i the base-r digits of `low`.
        for low in 0..q {
            let f: Vec<u32> = digits(low, r, n);
            let mul: Vec<u32> = (0..qs * qs)
                .map(|i| poly_mul((i / qs) as u32, (i % qs) as u32, &f, r, n))
                .collect();
            let field = Field {
                q,
                add: add.clone(),
                mul,
                neg: neg.clone(),
                xi: 0,
            };
            if let Some(xi) = (1..q).find(|&g| field.order(g) == q - 1) {
                return Some(Field { xi, ..field });
            }
        }
        None
    }

    /// The order `q`.
    pub(crate) fn q(&self) -> u32 {
        self.q
    }

    /// `a + b`.
    pub(crate) fn add(&self, a: u32, b: u32) -> u32 {
        self.add[(a * self.q + b) as usize]
    }

    /// `a · b`.
    pub(crate) fn mul(&self, a: u32, b: u32) -> u32 {
        self.mul[(a * self.q + b) as usize]
    }

    /// `-a`.
    pub(crate) fn neg(&self, a: u32) -> u32 {
        self.neg[a as usize]
    }

    /// `a - b`.
    pub(crate) fn sub(&self, a: u32, b: u32) -> u32 {
        self.add(a, self.neg(b))
    }

    /// `ξ^e`.
    pub(crate) fn xi_pow(&self, e: u32) -> u32 {
        (0..e).fold(1, |acc, _| self.mul(acc, self.xi))
    }

    /// Multiplicative order of a nonzero element (0 for 0 or a non-unit).
    fn order(&self, g: u32) -> u32 {
        let mut x = g;
        for k in 1..self.q {
            if x == 1 {
                return k;
            }
            x = self.mul(x, g);
            if x == 0 {
                return 0;
            }
        }
        0
    }
}

fn digits(mut a: u32, r: u32, n: u32) -> Vec<u32> {
    (0..n)
        .map(|_| {
            let d = a % r;
            a /= r;
            d
        })
        .collect()
}

/// `a · b mod f` in `F_r[x]`, elements as base-`r` digit numbers, `f` monic of degree `n`
/// (given by its low coefficients).
fn poly_mul(a: u32, b: u32, f: &[u32], r: u32, n: u32) -> u32 {
    let (a, b) = (digits(a, r, n), digits(b, r, n));
    let n = n as usize;
    let mut prod = vec![0u32; 2 * n];
    for i in 0..n {
        for j in 0..n {
            prod[i + j] = (prod[i + j] + a[i] * b[j]) % r;
        }
    }
    // x^n = -Σ f_i x^i: fold the high terms down, highest first.
    for d in (n..2 * n).rev() {
        let c = prod[d];
        if c == 0 {
            continue;
        }
        prod[d] = 0;
        for (i, &fi) in f.iter().enumerate() {
            let t = d - n + i;
            prod[t] = (prod[t] + c * (r - fi % r)) % r;
        }
    }
    prod[..n].iter().rev().fold(0, |acc, &d| acc * r + d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prime_powers_are_recognised() {
        assert_eq!(prime_power(5), Some((5, 1)));
        assert_eq!(prime_power(8), Some((2, 3)));
        assert_eq!(prime_power(9), Some((3, 2)));
        assert_eq!(prime_power(49), Some((7, 2)));
        for bad in [0, 1, 6, 10, 12, 15, 100] {
            assert_eq!(prime_power(bad), None, "{bad}");
        }
    }

    #[test]
    fn fields_satisfy_the_axioms() {
        for q in [2, 3, 4, 5, 7, 8, 9, 16, 25, 27] {
            let f = Field::new(q).unwrap();
            // ξ generates every nonzero element; multiplication distributes over addition.
            let mut seen: Vec<u32> = (0..q - 1).map(|e| f.xi_pow(e)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (1..q).collect::<Vec<_>>(), "q = {q}");
            for a in 0..q {
                assert_eq!(f.add(a, f.neg(a)), 0);
                for b in 0..q {
                    for c in 0..q {
                        assert_eq!(f.mul(a, f.add(b, c)), f.add(f.mul(a, b), f.mul(a, c)));
                    }
                }
            }
        }
        // The paper's deployment (Appendix A.2): F_5 with ξ = 2.
        assert_eq!(Field::new(5).unwrap().xi, 2);
    }
}
