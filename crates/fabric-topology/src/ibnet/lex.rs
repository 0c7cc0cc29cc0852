//! Pass 1: lines to node records (syntax, port ranges, duplicate ports, node GUIDs).

use super::error::{ParseError, Warning};
use crate::model::{Guid, PortNum};

/// The three record types of the format.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum NodeKind {
    Switch,
    /// `Ca` or `Hca` (channel adapter).
    Ca,
    /// `Rt` (router).
    Rt,
}

impl NodeKind {
    /// The keyword as written by ibnetdiscover.
    pub(super) fn name(self) -> &'static str {
        match self {
            NodeKind::Switch => "Switch",
            NodeKind::Ca => "Ca",
            NodeKind::Rt => "Rt",
        }
    }
    fn index(self) -> usize {
        match self {
            NodeKind::Switch => 0,
            NodeKind::Ca => 1,
            NodeKind::Rt => 2,
        }
    }
}

/// One cabled port as written in a record: `[local](guid) "remote"[remote_port](guid) # ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PortLine<'a> {
    /// 1-based line number.
    pub line: usize,
    pub local: PortNum,
    /// `(guid)` after the local port (CA / router records).
    pub local_guid: Option<Guid>,
    pub remote_id: &'a str,
    pub remote_port: PortNum,
    /// `(guid)` after the remote port (remote CA / router).
    pub remote_guid: Option<Guid>,
    /// Last `<width>x<speed>` token of the comment, e.g. `4xQDR`.
    pub speed: Option<&'a str>,
}

/// A node record: header plus its port lines (in file order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Record<'a> {
    pub kind: NodeKind,
    /// 1-based line number of the header.
    pub line: usize,
    pub nports: PortNum,
    pub id: &'a str,
    /// Node description (the node id when the file gives none).
    pub desc: &'a str,
    pub guid: Guid,
    pub ports: Vec<PortLine<'a>>,
}

/// A classified line.
#[derive(Debug)]
enum Line<'a> {
    Blank,
    Comment,
    Header {
        kind: NodeKind,
        nports: PortNum,
        id: &'a str,
        desc: Option<&'a str>,
    },
    Port(PortLine<'a>, Option<&'static str>),
    GuidBase {
        kind: NodeKind,
        relative: bool,
        value: u64,
    },
    /// `vendid=`, `devid=`, `sysimgguid=` and ibsim's global settings: no bearing on the model.
    Setting,
    /// `ibnetdiscover -g` grouping lines (`Chassis 1 (guid ...)`, `Non-Chassis Nodes`, `Hostname:`).
    Grouping,
    /// ibsim `do <command>` line.
    Console,
    Unknown(&'a str),
}

const NOTE_SPACE: &str = "space between the remote node id and its `[port]`: ibsim reads such a line as remote port 1";
const NOTE_MISSING: &str = "no remote `[port]` after the remote node id: port 1 assumed (as ibsim does)";

/// Node GUID assignment, following ibsim's per-type GUID counters (see the module docs).
struct GuidCounters {
    base: [u64; 3],
    next: [u64; 3],
    explicit: [bool; 3],
}

impl GuidCounters {
    fn new() -> Self {
        // ibsim: switches from 0x200000, CAs from 0x100000, routers from 0.
        let base = [0x20_0000, 0x10_0000, 0];
        GuidCounters {
            base,
            next: base,
            explicit: [false; 3],
        }
    }
    fn set(&mut self, kind: NodeKind, relative: bool, value: u64) {
        let k = kind.index();
        if relative {
            self.next[k] = self.base[k].wrapping_add(value);
        } else {
            self.base[k] = value;
            self.next[k] = value;
        }
        self.explicit[k] = true;
    }
    fn assign(&mut self, kind: NodeKind, id: &str, nports: PortNum) -> Guid {
        let k = kind.index();
        let guid = if self.explicit[k] {
            self.next[k]
        } else {
            id_guid(id).unwrap_or(self.next[k])
        };
        self.explicit[k] = false;
        let reserved = if kind == NodeKind::Switch {
            1
        } else {
            u64::from(nports) + 1
        };
        self.next[k] = self.next[k].wrapping_add(reserved);
        guid
    }
}

