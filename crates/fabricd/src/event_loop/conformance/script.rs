//! The words of a case script (switch and end-port names, durations, phases, settings) and the
//! text of the record (notices, loop errors).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fabric_ranking::RankOptions;
use fabric_routing::EngineKind;
use fabric_topology::{fmt_guid, Fabric, Guid, PortNum};
use fabric_update::DeadlinePolicy;

use crate::config::{FaultInjectionConfig, UpdateConfig};
use crate::event_loop::{FaultTarget, LoopError, LoopSettings};
use crate::state::{Notice, Phase};

/// Readable names of the switches and end ports of the simulated fabric.
pub(super) struct Names {
    pub(super) switches: Vec<String>,
    end_ports: Vec<String>,
    /// `fmt_guid` text → name (fixed width: no GUID text is part of another).
    guids: Vec<(String, String)>,
}

impl Names {
    pub(super) fn new(f: &Fabric) -> Names {
        let mut per_level: BTreeMap<String, usize> = BTreeMap::new();
        let switches: Vec<String> = f
            .switches()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let level = s
                    .desc
                    .split_whitespace()
                    .find(|t| t.len() > 1 && t.starts_with('L') && t[1..].bytes().all(|b| b.is_ascii_digit()));
                match level {
                    Some(l) => {
                        let n = per_level.entry(l.to_string()).or_default();
                        *n += 1;
                        format!("{l}_{}", *n - 1)
                    }
                    None => format!("S{i}"),
                }
            })
            .collect();
        let end_ports: Vec<String> = (0..f.num_end_ports()).map(|i| format!("N{i}")).collect();
        let mut guids = Vec::new();
        for (s, name) in f.switches().iter().zip(&switches) {
            guids.push((fmt_guid(s.guid), name.clone()));
        }
        for (e, name) in f.end_ports().iter().zip(&end_ports) {
            guids.push((fmt_guid(e.port_guid), name.clone()));
            if e.node_guid != e.port_guid {
                guids.push((fmt_guid(e.node_guid), format!("{name}-node")));
            }
        }
        Names {
            switches,
            end_ports,
            guids,
        }
    }

    /// `text` with every GUID of the fabric replaced by its name.
    pub(super) fn scrub(&self, text: &str) -> String {
        if !text.contains("0x") {
            return text.to_string();
        }
        let mut s = text.to_string();
        for (hex, name) in &self.guids {
            s = s.replace(hex.as_str(), name);
        }
        s
    }

    pub(super) fn switch(&self, f: &Fabric, name: &str) -> Result<Guid, String> {
        lookup(&self.switches, name, "switch", |i| f.switches()[i].guid)
    }

    pub(super) fn end_port(&self, f: &Fabric, name: &str) -> Result<Guid, String> {
        lookup(&self.end_ports, name, "end port", |i| f.end_ports()[i].port_guid)
    }

    /// `L0_0[3]` (a switch port), `L1_0` (a switch) or `N4` (an end port), as an event.
    pub(super) fn event(&self, f: &Fabric, kind: &str, target: &str) -> Result<FaultRequestTarget, String> {
        let (up, what) = match kind.rsplit_once('-') {
            Some((what, "down")) => (false, what),
            Some((what, "up")) => (true, what),
            _ => return Err(format!("unknown event `{kind}` (link-down, switch-up, node-down, ...)")),
        };
        let target = match what {
            "link" => {
                let (sw, port) = target
                    .strip_suffix(']')
                    .and_then(|t| t.split_once('['))
                    .ok_or_else(|| format!("`{target}` is not a switch port like L0_0[3]"))?;
                let port: PortNum = port.parse().map_err(|_| format!("bad port number in `{target}`"))?;
                FaultTarget::Link {
                    switch: self.switch(f, sw)?,
                    port,
                }
            }
            "switch" => FaultTarget::Switch(self.switch(f, target)?),
            "node" => FaultTarget::Node(self.end_port(f, target)?),
            _ => return Err(format!("unknown event `{kind}`")),
        };
        Ok(FaultRequestTarget { target, up })
    }
}

/// The GUID written as `0x...`, or the GUID of the item named `name` in `names`.
fn lookup(names: &[String], name: &str, what: &str, guid_of: impl Fn(usize) -> Guid) -> Result<Guid, String> {
    if let Some(g) = fabric_topology::parse_guid(name) {
        return Ok(g);
    }
    let i = names.iter().position(|n| n == name);
    i.map(guid_of).ok_or_else(|| format!("unknown {what} name `{name}`"))
}

