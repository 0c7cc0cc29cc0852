//! Direct (low-diameter) topologies: Slim Fly, Dragonfly, 2-D HyperX and random regular graphs,
//! where every switch has end nodes (issue #19; Slim Fly paper, Blach et al., §2–3 and
//! Appendix A).
//!
//! # Notation
//!
//! | string | meaning |
//! |---|---|
//! | `SLIMFLY(q)`, `SLIMFLY(q;p)` | Slim Fly: the McKay–Miller–Širáň graph of the prime power `q = 4w + δ` (δ ∈ {−1, 0, 1}, Appendix A.1), `p` end nodes per switch, default `⌈k'/2⌉` (the paper's full-global-bandwidth rule, §3.2) |
//! | `DRAGONFLY(a,p,h)`, `DRAGONFLY(a,p,h;g)`, `DRAGONFLY(h)` | Dragonfly: groups of `a` fully connected routers, `p` end nodes and `h` global links per router, `g` groups (default `a·h + 1`: one global link between every pair of groups); `DRAGONFLY(h)` is the balanced `DRAGONFLY(2h,h,h)` |
//! | `HYPERX(S1,S2;T)`, `HYPERX(S1,S2;T;K)`, `HYPERX(S1,S2;T;K1,K2)` | 2-D HyperX: an `S1 × S2` grid of switches, each cabled to every switch of its row and of its column (`K1`, `K2` parallel cables per pair in dimension 1, 2; default 1), `T` end nodes per switch |
//! | `RRG(n,k,p;seed)` | random `k`-regular graph on `n` switches (connected, simple, deterministic for the seed), `p` end nodes per switch |
//!
//! Closed forms (checked by the tests): Slim Fly `2q²` switches, network radix
//! `k' = (3q − δ)/2`, `q²·k'` cables, diameter 2; Dragonfly `a·g` switches, network radix
//! `a − 1 + h`, `g·a(a−1)/2 + g·a·h/2` cables, diameter 3 (balanced, `a ≥ 2`); HyperX `S1·S2`
//! switches, network radix `(S1−1)K1 + (S2−1)K2`, diameter 2; RRG `n` switches of network radix
//! `k`, `n·k/2` cables. The paper's deployment is `SLIMFLY(5)` = `SLIMFLY(5;4)`: 50 switches
//! (the Hoffman–Singleton graph), `k' = 7`, 4 end nodes per switch, 200 end nodes, 175 cables,
//! 11-port switches, 5 racks of 10 switches.
//!
//! # Slim Fly construction (Appendix A.2–A.3)
//!
//! Switches `(0,x,y)` and `(1,m,c)` with `x, y, m, c ∈ F_q` (elements numbered `0..q` as in
//! `field`: integers mod `q` for a prime, base-`r` polynomial digits for `q = r^n`; the field
//! polynomial and the primitive element `ξ` are the first that work, so `ξ = 2` for `q = 5` as in
//! the paper). Generator sets: δ = 1: `X = {ξ^0, ξ^2, .., ξ^{q−3}}`, `X' = {ξ^1, ξ^3, .., ξ^{q−2}}`;
//! δ = −1: `X = {ξ^0, ξ^2, .., ξ^{2w−2}} ∪ {ξ^{2w−1}, ξ^{2w+1}, .., ξ^{4w−3}}`, `X' = ξ·X`; δ = 0:
//! `X = {ξ^0, ξ^2, .., ξ^{q−2}}`, `X' = {ξ^1, ξ^3, .., ξ^{q−1}}`. Cables: `(0,x,y) ~ (0,x,y')` iff
//! `y − y' ∈ X` (eq. 1), `(1,m,c) ~ (1,m,c')` iff `c − c' ∈ X'` (eq. 2), `(0,x,y) ~ (1,m,c)` iff
//! `y = m·x + c` (eq. 3). Rack `i` holds the groups `(0,i,·)` and `(1,i,·)` (Appendix A.4).
//!
//! # Ids, names, ports, GUIDs
//!
//! Switch ids: Slim Fly `s·q² + x·q + y` for `(s,x,y)`; Dragonfly `group·a + router`; HyperX
//! `x + S1·y`; RRG `0..n`. Names: `"SLIMFLY S(s,x,y)"`, `"DRAGONFLY S(group,router)"`,
//! `"HYPERX S(x,y)"`, `"RRG S(i)"`; end node `a` of a switch is `"n(a,<switch digits>)"`. Switch
//! node GUID: `SWITCH_GUID_BASE | tag << 32 | id` with the tag byte `0x41` (Slim Fly), `0x42`
//! (Dragonfly), `0x43` (HyperX), `0x44` (RRG) in place of the fat-trees' level byte; end node
//! `d = id·p + a` has node GUID `NODE_GUID_BASE | d << 8` and port GUID node GUID + 1, as for
//! the fat-trees. Ports: end nodes on `1..=p`, then the network ports, every one cabled:
//!
//! * Slim Fly `(0,x,y)`: port `p + 1 + j` to `(0,x,y + X[j])` (`X` in exponent order), port
//!   `p + |X| + 1 + m` to the switch of rack `m` in the other subgraph (so every switch uses the
//!   same port toward a given rack, §3.3); `(1,m,c)` alike with `X'`, port `p + |X'| + 1 + x`
//!   toward `(0,x,m·x + c)`.
//! * Dragonfly router `r` of group `i`: port `p + 1 + r'` (`r' < r`) or `p + r'` (`r' > r`) to
//!   router `r'` of its group, port `p + a + k` for global link `k ∈ [0,h)`. Global links are
//!   in the **absolute** arrangement: global index `j = r·h + k`, slot `s = j mod (g−1)`, copy
//!   `j div (g−1)`; slot `s` of group `i` goes to group `s` if `s < i`, else `s + 1`, on the
//!   same copy of the slot that names `i` there (`g − 1` must divide `a·h`).
//! * HyperX `(x,y)`: port `T + 1 + i·K1 + c` to `(x',y)` with `i = x'` if `x' < x` else `x' − 1`,
//!   then port `T + (S1−1)K1 + 1 + i·K2 + c` to `(x,y')` likewise (`c` the parallel cable).
//! * RRG: port `p + 1 + j` to the `j`-th smallest neighbour.
//!
//! # Degradation
//!
//! [`generate_str`](super::generate_str) degrades them with
//! [`degrade_direct`](super::degrade_direct): as [`degrade`](fn@super::degrade) but any switch
//! may be removed (every switch has end nodes), its end nodes with it.

