//! Switch addresses of a generated fat-tree (`L1 S(0,3,1)`).

use std::fmt;

/// Switch address: `level` 0 = leaf. `digits[i]` is the digit of notation index `i + 1`
/// (little-endian): for `i <= level` it is a w-digit `b_{i+1}` in `[0, w[i])`; for `i > level`
/// an m-digit `a_{i+1}` in `[0, m[i])`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwitchAddr {
    /// Switch level, 0 = leaf (notation level `level + 1`).
    pub level: u32,
    /// `h` digits, notation index 1 first.
    pub digits: Vec<u32>,
}

impl SwitchAddr {
    /// Whether this is a leaf (level 0).
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Parses the address part of a generated switch name, `"L<level> S(<d1>,..,<dh>)"`.
    pub fn parse(s: &str) -> Option<SwitchAddr> {
        let (level, tuple) = s.strip_prefix('L')?.split_once(" S(")?;
        let level = parse_u32(level)?;
        let digits = tuple
            .strip_suffix(')')?
            .split(',')
            .map(parse_u32)
            .collect::<Option<Vec<u32>>>()?;
        Some(SwitchAddr { level, digits })
    }
}

/// Strict decimal (no sign, no blanks).
fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for SwitchAddr {
    /// `"L<level> S(<d1>,..,<dh>)"`, digits in notation order (index 1 first).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{} S(", self.level)?;
        for (i, d) in self.digits.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str(")")
    }
}
