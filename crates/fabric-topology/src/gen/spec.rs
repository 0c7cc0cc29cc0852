//! Fat-tree notation: parsing, canonical display, validation, closed-form counts, addressing,
//! port numbering and the GUID scheme. The notation as text (display and parser) is in
//! `notation`.

mod notation;

use std::fmt;

use super::addr::SwitchAddr;
use super::error::GenError;
use super::limits::{MAX_END_NODES, MAX_LEVELS, MAX_SWITCHES, MAX_SWITCH_PORTS};
use crate::model::{Guid, PortNum};

/// Base of generated switch GUIDs: OUI `0x0002c9` in the top 24 bits, then the level byte, then
/// the 32-bit index of the switch within its level.
pub const SWITCH_GUID_BASE: Guid = 0x0002_c900_0000_0000;
/// Base of generated end-node GUIDs: OUI `0x0002c9`, byte `0x80`, then the end-node index `d << 8`.
pub const NODE_GUID_BASE: Guid = 0x0002_c980_0000_0000;

const OUI_SHIFT: u32 = 40;
const LEVEL_SHIFT: u32 = 32;
const NODE_SHIFT: u32 = 8;

/// The family of a fat-tree notation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SpecKind {
    /// Parallel generalised fat-tree `PGFT(h;m..;w..;p..)` (thesis Definition 26).
    Pgft,
    /// Extended generalised fat-tree `XGFT(h;m..;w..)` (Definition 25), a PGFT with all `p = 1`.
    Xgft,
    /// k-ary n-tree `KARY(k,n)` (Definition 23), `XGFT(n;k,..,k;1,k,..,k)`.
    Kary,
    /// Quasi fat-tree `QFT(h;m..;w..;p..)` (QFT paper §III): `p` counts cross-connected groups.
    Qft,
}