/// The GUID in an ibnetdiscover node id (`S-`, `H-` or `R-` followed by up to 16 hex digits).
fn id_guid(id: &str) -> Option<Guid> {
    let hex = id
        .strip_prefix("S-")
        .or_else(|| id.strip_prefix("H-"))
        .or_else(|| id.strip_prefix("R-"))?;
    parse_hex(hex)
}

/// 1 to 16 hex digits, optionally prefixed with `0x`.
fn parse_hex(s: &str) -> Option<u64> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if h.is_empty() || h.len() > 16 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

/// At most 60 characters of `s`, for messages.
pub(super) fn short(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// Whether a token is a link width and speed as ibnetdiscover prints them (`4xQDR`, `1xSDR`,
/// `12xEDR`, `4xFDR10`, `4x???`).
pub(super) fn is_speed(tok: &str) -> bool {
    let rest = ["12x", "1x", "2x", "4x", "8x"].iter().find_map(|w| tok.strip_prefix(w));
    match rest {
        Some(r) => {
            let mut cs = r.chars();
            matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '?')
                && cs.all(|c| c.is_ascii_alphanumeric() || c == '?')
        }
        None => false,
    }
}

/// Splits `"..."rest` into the quoted text and the rest. `s` must start with `"`.
fn quoted<'a>(s: &'a str, what: &str) -> Result<(&'a str, &'a str), String> {
    let body = &s[1..];
    match body.find('"') {
        Some(e) => Ok((&body[..e], &body[e + 1..])),
        None => Err(format!("unterminated quote in {what}")),
    }
}

/// Parses `[n]` at the start of `s` (a port number 1..=255).
fn bracket_port<'a>(s: &'a str, which: &str) -> Result<(PortNum, &'a str), String> {
    let body = s[1..].trim_start();
    let ndigits = body.len() - body.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let after = body[ndigits..].trim_start();
    if ndigits == 0 {
        let shown = &body[..body.find(']').unwrap_or(body.len())];
        return Err(format!("bad {which} port number `[{}]`", short(shown)));
    }
    let Some(after) = after.strip_prefix(']') else {
        return Err(format!("missing `]` after {which} port number"));
    };
    let digits = &body[..ndigits];
    let n: u32 = digits.parse().unwrap_or(u32::MAX);
    if n == 0 {
        return Err(format!(
            "{which} port 0 is a switch's management port and cannot be cabled"
        ));
    }
    if n > 255 {
        return Err(format!("{which} port number {} out of range 1..=255", short(digits)));
    }
    Ok((n as PortNum, after))
}

/// Skips an optional `[ext N]` (ibnetdiscover -g external port number).
fn skip_ext(s: &str) -> Result<&str, String> {
    match s.strip_prefix("[ext") {
        Some(body) => match body.find(']') {
            Some(e) => Ok(&body[e + 1..]),
            None => Err("missing `]` after `[ext`".to_string()),
        },
        None => Ok(s),
    }
}

/// Parses an optional `(hexguid)` at the start of `s`.
fn opt_guid(s: &str) -> Result<(Option<Guid>, &str), String> {
    let Some(body) = s.strip_prefix('(') else {
        return Ok((None, s));
    };
    let Some(e) = body.find(')') else {
        return Err("missing `)` after port GUID".to_string());
    };
    match parse_hex(body[..e].trim()) {
        Some(g) => Ok((Some(g), &body[e + 1..])),
        None => Err(format!("bad port GUID `({})`", short(&body[..e]))),
    }
}

/// An ibsim port option such as `w=4` or `s=2`.
fn is_option(tok: &str) -> bool {
    match tok.split_once('=') {
        Some((k, _)) => !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphabetic()),
        None => false,
    }
}

/// The last speed token of a port-line comment, ignoring quoted descriptions.
fn comment_speed(comment: &str) -> Option<&str> {
    let mut rest = comment;
    let mut speed = None;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return speed;
        }
        if let Some(q) = rest.strip_prefix('"') {
            match q.find('"') {
                Some(e) => rest = &q[e + 1..],
                // An unbalanced quote in a free-text comment: the rest is description text.
                None => return speed,
            }
            continue;
        }
        let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
        if is_speed(&rest[..end]) {
            speed = Some(&rest[..end]);
        }
        rest = &rest[end..];
    }
}

