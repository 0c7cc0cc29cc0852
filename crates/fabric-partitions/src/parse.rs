//! The `partitions.conf` parser.
//!
//! Grammar (OpenSM's, `opensm(8)` "PARTITION CONFIGURATION"): `#` starts a comment; a statement
//! is `[Name][=PKey][,flag[=value]]* : [member[,member]*] ;`; its header (up to `:`) is on one
//! line, its member list may continue over the following lines up to `;`; several statements
//! may share a line. Members are `ALL`, `ALL_CAS`, `ALL_SWITCHES`, `ALL_ROUTERS`, `SELF`, `NONE`
//! or a port GUID (`0x` hex, `0` octal or decimal, as C's `strtoull(.., 0)`), each with an
//! optional `=full|limited|both`. Flag names, keywords and membership words may be abbreviated as
//! OpenSM allows (a non-empty prefix; the first match in OpenSM's order wins).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::config::{
    Member, MemberSpec, Membership, Partition, PartitionConfig, DEFAULT_PARTITION_NAME, MAX_PARTITIONS,
    OPENSM_DEFAULT_TEXT,
};
use crate::ipoib::{
    IpoibGroup, DEFAULT_MGRP_MTU, DEFAULT_MGRP_RATE, DEFAULT_MGRP_SCOPE, DEFAULT_SL, IPOIB_BROADCAST_QKEY,
};
use crate::pkey::{DEFAULT_PKEY, FULL_MEMBER_BIT, PKEY_BASE_MASK};

mod text;

use text::{abbreviates, c_number, Piece, NUMBER_FORMS};

/// A refused `partitions.conf`: file, 1-based line and column (in characters), what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ParseError {
    /// The file name given to [`parse`].
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    /// What is wrong.
    pub message: String,
}

/// Parses a `partitions.conf` text; `file_name` is only used in errors.
///
/// The result always holds the default partition first (P_Key 0x7fff: every port limited, the
/// SM port full, before the file's own `Default` statements), as OpenSM builds it before reading
/// the file.
pub fn parse(text: &str, file_name: &str) -> Result<PartitionConfig, ParseError> {
    let mut p = Parser::new(file_name);
    let mut line_no = 0u32;
    for line in text.split('\n') {
        line_no = line_no.saturating_add(1);
        p.line(line, line_no)?;
    }
    if let Some(open) = &p.open {
        return Err(p.err_at(open.line, open.column, "missing ';' at the end of this statement"));
    }
    Ok(PartitionConfig {
        partitions: p.partitions,
    })
}

impl PartitionConfig {
    /// What OpenSM uses without a partitions file: `Default=0x7fff, ipoib : ALL=full ;`
    /// (every port a full member of the default partition, its IPoIB broadcast group created).
    pub fn default_opensm() -> PartitionConfig {
        match parse(OPENSM_DEFAULT_TEXT, "<built-in>") {
            Ok(c) => c,
            // The built-in text is valid (tested); the built-in default partition is the fallback.
            Err(_) => PartitionConfig {
                partitions: vec![Partition::builtin_default()],
            },
        }
    }
}

/// The statement whose member list is being read.
struct Open {
    partition: usize,
    membership: Membership,
    indx0: bool,
    line: u32,
    column: u32,
}

/// The multicast group flags of one statement header.
#[derive(Clone)]
struct GroupFlags {
    mtu: u8,
    rate: u8,
    sl: u8,
    scope_mask: u16,
    qkey: u32,
    tclass: u8,
    flow_label: u32,
}

struct Parser<'f> {
    file: &'f str,
    partitions: Vec<Partition>,
    /// Whether each partition was first defined with an explicit name.
    named: Vec<bool>,
    by_pkey: HashMap<u16, usize>,
    /// Partitions by name (names need not be unique).
    by_name: HashMap<String, Vec<usize>>,
    pkey_counter: u16,
    open: Option<Open>,
    /// The line being parsed (for columns).
    cur_line: String,
    cur_line_no: u32,
}

impl<'f> Parser<'f> {
    fn new(file: &'f str) -> Self {
        let default = Partition::builtin_default();
        let mut by_pkey = HashMap::new();
        by_pkey.insert(DEFAULT_PKEY, 0);
        Parser {
            file,
            partitions: vec![default],
            named: vec![true],
            by_pkey,
            by_name: HashMap::from([(DEFAULT_PARTITION_NAME.to_string(), vec![0])]),
            pkey_counter: 0,
            open: None,
            cur_line: String::new(),
            cur_line_no: 0,
        }
    }

