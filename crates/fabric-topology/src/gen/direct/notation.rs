//! Parser of the direct notations: `KIND(v,..;v,..;..)` (keyword in any case, blanks allowed
//! between tokens), errors with 1-based columns.

use std::str::FromStr;

use super::{slimfly_network_radix, DirectSpec};
use crate::gen::error::GenError;

/// Value groups (separated by `;`) of comma-separated numbers, with the column of each group.
struct Parsed {
    kind: String,
    groups: Vec<(usize, Vec<u64>)>,
}

fn syntax(spec: &str, pos: usize, reason: String) -> GenError {
    GenError::Syntax {
        spec: spec.to_string(),
        column: pos + 1,
        reason,
    }
}

fn tokenize(s: &str) -> Result<Parsed, GenError> {
    let chars: Vec<char> = s.chars().collect();
    let mut pos = 0;
    let skip = |pos: &mut usize| {
        while chars.get(*pos).is_some_and(|c| c.is_whitespace()) {
            *pos += 1;
        }
    };
    let found = |pos: usize| match chars.get(pos) {
        Some(c) => format!("'{c}'"),
        None => "end of input".to_string(),
    };
    skip(&mut pos);
    let start = pos;
    while chars.get(pos).is_some_and(char::is_ascii_alphabetic) {
        pos += 1;
    }
    let kind: String = chars[start..pos].iter().collect::<String>().to_ascii_uppercase();
    skip(&mut pos);
    if chars.get(pos) != Some(&'(') {
        return Err(syntax(
            s,
            pos,
            format!("expected '(' after {kind}, found {}", found(pos)),
        ));
    }
    pos += 1;
    let mut groups = vec![(pos, Vec::new())];
    loop {
        skip(&mut pos);
        let begin = pos;
        while chars.get(pos).is_some_and(char::is_ascii_digit) {
            pos += 1;
        }
        if begin == pos {
            return Err(syntax(s, pos, format!("expected a number, found {}", found(pos))));
        }
        let text: String = chars[begin..pos].iter().collect();
        let v: u64 = text
            .parse()
            .map_err(|_| syntax(s, begin, format!("{text} is too large")))?;
        groups.last_mut().expect("one group").1.push(v);
        skip(&mut pos);
        match chars.get(pos) {
            Some(',') => pos += 1,
            Some(';') => {
                pos += 1;
                groups.push((pos, Vec::new()));
            }
            Some(')') => {
                pos += 1;
                break;
            }
            _ => {
                return Err(syntax(
                    s,
                    pos,
                    format!("expected ',', ';' or ')' after a number, found {}", found(pos)),
                ))
            }
        }
    }
    skip(&mut pos);
    if pos < chars.len() {
        return Err(syntax(
            s,
            pos,
            format!("unexpected {} after the closing ')'", found(pos)),
        ));
    }
    Ok(Parsed { kind, groups })
}

impl FromStr for DirectSpec {
    type Err = GenError;

    /// Parses `SLIMFLY(q[;p])`, `DRAGONFLY(a,p,h[;g])`, `DRAGONFLY(h)`, `HYPERX(S1,S2;T[;K1[,K2]])`
    /// or `RRG(n,k,p;seed)` and validates.
    fn from_str(s: &str) -> Result<DirectSpec, GenError> {
        let Parsed { kind, groups } = tokenize(s)?;
        let shape: Vec<usize> = groups.iter().map(|g| g.1.len()).collect();
        let bad_shape = |want: &str| {
            syntax(
                s,
                groups[0].0.saturating_sub(1),
                format!("{kind} takes {want}, got {}", describe(&shape)),
            )
        };
        let u32v = |name: &str, v: u64| -> Result<u32, GenError> {
            u32::try_from(v).map_err(|_| GenError::Invalid {
                spec: s.to_string(),
                reason: format!("{name} = {v} is too large"),
            })
        };
        let g = |i: usize, j: usize| groups[i].1[j];
        let spec = match (kind.as_str(), shape.as_slice()) {
            ("SLIMFLY", [1]) | ("SLIMFLY", [1, 1]) => {
                let q = u32v("q", g(0, 0))?;
                let p = if shape.len() == 2 {
                    u32v("p", g(1, 0))?
                } else {
                    // ⌈k'/2⌉; an invalid q is reported by check() below.
                    slimfly_network_radix(q).map_or(1, |k| k.div_ceil(2) as u32)
                };
                DirectSpec::SlimFly { q, p }
            }
            ("SLIMFLY", _) => return Err(bad_shape("(q) or (q;p)")),
            ("DRAGONFLY", [1]) => {
                let h = u32v("h", g(0, 0))?;
                let a = u32v("a", 2 * u64::from(h))?;
                let ah = u64::from(a) * u64::from(h);
                DirectSpec::Dragonfly {
                    a,
                    p: h,
                    h,
                    g: u32v("g", ah + 1)?,
                }
            }
            ("DRAGONFLY", [3]) | ("DRAGONFLY", [3, 1]) => {
                let (a, p, h) = (u32v("a", g(0, 0))?, u32v("p", g(0, 1))?, u32v("h", g(0, 2))?);
                let groups_n = if shape.len() == 2 {
                    u32v("g", g(1, 0))?
                } else {
                    u32v("g", u64::from(a) * u64::from(h) + 1)?
                };
                DirectSpec::Dragonfly { a, p, h, g: groups_n }
            }
            ("DRAGONFLY", _) => return Err(bad_shape("(h), (a,p,h) or (a,p,h;g)")),
            ("HYPERX", [2, 1]) | ("HYPERX", [2, 1, 1]) | ("HYPERX", [2, 1, 2]) => {
                let (k1, k2) = match shape.len() {
                    2 => (1, 1),
                    _ if shape[2] == 1 => (g(2, 0), g(2, 0)),
                    _ => (g(2, 0), g(2, 1)),
                };
                DirectSpec::HyperX {
                    s1: u32v("S1", g(0, 0))?,
                    s2: u32v("S2", g(0, 1))?,
                    t: u32v("T", g(1, 0))?,
                    k1: u32v("K1", k1)?,
                    k2: u32v("K2", k2)?,
                }
            }
            ("HYPERX", _) => return Err(bad_shape("(S1,S2;T), (S1,S2;T;K) or (S1,S2;T;K1,K2)")),
            ("RRG", [3, 1]) => DirectSpec::Rrg {
                n: u32v("n", g(0, 0))?,
                k: u32v("k", g(0, 1))?,
                p: u32v("p", g(0, 2))?,
                seed: g(1, 0),
            },
            ("RRG", _) => return Err(bad_shape("(n,k,p;seed)")),
            _ => {
                return Err(syntax(
                    s,
                    0,
                    format!("unknown direct topology kind '{kind}', expected SLIMFLY, DRAGONFLY, HYPERX or RRG"),
                ))
            }
        };
        spec.check(s)?;
        Ok(spec)
    }
}