mod build;
mod dragonfly;
pub(crate) mod field;
mod hyperx;
mod notation;
mod rrg;
mod slimfly;

use std::fmt;

use super::error::GenError;
use super::limits::{MAX_END_NODES, MAX_SWITCHES, MAX_SWITCH_PORTS};

pub use build::generate_direct;

/// A direct topology notation (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DirectSpec {
    /// `SLIMFLY(q;p)`: MMS graph of the prime power `q`, `p` end nodes per switch.
    SlimFly { q: u32, p: u32 },
    /// `DRAGONFLY(a,p,h;g)`: `g` groups of `a` routers, `p` end nodes, `h` global links each.
    Dragonfly { a: u32, p: u32, h: u32, g: u32 },
    /// `HYPERX(S1,S2;T;K1,K2)`: 2-D HyperX with `T` end nodes per switch.
    HyperX { s1: u32, s2: u32, t: u32, k1: u32, k2: u32 },
    /// `RRG(n,k,p;seed)`: random `k`-regular graph on `n` switches.
    Rrg { n: u32, k: u32, p: u32, seed: u64 },
}

/// Keywords of the direct notations.
pub const DIRECT_KINDS: [&str; 4] = ["SLIMFLY", "DRAGONFLY", "HYPERX", "RRG"];

/// `q mod 4` as δ ∈ {−1, 0, 1} (`None` for `q ≡ 2 mod 4`, which has no MMS graph).
pub fn slimfly_delta(q: u32) -> Option<i64> {
    match q % 4 {
        0 => Some(0),
        1 => Some(1),
        3 => Some(-1),
        _ => None,
    }
}

/// Network radix `k' = (3q − δ)/2` of the Slim Fly of `q` (`q ≢ 2 mod 4`).
pub fn slimfly_network_radix(q: u32) -> Option<u64> {
    slimfly_delta(q).map(|d| ((3 * i64::from(q) - d) / 2) as u64)
}

