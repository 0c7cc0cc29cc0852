//! Ranking configuration files: OpenSM `root_guid_file` and switch roles.
//!
//! Both formats are line based. `#` starts a comment (anywhere on a line), blank lines are
//! ignored, GUIDs are written in hexadecimal with a `0x` prefix (as OpenSM and `ibnetdiscover`
//! print them). A bare number is rejected rather than guessed: `0002c903000a1b2c` could be meant
//! as hex or as decimal, and a wrong root GUID silently changes every level of the fabric.

use std::collections::HashMap;

use fabric_topology::{fmt_guid, Guid};

use crate::Role;

/// Errors of the configuration parsers. Every variant names the file (as given by the caller)
/// and the 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RankError {
    /// A token that is not a `0x`-prefixed 64-bit hexadecimal GUID (or is GUID 0).
    #[error("{file}:{line}: invalid GUID `{text}`: {reason}")]
    InvalidGuid {
        file: String,
        line: usize,
        text: String,
        reason: &'static str,
    },
    /// A role word other than `leaf`, `spine` or `root`.
    #[error("{file}:{line}: unknown switch role `{text}` (expected leaf, spine or root)")]
    UnknownRole { file: String, line: usize, text: String },
    /// A line of the roles file without a role after the GUID.
    #[error("{file}:{line}: missing role after GUID {} (expected `GUID leaf|spine|root`)", fmt_guid(*guid))]
    MissingRole { file: String, line: usize, guid: Guid },
    /// Text after the last expected field of a line.
    #[error("{file}:{line}: unexpected `{text}` after the last field")]
    TrailingText { file: String, line: usize, text: String },
    /// The same switch given two different roles.
    #[error(
        "{file}:{line}: switch {} has role {second:?} here but role {first:?} on line {first_line}",
        fmt_guid(*guid)
    )]
    ConflictingRole {
        file: String,
        line: usize,
        guid: Guid,
        first: Role,
        first_line: usize,
        second: Role,
    },
}

/// Strips a `#` comment and surrounding blanks.
fn content(line: &str) -> &str {
    match line.find('#') {
        Some(i) => line[..i].trim(),
        None => line.trim(),
    }
}

/// Parses one GUID token: `0x` followed by 1 to 16 hex digits, not zero.
fn parse_guid_token(tok: &str, file: &str, line: usize) -> Result<Guid, RankError> {
    let err = |reason: &'static str| RankError::InvalidGuid {
        file: file.to_owned(),
        line,
        text: tok.to_owned(),
        reason,
    };
    let hex = tok
        .strip_prefix("0x")
        .or_else(|| tok.strip_prefix("0X"))
        .ok_or_else(|| err("expected 0x followed by hexadecimal digits"))?;
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(err("expected 0x followed by hexadecimal digits"));
    }
    let digits = hex.trim_start_matches('0');
    if digits.len() > 16 {
        return Err(err("more than 64 bits"));
    }
    let g = if digits.is_empty() {
        0
    } else {
        u64::from_str_radix(digits, 16).map_err(|_| err("expected 0x followed by hexadecimal digits"))?
    };
    if g == 0 {
        return Err(err("GUID 0 is not a valid switch GUID"));
    }
    Ok(g)
}

/// Parses an OpenSM `root_guid_file`: one top-switch GUID per line (`0x` hex), blank lines and
/// `#` comments allowed. Returns the GUIDs in file order without duplicates (the first occurrence
/// is kept). `source` names the file in errors.
///
/// ```
/// let roots = fabric_ranking::parse_root_guid_file("# spines\n0x0002c90300000001\n\n0x2 # spine 2\n", "roots.txt")
///     .unwrap();
/// assert_eq!(roots, vec![0x0002c90300000001, 2]);
/// ```
pub fn parse_root_guid_file(text: &str, source: &str) -> Result<Vec<Guid>, RankError> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let mut toks = content(raw).split_whitespace();
        let Some(tok) = toks.next() else { continue };
        let g = parse_guid_token(tok, source, line)?;
        if let Some(extra) = toks.next() {
            return Err(RankError::TrailingText {
                file: source.to_owned(),
                line,
                text: extra.to_owned(),
            });
        }
        if seen.insert(g) {
            out.push(g);
        }
    }
    Ok(out)
}

