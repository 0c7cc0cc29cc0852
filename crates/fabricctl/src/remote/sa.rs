//! `fabricctl sa`: Subnet Administration queries answered by the daemon's SA (gRPC `SaQuery`),
//! the verbs of the wire client `fabric-saquery`. The daemon builds the SA MAD from the
//! template and answers with the same code as on the wire, on every driver.
//!
//! Templates are written here from the record layouts of IBA vol. 1 15.2.5 (the fields a verb
//! selects by, and their component-mask bits). `--json` prints one document:
//! `{"attribute", "method", "status", "status_text", "snapshot_version", "records": [decoded
//! record or null], "raw_records_hex": [...]}` (the shape `fabric-saquery` prints).

use std::net::Ipv6Addr;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use fabric_proto::v1 as pb;
use serde_json::{json, Value};

use super::output::{ask, print_json};

/// `fabricctl sa`.
#[derive(Args, Debug)]
pub struct SaArgs {
    #[command(subcommand)]
    pub query: SaCmd,
    /// One JSON document (decoded records and their raw images).
    #[arg(long, global = true)]
    pub json: bool,
}

/// The queries (saquery's verbs).
#[derive(Subcommand, Debug)]
pub enum SaCmd {
    /// NodeRecords: one per channel-adapter port and one per switch; all, or those of LID.
    Nr {
        /// Only the records of this LID (default: all).
        lid: Option<u16>,
    },
    /// PortInfoRecords: every port (switch external ports with the switch's LID); or of LID
    /// (and PORT).
    Pir {
        /// Only the ports of this LID (default: all).
        lid: Option<u16>,
        /// Only this port of LID.
        port: Option<u8>,
    },
    /// SwitchInfoRecords: every switch, or the one of LID.
    Swir {
        /// Only the switch of this LID (default: all).
        lid: Option<u16>,
    },
    /// LinkRecords: every live link, in both directions.
    Lr,
    /// LinearForwardingTableRecords: every (switch, block) installed, or of LID (and BLOCK).
    Lftr {
        /// Only the switch of this LID (default: all).
        lid: Option<u16>,
        /// Only this LFT block (64 LIDs each) of LID.
        block: Option<u16>,
    },
    /// GUIDInfoRecords.
    Gir {
        /// Only the records of this LID (default: all).
        lid: Option<u16>,
    },
    /// SMInfoRecord of the master subnet manager.
    Smir,
    /// ServiceRecords registered.
    Sr,
    /// InformInfoRecords (event subscriptions).
    Iir,
    /// PathRecords: between two LIDs (--slid/--dlid), two GIDs (--sgid/--dgid), from one source,
    /// or the whole table.
    Pr {
        /// Source LID.
        #[arg(long)]
        slid: Option<u16>,
        /// Destination LID.
        #[arg(long)]
        dlid: Option<u16>,
        /// Source GID (IPv6 notation, e.g. fe80::2:c903:0:1).
        #[arg(long)]
        sgid: Option<Ipv6Addr>,
        /// Destination GID (IPv6 notation).
        #[arg(long)]
        dgid: Option<Ipv6Addr>,
    },
    /// The SA's ClassPortInfo.
    Classportinfo,
}

/// A record template: its wire image (the selected fields) and component mask.
#[derive(Debug, Default, PartialEq, Eq)]
struct Template {
    bytes: Vec<u8>,
    mask: u64,
}

impl Template {
    fn set(&mut self, offset: usize, value: &[u8], bit: u32) {
        if self.bytes.len() < offset + value.len() {
            self.bytes.resize(offset + value.len(), 0);
        }
        self.bytes[offset..offset + value.len()].copy_from_slice(value);
        self.mask |= 1 << bit;
    }
    fn u16_at(&mut self, offset: usize, v: Option<u16>, bit: u32) {
        if let Some(v) = v {
            self.set(offset, &v.to_be_bytes(), bit);
        }
    }
}

/// LID-keyed records (NodeRecord, SwitchInfoRecord, GUIDInfoRecord...): LID at 0, bit 0.
fn by_lid(lid: Option<u16>) -> Template {
    let mut t = Template::default();
    t.u16_at(0, lid, 0);
    t
}

