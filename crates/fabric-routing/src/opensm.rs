//! OpenSM's `opensm-lfts.dump` format (as written by `osm_dump.c`, and read back by OpenSM's
//! `file` routing engine):
//!
//! ```text
//! Unicast lids [0-<maxlid>] of switch Lid <swlid> guid 0x<16 hex> ('<nodedesc>'):
//! 0x<lid, 4 hex> <port, 3 digits> # <Channel Adapter|Switch> portguid 0x<16 hex>: '<nodedesc>'
//! ...
//! <maxlid> lids dumped
//! ```
//!
//! One section per switch (ascending GUID, as OpenSM's switch table), LIDs without a route
//! omitted, port 0 = the switch itself. OpenSM prints the highest LID on the last line, not the
//! number of lines. The reader also accepts `ibroute`'s variant (`0x0-0x..` ranges,
//! `: (...)` comments, `N valid lids dumped`).

use fabric_topology::{fmt_guid, parse_guid, Fabric, Guid, Lid, PortNum};

use crate::lft::{Lfts, NO_ROUTE};

mod write;

pub use write::{write_opensm_lfts, write_opensm_lfts_to, OpensmLftWriter, FLUSH_BYTES};

/// Errors of [`parse_opensm_lfts`] and [`OpensmLfts::to_lfts`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LftDumpError {
    #[error("{file}:{line}: {message}")]
    /// A malformed line (file name, 1-based line, what).
    Parse { file: String, line: usize, message: String },
    /// A switch section names a GUID that the fabric does not have.
    #[error("{file}:{line}: switch {} is not in the fabric", fmt_guid(*.guid))]
    UnknownSwitch { file: String, line: usize, guid: Guid },
    #[error("{file}:{line}: switch {} has no port {port}", fmt_guid(*.guid))]
    /// An entry names a port the switch does not have.
    PortOutOfRange {
        file: String,
        line: usize,
        guid: Guid,
        port: PortNum,
    },
    /// A header range or an entry names a LID above the highest one the tables may hold.
    #[error("{file}:{line}: LID {lid} is above the highest LID {max:#x} of these tables{hint}")]
    LidOutOfRange {
        file: String,
        line: usize,
        lid: u64,
        max: Lid,
        hint: &'static str,
    },
}

/// Highest LID a dump may name: the widest LID space of any driver (`oob`, 24 bits). InfiniBand
/// dumps stay within 16 bits; [`OpensmLfts::to_lfts`] bounds them further by the caller's limit.
pub const MAX_DUMP_LID: Lid = 0xFF_FFFF;

/// The LFT of one switch as read from a dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchLftDump {
    /// Node GUID of the switch.
    pub guid: Guid,
    /// Its LID (0 when the header has none, as in some `ibroute` outputs).
    pub lid: Lid,
    /// Node description from the header.
    pub desc: String,
    /// Highest LID of the header's range.
    pub max_lid: Lid,
    /// (LID, port) in file order.
    pub entries: Vec<(Lid, PortNum)>,
    /// Line of the header (for errors).
    pub line: usize,
}

/// A parsed `opensm-lfts.dump`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OpensmLfts {
    /// Name of the dump (for errors).
    pub source: String,
    /// Switch sections in file order.
    pub switches: Vec<SwitchLftDump>,
}

fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Longest line [`read_opensm_lfts`] accepts (a dump line is ~100 bytes; a file without line
/// breaks is refused, not read whole).
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Parses an `opensm-lfts.dump` (or `ibroute` output). `source` names it in errors.
pub fn parse_opensm_lfts(text: &str, source: &str) -> Result<OpensmLfts, LftDumpError> {
    read_opensm_lfts(text.as_bytes(), source)
}

/// Parses an `opensm-lfts.dump` (or `ibroute` output) line by line from `r`: a dump of many
/// gigabytes is never held whole (the result keeps 8 bytes per entry). `source` names it in
/// errors; a read error or a line that is not UTF-8 is a [`LftDumpError::Parse`] of its line.
pub fn read_opensm_lfts<R: std::io::BufRead>(mut r: R, source: &str) -> Result<OpensmLfts, LftDumpError> {
    use std::io::{BufRead as _, Read as _};
    let mut out = OpensmLfts {
        source: source.to_string(),
        switches: Vec::new(),
    };
    let mut buf = Vec::new();
    let mut line = 0;
    loop {
        line += 1;
        buf.clear();
        let n = (&mut r)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| LftDumpError::Parse {
                file: source.to_string(),
                line,
                message: format!("cannot read: {e}"),
            })?;
        if n == 0 {
            return Ok(out);
        }
        if n > MAX_LINE_BYTES {
            return Err(LftDumpError::Parse {
                file: source.to_string(),
                line,
                message: format!("line longer than {MAX_LINE_BYTES} bytes"),
            });
        }
        let l = std::str::from_utf8(&buf).map_err(|e| LftDumpError::Parse {
            file: source.to_string(),
            line,
            message: format!("invalid UTF-8 text: {e}"),
        })?;
        parse_line(&mut out, line, l)?;
    }
}

/// One line of a dump into `out`.
fn parse_line(out: &mut OpensmLfts, line: usize, raw: &str) -> Result<(), LftDumpError> {
    let source = out.source.as_str();
    let err = |line: usize, message: String| LftDumpError::Parse {
        file: source.to_string(),
        line,
        message,
    };
    let check_lid = |lid: u64, line: usize| {
        if lid > u64::from(MAX_DUMP_LID) {
            Err(LftDumpError::LidOutOfRange {
                file: source.to_string(),
                line,
                lid,
                max: MAX_DUMP_LID,
                hint: "",
            })
        } else {
            Ok(())
        }
    };
    let l = raw.trim();
    if l.is_empty() || l.ends_with("lids dumped") || l.starts_with("Lid") || l.starts_with("Port") {
        return Ok(());
    }
    if let Some(rest) = l.strip_prefix("Unicast lids [") {
        let bad = || err(line, format!("malformed switch header `{l}`"));
        let (range, rest) = rest.split_once(']').ok_or_else(bad)?;
        let (_, hi) = range.split_once('-').ok_or_else(bad)?;
        let max_lid = parse_num(hi.trim()).ok_or_else(bad)?;
        check_lid(max_lid, line)?;
        let rest = rest.trim_start().strip_prefix("of switch ").ok_or_else(bad)?;
        let (lid, rest) = match rest.strip_prefix("Lid ") {
            Some(r) => {
                let (n, r) = r.split_once(' ').ok_or_else(bad)?;
                (parse_num(n).ok_or_else(bad)?, r)
            }
            None => (0, rest),
        };
        let gpos = rest.find("guid ").ok_or_else(bad)?;
        let rest = &rest[gpos + 5..];
        let (g, rest) = rest.split_once(' ').ok_or_else(bad)?;
        let guid = parse_guid(g).ok_or_else(bad)?;
        let desc = rest
            .trim()
            .trim_end_matches(':')
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')');
        let desc = desc
            .strip_prefix('\'')
            .and_then(|d| d.strip_suffix('\''))
            .unwrap_or(desc);
        out.switches.push(SwitchLftDump {
            guid,
            lid: u32::try_from(lid).map_err(|_| bad())?,
            desc: desc.to_string(),
            max_lid: u32::try_from(max_lid).map_err(|_| bad())?,
            entries: Vec::new(),
            line,
        });
        return Ok(());
    }
    let bad = || err(line, format!("expected `0xLID PORT # ...`, found `{l}`"));
    let mut it = l.split_whitespace();
    let lid = it
        .next()
        .filter(|t| t.starts_with("0x"))
        .and_then(parse_num)
        .ok_or_else(bad)?;
    let port = it.next().and_then(|t| t.parse::<u16>().ok()).ok_or_else(bad)?;
    check_lid(lid, line)?;
    let lid = u32::try_from(lid).map_err(|_| bad())?;
    let port = u8::try_from(port).ok().filter(|&p| p != NO_ROUTE).ok_or_else(bad)?;
    let sw = out
        .switches
        .last_mut()
        .ok_or_else(|| err(line, "LFT entry before any switch header".into()))?;
    sw.entries.push((lid, port));
    Ok(())
}

