//! Slurm hostlist expressions: `node[001-018,020],login1`.
//!
//! [`compress`] writes a set of names the way Slurm's `hostlist_ranged_string` does: names
//! grouped by the prefix before their trailing digits, each group as `prefix[ranges]`, a range
//! `lo-hi` of consecutive numbers printed with the width of `lo` (zero padding kept: `n[08-11]`
//! is `n08 n09 n10 n11`, `n[9-10]` is `n9 n10`). [`expand`] reads such expressions (and any number
//! of bracket groups per name, as Slurm does: `r[1-2]n[1-2]`), in order.
//!
//! Invariant: `expand(&compress(names))` is the set of `names` (checked by the property tests).

use std::collections::BTreeMap;

/// At most this many names from one expression (a typo like `n[0-999999999]` is an error, not
/// an allocation of gigabytes).
pub const MAX_NAMES: usize = 1 << 20;

/// Numbers of more digits than this are not ranges (they do not fit a `u64` safely).
const MAX_DIGITS: usize = 18;

/// Why a hostlist expression cannot be read; `at` is the byte offset in the expression.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    #[error("hostlist {expr:?}: unbalanced bracket at byte {at}")]
    Unbalanced { expr: String, at: usize },
    #[error("hostlist {expr:?}: bad range {range:?} (expected N or LO-HI with LO <= HI, decimal digits)")]
    BadRange { expr: String, range: String },
    #[error("hostlist {expr:?}: more than {MAX_NAMES} names")]
    TooMany { expr: String },
}

/// The names of a hostlist expression, in order (duplicates kept, as Slurm does). Commas and
/// white space outside brackets separate names; empty items are skipped.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let bytes = expr.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'[' => {
                if depth > 0 {
                    return Err(HostlistError::Unbalanced {
                        expr: expr.into(),
                        at: i,
                    });
                }
                depth = 1;
            }
            b']' => {
                if depth == 0 {
                    return Err(HostlistError::Unbalanced {
                        expr: expr.into(),
                        at: i,
                    });
                }
                depth = 0;
            }
            b',' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => {
                expand_item(expr, &expr[start..i], &mut out)?;
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err(HostlistError::Unbalanced {
            expr: expr.into(),
            at: expr.len(),
        });
    }
    expand_item(expr, &expr[start..], &mut out)?;
    Ok(out)
}

/// One item: literal parts and bracket groups, expanded as a cartesian product (left to right).
fn expand_item(expr: &str, item: &str, out: &mut Vec<String>) -> Result<(), HostlistError> {
    if item.is_empty() {
        return Ok(());
    }
    let mut partial = vec![String::new()];
    let mut rest = item;
    while !rest.is_empty() {
        match rest.find('[') {
            None => {
                for p in &mut partial {
                    p.push_str(rest);
                }
                rest = "";
            }
            Some(open) => {
                let close = rest[open..]
                    .find(']')
                    .map(|c| open + c)
                    .ok_or_else(|| HostlistError::Unbalanced {
                        expr: expr.into(),
                        at: expr.len(),
                    })?;
                let literal = &rest[..open];
                let numbers = ranges(expr, &rest[open + 1..close])?;
                if partial.len().saturating_mul(numbers.len()) + out.len() > MAX_NAMES {
                    return Err(HostlistError::TooMany { expr: expr.into() });
                }
                let mut next = Vec::with_capacity(partial.len() * numbers.len());
                for p in &partial {
                    for n in &numbers {
                        next.push(format!("{p}{literal}{n}"));
                    }
                }
                partial = next;
                rest = &rest[close + 1..];
            }
        }
    }
    if partial.len() + out.len() > MAX_NAMES {
        return Err(HostlistError::TooMany { expr: expr.into() });
    }
    out.extend(partial);
    Ok(())
}

/// The numbers of a bracket group `1-3,07,10-12`, formatted with the width of each range's
/// lower bound.
fn ranges(expr: &str, group: &str) -> Result<Vec<String>, HostlistError> {
    let bad = |r: &str| HostlistError::BadRange {
        expr: expr.into(),
        range: r.into(),
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= MAX_DIGITS && s.bytes().all(|b| b.is_ascii_digit());
    let mut out = Vec::new();
    for r in group.split(',') {
        let r = r.trim();
        let (lo, hi) = r.split_once('-').unwrap_or((r, r));
        if !digits(lo) || !digits(hi) {
            return Err(bad(r));
        }
        let (a, b) = (
            lo.parse::<u64>().map_err(|_| bad(r))?,
            hi.parse::<u64>().map_err(|_| bad(r))?,
        );
        if a > b {
            return Err(bad(r));
        }
        if (b - a) as usize >= MAX_NAMES || out.len() + (b - a) as usize >= MAX_NAMES {
            return Err(HostlistError::TooMany { expr: expr.into() });
        }
        let w = lo.len();
        out.extend((a..=b).map(|v| format!("{v:0w$}")));
    }
    Ok(out)
}

/// A name split at its trailing decimal digits.
struct Numbered<'a> {
    value: u64,
    text: &'a str,
}