impl DirectSpec {
    /// `SLIMFLY(q)` with the paper's `p = ⌈k'/2⌉` (§3.2), validated.
    pub fn slimfly(q: u32) -> Result<DirectSpec, GenError> {
        let label = format!("SLIMFLY({q})");
        let k = slimfly_network_radix(q).ok_or_else(|| not_mms(&label, q))?;
        let s = DirectSpec::SlimFly {
            q,
            p: k.div_ceil(2) as u32,
        };
        s.check(&label)?;
        Ok(s)
    }

    /// The notation keyword.
    pub fn kind_name(&self) -> &'static str {
        match self {
            DirectSpec::SlimFly { .. } => "SLIMFLY",
            DirectSpec::Dragonfly { .. } => "DRAGONFLY",
            DirectSpec::HyperX { .. } => "HYPERX",
            DirectSpec::Rrg { .. } => "RRG",
        }
    }

    /// The GUID tag byte (in place of the fat-trees' level byte).
    pub fn guid_tag(&self) -> u64 {
        match self {
            DirectSpec::SlimFly { .. } => 0x41,
            DirectSpec::Dragonfly { .. } => 0x42,
            DirectSpec::HyperX { .. } => 0x43,
            DirectSpec::Rrg { .. } => 0x44,
        }
    }

    /// Number of switches.
    pub fn num_switches(&self) -> u64 {
        match *self {
            DirectSpec::SlimFly { q, .. } => 2 * u64::from(q) * u64::from(q),
            DirectSpec::Dragonfly { a, g, .. } => u64::from(a) * u64::from(g),
            DirectSpec::HyperX { s1, s2, .. } => u64::from(s1) * u64::from(s2),
            DirectSpec::Rrg { n, .. } => u64::from(n),
        }
    }

    /// End nodes per switch (the concentration `p`).
    pub fn hosts_per_switch(&self) -> u32 {
        match *self {
            DirectSpec::SlimFly { p, .. } | DirectSpec::Dragonfly { p, .. } | DirectSpec::Rrg { p, .. } => p,
            DirectSpec::HyperX { t, .. } => t,
        }
    }

    /// Network radix `k'`: inter-switch cables per switch (every switch has the same).
    pub fn network_radix(&self) -> u64 {
        match *self {
            DirectSpec::SlimFly { q, .. } => slimfly_network_radix(q).unwrap_or(0),
            DirectSpec::Dragonfly { a, h, .. } => u64::from(a) - 1 + u64::from(h),
            DirectSpec::HyperX { s1, s2, k1, k2, .. } => {
                (u64::from(s1) - 1) * u64::from(k1) + (u64::from(s2) - 1) * u64::from(k2)
            }
            DirectSpec::Rrg { k, .. } => u64::from(k),
        }
    }

    /// Ports per switch, `p + k'` (all cabled).
    pub fn switch_ports(&self) -> u64 {
        u64::from(self.hosts_per_switch()) + self.network_radix()
    }

    /// Number of end nodes.
    pub fn num_end_nodes(&self) -> u64 {
        self.num_switches() * u64::from(self.hosts_per_switch())
    }

    /// Number of inter-switch cables, `switches · k' / 2`.
    pub fn num_cables(&self) -> u64 {
        self.num_switches() * self.network_radix() / 2
    }

    /// Checks the parameters (see [`GenError`] for the messages).
    pub fn validate(&self) -> Result<(), GenError> {
        self.check(&self.to_string())
    }

    pub(super) fn check(&self, label: &str) -> Result<(), GenError> {
        let invalid = |reason: String| GenError::Invalid {
            spec: label.to_string(),
            reason,
        };
        let zero = |name: &str, v: u64| {
            if v == 0 {
                Err(GenError::Zero {
                    spec: label.to_string(),
                    name: name.to_string(),
                })
            } else {
                Ok(())
            }
        };
        match *self {
            DirectSpec::SlimFly { q, p } => {
                zero("p", p.into())?;
                if slimfly_delta(q).is_none() || field::prime_power(q).is_none() || q < 3 {
                    return Err(not_mms(label, q));
                }
            }
            DirectSpec::Dragonfly { a, p, h, g } => {
                for (n, v) in [("a", a), ("p", p), ("h", h), ("g", g)] {
                    zero(n, v.into())?;
                }
                let ah = u64::from(a) * u64::from(h);
                if g < 2 || u64::from(g) > ah + 1 {
                    return Err(invalid(format!(
                        "g = {g} groups: a Dragonfly needs 2 ≤ g ≤ a·h + 1 = {}",
                        ah + 1
                    )));
                }
                if ah % (u64::from(g) - 1) != 0 {
                    return Err(invalid(format!(
                        "g − 1 = {} must divide a·h = {ah} (each pair of groups gets the same number of global cables)",
                        g - 1
                    )));
                }
            }
            DirectSpec::HyperX { s1, s2, t, k1, k2 } => {
                for (n, v) in [("S1", s1), ("S2", s2), ("T", t), ("K1", k1), ("K2", k2)] {
                    zero(n, v.into())?;
                }
                if s1 < 2 || s2 < 2 {
                    return Err(invalid(format!("a 2-D HyperX needs S1, S2 ≥ 2, got {s1} × {s2}")));
                }
            }
            DirectSpec::Rrg { n, k, p, .. } => {
                zero("p", p.into())?;
                if k < 2 {
                    return Err(invalid(format!("k = {k}: a connected regular graph needs k ≥ 2")));
                }
                if n <= k {
                    return Err(invalid(format!("a {k}-regular simple graph needs n > k, got n = {n}")));
                }
                if (u64::from(n) * u64::from(k)) % 2 != 0 {
                    return Err(invalid(format!("n·k = {} must be even", u64::from(n) * u64::from(k))));
                }
            }
        }
        let ports = self.switch_ports();
        if ports > u64::from(MAX_SWITCH_PORTS) {
            return Err(invalid(format!(
                "switches need {ports} ports ({} end-node + {} network), at most {MAX_SWITCH_PORTS} are supported (8-bit port numbers, 255 = no route)",
                self.hosts_per_switch(),
                self.network_radix()
            )));
        }
        for (what, count, limit) in [
            ("switches", u128::from(self.num_switches()), MAX_SWITCHES),
            (
                "end nodes",
                u128::from(self.num_switches()) * u128::from(self.hosts_per_switch()),
                MAX_END_NODES,
            ),
        ] {
            if count > u128::from(limit) {
                return Err(GenError::TooLarge {
                    spec: label.to_string(),
                    what,
                    count,
                    limit,
                });
            }
        }
        Ok(())
    }
}

