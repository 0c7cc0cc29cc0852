//! The console / control command grammar (stdin lines and the `SimControl.Command` RPC).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fabric_southbound::{Counter, CounterPort, PortCounters, SouthboundDriver};
use fabric_topology::{fmt_guid, parse_guid, Guid, Lid, PortNum};
use tokio::net::TcpListener;

use super::agent::spawn_agent;
use super::mcast::summary;
use super::mkey::ManagementKey;
use super::state::{lock, Sim, SimError};

impl Sim {
    async fn restore(self: &Arc<Self>, i: usize) -> Result<(), SimError> {
        let a = &self.agents[i];
        if lock(&a.server).is_some() {
            return Ok(());
        }
        // The old listener may take a moment to be released after the abort.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(a.addr).await {
                Ok(l) => break l,
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(err) => {
                    return Err(SimError::Io {
                        what: format!("agent address {}", a.addr),
                        err,
                    })
                }
            }
        };
        a.killed.store(false, Ordering::SeqCst);
        spawn_agent(self.clone(), i, listener);
        Ok(())
    }

    /// Runs one console / control command and returns its output.
    pub async fn command(self: &Arc<Self>, line: &str) -> Result<String, SimError> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let arg = |i: usize| {
            w.get(i)
                .copied()
                .ok_or_else(|| SimError::Command(format!("`{}`: missing argument", line.trim())))
        };
        let port = |s: &str| {
            s.parse::<PortNum>()
                .map_err(|_| SimError::Command(format!("invalid port `{s}`")))
        };
        let guid = |s: &str| parse_guid(s).ok_or_else(|| SimError::Command(format!("invalid GUID `{s}`")));
        let one = |s: &str| -> Result<Guid, SimError> {
            let v = self.find_switches(s)?;
            if v.len() != 1 {
                return Err(SimError::Command("`all` is not allowed here".into()));
            }
            Ok(self.agents[v[0]].guid)
        };
        match w.first().copied().unwrap_or("") {
            "" => Ok(String::new()),
            "link-down" | "link-up" => {
                let (g, p) = (one(arg(1)?)?, port(arg(2)?)?);
                self.mock.set_port_state(g, p, w[0] == "link-up").await?;
                self.refresh().await?;
                Ok(format!("{} {}[{p}]", w[0], fmt_guid(g)))
            }
            "switch-down" | "switch-up" => {
                let g = one(arg(1)?)?;
                self.mock.set_switch_state(g, w[0] == "switch-up").await?;
                self.refresh().await?;
                Ok(format!("{} {}", w[0], fmt_guid(g)))
            }
            "node-down" | "node-up" => {
                let g = guid(arg(1)?)?;
                self.mock.set_end_port_state(g, w[0] == "node-up").await?;
                self.refresh().await?;
                Ok(format!("{} {}", w[0], fmt_guid(g)))
            }
            "kill" => {
                let v = self.find_switches(arg(1)?)?;
                for &i in &v {
                    self.kill(i);
                }
                Ok(format!("killed {} agent(s)", v.len()))
            }
            "restore" => {
                let v = self.find_switches(arg(1)?)?;
                for &i in &v {
                    self.restore(i).await?;
                }
                Ok(format!("restored {} agent(s)", v.len()))
            }
            "drop" => {
                let v = self.find_switches(arg(1)?)?;
                for &i in &v {
                    self.drop_connections(i);
                }
                Ok(format!("dropped connections of {} agent(s)", v.len()))
            }
            "delay" | "write-delay" => {
                let v = self.find_switches(arg(1)?)?;
                let ms: u64 = arg(2)?.parse().map_err(|_| SimError::Command("invalid delay".into()))?;
                let write = w[0] == "write-delay";
                for &i in &v {
                    let a = &self.agents[i];
                    let delay = if write { &a.write_delay_ms } else { &a.delay_ms };
                    delay.store(ms, Ordering::SeqCst);
                }
                Ok(format!("{} {ms} ms on {} agent(s)", if write { "write delay" } else { "delay" }, v.len()))
            }
            "verify" => {
                let r = self.verify(w.get(1) == Some(&"escape")).await?;
                Ok(format!(
                    "pairs checked {}, unreachable {}, disconnected {}{}\n{}",
                    r.pairs_checked,
                    r.unreachable_count,
                    r.disconnected,
                    r.unreachable.first().map(|u| format!("; first: {}", u.reason)).unwrap_or_default(),
                    r.multicast.as_ref().map(summary).unwrap_or_default()
                ))
            }
            "verify-mcast" => {
                let r = self.verify_multicast().await?;
                let mut out = summary(&r);
                for f in r.failures.iter().take(20) {
                    out.push_str(&format!("\n  {}", f.reason));
                }
                Ok(out)
            }
            "mkey-clear" => {
                let v = self.find_switches(arg(1)?)?;
                for &i in &v {
                    *lock(&self.agents[i].mkey) = ManagementKey::default();
                }
                Ok(format!("cleared the management key of {} agent(s)", v.len()))
            }
            "epoch-forget" => {
                let v = self.find_switches(arg(1)?)?;
                for &i in &v {
                    lock(&self.agents[i].manager).highest = 0;
                }
                Ok(format!("forgot the manager epoch of {} agent(s)", v.len()))
            }
            "epochs" => Ok(self
                .agents
                .iter()
                .map(|a| {
                    let m = *lock(&a.manager);
                    format!(
                        "{} epoch {} accepted {} refused {} last refused {}",
                        fmt_guid(a.guid),
                        m.highest,
                        m.accepted,
                        m.refused,
                        m.last_refused
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")),
            "trace" => {
                let (src, lid) = (guid(arg(1)?)?, arg(2)?.parse::<Lid>().map_err(|_| SimError::Command("invalid LID".into()))?);
                let r = self.trace(src, false, lid).await?;
                let hops: Vec<String> =
                    r.hops.iter().map(|h| format!("{}[{}->{}]", fmt_guid(h.switch_guid), h.in_port, h.out_port)).collect();
                Ok(format!("{}{}", hops.join(" "), if r.error.is_empty() { String::new() } else { format!(" error: {}", r.error) }))
            }
            "status" => {
                let killed = self.agents.iter().filter(|a| a.killed.load(Ordering::SeqCst)).count();
                let keyed = self.agents.iter().filter(|a| lock(&a.mkey).key != 0).count();
                let refused: u64 = self
                    .agents
                    .iter()
                    .map(|a| a.refused_writes.load(Ordering::SeqCst) + a.refused_reads.load(Ordering::SeqCst))
                    .sum();
                let (epoch, stale) = self.agents.iter().fold((0, 0), |(e, r), a| {
                    let m = *lock(&a.manager);
                    (e.max(m.highest), r + m.refused)
                });
                let st = self.mock.discover().await?;
                let (total, live) = st.count_links();
                Ok(format!(
                    "{} agents ({} killed, {keyed} with a management key, {refused} calls refused for the key, \
                     highest manager epoch {epoch}, {stale} writes refused for a stale epoch), {} end ports, links \
                     {live}/{total} up, address bits {}",
                    self.agents.len(),
                    killed,
                    st.num_end_ports(),
                    self.address_bits
                ))
            }
            "port-errors" => {
                let (g, p) = (one(arg(1)?)?, port(arg(2)?)?);
                if w.len() < 4 {
                    return Err(SimError::Command("port-errors SW PORT COUNTER=N...: no counter given".into()));
                }
                let mut delta = PortCounters::default();
                for kv in &w[3..] {
                    let (name, n) = kv.split_once('=').ok_or_else(|| {
                        SimError::Command(format!("`{kv}`: expected COUNTER=N (e.g. symbol_errors=10)"))
                    })?;
                    let c = Counter::from_name(name).ok_or_else(|| {
                        let names: Vec<&str> = Counter::ALL.iter().map(|c| c.name()).collect();
                        SimError::Command(format!("unknown counter `{name}` (one of {})", names.join(", ")))
                    })?;
                    *delta.get_mut(c) = n
                        .parse()
                        .map_err(|_| SimError::Command(format!("`{kv}`: invalid count `{n}`")))?;
                }
                let c = self.mock.add_port_counters(CounterPort::Switch { switch: g, port: p }, &delta)?;
                Ok(format!("{}[{p}] {}", fmt_guid(g), show_counters(&c)))
            }
            "port-counters" => {
                let g = one(arg(1)?)?;
                let nports = self.cabling.switch_by_guid(g).map_or(0, |s| self.cabling.switch(s).nports);
                let ports: Vec<PortNum> = match w.get(2) {
                    Some(s) => vec![port(s)?],
                    None => (1..=nports).collect(),
                };
                let mut out = Vec::new();
                for p in ports {
                    let c = self.mock.port_counters(CounterPort::Switch { switch: g, port: p })?;
                    out.push(format!("{}[{p}] {}", fmt_guid(g), show_counters(&c)));
                }
                Ok(out.join("\n"))
            }
            "quit" | "exit" => std::process::exit(0),
            "help" => Ok("commands: link-down|link-up SW PORT, switch-down|switch-up SW, node-down|node-up PORTGUID, kill|restore|drop SW|all, delay SW|all MS, write-delay SW|all MS, verify [escape], verify-mcast, mkey-clear SW|all, epochs, epoch-forget SW|all, trace SRCPORTGUID LID, port-errors SW PORT COUNTER=N..., port-counters SW [PORT], status, quit".into()),
            other => Err(SimError::Command(format!("unknown command `{other}` (try `help`)"))),
        }
    }
}

/// The non-zero counters of a port as `name=value` pairs (`all zero` when none).
fn show_counters(c: &PortCounters) -> String {
    let set: Vec<String> = Counter::ALL
        .iter()
        .filter(|&&k| c.get(k) != 0)
        .map(|&k| format!("{}={}", k.name(), c.get(k)))
        .collect();
    if set.is_empty() {
        "all zero".into()
    } else {
        set.join(" ")
    }
}