fn parse_port_line(t: &str, line: usize) -> Result<Line<'_>, String> {
    let (local, rest) = bracket_port(t, "local")?;
    let rest = skip_ext(rest)?.trim_start();
    let (local_guid, rest) = opt_guid(rest)?;
    let rest = rest.trim_start();
    if !rest.starts_with('"') {
        return Err(format!(
            "expected the quoted remote node id after port [{local}], found `{}`",
            short(rest)
        ));
    }
    let (remote_id, rest) = quoted(rest, "remote node id")?;
    if remote_id.is_empty() {
        return Err("empty remote node id".to_string());
    }
    let mut note = None;
    let (remote_port, rest) = if rest.starts_with('[') && !rest.starts_with("[ext") {
        bracket_port(rest, "remote")?
    } else {
        let t = rest.trim_start();
        if t.starts_with('[') && !t.starts_with("[ext") {
            note = Some(NOTE_SPACE);
            bracket_port(t, "remote")?
        } else {
            note = Some(NOTE_MISSING);
            (1, rest)
        }
    };
    let rest = skip_ext(rest)?.trim_start();
    let (remote_guid, mut rest) = opt_guid(rest)?;
    let mut comment = None;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        if let Some(c) = rest.strip_prefix('#') {
            comment = Some(c);
            break;
        }
        let end = rest.find(|c: char| c.is_whitespace() || c == '#').unwrap_or(rest.len());
        if !is_option(&rest[..end]) {
            return Err(format!(
                "unexpected text `{}` after the remote port (expected ibsim options such as `w=4` or a `#` comment)",
                short(&rest[..end])
            ));
        }
        rest = &rest[end..];
    }
    let speed = comment.and_then(comment_speed);
    Ok(Line::Port(
        PortLine {
            line,
            local,
            local_guid,
            remote_id,
            remote_port,
            remote_guid,
            speed,
        },
        note,
    ))
}

fn parse_header(kind: NodeKind, rest: &str) -> Result<Line<'_>, String> {
    let kw = kind.name();
    let rest = rest.trim_start();
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return Err(format!(
            "expected the number of ports after `{kw}`, found `{}`",
            short(rest)
        ));
    }
    let n: u32 = rest[..digits].parse().unwrap_or(u32::MAX);
    if n == 0 || n > 255 {
        return Err(format!(
            "{kw} port count {} out of range 1..=255",
            short(&rest[..digits])
        ));
    }
    let rest = rest[digits..].trim_start();
    if !rest.starts_with('"') {
        return Err(format!(
            "expected the quoted node id after `{kw} {n}`, found `{}`",
            short(rest)
        ));
    }
    let (id, rest) = quoted(rest, "node id")?;
    if id.is_empty() {
        return Err("empty node id".to_string());
    }
    let rest = rest.trim_start();
    let desc = if rest.is_empty() {
        None
    } else if let Some(c) = rest.strip_prefix('#') {
        header_desc(c)?
    } else {
        return Err(format!(
            "unexpected text `{}` after node id (expected `# \"description\"`)",
            short(rest)
        ));
    };
    Ok(Line::Header {
        kind,
        nports: n as PortNum,
        id,
        desc,
    })
}

/// The description in a header comment: the quoted string, else (as ibsim does) the text before
/// ` enhanced port `, ` base port `, ` lid ` or ` lmc `.
fn header_desc(comment: &str) -> Result<Option<&str>, String> {
    let c = comment.trim_start();
    if c.starts_with('"') {
        let (d, _) = quoted(c, "node description")?;
        return Ok(Some(d));
    }
    let cut = [" enhanced port ", " base port ", " lid ", " lmc "]
        .iter()
        .filter_map(|m| c.find(m))
        .min();
    let d = c[..cut.unwrap_or(c.len())].trim_end();
    Ok((!d.is_empty()).then_some(d))
}