/// The shortest Slurm hostlist expression of a set of names (sorted by prefix, then number;
/// duplicates removed). Names must not hold `[`, `]`, `,` or white space (host and switch names
/// never do: see [`crate::names`]).
pub fn compress<'a, I: IntoIterator<Item = &'a str>>(names: I) -> String {
    let mut plain: Vec<&str> = Vec::new();
    let mut groups: BTreeMap<&str, Vec<Numbered<'_>>> = BTreeMap::new();
    for name in names {
        let split = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
        let (prefix, digits) = name.split_at(split);
        // All-digit names and huge numbers stay plain: no range form for them.
        if prefix.is_empty() || digits.is_empty() || digits.len() > MAX_DIGITS {
            plain.push(name);
            continue;
        }
        let value = digits.parse::<u64>().unwrap_or(0);
        groups.entry(prefix).or_default().push(Numbered { value, text: digits });
    }
    let mut items: Vec<(String, String)> = Vec::new();
    plain.sort_unstable();
    plain.dedup();
    for p in plain {
        items.push((p.to_string(), p.to_string()));
    }
    for (prefix, mut nums) in groups {
        nums.sort_by(|a, b| (a.value, a.text.len(), a.text).cmp(&(b.value, b.text.len(), b.text)));
        nums.dedup_by(|a, b| a.text == b.text);
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let first = &nums[i];
            let w = first.text.len();
            let mut j = i;
            while j + 1 < nums.len()
                && nums[j + 1].value == nums[j].value + 1
                && format!("{:0w$}", nums[j + 1].value) == nums[j + 1].text
            {
                j += 1;
            }
            parts.push(if j == i {
                first.text.to_string()
            } else {
                format!("{}-{}", first.text, nums[j].text)
            });
            i = j + 1;
        }
        let text = if nums.len() == 1 {
            format!("{prefix}{}", parts[0])
        } else {
            format!("{prefix}[{}]", parts.join(","))
        };
        items.push((prefix.to_string(), text));
    }
    items.sort();
    items.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compresses_with_padding_and_gaps() {
        let names: Vec<String> = (1..=18).chain([20]).map(|i| format!("node{i:03}")).collect();
        assert_eq!(compress(names.iter().map(String::as_str)), "node[001-018,020]");
        assert_eq!(compress(["n9", "n10", "n11"]), "n[9-11]");
        assert_eq!(compress(["n9", "n010"]), "n[9,010]");
        assert_eq!(compress(["n08", "n09", "n10"]), "n[08-10]");
        assert_eq!(compress(["login", "node2", "node1", "node1"]), "login,node[1-2]");
        assert_eq!(compress(["a1"]), "a1");
        assert_eq!(compress(["123", "x"]), "123,x");
        assert_eq!(compress(std::iter::empty::<&str>()), "");
    }

    #[test]
    fn expands_slurm_forms() {
        assert_eq!(
            expand("node[001-003,010]").unwrap(),
            ["node001", "node002", "node003", "node010"]
        );
        assert_eq!(expand("n[9-10],login").unwrap(), ["n9", "n10", "login"]);
        assert_eq!(expand("r[1-2]n[1-2]").unwrap(), ["r1n1", "r1n2", "r2n1", "r2n2"]);
        assert_eq!(expand("a b,,c").unwrap(), ["a", "b", "c"]);
        assert_eq!(expand("").unwrap(), Vec::<String>::new());
        assert_eq!(expand("gpu[7]-ib").unwrap(), ["gpu7-ib"]);
    }

    #[test]
    fn bad_expressions_say_what_and_where() {
        assert!(matches!(expand("n[1-3"), Err(HostlistError::Unbalanced { .. })));
        assert!(matches!(expand("n1-3]"), Err(HostlistError::Unbalanced { at: 4, .. })));
        assert!(matches!(expand("n[[1]]"), Err(HostlistError::Unbalanced { at: 2, .. })));
        let e = expand("n[5-3]").unwrap_err();
        assert_eq!(
            e.to_string(),
            "hostlist \"n[5-3]\": bad range \"5-3\" (expected N or LO-HI with LO <= HI, decimal digits)"
        );
        assert!(matches!(expand("n[a-b]"), Err(HostlistError::BadRange { .. })));
        assert!(matches!(expand("n[0-99999999]"), Err(HostlistError::TooMany { .. })));
        assert!(matches!(
            expand("a[0-2000]b[0-2000]"),
            Err(HostlistError::TooMany { .. })
        ));
    }
}