fn describe(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|n| format!("{n}")).collect();
    format!("groups of {} value(s)", parts.join(";"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays_canonically() {
        let cases = [
            ("SLIMFLY(5)", "SLIMFLY(5;4)"),
            ("slimfly ( 7 ; 2 )", "SLIMFLY(7;2)"),
            ("DRAGONFLY(2)", "DRAGONFLY(4,2,2;9)"),
            ("DRAGONFLY(4,2,2)", "DRAGONFLY(4,2,2;9)"),
            ("DRAGONFLY(4,2,2;5)", "DRAGONFLY(4,2,2;5)"),
            ("HYPERX(4,3;2)", "HYPERX(4,3;2)"),
            ("HYPERX(4,3;2;2)", "HYPERX(4,3;2;2,2)"),
            ("HYPERX(4,3;2;1,3)", "HYPERX(4,3;2;1,3)"),
            ("RRG(16,4,2;7)", "RRG(16,4,2;7)"),
        ];
        for (input, canon) in cases {
            let s: DirectSpec = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(s.to_string(), canon);
            assert_eq!(canon.parse::<DirectSpec>().unwrap(), s);
        }
    }

    #[test]
    fn bad_parameters_have_clear_errors() {
        let cases = [
            ("SLIMFLY(6)", "SLIMFLY(6): q = 6 is not a prime power"),
            ("SLIMFLY(12)", "SLIMFLY(12): q = 12 is not a prime power"),
            ("SLIMFLY(2)", "SLIMFLY(2): q = 2 is not a prime power"),
            ("SLIMFLY(5;0)", "SLIMFLY(5;0): p is 0"),
            (
                "SLIMFLY(169)",
                "SLIMFLY(169): switches need 380 ports (127 end-node + 253 network), at most 254",
            ),
            (
                "SLIMFLY(5;4;1)",
                "SLIMFLY(5;4;1): at column 8: SLIMFLY takes (q) or (q;p), got groups of 1;1;1",
            ),
            ("DRAGONFLY(4,2,2;4)", "g − 1 = 3 must divide a·h = 8"),
            (
                "DRAGONFLY(4,2,2;10)",
                "g = 10 groups: a Dragonfly needs 2 ≤ g ≤ a·h + 1 = 9",
            ),
            ("DRAGONFLY(40,200,20)", "switches need 259 ports"),
            ("HYPERX(1,4;2)", "a 2-D HyperX needs S1, S2 ≥ 2, got 1 × 4"),
            ("HYPERX(4,4;0)", "T is 0"),
            ("RRG(5,3,1;1)", "n·k = 15 must be even"),
            ("RRG(4,4,1;1)", "needs n > k, got n = 4"),
            ("RRG(4,1,1;1)", "k = 1: a connected regular graph needs k ≥ 2"),
            ("RRG(4,2,1)", "RRG takes (n,k,p;seed)"),
            ("HYPERX(4,4;2)x", "at column 14: unexpected 'x' after the closing ')'"),
            ("HYPERX(4,,4;2)", "at column 10: expected a number, found ','"),
            ("SLIMFLY(99999999999)", "q = 99999999999 is too large"),
        ];
        for (input, want) in cases {
            let e = input.parse::<DirectSpec>().unwrap_err().to_string();
            assert!(e.contains(want), "{input}: {e}");
        }
    }
}