impl SpecKind {
    /// The notation keyword (`PGFT`, `XGFT`, `KARY`, `QFT`).
    pub fn name(self) -> &'static str {
        match self {
            SpecKind::Pgft => "PGFT",
            SpecKind::Xgft => "XGFT",
            SpecKind::Kary => "KARY",
            SpecKind::Qft => "QFT",
        }
    }

    /// The kind named by a notation keyword, ignoring ASCII case (`RLFT` is not a kind: it reads
    /// as a PGFT).
    pub fn from_name(name: &str) -> Option<SpecKind> {
        [SpecKind::Pgft, SpecKind::Xgft, SpecKind::Kary, SpecKind::Qft]
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for SpecKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parsed fat-tree notation. Vectors are indexed by notation level - 1 (index 0 = notation
/// level 1 = the end-node links below the leaves).
///
/// The fields are public for reading; build specs with [`str::parse`] or the constructors, which
/// validate. [`generate`](super::generate) validates again, so a hand-built spec is checked too.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PgftSpec {
    /// The notation family (a parsed `RLFT` is a [`SpecKind::Pgft`]).
    pub kind: SpecKind,
    /// Number of switch levels.
    pub h: usize,
    /// `m[i]`: children of a switch of notation level `i + 1` (end nodes per leaf for `i = 0`).
    pub m: Vec<u32>,
    /// `w[i]`: parents of a switch (or node, `i = 0`) of notation level `i`; `w[0]` is 1.
    pub w: Vec<u32>,
    /// `p[i]`: parallel cables (PGFT) or cross-connected groups (QFT) at notation level `i + 1`;
    /// `p[0]` is 1.
    pub p: Vec<u32>,
}

impl PgftSpec {
    /// `PGFT(h;m;w;p)` with `h = m.len()`, validated.
    pub fn pgft(m: Vec<u32>, w: Vec<u32>, p: Vec<u32>) -> Result<PgftSpec, GenError> {
        Self::checked(SpecKind::Pgft, m, w, p)
    }

    /// `XGFT(h;m;w)` with `h = m.len()`, validated.
    pub fn xgft(m: Vec<u32>, w: Vec<u32>) -> Result<PgftSpec, GenError> {
        let p = vec![1; m.len()];
        Self::checked(SpecKind::Xgft, m, w, p)
    }

    /// `QFT(h;m;w;p)` with `h = m.len()`, validated.
    pub fn qft(m: Vec<u32>, w: Vec<u32>, p: Vec<u32>) -> Result<PgftSpec, GenError> {
        Self::checked(SpecKind::Qft, m, w, p)
    }

    /// `KARY(k,n)`: the k-ary n-tree `XGFT(n;k,..,k;1,k,..,k)`, validated.
    pub fn kary(k: u32, n: usize) -> Result<PgftSpec, GenError> {
        let label = format!("KARY({k},{n})");
        nonzero(&label, "k", k)?;
        nonzero(&label, "n", n)?;
        at_most_max_levels(&label, n)?;
        let spec = Self::kary_unchecked(k, n);
        spec.check(&label)?;
        Ok(spec)
    }

    fn kary_unchecked(k: u32, n: usize) -> PgftSpec {
        let mut w = vec![k; n];
        w[0] = 1;
        PgftSpec {
            kind: SpecKind::Kary,
            h: n,
            m: vec![k; n],
            w,
            p: vec![1; n],
        }
    }

    /// The real-life fat-tree (thesis Definition 27) of `k`-port switches with parallel cables
    /// `p` (`h = p.len()`, `p[0] = 1`): `PGFT(h; K/2, K/(2p2), .., K/(2p_{h-1}), K/ph; 1, K/(2p2),
    /// .., K/(2ph); p)`, every switch with `K` ports, all plugged. An error if `K` is not divisible.
    pub fn rlft(k: u32, p: Vec<u32>) -> Result<PgftSpec, GenError> {
        let label = format!("RLFT({};{k};{})", p.len(), join(&p));
        Self::rlft_labelled(k, p, &label)
    }

    fn rlft_labelled(k: u32, p: Vec<u32>, label: &str) -> Result<PgftSpec, GenError> {
        let h = p.len();
        nonzero(label, "h", h)?;
        at_most_max_levels(label, h)?;
        nonzero(label, "K", k)?;
        if let Some(i) = p.iter().position(|&x| x == 0) {
            return Err(GenError::Zero {
                spec: label.into(),
                name: format!("p{}", i + 1),
            });
        }
        let mut m = Vec::with_capacity(h);
        let mut w = Vec::with_capacity(h);
        for (i, &pi) in p.iter().enumerate() {
            // Up and down halves of a K-port switch; the top level has all K ports down.
            let top = i + 1 == h;
            let down_div = if top { u64::from(pi) } else { 2 * u64::from(pi) };
            if u64::from(k) % down_div != 0 {
                let what = if top {
                    format!("p{}", i + 1)
                } else {
                    format!("2·p{}", i + 1)
                };
                return Err(GenError::Invalid {
                    spec: label.into(),
                    reason: format!("K = {k} is not divisible by {what} = {down_div}"),
                });
            }
            m.push((u64::from(k) / down_div) as u32);
            if i == 0 {
                w.push(1);
            } else {
                let up_div = 2 * u64::from(pi);
                if u64::from(k) % up_div != 0 {
                    return Err(GenError::Invalid {
                        spec: label.into(),
                        reason: format!("K = {k} is not divisible by 2·p{} = {up_div}", i + 1),
                    });
                }
                w.push((u64::from(k) / up_div) as u32);
            }
        }
        let spec = PgftSpec {
            kind: SpecKind::Pgft,
            h,
            m,
            w,
            p,
        };
        spec.check(label)?;
        Ok(spec)
    }

    fn checked(kind: SpecKind, m: Vec<u32>, w: Vec<u32>, p: Vec<u32>) -> Result<PgftSpec, GenError> {
        let spec = PgftSpec {
            kind,
            h: m.len(),
            m,
            w,
            p,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks that the spec describes a fat-tree the generator builds: `1 ≤ h ≤ 16`, vectors of
    /// length `h`, no zero, `w1 = p1 = 1`, the kind's own shape (XGFT: all `p = 1`; KARY: its
    /// vectors; QFT: each `p_l > 1` divides `m_{l+1}`, or `w_{h-1}` at the top, so that eq. 6
    /// groups are whole), at most [`MAX_SWITCH_PORTS`] ports per switch and the size limits.
    pub fn validate(&self) -> Result<(), GenError> {
        self.check(&self.to_string())
    }

    fn check(&self, label: &str) -> Result<(), GenError> {
        let spec = || label.to_string();
        let h = self.h;
        nonzero(label, "h", h)?;
        at_most_max_levels(label, h)?;
        for (vector, v) in [("m", &self.m), ("w", &self.w), ("p", &self.p)] {
            if v.len() != h {
                return Err(GenError::WrongLength {
                    spec: spec(),
                    vector,
                    expected: h,
                    got: v.len(),
                });
            }
        }
        for (vector, v) in [("m", &self.m), ("w", &self.w), ("p", &self.p)] {
            if let Some(i) = v.iter().position(|&x| x == 0) {
                return Err(GenError::Zero {
                    spec: spec(),
                    name: format!("{vector}{}", i + 1),
                });
            }
        }
        if self.w[0] != 1 {
            return Err(GenError::Invalid {
                spec: spec(),
                reason: format!(
                    "w1 = {}: an end node connects to exactly one leaf, w1 must be 1",
                    self.w[0]
                ),
            });
        }
        if self.p[0] != 1 {
            return Err(GenError::Invalid {
                spec: spec(),
                reason: format!(
                    "p1 = {}: nodes with several links are not supported, p1 must be 1",
                    self.p[0]
                ),
            });
        }
        match self.kind {
            SpecKind::Pgft => {}
            SpecKind::Xgft => {
                if let Some(i) = self.p.iter().position(|&x| x != 1) {
                    return Err(GenError::Invalid {
                        spec: spec(),
                        reason: format!("an XGFT has no parallel cables, but p{} = {}", i + 1, self.p[i]),
                    });
                }
            }
            SpecKind::Kary => {
                let k = self.m[0];
                if *self != Self::kary_unchecked(k, h) {
                    return Err(GenError::Invalid {
                        spec: spec(),
                        reason: format!(
                            "a k-ary n-tree has m = ({}), w = (1,{}), p = (1,..): got m = ({}), w = ({}), p = ({})",
                            join(&vec![k; h]),
                            join(&vec![k; h - 1]),
                            join(&self.m),
                            join(&self.w),
                            join(&self.p)
                        ),
                    });
                }
            }
            SpecKind::Qft => {
                // Eq. 6 groups digit l+1 (l < h) or digit h-1 (l = h) by p_l: the group must be whole.
                for l in 2..=h {
                    let pl = self.p[l - 1];
                    if pl == 1 {
                        continue;
                    }
                    let (name, radix) = if l < h {
                        (format!("m{}", l + 1), self.m[l])
                    } else {
                        (format!("w{}", h - 1), self.w[h - 2])
                    };
                    if radix % pl != 0 {
                        return Err(GenError::Invalid {
                            spec: spec(),
                            reason: format!("p{l} = {pl} cross-connected groups must divide {name} = {radix}"),
                        });
                    }
                }
            }
        }
        for level in 0..h as u32 {
            let ports = u64::from(self.m[level as usize]) * u64::from(self.p[level as usize])
                + if (level as usize) + 1 < h {
                    u64::from(self.w[level as usize + 1]) * u64::from(self.p[level as usize + 1])
                } else {
                    0
                };
            if ports > u64::from(MAX_SWITCH_PORTS) {
                return Err(GenError::TooManyPorts {
                    spec: spec(),
                    level,
                    ports,
                });
            }
        }
        let nodes = self.m.iter().fold(1u128, |a, &x| a.saturating_mul(u128::from(x)));
        if nodes > u128::from(MAX_END_NODES) {
            return Err(GenError::TooLarge {
                spec: spec(),
                what: "end nodes",
                count: nodes,
                limit: MAX_END_NODES,
            });
        }
        let switches = (0..h as u32).fold(0u128, |acc, level| {
            let n = (0..h).fold(1u128, |a, i| a.saturating_mul(u128::from(self.radix(level, i))));
            acc.saturating_add(n)
        });
        if switches > u128::from(MAX_SWITCHES) {
            return Err(GenError::TooLarge {
                spec: spec(),
                what: "switches",
                count: switches,
                limit: MAX_SWITCHES,
            });
        }
        Ok(())
    }

    /// Radix of digit `i` of a level-`level` switch: `w[i]` for `i ≤ level`, else `m[i]`.
    ///
    /// # Panics
    /// If `i ≥ h`.
    pub fn radix(&self, level: u32, i: usize) -> u32 {
        if i <= level as usize {
            self.w[i]
        } else {
            self.m[i]
        }
    }

    /// Number of end nodes, `Π m`.
    pub fn num_end_nodes(&self) -> u64 {
        self.m.iter().map(|&x| u64::from(x)).product()
    }

    /// Number of switches at `level` (0 = leaves, notation level `level + 1`):
    /// `Π_{i ≤ level} w[i] · Π_{i > level} m[i]`.
    pub fn switches_at(&self, level: u32) -> u64 {
        (0..self.h).map(|i| u64::from(self.radix(level, i))).product()
    }

    /// Total number of switches.
    pub fn num_switches(&self) -> u64 {
        (0..self.h as u32).map(|l| self.switches_at(l)).sum()
    }

    /// Down ports of a level-`level` switch (end-node ports for leaves): `m[level] · p[level]`.
    ///
    /// # Panics
    /// If `level ≥ h`.
    pub fn down_ports(&self, level: u32) -> u32 {
        self.m[level as usize] * self.p[level as usize]
    }

    /// Up ports of a level-`level` switch: `w[level+1] · p[level+1]`, 0 at the top.
    pub fn up_ports(&self, level: u32) -> u32 {
        let up = level as usize + 1;
        if up < self.h {
            self.w[up] * self.p[up]
        } else {
            0
        }
    }

    /// Ports of a level-`level` switch (all cabled in a generated fabric).
    pub fn switch_ports(&self, level: u32) -> u32 {
        self.down_ports(level) + self.up_ports(level)
    }

    /// Inter-switch cables between `level` and `level + 1` (0 for the top level).
    pub fn cables_above(&self, level: u32) -> u64 {
        self.switches_at(level) * u64::from(self.up_ports(level))
    }

    /// Total number of inter-switch cables.
    pub fn num_cables(&self) -> u64 {
        (0..self.h as u32).map(|l| self.cables_above(l)).sum()
    }

    /// Whether this is a real-life fat-tree (Definition 27): a PGFT (not a QFT) with constant
    /// CBB (as many up as down ports below the top) and every switch of the same radix, all
    /// plugged (which generated switches always are).
    pub fn is_rlft(&self) -> bool {
        let radix = self.switch_ports(0);
        self.kind != SpecKind::Qft
            && (0..self.h as u32).all(|l| {
                self.switch_ports(l) == radix && (l as usize + 1 == self.h || self.down_ports(l) == self.up_ports(l))
            })
    }

    /// Mixed-radix index of a switch within its level (digit 0 least significant).
    ///
    /// # Panics
    /// If the address has fewer than `h` digits.
    pub fn switch_index(&self, addr: &SwitchAddr) -> u64 {
        let mut index = 0u64;
        for i in (0..self.h).rev() {
            index = index * u64::from(self.radix(addr.level, i)) + u64::from(addr.digits[i]);
        }
        index
    }

    /// The address of switch number `index` of `level`.
    pub fn switch_addr(&self, level: u32, index: u64) -> SwitchAddr {
        let mut rest = index;
        let digits = (0..self.h)
            .map(|i| {
                let r = u64::from(self.radix(level, i));
                let d = rest % r;
                rest /= r;
                d as u32
            })
            .collect();
        SwitchAddr { level, digits }
    }

    /// The m-digits `(a1, .., ah)` of end node `d`.
    pub fn node_digits(&self, d: u64) -> Vec<u32> {
        let mut rest = d;
        self.m
            .iter()
            .map(|&r| {
                let x = rest % u64::from(r);
                rest /= u64::from(r);
                x as u32
            })
            .collect()
    }

    /// Index `d = Σ a_i · Π_{j<i} m_j` of the end node with m-digits `(a1, .., ah)`.
    pub fn node_index(&self, digits: &[u32]) -> u64 {
        digits
            .iter()
            .zip(&self.m)
            .rev()
            .fold(0u64, |acc, (&a, &r)| acc * u64::from(r) + u64::from(a))
    }

    /// Node GUID of switch `index` of `level`: `SWITCH_GUID_BASE | level << 32 | index`.
    pub fn switch_guid(&self, level: u32, index: u64) -> Guid {
        SWITCH_GUID_BASE | (u64::from(level) << LEVEL_SHIFT) | index
    }

    /// Node GUID of end node `d`: `NODE_GUID_BASE | d << 8`.
    pub fn node_guid(&self, d: u64) -> Guid {
        NODE_GUID_BASE | (d << NODE_SHIFT)
    }

    /// Port GUID of end node `d` (its only port, port 1): node GUID + 1.
    pub fn port_guid(&self, d: u64) -> Guid {
        self.node_guid(d) + 1
    }

    /// Level and index of the switch with this generated GUID, if it is one of this spec's.
    pub fn decode_switch_guid(&self, guid: Guid) -> Option<(u32, u64)> {
        if guid >> OUI_SHIFT != SWITCH_GUID_BASE >> OUI_SHIFT {
            return None;
        }
        let level = ((guid >> LEVEL_SHIFT) & 0xff) as u32;
        let index = guid & 0xffff_ffff;
        ((level as usize) < self.h && index < self.switches_at(level)).then_some((level, index))
    }

    /// Port of a level-`level` switch toward a child (or, on a leaf, the end node with `a1 =
    /// child`). PGFT/XGFT/KARY: child number `c` (the child's digit at index `level`) and
    /// parallel cable `k`: `1 + c·p[level] + k`. QFT (eq. 7): `1 + f` with `f = c + m[level]·k`,
    /// `k` being the child's position in its cross-connected group.
    pub fn down_port(&self, level: u32, child: u32, k: u32) -> PortNum {
        let l = level as usize;
        let f = match self.kind {
            SpecKind::Qft => child + self.m[l] * k,
            _ => child * self.p[l] + k,
        };
        (1 + f) as PortNum
    }

    /// Port of a level-`level` switch toward a parent. PGFT/XGFT/KARY: parent number `j` (the
    /// parent's digit at index `level + 1`) and parallel cable `k`: `1 + down + j·p[level+1] + k`.
    /// QFT (eq. 8): `1 + down + g` with `g = j + w[level+1]·k`, `k` being the parent's position
    /// in its cross-connected group.
    pub fn up_port(&self, level: u32, parent: u32, k: u32) -> PortNum {
        let u = level as usize + 1;
        let g = match self.kind {
            SpecKind::Qft => parent + self.w[u] * k,
            _ => parent * self.p[u] + k,
        };
        (1 + self.down_ports(level) + g) as PortNum
    }
}

/// An error naming `name` of the notation `spec` when `value` is 0.
fn nonzero<T: Default + PartialEq>(spec: &str, name: &str, value: T) -> Result<(), GenError> {
    if value == T::default() {
        return Err(GenError::Zero {
            spec: spec.into(),
            name: name.into(),
        });
    }
    Ok(())
}

/// An error when the notation `spec` has more than [`MAX_LEVELS`] levels.
fn at_most_max_levels(spec: &str, h: usize) -> Result<(), GenError> {
    if h > MAX_LEVELS {
        return Err(GenError::Invalid {
            spec: spec.into(),
            reason: format!("{h} levels, at most {MAX_LEVELS} are supported"),
        });
    }
    Ok(())
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<PgftSpec, GenError> {
        s.parse()
    }

    #[test]
    fn parses_every_kind() {
        let s = parse("PGFT(3;18,9,36;1,9,18;1,2,1)").unwrap();
        assert_eq!((s.kind, s.h), (SpecKind::Pgft, 3));
        assert_eq!((s.m, s.w, s.p), (vec![18, 9, 36], vec![1, 9, 18], vec![1, 2, 1]));
        let s = parse(" xgft ( 2 ; 4, 8 ; 1 , 4 ) ").unwrap();
        assert_eq!(
            (s.kind, s.m, s.w, s.p),
            (SpecKind::Xgft, vec![4, 8], vec![1, 4], vec![1, 1])
        );
        let s = parse("KARY(4,3)").unwrap();
        assert_eq!(
            (s.kind, s.h, s.m, s.w, s.p),
            (SpecKind::Kary, 3, vec![4; 3], vec![1, 4, 4], vec![1; 3])
        );
        let s = parse("QFT(3;18,9,36;1,9,18;1,2,1)").unwrap();
        assert_eq!(s.kind, SpecKind::Qft);
    }

    #[test]
    fn rlft_reads_as_the_thesis_pgft() {
        // Thesis §1.3.3: the 36-port 3-level RLFT with p = (1,2,1).
        let s = parse("RLFT(3;36;1,2,1)").unwrap();
        assert_eq!(s, parse("PGFT(3;18,9,36;1,9,18;1,2,1)").unwrap());
        assert!(s.is_rlft());
        // Figure 1.6.b: 8-port 2-level RLFT with p = (1,2): PGFT(2;4,4;1,2;1,2), 16 nodes.
        let s = PgftSpec::rlft(8, vec![1, 2]).unwrap();
        assert_eq!((s.m.clone(), s.w.clone()), (vec![4, 4], vec![1, 2]));
        assert_eq!(s.num_end_nodes(), 16);
        let e = PgftSpec::rlft(36, vec![1, 5, 1]).unwrap_err();
        assert_eq!(e.to_string(), "RLFT(3;36;1,5,1): K = 36 is not divisible by 2·p2 = 10");
    }

    #[test]
    fn display_is_canonical() {
        for s in [
            "PGFT(3;18,9,36;1,9,18;1,2,1)",
            "XGFT(2;4,8;1,4)",
            "KARY(2,3)",
            "QFT(3;4,2,8;1,2,4;1,2,1)",
        ] {
            assert_eq!(parse(s).unwrap().to_string(), s);
        }
        assert_eq!(parse("pgft( 1 ;5;1;1)").unwrap().to_string(), "PGFT(1;5;1;1)");
    }

    #[test]
    fn precise_errors() {
        let cases = [
            (
                "PGFT(3;18,9;1,9,18;1,2,1)",
                "PGFT(3;18,9;1,9,18;1,2,1): expected 3 values for m, got 2",
            ),
            (
                "PGFT(2;4,4;1,4)",
                "PGFT(2;4,4;1,4): at column 15: expected ';' after the w values, found ')'",
            ),
            (
                "PGFT(2;4,x;1,4;1,1)",
                "PGFT(2;4,x;1,4;1,1): at column 10: expected a number for m, found 'x'",
            ),
            (
                "FT(2;4,4;1,4)",
                "FT(2;4,4;1,4): at column 1: unknown fat-tree kind 'FT', expected PGFT, XGFT, KARY, QFT or RLFT",
            ),
            (
                "KARY(4,3",
                "KARY(4,3: at column 9: expected ')' after n, found end of input",
            ),
            (
                "KARY(4,3)x",
                "KARY(4,3)x: at column 10: unexpected 'x' after the closing ')'",
            ),
            ("KARY(0,3)", "KARY(0,3): k is 0, it must be at least 1"),
            ("XGFT(2;4,0;1,4)", "XGFT(2;4,0;1,4): m2 is 0, it must be at least 1"),
            (
                "PGFT(0;;;)",
                "PGFT(0;;;): at column 8: expected a number for m, found ';'",
            ),
            (
                "PGFT(2;4,4;2,4;1,1)",
                "PGFT(2;4,4;2,4;1,1): w1 = 2: an end node connects to exactly one leaf, w1 must be 1",
            ),
            (
                "PGFT(2;4,4;1,4;2,1)",
                "PGFT(2;4,4;1,4;2,1): p1 = 2: nodes with several links are not supported, p1 must be 1",
            ),
            (
                "PGFT(2;200,4;1,60;1,1)",
                "PGFT(2;200,4;1,60;1,1): level 0 switches need 260 ports, at most 254 are supported",
            ),
            (
                "QFT(3;4,2,6;1,2,4;1,4,1)",
                "QFT(3;4,2,6;1,2,4;1,4,1): p2 = 4 cross-connected groups must divide m3 = 6",
            ),
            (
                "QFT(2;4,4;1,4;1,2)",
                "QFT(2;4,4;1,4;1,2): p2 = 2 cross-connected groups must divide w1 = 1",
            ),
            (
                "KARY(4,99999999999)",
                "KARY(4,99999999999): at column 8: value of n is too large (at most 4294967295)",
            ),
            ("KARY(4,17)", "KARY(4,17): 17 levels, at most 16 are supported"),
            (
                "KARY(64,5)",
                "KARY(64,5): 1073741824 end nodes exceed the generator limit of 4194304",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input).unwrap_err().to_string(), want, "input {input}");
        }
    }

    #[test]
    fn hand_built_specs_are_validated() {
        let s = PgftSpec {
            kind: SpecKind::Kary,
            h: 2,
            m: vec![4, 4],
            w: vec![1, 2],
            p: vec![1, 1],
        };
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("a k-ary n-tree has m = (4,4), w = (1,4)"), "{e}");
        let s = PgftSpec {
            kind: SpecKind::Xgft,
            h: 2,
            m: vec![4, 4],
            w: vec![1, 2],
            p: vec![1, 2],
        };
        assert_eq!(
            s.validate().unwrap_err().to_string(),
            "XGFT(2;4,4;1,2): an XGFT has no parallel cables, but p2 = 2"
        );
    }

    #[test]
    fn closed_form_counts_of_the_named_example() {
        let s = parse("PGFT(3;18,9,36;1,9,18;1,2,1)").unwrap();
        assert_eq!(s.num_end_nodes(), 5832);
        assert_eq!([s.switches_at(0), s.switches_at(1), s.switches_at(2)], [324, 324, 162]);
        assert_eq!(s.num_switches(), 810);
        assert_eq!([s.switch_ports(0), s.switch_ports(1), s.switch_ports(2)], [36, 36, 36]);
        assert_eq!(
            [s.cables_above(0), s.cables_above(1), s.cables_above(2)],
            [324 * 18, 324 * 18, 0]
        );
    }

    #[test]
    fn addressing_round_trips() {
        let s = parse("PGFT(3;3,2,4;1,2,3;1,2,1)").unwrap();
        for level in 0..3 {
            for index in 0..s.switches_at(level) {
                let a = s.switch_addr(level, index);
                assert_eq!(s.switch_index(&a), index);
                assert_eq!(s.decode_switch_guid(s.switch_guid(level, index)), Some((level, index)));
            }
        }
        for d in 0..s.num_end_nodes() {
            assert_eq!(s.node_index(&s.node_digits(d)), d);
        }
        assert_eq!(s.decode_switch_guid(s.switch_guid(0, s.switches_at(0))), None);
        assert_eq!(s.decode_switch_guid(s.node_guid(0)), None);
        // Host (0;2,0,1) of the QFT paper's Figure 4 example (m1 = m2 = 2) has index 9.
        let s = parse("XGFT(3;2,2,3;1,2,2)").unwrap();
        assert_eq!(s.node_index(&[1, 0, 2]), 9);
    }

    #[test]
    fn guid_scheme_is_stable() {
        let s = parse("KARY(2,3)").unwrap();
        assert_eq!(s.switch_guid(2, 3), 0x0002_c902_0000_0003);
        assert_eq!(s.node_guid(5), 0x0002_c980_0000_0500);
        assert_eq!(s.port_guid(5), 0x0002_c980_0000_0501);
    }
}
