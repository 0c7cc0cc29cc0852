//! ibnetdiscover / ibsim topology text format (reader and writer).
//!
//! This is the text that `ibnetdiscover` prints and that the `ibsim` simulator loads: a sequence of
//! node records, each a header line followed by one line per cabled port (ibnetdiscover separates
//! fields with tabs, shown here as spaces).
//!
//! ```text
//! vendid=0x2c9
//! devid=0xc738
//! sysimgguid=0xf4521403005764b0
//! switchguid=0xf4521403005764b0(f4521403005764b0)
//! Switch 12 "S-f4521403005764b0"  # "MF0;switch-de779e:SX6012/U1" enhanced port 0 lid 174 lmc 0
//! [1] "S-e41d2d030003e470"[3]  # "SwitchIB Mellanox Technologies" lid 268 4xFDR
//! [2] "H-0002c9030004e938"[1](2c9030004e939)   # "r-ufm101 HCA-1" lid 27 4xQDR
//!
//! caguid=0x2c9030004e938
//! Ca 1 "H-0002c9030004e938"  # "r-ufm101 HCA-1"
//! [1](2c9030004e939)  "S-f4521403005764b0"[2]  # lid 27 lmc 0 "MF0;switch-de779e:SX6012/U1" lid 174 4xQDR
//! ```
//!
//! # What the reader accepts
//!
//! * Record headers `Switch N "id"`, `Ca N "id"` (also `Hca`, ibsim's spelling) and `Rt N "id"`
//!   (router), `N` = number of ports (1..=255), optionally followed by a `# ...` comment whose quoted
//!   string (or, unquoted, the text before ` enhanced port ` / ` base port ` / ` lid ` / ` lmc `) is
//!   the node description. Without one, the description is the node id.
//! * Port lines `[n]` (optionally `[n][ext m]` and, on CA/router records, `(portguid)`), the quoted
//!   remote node id, `[m]` (remote port; optionally `(portguid)` when the remote is a CA), ibsim
//!   options such as `w=4`, and a `# ...` comment whose last `<width>x<speed>` token (`4xQDR`,
//!   `4xFDR10`, `12xEDR`, ...) is stored as the switch port's [`Port::speed`](crate::Port::speed).
//! * `switchguid=` / `caguid=` / `hcaguids=` / `rtguid=` lines (`=value` or ibsim's relative
//!   `+offset`), `vendid=` / `devid=` / `sysimgguid=` lines, `# ...` comments, blank lines or no
//!   blank lines between records, tabs or spaces, CRLF line ends, and the `Chassis` /
//!   `Non-Chassis Nodes` / `Hostname:` lines of `ibnetdiscover -g`.
//! * Unrecognised text before the first node record (such as libibmad's
//!   `src/query_smp.c:195; umad (DR path ...) bad status 110` error line) is skipped with a warning.
//! * Also warned about, because ibsim would read them differently: a record header or guid line
//!   right after a record's port lines without a blank line (ibsim swallows that line), a space
//!   between the remote id and its `[m]` and a missing `[m]` (ibsim reads both as remote port 1;
//!   this reader takes the written number, or 1 when there is none). ibsim's `do` console lines are
//!   ignored with a warning; its `include`, `module` and `@alias` extensions are errors.
//!
//! # Node and port GUIDs
//!
//! A node's GUID is, in this order: the value of the `switchguid=` / `caguid=` / `rtguid=` line
//! that precedes its record; else the hexadecimal digits of an id written the way
//! `ibnetdiscover` writes them (`"S-<hex>"`, `"H-<hex>"`, `"R-<hex>"`); else the GUID that ibsim
//! itself would assign: ibsim numbers switches from 0x200000 (one GUID each), CAs from 0x100000 and
//! routers from 0 (`ports + 1` GUIDs each), and a guid line resets the counter of its node type.
//! This makes the model of an ibsim net file such as `net-examples/net` carry the very GUIDs that
//! discovery under ibsim reports. A switch port has no GUID of its own. A CA port's GUID is the
//! `(guid)` after its local `[n]`, else the `(guid)` given on the switch side of the cable, else node
//! GUID + port number (the ibsim convention).
//!
//! # The model that comes out
//!
//! Switch ids follow the order of the `Switch` records. End ports ([`EndPortId`](crate::EndPortId))
//! follow the *global end-node order*: order of the `Ca`/`Hca`/`Rt` records in the file, then port
//! number. Only cabled CA ports become end ports. `Ca` ports are
//! [`NodeType::Compute`](crate::NodeType::Compute), router ports
//! [`NodeType::Other`](crate::NodeType::Other) (roles such as I/O come from GUID files, not from
//! this format). Every cable is recorded once even though it appears in the records of both of its
//! ends; a link written on only one side is kept with a warning; two records that disagree about a
//! cable are an error. Self-looped cables (a switch port cabled to another port of the same switch)
//! are kept in
//! the model with a warning. Direct CA-to-CA cables (no switch) are skipped with a warning.
//!
//! # Errors
//!
//! Malformed input gives a [`ParseError`] with the file name, the 1-based line and the reason;
//! the reader never panics, whatever the input.
//!
//! **Architecture invariant:** [`parse`] and [`write()`] do no I/O; only [`read_file`] touches the
//! file system.

