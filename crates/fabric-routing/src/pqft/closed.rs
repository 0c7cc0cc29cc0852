//! The closed form of the QFT paper, Sec. IV (eqs. 10–18), on the generator's tuples.
//!
//! Paper levels are 1-based (`l = 1` the leaves, `l = h` the top); a generator level `L` is
//! `l - 1`. Vectors are the spec's (`m[l-1] = m_l`). With `P(l) = p_l` for `1 ≤ l ≤ h` and 1
//! elsewhere, and `W_l = w_1 ⋯ w_l`:
//!
//! * eq. 12: `R'_l = Π_{i≤l} w_i p_i / p_{i-2} = W_l · P(l-1) · P(l)` (`R'_0 = 1`);
//! * eq. 14: `u_l = (⌊d / R'_{l-2}⌋ mod (w_{l-1} p_{l-1})) / w_{l-1}` (0 below level 2): the
//!   position, in its cross-connected group, of the parent through which `d` left the switch two
//!   levels below;
//! * eqs. 13 / 15 (up, to a non-descendant): `g = (⌊d / R'_l⌋ · P(l-1) + u_l) mod (w_{l+1}
//!   p_{l+1})`, which is eq. 13 when `P(l-1) = 1` (then `u_l = 0`); up port `1 + m_l p_l + g`;
//! * eqs. 17 / 18 (down, to a descendant): `f = d_1` on a leaf; `⌊d_l / P(l-1)⌋ P(l-1) + u_l`
//!   on the merge level (`P(l-1) > 1`, eq. 17); `d_l + m_l (d_{l+1} mod P(l))` on the
//!   cross-connected level (eq. 18, `l < h`); `d_l` elsewhere; down port `1 + f`;
//! * eq. 10 (descendant): `s_i = d_i` for `i ∈ l+2..h` and `⌊s_{l+1} / P(l)⌋ = ⌊d_{l+1} /
//!   P(l)⌋` (`l < h`); every end node is below a top switch.
//!
//! The paper assumes a single cross-connected level `l_c` (`p_{l_c} > 1`), below the top, with
//! `w_{l_c+2}` divisible by `p_{l_c}` (Sec. III); [`Closed::new`] refuses other shapes. With
//! every `p_l = 1` (an XGFT, the QFT without cross-connections) the formulas are d-mod-k.

use fabric_topology::gen::{PgftSpec, SpecKind};
use fabric_topology::PortNum;

/// The closed form of one QFT spec.
pub(crate) struct Closed<'s> {
    spec: &'s PgftSpec,
    /// `R'_l` for `l = 0..=h`.
    pub(super) rp: Vec<u64>,
}

impl<'s> Closed<'s> {
    /// The closed form of `spec`, or why the paper's routing does not cover it.
    pub fn new(spec: &'s PgftSpec) -> Result<Self, String> {
        let h = spec.h;
        let crossed: Vec<usize> = (2..=h).filter(|&l| spec.p[l - 1] > 1).collect();
        if spec.kind != SpecKind::Qft && !crossed.is_empty() {
            return Err(format!(
                "{spec} is a PGFT with parallel cables (there p_l counts parallel cables, in a QFT \
                 cross-connected groups): the QFT closed form (Sec. IV) does not describe its \
                 cabling; route it with dmodk or dmodc"
            ));
        }
        if crossed.len() > 1 {
            return Err(format!(
                "{spec} is cross-connected at {} levels; the QFT routing (Sec. III–IV) assumes a \
                 single level l with p_l > 1",
                crossed.len()
            ));
        }
        if let Some(&lc) = crossed.first() {
            if lc == h {
                return Err(format!(
                    "{spec} is cross-connected at its top level (p_{h} > 1); the QFT routing \
                     (Sec. IV) needs the cross-connections below the top (p_2 > 1 in every known QFT)"
                ));
            }
            if lc + 2 <= h && !spec.w[lc + 1].is_multiple_of(spec.p[lc - 1]) {
                return Err(format!(
                    "{spec}: w_{} = {} is not divisible by p_{lc} = {} (QFT paper Sec. III)",
                    lc + 2,
                    spec.w[lc + 1],
                    spec.p[lc - 1]
                ));
            }
        }
        let mut c = Closed { spec, rp: Vec::new() };
        c.rp = (0..=h)
            .map(|l| {
                let wl: u64 = spec.w[..l].iter().map(|&x| u64::from(x)).product();
                wl * c.pp(l as i64 - 1) * c.pp(l as i64)
            })
            .collect();
        Ok(c)
    }

    /// `P(l)`: `p_l` for `1 ≤ l ≤ h`, 1 elsewhere.
    fn pp(&self, l: i64) -> u64 {
        if l >= 1 && l as usize <= self.spec.h {
            u64::from(self.spec.p[l as usize - 1])
        } else {
            1
        }
    }

    /// Eq. 14: `u_l` of end node `d` (0 below paper level 2).
    fn u(&self, l: usize, d: u64) -> u64 {
        if l < 2 {
            return 0;
        }
        let w = u64::from(self.spec.w[l - 2]);
        let p = u64::from(self.spec.p[l - 2]);
        (d / self.rp[l - 2]) % (w * p) / w
    }

    /// The up port (eqs. 13 / 15) and down port (eqs. 17 / 18) of every generator level for
    /// end node `d` with digits `a` (`a[i] = d_{i+1}`): `up[L]` (0 at the top), `down[L]`.
    pub fn ports(&self, d: u64, a: &[u32], up: &mut [PortNum], down: &mut [PortNum]) {
        let s = self.spec;
        let h = s.h;
        for lv in 0..h {
            let l = lv + 1;
            let u = self.u(l, d);
            let below = self.pp(l as i64 - 1);
            up[lv] = if l < h {
                let n = u64::from(s.w[l]) * u64::from(s.p[l]);
                let g = (d / self.rp[l] * below + u) % n;
                (1 + u64::from(s.down_ports(lv as u32)) + g) as PortNum
            } else {
                0
            };
            let dl = u64::from(a[l - 1]);
            let f = if l == 1 {
                dl
            } else if below > 1 {
                dl / below * below + u
            } else if l < h && self.pp(l as i64) > 1 {
                dl + u64::from(s.m[l - 1]) * (u64::from(a[l]) % self.pp(l as i64))
            } else {
                dl
            };
            down[lv] = (1 + f) as PortNum;
        }
    }

    /// Eq. 10: whether end node `a` is a descendant of the switch of generator level `lv` with
    /// digits `sd`.
    pub fn descendant(&self, lv: usize, sd: &[u32], a: &[u32]) -> bool {
        let h = self.spec.h;
        let l = lv + 1;
        if (l + 2..=h).any(|i| sd[i - 1] != a[i - 1]) {
            return false;
        }
        if l < h {
            let p = self.spec.p[l - 1];
            return sd[l] / p == a[l] / p;
        }
        true
    }
}
