//! The agent inventory: which management address serves which switch.
//!
//! A text file, one agent per line: a key (switch node GUID as `0x` + hex, or the switch name,
//! which may contain spaces but not `#`) followed by the agent's `host:port` as the last
//! whitespace-separated token. `#` starts a comment. Lines starting with `!` are directives:
//! `!control HOST:PORT` names the agent simulator's control endpoint (ignored by the driver).
//!
//! ```text
//! # written by fabric-agent-sim
//! !control 127.0.0.1:40000
//! 0x0002c90000000000 127.0.0.1:40001   # PGFT L0 S(0,0,0)
//! spine-07 10.1.0.7:50051
//! ```

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

use fabric_topology::{fmt_guid, Guid};

/// How an inventory line names its switch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AgentKey {
    /// Node GUID of the switch.
    Guid(Guid),
    /// Switch name (node description); the GUID is learnt from the agent.
    Name(String),
}

impl std::fmt::Display for AgentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentKey::Guid(g) => f.write_str(&fmt_guid(*g)),
            AgentKey::Name(n) => f.write_str(n),
        }
    }
}

/// One agent of the inventory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InventoryEntry {
    pub key: AgentKey,
    /// `host:port` of the agent.
    pub address: String,
    /// Optional comment (the simulator writes the switch name there).
    pub comment: String,
    /// 1-based line in the source (0 when built in memory).
    pub line: usize,
}

/// A parsed inventory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Agents in file order (the order of switches in discovered fabrics).
    pub entries: Vec<InventoryEntry>,
    /// The simulator's control endpoint (`!control`), if any.
    pub control: Option<String>,
}

/// A malformed inventory: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {reason}")]
pub struct InventoryError {
    pub file: String,
    pub line: usize,
    pub reason: String,
}

fn valid_address(a: &str) -> bool {
    match a.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0),
        None => false,
    }
}

impl Inventory {
    /// Parses inventory text; `source` only labels errors.
    pub fn parse(text: &str, source: &str) -> Result<Inventory, InventoryError> {
        let err = |line: usize, reason: String| InventoryError {
            file: source.to_string(),
            line,
            reason,
        };
        let mut inv = Inventory::default();
        let mut keys = HashSet::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let (body, comment) = match raw.split_once('#') {
                Some((b, c)) => (b.trim(), c.trim()),
                None => (raw.trim(), ""),
            };
            if body.is_empty() {
                continue;
            }
            if let Some(d) = body.strip_prefix('!') {
                let mut it = d.split_whitespace();
                match (it.next(), it.next(), it.next()) {
                    (Some("control"), Some(addr), None) if valid_address(addr) => inv.control = Some(addr.to_string()),
                    _ => {
                        return Err(err(
                            line,
                            format!("unknown or malformed directive `!{d}` (expected `!control HOST:PORT`)"),
                        ))
                    }
                }
                continue;
            }
            let Some((key, address)) = body.rsplit_once(char::is_whitespace) else {
                return Err(err(line, format!("expected `GUID-or-NAME HOST:PORT`, got `{body}`")));
            };
            let (key, address) = (key.trim(), address.trim());
            if !valid_address(address) {
                return Err(err(
                    line,
                    format!("invalid agent address `{address}` (expected HOST:PORT)"),
                ));
            }
            let key = match key.strip_prefix("0x").or_else(|| key.strip_prefix("0X")) {
                Some(h) => {
                    AgentKey::Guid(u64::from_str_radix(h, 16).map_err(|_| err(line, format!("invalid GUID `{key}`")))?)
                }
                None => AgentKey::Name(key.to_string()),
            };
            if !keys.insert(key.clone()) {
                return Err(err(line, format!("switch {key} is listed twice")));
            }
            inv.entries.push(InventoryEntry {
                key,
                address: address.to_string(),
                comment: comment.to_string(),
                line,
            });
        }
        if inv.entries.is_empty() {
            return Err(err(0, "no agent listed".into()));
        }
        Ok(inv)
    }

    /// Reads an inventory file (errors name the path; a regular file of at most
    /// [`fabric_topology::textfile::SMALL_TEXT_LIMIT`] bytes, invalid UTF-8 named by its line).
    pub fn read_file(path: &Path) -> Result<Inventory, InventoryError> {
        let name = path.display().to_string();
        let text = fabric_topology::textfile::read_text_file(path, fabric_topology::textfile::SMALL_TEXT_LIMIT)
            .map_err(|e| InventoryError {
                file: name.clone(),
                line: e.line(),
                reason: format!("cannot read inventory: {}", e.reason()),
            })?;
        Inventory::parse(&text, &name)
    }

    /// Formats the inventory (the inverse of [`Inventory::parse`]).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        if let Some(c) = &self.control {
            let _ = writeln!(s, "!control {c}");
        }
        for e in &self.entries {
            let _ = write!(s, "{} {}", e.key, e.address);
            if !e.comment.is_empty() {
                let _ = write!(s, "  # {}", e.comment);
            }
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_guids_names_comments_and_control() {
        let text = "# inventory\n!control 127.0.0.1:4000\n0x0002c90000000001 127.0.0.1:4001 # L0 S(0)\nspine 07 10.0.0.7:50051\n\n";
        let inv = Inventory::parse(text, "inv").unwrap();
        assert_eq!(inv.control.as_deref(), Some("127.0.0.1:4000"));
        assert_eq!(inv.entries.len(), 2);
        assert_eq!(inv.entries[0].key, AgentKey::Guid(0x0002c90000000001));
        assert_eq!(inv.entries[0].comment, "L0 S(0)");
        assert_eq!(inv.entries[1].key, AgentKey::Name("spine 07".into()));
        assert_eq!(inv.entries[1].line, 4);
        assert_eq!(Inventory::parse(&inv.to_text(), "again").unwrap().entries, {
            let mut e = inv.entries.clone();
            e[0].line = 2;
            e[1].line = 3;
            e
        });
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = Inventory::parse("0x1 127.0.0.1:1\n0x1 127.0.0.1:2\n", "f").unwrap_err();
        assert_eq!(e.to_string(), "f:2: switch 0x0000000000000001 is listed twice");
        let e = Inventory::parse("0x1 nowhere\n", "f").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.reason.contains("invalid agent address"));
        let e = Inventory::parse("lonely\n", "f").unwrap_err();
        assert!(e.reason.contains("expected"), "{e}");
        let e = Inventory::parse("0xZZ 127.0.0.1:1\n", "f").unwrap_err();
        assert!(e.reason.contains("invalid GUID"));
        assert!(Inventory::parse("!bogus\n0x1 a:1\n", "f").is_err());
        assert_eq!(Inventory::parse("# nothing\n", "f").unwrap_err().line, 0);
    }
}