mod build;
mod error;
mod lex;
mod write;

use std::path::Path;

use crate::model::Fabric;

pub use error::ParseError;
pub use write::write;

/// A topology file read into the model, with the oddities that were tolerated.
#[derive(Clone, Debug)]
pub struct ParsedTopology {
    /// The fabric (generation 0).
    pub fabric: Fabric,
    /// One message per tolerated oddity, in line order, each prefixed with `file:line:` (non-reciprocal link
    /// records, self-looped cables, skipped CA-to-CA cables, garbage before the first record, ...).
    pub warnings: Vec<String>,
}

/// Reads ibnetdiscover / ibsim topology text. `source_name` only labels errors and warnings.
///
/// See the [module documentation](self) for the accepted syntax and how GUIDs, ids and links are
/// derived.
pub fn parse(text: &str, source_name: &str) -> Result<ParsedTopology, ParseError> {
    let (records, mut warnings) = lex::read_records(text, source_name)?;
    let fabric = build::build(&records, source_name, &mut warnings)?;
    // Both passes report in their own order; people read warnings in line order.
    warnings.sort_by_key(|w| w.line);
    let warnings = warnings
        .into_iter()
        .map(|w| format!("{source_name}:{}: {}", w.line, w.message))
        .collect();
    Ok(ParsedTopology { fabric, warnings })
}