    fn err_at(&self, line: u32, column: u32, message: impl Into<String>) -> ParseError {
        ParseError {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    fn column(&self, off: usize) -> u32 {
        let off = off.min(self.cur_line.len());
        let prefix = self.cur_line.get(..off).unwrap_or(&self.cur_line);
        u32::try_from(prefix.chars().count())
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    }

    fn err(&self, piece: Piece<'_>, message: impl Into<String>) -> ParseError {
        self.err_at(self.cur_line_no, self.column(piece.off), message)
    }

    fn line(&mut self, line: &str, line_no: u32) -> Result<(), ParseError> {
        self.cur_line = line.to_string();
        self.cur_line_no = line_no;
        let content = line.split_once('#').map_or(line, |(c, _)| c);
        let mut rest = Piece { text: content, off: 0 };
        loop {
            let (segment, after) = rest.split_once(';');
            self.segment(segment, after.is_some())?;
            match after {
                Some(a) => {
                    self.open = None;
                    rest = a;
                }
                None => return Ok(()),
            }
        }
    }

    /// One part of a line up to a `;` (`ends`) or the end of the line.
    fn segment(&mut self, seg: Piece<'_>, ends: bool) -> Result<(), ParseError> {
        let members = if self.open.is_some() {
            seg
        } else {
            let t = seg.trim();
            if t.text.is_empty() {
                if ends {
                    return Err(self.err(
                        Piece {
                            text: "",
                            off: seg.off + seg.text.len(),
                        },
                        "';' without a statement",
                    ));
                }
                return Ok(());
            }
            let (header, members) = t.split_once(':');
            let Some(members) = members else {
                return Err(self.err(
                    t,
                    format!(
                        "missing ':' after the partition definition '{}' (its header must be on one line)",
                        t.text
                    ),
                ));
            };
            self.header(header)?;
            members
        };
        for m in members.split_all(',') {
            self.member(m)?;
        }
        Ok(())
    }

    fn header(&mut self, header: Piece<'_>) -> Result<(), ParseError> {
        let mut parts = header.split_all(',').into_iter();
        let first = parts.next().unwrap_or(header);
        let (name, id) = first.split_once('=');
        let (mut name, mut id) = (name.trim(), id.map(Piece::trim));
        if id.is_none() && name.text.starts_with(|c: char| c.is_ascii_digit()) {
            id = Some(name);
            name = Piece {
                text: "",
                off: name.off,
            };
        }
        let pkey = match id {
            None => None,
            Some(id) => Some(self.pkey(id)?),
        };
        let mut flags = GroupFlags {
            mtu: DEFAULT_MGRP_MTU,
            rate: DEFAULT_MGRP_RATE,
            sl: DEFAULT_SL,
            scope_mask: 0,
            qkey: 0,
            tclass: 0,
            flow_label: 0,
        };
        let (mut ipoib, mut membership, mut indx0) = (false, Membership::Limited, false);
        for part in parts {
            let (flag, value) = part.split_once('=');
            let (flag, value) = (flag.trim(), value.map(Piece::trim));
            let f = flag.text;
            if f.is_empty() {
                return Err(self.err(part.trim(), "empty partition flag"));
            }
            let num = |p: &Self, max: u64, what: &str| -> Result<u64, ParseError> {
                let Some(v) = value else {
                    return Err(p.err(flag, format!("flag '{f}' needs a value ({what})")));
                };
                match c_number(v.text) {
                    Some(n) if n <= max => Ok(n),
                    _ => Err(p.err(
                        v,
                        format!("bad value '{}' of flag '{f}': {what} ({NUMBER_FORMS})", v.text),
                    )),
                }
            };
            let no_value = |p: &Self| match value {
                Some(v) => Err(p.err(v, format!("flag '{f}' takes no value"))),
                None => Ok(()),
            };
            if f == "qkey" {
                flags.qkey = u32::try_from(num(self, u64::from(u32::MAX), "a 32-bit Q_Key")?).unwrap_or(0);
            } else if f == "tclass" {
                flags.tclass = u8::try_from(num(self, 255, "a traffic class 0..255")?).unwrap_or(0);
            } else if abbreviates(f, "mtu") {
                let v = num(self, 5, "an IBA MTU code 1..5 (4 = 2048)")?;
                if v == 0 {
                    return Err(self.err(flag, "mtu 0 is not an IBA MTU code (1..5)"));
                }
                flags.mtu = v as u8;
            } else if abbreviates(f, "rate") {
                let v = num(self, 63, "an IBA rate code 2..63 (3 = 10 Gb/s)")?;
                if v < 2 {
                    return Err(self.err(flag, format!("rate {v} is not an IBA rate code (2..63)")));
                }
                flags.rate = v as u8;
            } else if abbreviates(f, "scope") {
                let v = num(self, 15, "a multicast scope 1..15 (2 = link-local)")?;
                if v == 0 {
                    return Err(self.err(flag, "scope 0 is reserved (1..15)"));
                }
                flags.scope_mask |= 1 << v;
            } else if abbreviates(f, "Q_Key") {
                flags.qkey = u32::try_from(num(self, u64::from(u32::MAX), "a 32-bit Q_Key")?).unwrap_or(0);
            } else if abbreviates(f, "TClass") {
                flags.tclass = u8::try_from(num(self, 255, "a traffic class 0..255")?).unwrap_or(0);
            } else if abbreviates(f, "sl") {
                flags.sl = num(self, 15, "a service level 0..15")? as u8;
            } else if abbreviates(f, "FlowLabel") {
                flags.flow_label = num(self, 0xF_FFFF, "a 20-bit flow label")? as u32;
            } else if abbreviates(f, "ipoib") {
                no_value(self)?;
                ipoib = true;
            } else if abbreviates(f, "defmember") {
                let Some(v) = value else {
                    return Err(self.err(flag, "flag 'defmember' needs a value (full, limited or both)"));
                };
                membership = self.membership(v)?;
            } else if f == "indx0" {
                no_value(self)?;
                indx0 = true;
            } else {
                return Err(self.err(
                    flag,
                    format!(
                        "unknown partition flag '{f}' (ipoib, mtu, rate, sl, scope, Q_Key/qkey, TClass/tclass, \
                         FlowLabel, defmember, indx0)"
                    ),
                ));
            }
        }
        let idx = self.partition(name, pkey, header)?;
        if ipoib {
            self.add_ipoib(idx, &flags);
        }
        let column = self.column(header.off);
        self.open = Some(Open {
            partition: idx,
            membership,
            indx0,
            line: self.cur_line_no,
            column,
        });
        Ok(())
    }

    fn pkey(&self, id: Piece<'_>) -> Result<u16, ParseError> {
        if id.text.is_empty() {
            return Err(self.err(id, "missing P_Key after '='"));
        }
        let Some(v) = c_number(id.text) else {
            return Err(self.err(id, format!("bad P_Key '{}' ({NUMBER_FORMS})", id.text)));
        };
        let Ok(v) = u16::try_from(v) else {
            return Err(self.err(id, format!("P_Key '{}' does not fit in 16 bits", id.text)));
        };
        let base = v & PKEY_BASE_MASK;
        if base == 0 {
            return Err(self.err(
                id,
                format!("P_Key {v:#06x} is the invalid P_Key 0 (bit 15 is ignored); omit it to have one generated"),
            ));
        }
        Ok(base)
    }

    /// Finds or creates the statement's partition (OpenSM's `osm_prtn_make_new`).
    fn partition(&mut self, name: Piece<'_>, pkey: Option<u16>, header: Piece<'_>) -> Result<usize, ParseError> {
        let pkey = match pkey {
            Some(pkey) => {
                if let Some(&idx) = self.by_pkey.get(&pkey) {
                    let existing = &self.partitions[idx];
                    if !name.text.is_empty() && self.named[idx] && existing.name != name.text {
                        let at = if existing.line == 0 {
                            "built in".to_string()
                        } else {
                            format!("line {}", existing.line)
                        };
                        return Err(self.err(
                            name,
                            format!(
                                "P_Key {pkey:#06x} of partition '{}' is already the P_Key of partition '{}' ({at})",
                                name.text, existing.name
                            ),
                        ));
                    }
                    return Ok(idx);
                }
                pkey
            }
            None => {
                if !name.text.is_empty() {
                    // OpenSM's lookup by name walks its partitions in map order.
                    let found = self
                        .by_name
                        .get(name.text)
                        .and_then(|v| v.iter().copied().min_by_key(|&i| self.partitions[i].pkey.swap_bytes()));
                    if let Some(idx) = found {
                        return Ok(idx);
                    }
                }
                self.generate_pkey().ok_or_else(|| {
                    self.err(
                        header,
                        format!("no P_Key left to generate (at most {MAX_PARTITIONS} partitions)"),
                    )
                })?
            }
        };
        let idx = self.partitions.len();
        let named = !name.text.is_empty();
        self.partitions.push(Partition {
            name: if named {
                name.text.to_string()
            } else {
                format!("{pkey:04x}")
            },
            pkey,
            ipoib: Vec::new(),
            members: Vec::new(),
            line: self.cur_line_no,
        });
        self.named.push(named);
        self.by_pkey.insert(pkey, idx);
        self.by_name
            .entry(self.partitions[idx].name.clone())
            .or_default()
            .push(idx);
        Ok(idx)
    }

    fn generate_pkey(&mut self) -> Option<u16> {
        while self.pkey_counter < DEFAULT_PKEY - 1 {
            self.pkey_counter += 1;
            if !self.by_pkey.contains_key(&self.pkey_counter) {
                return Some(self.pkey_counter);
            }
        }
        None
    }

    fn add_ipoib(&mut self, idx: usize, f: &GroupFlags) {
        let p = &mut self.partitions[idx];
        let scopes: Vec<u8> = if f.scope_mask == 0 {
            vec![DEFAULT_MGRP_SCOPE]
        } else {
            (1u8..16).filter(|s| f.scope_mask & (1 << s) != 0).collect()
        };
        for scope in scopes {
            if p.ipoib.iter().any(|g| g.scope == scope) {
                continue;
            }
            p.ipoib.push(IpoibGroup {
                pkey: p.pkey | FULL_MEMBER_BIT,
                name: p.name.clone(),
                mtu: f.mtu,
                rate: f.rate,
                sl: f.sl,
                scope,
                qkey: if f.qkey == 0 { IPOIB_BROADCAST_QKEY } else { f.qkey },
                tclass: f.tclass,
                flow_label: f.flow_label,
            });
        }
    }

    fn membership(&self, v: Piece<'_>) -> Result<Membership, ParseError> {
        let t = v.text;
        if abbreviates(t, "full") {
            Ok(Membership::Full)
        } else if abbreviates(t, "both") {
            Ok(Membership::Both)
        } else if abbreviates(t, "limited") {
            Ok(Membership::Limited)
        } else if t.is_empty() {
            Err(self.err(v, "missing membership after '=' (full, limited or both)"))
        } else {
            Err(self.err(v, format!("unknown membership '{t}' (full, limited or both)")))
        }
    }

    fn member(&mut self, piece: Piece<'_>) -> Result<(), ParseError> {
        let t = piece.trim();
        if t.text.is_empty() {
            return Ok(());
        }
        let Some(open) = &self.open else {
            return Err(self.err(t, "member outside a statement"));
        };
        let (name, flag) = t.split_once('=');
        let name = name.trim();
        let n = name.text;
        if n == "mgid" {
            return Err(self.err(
                name,
                "'mgid=' multicast groups are not supported (fabricd creates the IPoIB broadcast groups only)",
            ));
        }
        if let Some(i) = t.text.find(':') {
            return Err(self.err(
                Piece {
                    text: "",
                    off: t.off + i,
                },
                format!(
                    "':' in the member list: is the ';' of the statement of line {} missing?",
                    open.line
                ),
            ));
        }
        if n.is_empty() {
            return Err(self.err(t, "member without a port before '='"));
        }
        let membership = match flag {
            Some(f) => self.membership(f.trim())?,
            None => open.membership,
        };
        let spec = if abbreviates(n, "NONE") {
            return Ok(());
        } else if abbreviates(n, "ALL") {
            MemberSpec::All
        } else if abbreviates(n, "ALL_CAS") {
            MemberSpec::AllCas
        } else if abbreviates(n, "ALL_SWITCHES") {
            MemberSpec::AllSwitches
        } else if abbreviates(n, "ALL_ROUTERS") {
            MemberSpec::AllRouters
        } else if abbreviates(n, "SELF") {
            MemberSpec::SelfPort
        } else {
            match c_number(n) {
                Some(g) if g != 0 => MemberSpec::Guid(g),
                Some(_) => return Err(self.err(name, "port GUID 0 is not a port")),
                None => {
                    return Err(self.err(
                        name,
                        format!(
                        "bad port GUID '{n}' (a number: {NUMBER_FORMS}; or ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, \
                             SELF, NONE)"
                    ),
                    ))
                }
            }
        };
        let (idx, indx0) = (open.partition, open.indx0);
        let line = self.cur_line_no;
        self.partitions[idx].members.push(Member {
            spec,
            membership,
            indx0,
            line,
        });
        Ok(())
    }
}