/// A parsed fault target with its direction.
pub(super) struct FaultRequestTarget {
    pub(super) target: FaultTarget,
    pub(super) up: bool,
}

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map(|i| s.split_at(i))
        .ok_or_else(|| format!("`{s}` has no unit (ms, s)"))?;
    let n: u64 = n.parse().map_err(|_| format!("bad duration `{s}`"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        _ => Err(format!("bad duration unit in `{s}` (ms, s)")),
    }
}

pub(super) fn parse_phase(s: &str) -> Result<Phase, String> {
    Phase::ALL
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| format!("unknown phase `{s}`"))
}

pub(super) fn default_settings() -> LoopSettings {
    LoopSettings {
        update: UpdateConfig {
            coalesce_ms: 0,
            coalesce_max_ms: 0,
            ..UpdateConfig::default()
        },
        engine: EngineKind::Dmodc,
        topology: crate::topology_mode::TopologySetting::Auto,
        validate: true,
        incremental: true,
        job_aware: false,
        rank_options: Arc::new(RankOptions::default()),
        fault_injection: FaultInjectionConfig {
            enabled: true,
            allow_physical: true,
        },
        multicast: true,
        partitions: Arc::default(),
    }
}

/// Applies `key=value` pairs to `s`.
pub(super) fn apply_settings(s: &mut LoopSettings, pairs: &[&str]) -> Result<(), String> {
    let (mut coalesce_max, mut repath) = (None, None);
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{pair}` is not key=value"))?;
        let num = || v.parse::<u64>().map_err(|_| format!("{k}: `{v}` is not a number"));
        let flag = || match v {
            "true" | "on" => Ok(true),
            "false" | "off" => Ok(false),
            _ => Err(format!("{k}: `{v}` is not true/false")),
        };
        let u = &mut s.update;
        match k {
            "coalesce_ms" => u.coalesce_ms = num()?,
            "coalesce_max_ms" => coalesce_max = Some(num()?),
            "five_phase" => u.five_phase = flag()?,
            "unpath_deadline_ms" => u.unpath_deadline_ms = num()?,
            "repath_deadline_ms" => repath = Some(num()?),
            "failed_generation_backoff_ms" => u.failed_generation_backoff_ms = num()?,
            "upload_retries" => u.upload_retries = num()? as u32,
            "missed_ack_policy" => {
                u.missed_ack_policy = match v {
                    "proceed" => DeadlinePolicy::Proceed,
                    "abort" => DeadlinePolicy::Abort,
                    _ => return Err(format!("missed_ack_policy: `{v}` is not proceed/abort")),
                }
            }
            "fault_injection" => s.fault_injection.enabled = flag()?,
            "job_aware" => s.job_aware = flag()?,
            _ => return Err(format!("unknown setting `{k}`")),
        }
    }
    let u = &mut s.update;
    u.coalesce_max_ms = coalesce_max.unwrap_or(u.coalesce_ms);
    u.repath_deadline_ms = repath.unwrap_or(u.unpath_deadline_ms);
    Ok(())
}

pub(super) fn loop_error(e: &LoopError) -> String {
    let kind = match e {
        LoopError::InvalidArgument(_) => "invalid argument",
        LoopError::FailedPrecondition(_) => "failed precondition",
        LoopError::NotFound(_) => "not found",
        LoopError::Internal(_) => "internal",
        LoopError::ShuttingDown => "shutting down",
    };
    format!("error ({kind}): {e}")
}

pub(super) fn notice_text(n: &Notice) -> String {
    match n {
        Notice::TopologyChange { event, physical } => format!(
            "notice: topology change {event} ({})",
            if *physical { "physical" } else { "virtual" }
        ),
        Notice::PhaseChanged { generation, phase } => format!("notice: generation {generation} phase {phase}"),
        Notice::GenerationCommitted { generation, timings } => format!(
            "notice: generation {generation} committed (changes {}, blocks written {}, retries {})",
            timings.faults, timings.blocks_written, timings.retries
        ),
        Notice::AcksMissed {
            generation,
            subscribers,
        } => format!(
            "notice: generation {generation} acks missed: {}",
            subscribers.join(", ")
        ),
        Notice::UpdateAborted { generation, reason } => format!("notice: generation {generation} aborted: {reason}"),
        Notice::UpdateRestarted {
            generation,
            attempt,
            reason,
        } => format!("notice: generation {generation} restarted (attempt {attempt}): {reason}"),
    }
}