/// Reads a topology file (see [`parse`]; at most [`crate::textfile::LARGE_TEXT_LIMIT`] bytes of a
/// regular file). Errors, including I/O errors, name the path.
pub fn read_file(path: &Path) -> Result<ParsedTopology, ParseError> {
    let name = path.display().to_string();
    let text = crate::textfile::read_text_file(path, crate::textfile::LARGE_TEXT_LIMIT)
        .map_err(|e| ParseError::new(&name, e.line(), e.reason()))?;
    parse(&text, &name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NodeType, Remote, SwitchId};

    const SMALL: &str = "\
# two switches, a dual-port CA, a router
switchguid=0x10(10)
Switch\t8 \"S-0000000000000010\"\t\t# \"leaf0\" enhanced port 0 lid 1 lmc 0
[1]\t\"H-0000000000000100\"[1](101) \t\t# \"node0\" lid 2 4xEDR
[2]\t\"H-0000000000000100\"[2](102) \t\t# \"node0\" lid 3 4xEDR
[3]\t\"S-0000000000000020\"[1]\t\t# \"spine\" lid 4 4xQDR
[4]\t\"R-0000000000000300\"[1](301) \t\t# \"router\" lid 5 4xQDR

switchguid=0x20(20)
Switch\t8 \"S-0000000000000020\"\t\t# \"spine\" base port 0 lid 4 lmc 0
[1]\t\"S-0000000000000010\"[3]\t\t# \"leaf0\" lid 1 4xQDR

caguid=0x100
Ca\t2 \"H-0000000000000100\"\t\t# \"node0\"
[2](102) \t\"S-0000000000000010\"[2]\t\t# lid 3 lmc 0 \"leaf0\" lid 1 4xEDR
[1](101) \t\"S-0000000000000010\"[1]\t\t# lid 2 lmc 0 \"leaf0\" lid 1 4xEDR

rtguid=0x300
Rt\t1 \"R-0000000000000300\"\t\t# \"router\"
[1](301) \t\"S-0000000000000010\"[4]\t\t# lid 5 lmc 0 \"leaf0\" lid 1 4xQDR
";

    #[test]
    fn small_file_model() {
        let p = parse(SMALL, "small").unwrap();
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let f = &p.fabric;
        assert_eq!(f.num_switches(), 2);
        assert_eq!(f.switch(SwitchId(0)).guid, 0x10);
        assert_eq!(f.switch(SwitchId(0)).desc, "leaf0");
        assert_eq!(f.switch(SwitchId(1)).desc, "spine");
        // End ports: CA record first (ports in number order even though lines are not), router.
        let eps: Vec<_> = f
            .end_ports()
            .iter()
            .map(|e| (e.port_guid, e.port_num, e.node_type))
            .collect();
        assert_eq!(
            eps,
            vec![
                (0x101, 1, NodeType::Compute),
                (0x102, 2, NodeType::Compute),
                (0x301, 1, NodeType::Other)
            ]
        );
        let s0 = f.switch(SwitchId(0));
        assert_eq!(
            s0.ports[3].remote,
            Remote::Switch {
                sw: SwitchId(1),
                port: 1
            }
        );
        assert_eq!(s0.ports[3].speed.as_deref(), Some("4xQDR"));
        assert_eq!(s0.ports[1].speed.as_deref(), Some("4xEDR"));
        assert_eq!(f.end_ports()[2].attach, Some((SwitchId(0), 4)));
        assert_eq!(f.end_ports()[0].node_ports, 2);
        assert_eq!(f.end_ports()[0].desc, "node0");
    }

    #[test]
    fn grouping_output_and_ibsim_extensions() {
        // The shape of `ibnetdiscover -g` output, plus ibsim's `do` and global settings.
        let text = "\
#
Chassis 1 (guid 0x8f104004121e9)

# Spine Nodes
vendid=0x8f1
devid=0x5a31
sysimgguid=0x8f104004121e9\t\t# Chassis 1 (Voltaire 4700)
switchguid=0x8f10400411f56(8f10400411f56)\t# Voltaire 4700 Spine 1 Chip 1
Switch\t24 \"S-0008f10400411f56\"\t\t# \"Voltaire 4700 # spine\" base port 0 lid 6 lmc 0
[1][ext 1]\t\"S-0008f10400411f57\"[2][ext 3]\t\t# \"Voltaire 4700 # line\" lid 7 4xDDR

Non-Chassis Nodes
width=3
do Dump

vendid=0x8f1
switchguid=0x8f10400411f57(8f10400411f57)
Switch\t24 \"S-0008f10400411f57\"\t\t# \"Voltaire 4700 # line\" base port 0 lid 7 lmc 0
[2][ext 3]\t\"S-0008f10400411f56\"[1][ext 1]\t\t# \"Voltaire 4700 # spine\" lid 6 4xDDR
";
        let p = parse(text, "g").unwrap();
        assert_eq!(p.warnings, vec!["g:14: ibsim console command ignored".to_string()]);
        let f = &p.fabric;
        assert_eq!(
            f.switch(SwitchId(0)).ports[1].remote,
            Remote::Switch {
                sw: SwitchId(1),
                port: 2
            }
        );
        assert_eq!(f.switch(SwitchId(1)).desc, "Voltaire 4700 # line");
        assert_eq!(f.switch(SwitchId(1)).ports[2].speed.as_deref(), Some("4xDDR"));
    }

    #[test]
    fn error_display_has_file_line_reason() {
        let e = parse("Switch 4 \"a\"\n[7] \"a\"[1]\n", "f.net").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.file, "f.net");
        assert!(e.to_string().starts_with("f.net:2: "), "{e}");
    }

    #[test]
    fn read_file_reports_path_on_io_error() {
        let e = read_file(Path::new("/nonexistent/dir/x.ibnet")).unwrap_err();
        assert_eq!(e.file, "/nonexistent/dir/x.ibnet");
        assert_eq!(e.line, 0);
        assert!(e.reason.contains("cannot read"), "{e}");
    }
}