/// `switchguid=0x..(..)`, `caguid=0x..`, ibsim's `switchguid+0x10` (relative to the last base).
fn parse_guid_base<'a>(kind: NodeKind, kw: &str, rest: &'a str) -> Result<Line<'a>, String> {
    let (relative, val) = if let Some(v) = rest.strip_prefix('=') {
        (false, v)
    } else if let Some(v) = rest.strip_prefix('+') {
        (true, v)
    } else {
        return Err(format!("expected `=` after `{kw}`"));
    };
    let val = val.trim_start();
    let (digits, radix) = match val.strip_prefix("0x").or_else(|| val.strip_prefix("0X")) {
        Some(h) => (
            &h[..h.len() - h.trim_start_matches(|c: char| c.is_ascii_hexdigit()).len()],
            16,
        ),
        None => (
            &val[..val.len() - val.trim_start_matches(|c: char| c.is_ascii_digit()).len()],
            10,
        ),
    };
    match u64::from_str_radix(digits, radix) {
        Ok(value) if !digits.is_empty() => Ok(Line::GuidBase { kind, relative, value }),
        _ => Err(format!("bad GUID value `{}` after `{kw}`", short(val))),
    }
}

fn classify(t: &str, line: usize) -> Result<Line<'_>, String> {
    if t.trim_end().is_empty() {
        return Ok(Line::Blank);
    }
    if t.starts_with('#') {
        return Ok(Line::Comment);
    }
    if t.starts_with('[') {
        return parse_port_line(t, line);
    }
    if t.starts_with('@') {
        return Err("ibsim port aliases (`@...`) are not supported".to_string());
    }
    let word = t.split(char::is_whitespace).next().unwrap_or(t);
    let kw = &word[..word.find(['=', '+']).unwrap_or(word.len())];
    let rest = &t[kw.len()..];
    match kw {
        "Switch" => parse_header(NodeKind::Switch, rest),
        "Ca" | "Hca" => parse_header(NodeKind::Ca, rest),
        "Rt" => parse_header(NodeKind::Rt, rest),
        "switchguid" => parse_guid_base(NodeKind::Switch, kw, rest.trim_start()),
        "caguid" | "hcaguids" => parse_guid_base(NodeKind::Ca, kw, rest.trim_start()),
        "rtguid" => parse_guid_base(NodeKind::Rt, kw, rest.trim_start()),
        "vendid" | "devid" | "sysimgguid" | "width" | "speed" | "speedext" | "pdebug" => {
            if rest.trim_start().starts_with('=') {
                Ok(Line::Setting)
            } else {
                Err(format!("expected `=` after `{kw}`"))
            }
        }
        "Chassis" | "Non-Chassis" | "Hostname:" => Ok(Line::Grouping),
        "do" => Ok(Line::Console),
        "include" => Err("`include` lines are not supported: merge the included file into this one".to_string()),
        "module" => Err("ibsim `module` node-id prefixes are not supported".to_string()),
        _ => Ok(Line::Unknown(word)),
    }
}