/// The query of a verb: attribute name, method, template.
fn query(cmd: &SaCmd) -> Result<(&'static str, pb::SaMethod, Template)> {
    use pb::SaMethod::{Get, GetTable};
    Ok(match *cmd {
        SaCmd::Nr { lid } => ("NodeRecord", GetTable, by_lid(lid)),
        SaCmd::Pir { lid, port } => {
            if port.is_some() && lid.is_none() {
                return Err(crate::exit::usage("pir: a PORT needs a LID"));
            }
            // EndportLID (0..2, bit 0), PortNum (2, bit 1).
            let mut t = by_lid(lid);
            if let Some(p) = port {
                t.set(2, &[p], 1);
            }
            ("PortInfoRecord", GetTable, t)
        }
        SaCmd::Swir { lid } => ("SwitchInfoRecord", GetTable, by_lid(lid)),
        SaCmd::Lr => ("LinkRecord", GetTable, Template::default()),
        SaCmd::Lftr { lid, block } => {
            if block.is_some() && lid.is_none() {
                return Err(crate::exit::usage("lftr: a BLOCK needs a LID"));
            }
            // LID (0..2, bit 0), BlockNum (2..4, bit 1).
            let mut t = by_lid(lid);
            t.u16_at(2, block, 1);
            ("LinearForwardingTableRecord", GetTable, t)
        }
        SaCmd::Gir { lid } => ("GUIDInfoRecord", GetTable, by_lid(lid)),
        SaCmd::Smir => ("SMInfoRecord", GetTable, Template::default()),
        SaCmd::Sr => ("ServiceRecord", GetTable, Template::default()),
        SaCmd::Iir => ("InformInfoRecord", GetTable, Template::default()),
        SaCmd::Pr { slid, dlid, sgid, dgid } => {
            // DGID (8..24, bit 2), SGID (24..40, bit 3), DLID (40..42, bit 4), SLID (42..44, bit 5).
            let mut t = Template::default();
            if let Some(g) = dgid {
                t.set(8, &g.octets(), 2);
            }
            if let Some(g) = sgid {
                t.set(24, &g.octets(), 3);
            }
            t.u16_at(40, dlid, 4);
            t.u16_at(42, slid, 5);
            ("PathRecord", GetTable, t)
        }
        SaCmd::Classportinfo => ("ClassPortInfo", Get, Template::default()),
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `--json` document of an answer.
fn answer_json(method: pb::SaMethod, a: &pb::SaQueryResponse) -> Value {
    json!({
        "attribute": a.attribute,
        "attribute_id": a.attribute_id,
        "method": method.as_str_name().trim_start_matches("SA_METHOD_").to_ascii_lowercase(),
        "status": a.status,
        "status_text": a.status_text,
        "attribute_offset": a.attribute_offset,
        "snapshot_version": a.snapshot_version,
        "records": a.records.iter().map(|r| {
            serde_json::from_str::<Value>(&r.json).unwrap_or(Value::Null)
        }).collect::<Vec<_>>(),
        "raw_records_hex": a.records.iter().map(|r| hex(&r.raw)).collect::<Vec<_>>(),
    })
}

/// Runs `fabricctl sa ...`.
pub(super) async fn run(c: &mut fabric_proto::Client, a: SaArgs) -> Result<()> {
    let (attribute, method, t) = query(&a.query)?;
    let r = ask(c.sa_query(pb::SaQueryRequest {
        method: method as i32,
        attribute: attribute.into(),
        attribute_id: 0,
        component_mask: t.mask,
        template: t.bytes,
        attribute_modifier: 0,
    }))
    .await
    .with_context(|| format!("SA query {attribute}"))?;
    if a.json {
        print_json(&answer_json(method, &r))?;
    } else {
        outln!(
            "{}: {} record{} (SA snapshot {})",
            attribute,
            r.records.len(),
            if r.records.len() == 1 { "" } else { "s" },
            r.snapshot_version
        );
        for rec in &r.records {
            if rec.json.is_empty() {
                outln!("  {}", hex(&rec.raw));
            } else {
                outln!("  {}", rec.json);
            }
        }
    }
    if r.status != 0 {
        bail!("SA status {:#06x} ({})", r.status, r.status_text);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_select_the_fields_at_their_wire_offsets() {
        let (name, m, t) = query(&SaCmd::Nr { lid: Some(0x0102) }).unwrap();
        assert_eq!((name, m), ("NodeRecord", pb::SaMethod::GetTable));
        assert_eq!(
            t,
            Template {
                bytes: vec![1, 2],
                mask: 1
            }
        );
        let (_, _, t) = query(&SaCmd::Pir {
            lid: Some(5),
            port: Some(3),
        })
        .unwrap();
        assert_eq!(
            t,
            Template {
                bytes: vec![0, 5, 3],
                mask: 0b11
            }
        );
        let (_, _, t) = query(&SaCmd::Lftr {
            lid: Some(5),
            block: Some(2),
        })
        .unwrap();
        assert_eq!(
            t,
            Template {
                bytes: vec![0, 5, 0, 2],
                mask: 0b11
            }
        );
        let (_, _, t) = query(&SaCmd::Pr {
            slid: Some(7),
            dlid: Some(9),
            sgid: None,
            dgid: Some("fe80::1".parse().unwrap()),
        })
        .unwrap();
        assert_eq!(t.mask, (1 << 2) | (1 << 4) | (1 << 5));
        assert_eq!((t.bytes[8], t.bytes[23]), (0xfe, 1));
        assert_eq!(&t.bytes[40..44], &[0, 9, 0, 7]);
        assert_eq!(query(&SaCmd::Lr).unwrap().2, Template::default());
        assert!(query(&SaCmd::Pir {
            lid: None,
            port: Some(1)
        })
        .is_err());
    }
}
