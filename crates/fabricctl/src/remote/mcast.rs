//! `fabricctl mcast` (multicast groups, members, trees; `verify` on the simulated fabric) and
//! `fabricctl partitions` (the partitions in force and their members).

use anyhow::Result;
use clap::{Args, Subcommand};
use fabric_proto::v1 as pb;
use serde_json::{json, Value};

use super::output::{ask, guid, print_json};

/// `fabricctl mcast`.
#[derive(Args, Debug)]
pub struct McastArgs {
    #[command(subcommand)]
    pub cmd: Option<McastCmd>,
    /// One group by MLID (`0xc000` or decimal).
    #[arg(long)]
    pub mlid: Option<String>,
    /// Also print each group's spanning tree (switches and MFT ports).
    #[arg(long)]
    pub trees: bool,
    /// JSON output (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `fabricctl mcast verify`.
#[derive(Subcommand, Debug)]
pub enum McastCmd {
    /// Flood a packet from every member of every group through the simulated fabric's MFTs
    /// (mock driver): each receiving member must get it exactly once, nobody else.
    Verify {
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `fabricctl partitions`.
#[derive(Args, Debug)]
pub struct PartitionsArgs {
    /// List every member (default: counts only).
    #[arg(long)]
    pub members: bool,
    /// JSON output (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_mlid(s: &str) -> Result<u32> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    match v {
        Ok(m) if (0xC000..=0xFFFE).contains(&m) => Ok(m),
        Ok(m) => Err(crate::exit::usage(format!(
            "--mlid {m:#06x} is not a multicast LID (0xc000..=0xfffe)"
        ))),
        Err(_) => Err(crate::exit::usage(format!(
            "--mlid {s:?} is not a number (0xc000 or 49152)"
        ))),
    }
}

/// Join state bits in words.
fn join_state_text(js: u32) -> String {
    let mut v = Vec::new();
    for (bit, name) in [(1, "full"), (2, "non"), (4, "send-only"), (8, "send-only-full")] {
        if js & bit != 0 {
            v.push(name);
        }
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join("+")
    }
}

fn group_json(g: &pb::McastGroup) -> Value {
    let mut v = json!({
        "mgid": g.mgid,
        "mlid": format!("{:#06x}", g.mlid),
        "pkey": format!("{:#06x}", g.pkey),
        "qkey": format!("{:#010x}", g.qkey),
        "mtu": g.mtu,
        "rate": g.rate,
        "sl": g.sl,
        "well_known": g.well_known,
        "members": g.members.iter().map(|m| json!({
            "port_guid": guid(m.port_guid),
            "name": m.name,
            "join_state": m.join_state,
        })).collect::<Vec<_>>(),
    });
    if let Some(t) = &g.tree {
        v["tree"] = json!({
            "root": guid(t.root_guid),
            "root_name": t.root_name,
            "switches": t.switches.iter().map(|s| json!({
                "guid": guid(s.guid),
                "name": s.name,
                "level": s.level,
                "ports": s.ports,
            })).collect::<Vec<_>>(),
            "unreachable": t.unreachable.iter().map(|g| guid(*g)).collect::<Vec<_>>(),
        });
    }
    v
}

/// Runs `fabricctl mcast`.
pub(super) async fn mcast(c: &mut fabric_proto::Client, a: McastArgs) -> Result<()> {
    if let Some(McastCmd::Verify { json: j }) = a.cmd {
        let r = ask(c.verify_multicast(pb::VerifyMulticastRequest {})).await?;
        if j {
            return print_json(&json!({
                "groups_checked": r.groups_checked,
                "deliveries_checked": r.deliveries_checked,
                "failures": r.failures,
            }));
        }
        outln!(
            "{} groups, {} deliveries checked, {} failures",
            r.groups_checked,
            r.deliveries_checked,
            r.failures.len()
        );
        for f in &r.failures {
            outln!("FAIL {f}");
        }
        if !r.failures.is_empty() {
            return Err(crate::exit::difference(format!(
                "multicast verification failed ({} failures)",
                r.failures.len()
            )));
        }
        return Ok(());
    }
    let mlid = a.mlid.as_deref().map(parse_mlid).transpose()?.unwrap_or(0);
    let r = ask(c.list_multicast_groups(pb::ListMulticastGroupsRequest { mlid, trees: a.trees })).await?;
    if a.json {
        return print_json(&json!({
            "generation": r.generation,
            "enabled": r.enabled,
            "not_programmed": r.not_programmed,
            "groups": r.groups.iter().map(group_json).collect::<Vec<_>>(),
        }));
    }
    if !r.enabled {
        outln!("multicast routing is disabled ([multicast] enabled = false)");
    }
    if !r.not_programmed.is_empty() {
        outln!("NOT PROGRAMMED: {}", r.not_programmed);
    }
    outln!(
        "{:<40}  {:>6}  {:>6}  {:>10}  {:>3}  {:>4}  {:>7}",
        "MGID",
        "MLID",
        "P_KEY",
        "Q_KEY",
        "MTU",
        "RATE",
        "MEMBERS"
    );
    for g in &r.groups {
        outln!(
            "{:<40}  {:>#6x}  {:>#6x}  {:>#10x}  {:>3}  {:>4}  {:>7}{}",
            g.mgid,
            g.mlid,
            g.pkey,
            g.qkey,
            g.mtu,
            g.rate,
            g.members.len(),
            if g.well_known { "  (well-known)" } else { "" }
        );
        if a.mlid.is_some() || a.trees {
            for m in &g.members {
                outln!(
                    "    member {} {} ({})",
                    guid(m.port_guid),
                    m.name,
                    join_state_text(m.join_state)
                );
            }
        }
        if let Some(t) = &g.tree {
            if t.root_guid != 0 {
                outln!("    tree root {} {}", guid(t.root_guid), t.root_name);
            }
            for s in &t.switches {
                outln!(
                    "    switch {} {:<24} level {} ports {:?}",
                    guid(s.guid),
                    s.name,
                    s.level,
                    s.ports
                );
            }
            for u in &t.unreachable {
                outln!("    UNREACHABLE member {}", guid(*u));
            }
        }
    }
    outln!("{} groups (generation {})", r.groups.len(), r.generation);
    Ok(())
}

/// Runs `fabricctl partitions`.
pub(super) async fn partitions(c: &mut fabric_proto::Client, a: PartitionsArgs) -> Result<()> {
    let r = ask(c.list_partitions(pb::ListPartitionsRequest {})).await?;
    if a.json {
        return print_json(&json!({
            "generation": r.generation,
            "source": r.source,
            "enforce_switch_ports": r.enforce_switch_ports,
            "not_programmed": r.not_programmed,
            "issues": r.issues,
            "partitions": r.partitions.iter().map(|p| json!({
                "name": p.name,
                "pkey": format!("{:#06x}", p.pkey),
                "ipoib": p.ipoib,
                "members": p.members.iter().map(|m| json!({
                    "port_guid": guid(m.port_guid),
                    "name": m.name,
                    "full": m.full,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }));
    }
    outln!("source           {}", r.source);
    outln!(
        "switch ports     {}",
        if r.enforce_switch_ports {
            "enforced"
        } else {
            "not programmed"
        }
    );
    if !r.not_programmed.is_empty() {
        outln!("NOT PROGRAMMED   {}", r.not_programmed);
    }
    for i in &r.issues {
        outln!("issue            {i}");
    }
    outln!(
        "{:<24}  {:>6}  {:>5}  {:>6}  {:>7}",
        "PARTITION",
        "P_KEY",
        "IPOIB",
        "FULL",
        "LIMITED"
    );
    for p in &r.partitions {
        let full = p.members.iter().filter(|m| m.full).count();
        outln!(
            "{:<24}  {:>#6x}  {:>5}  {:>6}  {:>7}",
            p.name,
            p.pkey,
            if p.ipoib { "yes" } else { "no" },
            full,
            p.members.len() - full
        );
        if a.members {
            for m in &p.members {
                outln!(
                    "    {} {} {}",
                    guid(m.port_guid),
                    m.name,
                    if m.full { "full" } else { "limited" }
                );
            }
        }
    }
    Ok(())
}