impl OpensmLfts {
    /// The tables as [`Lfts`] for `fabric` (switches by GUID; switches absent from the dump get
    /// all-`NO_ROUTE` rows). Covers LIDs up to the highest LID of any header or entry, which must
    /// not exceed `max_lid` (the tables take `switches × (max_lid + 1)` bytes): an error names the
    /// line that goes beyond.
    pub fn to_lfts(&self, fabric: &Fabric, max_lid: Lid) -> Result<Lfts, LftDumpError> {
        let mut top = 0;
        for s in &self.switches {
            if s.max_lid > max_lid {
                return Err(self.out_of_range(s.line, s.max_lid, max_lid));
            }
            top = top.max(s.max_lid);
            for &(lid, _) in &s.entries {
                if lid > max_lid {
                    return Err(self.out_of_range(s.line, lid, max_lid));
                }
                top = top.max(lid);
            }
        }
        let mut lfts = Lfts::new(fabric.num_switches(), top);
        for s in &self.switches {
            let id = fabric
                .switch_by_guid(s.guid)
                .ok_or_else(|| LftDumpError::UnknownSwitch {
                    file: self.source.clone(),
                    line: s.line,
                    guid: s.guid,
                })?;
            let nports = fabric.switch(id).nports;
            for &(lid, port) in &s.entries {
                if port > nports {
                    return Err(LftDumpError::PortOutOfRange {
                        file: self.source.clone(),
                        line: s.line,
                        guid: s.guid,
                        port,
                    });
                }
                lfts.set(id, lid, port);
            }
        }
        Ok(lfts)
    }

