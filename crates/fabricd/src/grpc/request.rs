//! Limits and validation of client input: names and GUIDs resolved against the cabling, job
//! ids, fault targets, and error texts bounded in size.

use fabric_proto::v1 as pb;
use fabric_topology::{fmt_guid, parse_guid, EndPortId, Fabric, TopologyError};
use tonic::Status;

use crate::event_loop::FaultTarget;

/// Longest job id.
pub const MAX_JOB_ID_LEN: usize = 128;

/// Most elements one `WhatIf` plan takes down.
pub const MAX_WHAT_IF_CHANGES: usize = 4096;

/// Most problems one error message lists (the rest are counted).
pub const MAX_LISTED_PROBLEMS: usize = 20;

/// Longest error text built from a request, bytes (the rest is counted).
pub const MAX_ERROR_TEXT: usize = 4096;

/// Longest client-given name quoted in an error, characters.
const MAX_QUOTED_KEY: usize = 80;

/// `text` cut to at most `max` bytes (at a character boundary), with a note
/// `… (N more bytes)` when cut.
pub fn bounded_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}

/// The problems of a request, `; `-separated: the first [`MAX_LISTED_PROBLEMS`], then
/// `… (N more)`, the whole bounded by [`MAX_ERROR_TEXT`] (a request with 10⁶ bad entries gets a
/// short error, not one of megabytes).
pub fn bounded_problems(problems: &[String]) -> String {
    let mut text = problems
        .iter()
        .take(MAX_LISTED_PROBLEMS)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("; ");
    if problems.len() > MAX_LISTED_PROBLEMS {
        text.push_str(&format!("; … ({} more)", problems.len() - MAX_LISTED_PROBLEMS));
    }
    bounded_text(&text, MAX_ERROR_TEXT)
}

/// A client-given name, quoted for an error message: at most [`MAX_QUOTED_KEY`] characters,
/// then `… (N more bytes)`.
pub(super) fn quoted_key(key: &str) -> String {
    match key.char_indices().nth(MAX_QUOTED_KEY) {
        None => format!("{key:?}"),
        Some((end, _)) => format!("{:?}… ({} more bytes)", &key[..end], key.len() - end),
    }
}

/// The element a fault injection or a plan names (kind + switch/port or node), resolved
/// against the cabling.
pub(super) fn resolve_target(
    f: &Fabric,
    kind: i32,
    switch: &str,
    port: u32,
    node: &str,
) -> Result<FaultTarget, Status> {
    match pb::FaultKind::try_from(kind).unwrap_or(pb::FaultKind::Unspecified) {
        pb::FaultKind::Link => {
            let s = f.switch(resolve_switch(f, switch)?);
            let out_of_range = || TopologyError::PortOutOfRange {
                guid: s.guid,
                port,
                nports: u32::from(s.nports),
            };
            let target = FaultTarget::Link {
                switch: s.guid,
                port: u8::try_from(port).map_err(|_| Status::invalid_argument(out_of_range().to_string()))?,
            };
            f.check_event(&target.event(false))
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            Ok(target)
        }
        pb::FaultKind::Switch => Ok(FaultTarget::Switch(f.switch(resolve_switch(f, switch)?).guid)),
        pb::FaultKind::Node => {
            let ep = end_port_or_status(f, node, "")?;
            Ok(FaultTarget::Node(f.end_port(ep).port_guid))
        }
        pb::FaultKind::Unspecified => Err(Status::invalid_argument(
            "fault kind is required (link, switch or node)",
        )),
    }
}

/// Resolves a switch given by GUID or name.
pub(super) fn resolve_switch(f: &Fabric, key: &str) -> Result<fabric_topology::SwitchId, Status> {
    let key = key.trim();
    if key.is_empty() {
        return Err(Status::invalid_argument("a switch (GUID or name) is required"));
    }
    f.find_switch(key).ok_or_else(|| match parse_guid(key) {
        Some(g) => Status::not_found(format!("unknown switch GUID {}", fmt_guid(g))),
        None => Status::not_found(format!(
            "unknown switch {} (neither a switch GUID nor a switch name)",
            quoted_key(key)
        )),
    })
}

/// Resolves an end port given by port GUID, node GUID or name.
pub(super) fn resolve_end_port(f: &Fabric, key: &str) -> Result<EndPortId, String> {
    let key = key.trim();
    if key.is_empty() {
        return Err("an end port (GUID or name) is required".into());
    }
    f.find_end_port(key).ok_or_else(|| match parse_guid(key) {
        Some(g) => format!("unknown end port GUID {}", fmt_guid(g)),
        None => format!(
            "unknown end port {} (neither a port/node GUID nor a node name)",
            quoted_key(key)
        ),
    })
}

/// [`resolve_end_port`] for a request that names one end port: an empty key is
/// `INVALID_ARGUMENT`, an unknown one `NOT_FOUND`; `prefix` (e.g. `"src: "`) starts the message.
pub(super) fn end_port_or_status(f: &Fabric, key: &str, prefix: &str) -> Result<EndPortId, Status> {
    resolve_end_port(f, key).map_err(|m| {
        if key.trim().is_empty() {
            Status::invalid_argument(format!("{prefix}{m}"))
        } else {
            Status::not_found(format!("{prefix}{m}"))
        }
    })
}

/// Checks a job id: 1..=128 characters from `[A-Za-z0-9._:-]`.
pub fn check_job_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("job_id must not be empty".into());
    }
    if id.len() > MAX_JOB_ID_LEN {
        return Err(format!(
            "job_id is {} characters long (at most {MAX_JOB_ID_LEN})",
            id.len()
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(format!(
            "job_id {id:?} contains {c:?} (allowed: letters, digits, '.', '_', ':', '-')"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_is_bounded() {
        let problems: Vec<String> = (0..1_000_000)
            .map(|i| format!("end_ports[{i}]: unknown end port \"n{i}\""))
            .collect();
        let t = bounded_problems(&problems);
        assert!(t.len() <= MAX_ERROR_TEXT + 40, "{} bytes", t.len());
        assert!(
            t.starts_with("end_ports[0]: ") && t.ends_with("; … (999980 more)"),
            "{t}"
        );
        assert_eq!(
            bounded_problems(&problems[..2]),
            format!("{}; {}", problems[0], problems[1])
        );
        let long = "é".repeat(5000);
        let t = bounded_text(&long, 4095);
        assert!(
            t.ends_with("é… (5906 more bytes)"),
            "{}",
            t.chars().rev().take(30).collect::<String>()
        );
        let q = quoted_key(&"x".repeat(10_000_000));
        assert!(q.len() < 120 && q.ends_with("… (9999920 more bytes)"), "{q}");
    }

    #[test]
    fn job_ids_are_checked() {
        assert!(check_job_id("slurm-1234.0").is_ok());
        assert!(check_job_id("a:b_c").is_ok());
        assert_eq!(check_job_id(""), Err("job_id must not be empty".to_string()));
        let e = check_job_id("job 1").unwrap_err();
        assert!(e.contains("contains ' '"), "{e}");
        assert!(check_job_id(&"x".repeat(129)).unwrap_err().contains("129 characters"));
    }
}