/// Parses a switch roles file: lines `GUID ROLE` with `ROLE` one of `leaf`, `spine`, `root`
/// (case-insensitive), blank lines and `#` comments allowed. Giving a switch the same role twice
/// is accepted; two different roles for one switch is an error naming both lines.
///
/// ```
/// use fabric_ranking::{parse_roles, Role};
/// let roles = parse_roles("0x10 leaf\n0x20 root # top\n", "roles.txt").unwrap();
/// assert_eq!(roles[&0x10], Role::Leaf);
/// assert_eq!(roles[&0x20], Role::Root);
/// ```
pub fn parse_roles(text: &str, source: &str) -> Result<HashMap<Guid, Role>, RankError> {
    let mut out: HashMap<Guid, (Role, usize)> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let mut toks = content(raw).split_whitespace();
        let Some(tok) = toks.next() else { continue };
        let guid = parse_guid_token(tok, source, line)?;
        let Some(word) = toks.next() else {
            return Err(RankError::MissingRole {
                file: source.to_owned(),
                line,
                guid,
            });
        };
        let role = match word.to_ascii_lowercase().as_str() {
            "leaf" => Role::Leaf,
            "spine" => Role::Spine,
            "root" => Role::Root,
            _ => {
                return Err(RankError::UnknownRole {
                    file: source.to_owned(),
                    line,
                    text: word.to_owned(),
                })
            }
        };
        if let Some(extra) = toks.next() {
            return Err(RankError::TrailingText {
                file: source.to_owned(),
                line,
                text: extra.to_owned(),
            });
        }
        match out.get(&guid) {
            Some(&(first, first_line)) if first != role => {
                return Err(RankError::ConflictingRole {
                    file: source.to_owned(),
                    line,
                    guid,
                    first,
                    first_line,
                    second: role,
                });
            }
            Some(_) => {}
            None => {
                out.insert(guid, (role, line));
            }
        }
    }
    Ok(out.into_iter().map(|(g, (r, _))| (g, r)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_file_accepts_comments_blanks_and_dedups() {
        let text = "# OpenSM root_guid_file\n\n0x0002C90300A1B2C3\n   0x10   # second spine\n0x0002c90300a1b2c3\n\t\n";
        assert_eq!(
            parse_root_guid_file(text, "r").unwrap(),
            vec![0x0002_c903_00a1_b2c3, 0x10]
        );
        assert_eq!(parse_root_guid_file("", "r").unwrap(), Vec::<Guid>::new());
        assert_eq!(
            parse_root_guid_file("0xffffffffffffffff\n0x00000000000000000001", "r").unwrap(),
            vec![u64::MAX, 1]
        );
    }

    #[test]
    fn root_file_errors_name_file_and_line() {
        let e = parse_root_guid_file("0x1\n\n12345\n", "roots.txt").unwrap_err();
        assert!(
            matches!(&e, RankError::InvalidGuid { line: 3, text, .. } if text == "12345"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "roots.txt:3: invalid GUID `12345`: expected 0x followed by hexadecimal digits"
        );
        let e = parse_root_guid_file("0x1 0x2\n", "f").unwrap_err();
        assert_eq!(
            e,
            RankError::TrailingText {
                file: "f".into(),
                line: 1,
                text: "0x2".into()
            }
        );
        let e = parse_root_guid_file("# x\n0x1ffffffffffffffff\n", "f").unwrap_err();
        assert!(
            matches!(
                e,
                RankError::InvalidGuid {
                    line: 2,
                    reason: "more than 64 bits",
                    ..
                }
            ),
            "{e:?}"
        );
        let e = parse_root_guid_file("0x0\n", "f").unwrap_err();
        assert!(matches!(e, RankError::InvalidGuid { line: 1, .. }));
        for bad in ["0x", "0xg1", "x12", "0x-1", "0x+1"] {
            assert!(parse_root_guid_file(bad, "f").is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn roles_parse_and_reject_conflicts() {
        let r = parse_roles("0x1 LEAF\n0x2 spine\n0x3 Root\n0x1 leaf # again\n", "roles").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!((r[&1], r[&2], r[&3]), (Role::Leaf, Role::Spine, Role::Root));
        let e = parse_roles("0x1 leaf\n\n0x1 root\n", "roles").unwrap_err();
        assert_eq!(
            e,
            RankError::ConflictingRole {
                file: "roles".into(),
                line: 3,
                guid: 1,
                first: Role::Leaf,
                first_line: 1,
                second: Role::Root
            }
        );
        assert!(e
            .to_string()
            .starts_with("roles:3: switch 0x0000000000000001 has role Root"));
        assert_eq!(
            parse_roles("0x5\n", "f").unwrap_err(),
            RankError::MissingRole {
                file: "f".into(),
                line: 1,
                guid: 5
            }
        );
        assert!(matches!(
            parse_roles("0x5 core\n", "f").unwrap_err(),
            RankError::UnknownRole { line: 1, .. }
        ));
        assert!(matches!(
            parse_roles("0x5 leaf x\n", "f").unwrap_err(),
            RankError::TrailingText { line: 1, .. }
        ));
    }
}