    fn out_of_range(&self, line: usize, lid: Lid, max: Lid) -> LftDumpError {
        LftDumpError::LidOutOfRange {
            file: self.source.clone(),
            line,
            lid: u64::from(lid),
            max,
            hint: " (raise the highest LID if the fabric really uses it)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::{EngineKind, IB_MAX_UNICAST_LID};
    use fabric_topology::SwitchId;

    #[test]
    fn dump_matches_opensm_layout_and_reads_back() {
        let t = pgft(&[2, 2], &[1, 2], &[1, 1]);
        let f = &t.fabric;
        let (_, lids, lfts) = routed(f, EngineKind::Dmodc, 1);
        let text = write_opensm_lfts(f, &lids, &lfts);
        let lines: Vec<&str> = text.lines().collect();
        // 4 switches: header + footer each; leaves route all 4 × 2 end-port LIDs and 4 switch
        // LIDs; a spine cannot reach the other spine up*-down* (that LID is omitted).
        assert_eq!(lines.len(), 4 * 2 + 12 + 12 + 11 + 11);
        let sw0 = f.switch(SwitchId(0));
        assert_eq!(
            lines[0],
            format!(
                "Unicast lids [0-{}] of switch Lid {} guid {} ('{}'):",
                lids.top(),
                lids.switch_lid(SwitchId(0)),
                fmt_guid(sw0.guid),
                sw0.desc
            )
        );
        // LID 1 is switch 0 itself: port 0.
        assert_eq!(
            lines[1],
            format!("0x0001 000 # Switch portguid {}: '{}'", fmt_guid(sw0.guid), sw0.desc)
        );
        let e0 = f.end_port(fabric_topology::EndPortId(0));
        assert_eq!(
            lines[2],
            format!(
                "0x0002 {:03} # Channel Adapter portguid {}: '{}'",
                e0.attach.unwrap().1,
                fmt_guid(e0.port_guid),
                e0.desc
            )
        );
        assert_eq!(lines[13], format!("{} lids dumped", lids.top()));
        let parsed = parse_opensm_lfts(&text, "dump").unwrap();
        assert_eq!(parsed.switches.len(), 4);
        assert_eq!(parsed.switches[0].desc, sw0.desc);
        let back = parsed.to_lfts(f, IB_MAX_UNICAST_LID).unwrap();
        assert_eq!(back, lfts);
    }

    #[test]
    fn reads_from_a_reader_line_by_line() {
        let t = pgft(&[2, 2], &[1, 2], &[1, 1]);
        let (_, lids, lfts) = routed(&t.fabric, EngineKind::Dmodc, 1);
        let text = write_opensm_lfts(&t.fabric, &lids, &lfts);
        // A tiny buffer: lines span many reads.
        let r = std::io::BufReader::with_capacity(7, text.as_bytes());
        assert_eq!(
            read_opensm_lfts(r, "d").unwrap(),
            parse_opensm_lfts(&text, "d").unwrap()
        );
        let bad = b"Unicast lids [0-3] of switch Lid 1 guid 0x1 ('a'):\n0x0002 001 # \xff\n";
        let e = read_opensm_lfts(&bad[..], "r").unwrap_err();
        assert!(e.to_string().starts_with("r:2: invalid UTF-8 text"), "{e}");
        let long = format!("\n{}", "x".repeat(MAX_LINE_BYTES + 1));
        let e = read_opensm_lfts(long.as_bytes(), "r").unwrap_err();
        assert_eq!(e.to_string(), format!("r:2: line longer than {MAX_LINE_BYTES} bytes"));
    }

    #[test]
    fn reads_ibroute_style_and_reports_errors() {
        let text = "Unicast lids [0x0-0x8] of switch Lid 1 guid 0x0000000100000000 (sw-L1-0):\n  Lid  Out   Destination\n       Port     Info \n0x0001 000 : (Switch portguid 0x0000000100000000: 'sw-L1-0')\n0x0002 003 : (Channel Adapter portguid 0x00000000e0000001: 'n0')\n2 valid lids dumped \n";
        let p = parse_opensm_lfts(text, "r").unwrap();
        assert_eq!(p.switches[0].guid, 0x1_0000_0000);
        assert_eq!(p.switches[0].entries, vec![(1, 0), (2, 3)]);
        assert_eq!(p.switches[0].max_lid, 8);
        let e = parse_opensm_lfts("0x0001 001 # x\n", "r").unwrap_err();
        assert_eq!(e.to_string(), "r:1: LFT entry before any switch header");
        let e = parse_opensm_lfts("Unicast lids [0-3] of switch Lid 1 guid 0x1 ('a'):\n0x0002 abc\n", "r").unwrap_err();
        assert!(matches!(e, LftDumpError::Parse { line: 2, .. }), "{e}");
        let t = pgft(&[2, 2], &[1, 2], &[1, 1]);
        let e = parse_opensm_lfts(
            "Unicast lids [0-3] of switch Lid 1 guid 0x77 ('a'):\n0x0002 001 # x\n",
            "r",
        )
        .unwrap()
        .to_lfts(&t.fabric, IB_MAX_UNICAST_LID)
        .unwrap_err();
        assert_eq!(e.to_string(), "r:1: switch 0x0000000000000077 is not in the fabric");
        // LIDs beyond any address space are refused by the reader, on their line; beyond the
        // caller's highest LID by to_lfts (the tables are never allocated).
        let e = parse_opensm_lfts("\nUnicast lids [0-4294967295] of switch Lid 1 guid 0x1 ('a'):\n", "r").unwrap_err();
        assert_eq!(
            e.to_string(),
            "r:2: LID 4294967295 is above the highest LID 0xffffff of these tables"
        );
        let e = parse_opensm_lfts(
            "Unicast lids [0-3] of switch Lid 1 guid 0x1 ('a'):\n0x1000000 001 # x\n",
            "r",
        )
        .unwrap_err();
        assert!(matches!(e, LftDumpError::LidOutOfRange { line: 2, .. }), "{e}");
        let sw = fmt_guid(t.fabric.switch(SwitchId(0)).guid);
        let dump = parse_opensm_lfts(
            &format!("Unicast lids [0-0xc000] of switch Lid 1 guid {sw} ('a'):\n0x0002 001 # x\n"),
            "r",
        )
        .unwrap();
        let e = dump.to_lfts(&t.fabric, IB_MAX_UNICAST_LID).unwrap_err();
        assert!(
            matches!(
                e,
                LftDumpError::LidOutOfRange {
                    line: 1,
                    lid: 0xc000,
                    ..
                }
            ),
            "{e}"
        );
        assert!(dump.to_lfts(&t.fabric, 0xFFFF).is_ok());
    }
}
