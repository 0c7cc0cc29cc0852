//! `fabricctl lft`: the daemon's installed LFTs through StreamLft (bounded messages), written to
//! stdout as they arrive; GetLft for a daemon without StreamLft.

use anyhow::Result;
use fabric_proto::v1 as pb;
use serde::Serialize;

use super::output::{ask, guid, status_err};

/// One switch of `fabricctl lft --json` (fields in the order of the former `json!` object:
/// alphabetical).
#[derive(Serialize)]
struct SwitchJson<'a> {
    guid: String,
    lft: &'a [u8],
    lid: u32,
    name: &'a str,
}

#[derive(Serialize)]
struct LftJson<'a> {
    generation: u64,
    switches: Vec<SwitchJson<'a>>,
}

/// Prints the LFTs of one switch or all: OpenSM dump text, or JSON (`--json`, raw tables).
pub(super) async fn lft(c: &mut fabric_proto::Client, switch: Option<String>, json: bool) -> Result<()> {
    let format = if json {
        pb::LftFormat::Raw
    } else {
        pb::LftFormat::Opensm
    };
    let req = pb::GetLftRequest {
        switch: switch.unwrap_or_default(),
        format: format as i32,
    };
    let mut stream = match c.stream_lft(req.clone()).await {
        Ok(s) => s.into_inner(),
        Err(s) if s.code() == tonic::Code::Unimplemented => {
            // A daemon from before StreamLft: the whole reply in one message.
            let r = ask(c.get_lft(req)).await?;
            return print(r.generation, &r.switches, &r.opensm_dump, json);
        }
        Err(s) => return Err(status_err(s)),
    };
    // Raw tables are kept (the tables' size) for the one JSON document; dump text is written
    // piece by piece.
    let mut generation = 0;
    let mut switches = Vec::new();
    while let Some(m) = stream.message().await.map_err(status_err)? {
        generation = m.generation;
        if json {
            switches.extend(m.switches);
        } else {
            out!("{}", m.opensm_dump);
        }
    }
    if json {
        print(generation, &switches, "", true)?;
    }
    Ok(())
}

fn print(generation: u64, switches: &[pb::SwitchLft], dump: &str, json: bool) -> Result<()> {
    if !json {
        out!("{dump}");
        return Ok(());
    }
    let doc = LftJson {
        generation,
        switches: switches
            .iter()
            .map(|s| SwitchJson {
                guid: guid(s.guid),
                lft: &s.lft,
                lid: s.lid,
                name: &s.name,
            })
            .collect(),
    };
    // Streamed to stdout: a `serde_json::Value` of every entry would take ~30 bytes per entry.
    crate::remote::write_stdout_with(|out| {
        use std::io::Write as _;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
        serde_json::to_writer_pretty(&mut out, &doc).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
        out.flush()
    });
    Ok(())
}