fn not_mms(label: &str, q: u32) -> GenError {
    GenError::Invalid {
        spec: label.to_string(),
        reason: format!(
            "q = {q} is not a prime power q ≥ 3 with q mod 4 ∈ {{0, 1, 3}} (MMS graphs need q = 4w + δ, δ ∈ {{−1, 0, 1}}; e.g. 3, 4, 5, 7, 8, 9, 11, 13, 16, 17, 19, 23, 25, 27)"
        ),
    }
}

impl fmt::Display for DirectSpec {
    /// The canonical notation (all parameters written, `HYPERX` without `K` when both are 1).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DirectSpec::SlimFly { q, p } => write!(f, "SLIMFLY({q};{p})"),
            DirectSpec::Dragonfly { a, p, h, g } => write!(f, "DRAGONFLY({a},{p},{h};{g})"),
            DirectSpec::HyperX {
                s1,
                s2,
                t,
                k1: 1,
                k2: 1,
            } => write!(f, "HYPERX({s1},{s2};{t})"),
            DirectSpec::HyperX { s1, s2, t, k1, k2 } => write!(f, "HYPERX({s1},{s2};{t};{k1},{k2})"),
            DirectSpec::Rrg { n, k, p, seed } => write!(f, "RRG({n},{k},{p};{seed})"),
        }
    }
}

/// Whether a notation string names a direct topology (by its keyword, any case).
pub(super) fn is_direct(spec: &str) -> bool {
    let word: String = spec
        .trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    DIRECT_KINDS.iter().any(|k| k.eq_ignore_ascii_case(&word))
}