/// Reads all records. Errors stop at the first malformed line (in file order).
pub(super) fn read_records<'a>(text: &'a str, file: &str) -> Result<(Vec<Record<'a>>, Vec<Warning>), ParseError> {
    let mut records: Vec<Record<'a>> = Vec::new();
    let mut warnings = Vec::new();
    // Whether the last record still takes port lines (no blank or other line since its header).
    let mut open = false;
    // Port lines ibsim would still read for the open record; ibsim consumes (and so loses) the
    // first non-port line that follows a record with fewer port lines than ports.
    let mut ibsim_pending: u32 = 0;
    let mut guids = GuidCounters::new();
    for (i, raw) in text.split('\n').enumerate() {
        let lineno = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let t = line.trim_start();
        let cls = classify(t, lineno).map_err(|r| ParseError::new(file, lineno, r))?;
        match cls {
            Line::Comment => continue,
            Line::Port(..) => {}
            Line::Header { .. } | Line::GuidBase { .. } if ibsim_pending > 0 => {
                warnings.push(Warning {
                    line: lineno,
                    message: "no blank line before this line: ibsim would take it as the end of the previous record \
                              and skip it"
                        .to_string(),
                });
                ibsim_pending = 0;
            }
            _ => ibsim_pending = 0,
        }
        match cls {
            Line::Blank | Line::Setting | Line::Grouping | Line::GuidBase { .. } | Line::Console => {
                open = false;
                match cls {
                    Line::GuidBase { kind, relative, value } => guids.set(kind, relative, value),
                    Line::Console => warnings.push(Warning {
                        line: lineno,
                        message: "ibsim console command ignored".to_string(),
                    }),
                    _ => {}
                }
            }
            Line::Comment => {}
            Line::Header { kind, nports, id, desc } => {
                let guid = guids.assign(kind, id, nports);
                let desc = match desc {
                    Some(d) if !d.is_empty() => d,
                    _ => id,
                };
                records.push(Record {
                    kind,
                    line: lineno,
                    nports,
                    id,
                    desc,
                    guid,
                    ports: Vec::new(),
                });
                open = true;
                ibsim_pending = u32::from(nports);
            }
            Line::Port(pl, note) => {
                let rec = match records.last_mut() {
                    Some(r) if open => r,
                    Some(_) => {
                        return Err(ParseError::new(
                            file,
                            lineno,
                            "port line outside a node record (a blank or other line ended the previous record)",
                        ))
                    }
                    None => return Err(ParseError::new(file, lineno, "port line before the first node record")),
                };
                if pl.local > rec.nports {
                    return Err(ParseError::new(
                        file,
                        lineno,
                        format!(
                            "port [{}] out of range: {} \"{}\" has {} ports",
                            pl.local,
                            rec.kind.name(),
                            rec.id,
                            rec.nports
                        ),
                    ));
                }
                if let Some(first) = rec.ports.iter().find(|p| p.local == pl.local) {
                    return Err(ParseError::new(
                        file,
                        lineno,
                        format!(
                            "port [{}] of {} \"{}\" listed twice (first at line {})",
                            pl.local,
                            rec.kind.name(),
                            rec.id,
                            first.line
                        ),
                    ));
                }
                if let Some(n) = note {
                    warnings.push(Warning {
                        line: lineno,
                        message: n.to_string(),
                    });
                }
                rec.ports.push(pl);
                ibsim_pending = ibsim_pending.saturating_sub(1);
            }
            Line::Unknown(word) => {
                match records.last() {
                    None => warnings.push(Warning {
                        line: lineno,
                        message: format!(
                            "ignored unrecognised line before the first node record: `{}`",
                            short(line)
                        ),
                    }),
                    Some(r) if open => {
                        return Err(ParseError::new(
                            file,
                            lineno,
                            format!(
                                "unknown keyword `{}` inside {} record \"{}\" (expected a port line \
                                 `[n] \"remote\"[m]`, a `#` comment or a blank line)",
                                short(word),
                                r.kind.name(),
                                r.id
                            ),
                        ))
                    }
                    Some(_) => {
                        return Err(ParseError::new(
                            file,
                            lineno,
                            format!("unknown keyword `{}`", short(word)),
                        ))
                    }
                }
                open = false;
            }
        }
    }
    Ok((records, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(t: &str) -> PortLine<'_> {
        match classify(t, 7).unwrap() {
            Line::Port(p, None) => p,
            other => panic!("not a clean port line: {other:?}"),
        }
    }

    #[test]
    fn switch_port_line_forms() {
        let p = port("[21]\t\"S-f4521403007ea570\"[26]\t\t# \"MF0;ib8:SX6036/U1\" lid 1 4xFDR10");
        assert_eq!(
            (p.local, p.remote_id, p.remote_port, p.speed),
            (21, "S-f4521403007ea570", 26, Some("4xFDR10"))
        );
        assert_eq!((p.local_guid, p.remote_guid, p.line), (None, None, 7));
        let p = port("[2]\t\"H-24be05ffff981d60\"[2](24be05ffff981d62) \t\t# \"rocket mlx4_0\" lid 133 4xQDR");
        assert_eq!((p.remote_port, p.remote_guid), (2, Some(0x24be05ffff981d62)));
        // Single spaces, as in the collapsed UFM capture.
        let p = port("[35] \"H-0002c903003421b0\"[2](2c903003421b2) # \"r-ufm111 HCA-1\" lid 3 4xFDR");
        assert_eq!(
            (p.local, p.remote_port, p.remote_guid, p.speed),
            (35, 2, Some(0x2c903003421b2), Some("4xFDR"))
        );
        // ibsim style, no comment, with a width option.
        let p = port("[3]\t\"Switch2\"[3]\tw=12");
        assert_eq!((p.remote_id, p.remote_port, p.speed), ("Switch2", 3, None));
        // ibnetdiscover -g external port numbers.
        let p = port("[3][ext 5]\t\"S-01\"[7][ext 2]\t\t# \"x\" lid 3 4xEDR");
        assert_eq!((p.local, p.remote_port), (3, 7));
    }

    #[test]
    fn ca_port_line_forms() {
        let p = port(
            "[1](24be05ffff985d91) \t\"S-f4521403001165a0\"[32]\t\t# lid 121 lmc 0 \"MF0;ib5:SX6036/U1\" lid 128 4xQDR",
        );
        assert_eq!(p.local_guid, Some(0x24be05ffff985d91));
        assert_eq!((p.local, p.remote_port, p.speed), (1, 32, Some("4xQDR")));
        // A speed-like token inside a quoted description is not the speed.
        let p = port("[1](1) \"S-1\"[2] # lid 1 lmc 0 \"4xEDR box\" lid 2 4xSDR");
        assert_eq!(p.speed, Some("4xSDR"));
        let p = port("[1](1) \"S-1\"[2] # lid 1 lmc 0 \"4xEDR box\"");
        assert_eq!(p.speed, None);
    }

    #[test]
    fn remote_port_notes() {
        match classify("[1] \"Sw\" [3]", 1).unwrap() {
            Line::Port(p, Some(n)) => assert_eq!((p.remote_port, n), (3, NOTE_SPACE)),
            other => panic!("{other:?}"),
        }
        match classify("[1] \"Sw\"", 1).unwrap() {
            Line::Port(p, Some(n)) => assert_eq!((p.remote_port, n), (1, NOTE_MISSING)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn port_line_errors() {
        let e = |t: &str| classify(t, 1).unwrap_err();
        assert_eq!(e("[x] \"a\"[1]"), "bad local port number `[x]`");
        assert_eq!(
            e("[0] \"a\"[1]"),
            "local port 0 is a switch's management port and cannot be cabled"
        );
        assert_eq!(e("[256] \"a\"[1]"), "local port number 256 out of range 1..=255");
        assert_eq!(
            e("[99999999999999999999] \"a\"[1]"),
            "local port number 99999999999999999999 out of range 1..=255"
        );
        assert_eq!(e("[1 \"a\"[1]"), "missing `]` after local port number");
        assert_eq!(e("[1] \"a[1]"), "unterminated quote in remote node id");
        assert_eq!(e("[1] \"\"[1]"), "empty remote node id");
        assert_eq!(
            e("[1] \"a\"[0]"),
            "remote port 0 is a switch's management port and cannot be cabled"
        );
        assert_eq!(e("[1](xyz) \"a\"[1]"), "bad port GUID `(xyz)`");
        assert_eq!(
            e("[1] a[1]"),
            "expected the quoted remote node id after port [1], found `a[1]`"
        );
        assert!(e("[1] \"a\"[1] junk # c").starts_with("unexpected text `junk`"));
    }

    #[test]
    fn header_forms_and_errors() {
        match classify(
            "Switch\t36 \"S-e41d2d030003e470\"\t\t# \"SwitchIB Mellanox Technologies\" base port 0 lid 268 lmc 0",
            1,
        ) {
            Ok(Line::Header { kind, nports, id, desc }) => {
                assert_eq!(
                    (kind, nports, id, desc),
                    (
                        NodeKind::Switch,
                        36,
                        "S-e41d2d030003e470",
                        Some("SwitchIB Mellanox Technologies")
                    )
                );
            }
            other => panic!("{other:?}"),
        }
        match classify("Hca\t2 \"Hca1\"", 1) {
            Ok(Line::Header { kind, nports, desc, .. }) => assert_eq!((kind, nports, desc), (NodeKind::Ca, 2, None)),
            other => panic!("{other:?}"),
        }
        match classify("Switch 24 \"sw\" # ISR9024 Voltaire enhanced port 0 lid 1 lmc 0", 1) {
            Ok(Line::Header { desc, .. }) => assert_eq!(desc, Some("ISR9024 Voltaire")),
            other => panic!("{other:?}"),
        }
        let e = |t: &str| classify(t, 1).unwrap_err();
        assert_eq!(
            e("Switch \"a\""),
            "expected the number of ports after `Switch`, found `\"a\"`"
        );
        assert_eq!(e("Switch 0 \"a\""), "Switch port count 0 out of range 1..=255");
        assert_eq!(e("Ca 300 \"a\""), "Ca port count 300 out of range 1..=255");
        assert_eq!(e("Switch 8 \"a"), "unterminated quote in node id");
        assert_eq!(e("Switch 8 \"a\" # \"desc"), "unterminated quote in node description");
        assert_eq!(
            e("Switch 8 a"),
            "expected the quoted node id after `Switch 8`, found `a`"
        );
        assert!(e("Switch 8 \"a\" extra").starts_with("unexpected text `extra` after node id"));
    }

    #[test]
    fn guid_lines() {
        match classify("switchguid=0xe41d2d030003e470(e41d2d030003e470)", 1) {
            Ok(Line::GuidBase { kind, relative, value }) => {
                assert_eq!((kind, relative, value), (NodeKind::Switch, false, 0xe41d2d030003e470));
            }
            other => panic!("{other:?}"),
        }
        match classify("switchguid+0x7", 1) {
            Ok(Line::GuidBase { relative, value, .. }) => assert_eq!((relative, value), (true, 7)),
            other => panic!("{other:?}"),
        }
        match classify("caguid=1234", 1) {
            Ok(Line::GuidBase { kind, value, .. }) => assert_eq!((kind, value), (NodeKind::Ca, 1234)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            classify("caguid=zz", 1).unwrap_err(),
            "bad GUID value `zz` after `caguid`"
        );
        assert_eq!(classify("caguid 0x1", 1).unwrap_err(), "expected `=` after `caguid`");
        assert_eq!(
            classify("caguid=0x11112222333344445", 1).unwrap_err(),
            "bad GUID value `0x11112222333344445` after `caguid`"
        );
    }

    #[test]
    fn guid_counters_follow_ibsim() {
        // Values observed from ibsim 0.10 + ibnetdiscover on an ibsim-style file.
        let mut g = GuidCounters::new();
        assert_eq!(g.assign(NodeKind::Switch, "SwA", 8), 0x200000);
        g.set(NodeKind::Switch, true, 7);
        assert_eq!(g.assign(NodeKind::Switch, "SwB", 8), 0x200007);
        assert_eq!(g.assign(NodeKind::Switch, "SwC", 8), 0x200008);
        assert_eq!(g.assign(NodeKind::Ca, "Ca1", 3), 0x100000);
        assert_eq!(g.assign(NodeKind::Ca, "Ca2", 2), 0x100004);
        assert_eq!(g.assign(NodeKind::Rt, "Rt1", 1), 0);
        // ibnetdiscover ids carry the GUID; an explicit guid line wins over it.
        assert_eq!(g.assign(NodeKind::Switch, "S-00000000000000ab", 8), 0xab);
        g.set(NodeKind::Ca, false, 0x500);
        assert_eq!(g.assign(NodeKind::Ca, "H-00000000000000cd", 1), 0x500);
        assert_eq!(g.assign(NodeKind::Ca, "H-00000000000000cd", 1), 0xcd);
    }

    #[test]
    fn speed_tokens() {
        for ok in ["4xQDR", "1xSDR", "12xEDR", "4xFDR10", "4x???", "2xHDR", "8xNDR"] {
            assert!(is_speed(ok), "{ok}");
        }
        for bad in ["0x2c9", "4x", "x4QDR", "3xQDR", "4xQ-R", "lid", "s=2"] {
            assert!(!is_speed(bad), "{bad}");
        }
    }
}
