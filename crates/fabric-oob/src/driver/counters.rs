//! Port counters over the agents (`ReadPortCounters`): the asked ports grouped by switch, one
//! request per agent, at most `max_counter_reads` in flight, one answer per port.

use std::collections::HashMap;
use std::sync::Arc;

use fabric_southbound::{CounterPort, CountersReading, DriverError, PortCounters};
use fabric_topology::{fmt_guid, Guid, PortNum};
use tokio::task::JoinSet;

use super::agents::{lock, CallKind, Inner};
use crate::proto;

impl From<proto::PortCounterValues> for PortCounters {
    fn from(v: proto::PortCounterValues) -> Self {
        PortCounters {
            symbol_errors: v.symbol_errors,
            link_error_recovery: v.link_error_recovery,
            link_downed: v.link_downed,
            rcv_errors: v.rcv_errors,
            rcv_remote_physical_errors: v.rcv_remote_physical_errors,
            rcv_switch_relay_errors: v.rcv_switch_relay_errors,
            xmit_discards: v.xmit_discards,
            xmit_constraint_errors: v.xmit_constraint_errors,
            rcv_constraint_errors: v.rcv_constraint_errors,
            local_link_integrity_errors: v.local_link_integrity_errors,
            excessive_buffer_overrun_errors: v.excessive_buffer_overrun_errors,
            vl15_dropped: v.vl15_dropped,
            xmit_wait: v.xmit_wait,
            xmit_data: v.xmit_data,
            rcv_data: v.rcv_data,
            xmit_packets: v.xmit_packets,
            rcv_packets: v.rcv_packets,
        }
    }
}

impl From<PortCounters> for proto::PortCounterValues {
    fn from(v: PortCounters) -> Self {
        proto::PortCounterValues {
            symbol_errors: v.symbol_errors,
            link_error_recovery: v.link_error_recovery,
            link_downed: v.link_downed,
            rcv_errors: v.rcv_errors,
            rcv_remote_physical_errors: v.rcv_remote_physical_errors,
            rcv_switch_relay_errors: v.rcv_switch_relay_errors,
            xmit_discards: v.xmit_discards,
            xmit_constraint_errors: v.xmit_constraint_errors,
            rcv_constraint_errors: v.rcv_constraint_errors,
            local_link_integrity_errors: v.local_link_integrity_errors,
            excessive_buffer_overrun_errors: v.excessive_buffer_overrun_errors,
            vl15_dropped: v.vl15_dropped,
            xmit_wait: v.xmit_wait,
            xmit_data: v.xmit_data,
            rcv_data: v.rcv_data,
            xmit_packets: v.xmit_packets,
            rcv_packets: v.rcv_packets,
        }
    }
}

/// The same error again, for every port of a failed request (`DriverError` is not `Clone`: its
/// I/O variant becomes a protocol error with the same text).
fn again(e: &DriverError) -> DriverError {
    match e {
        DriverError::Unreachable { guid } => DriverError::Unreachable { guid: *guid },
        DriverError::Timeout { guid, op } => DriverError::Timeout { guid: *guid, op },
        DriverError::Transient { guid, op, attempts } => DriverError::Transient {
            guid: *guid,
            op,
            attempts: *attempts,
        },
        DriverError::UnknownSwitch(g) => DriverError::UnknownSwitch(*g),
        DriverError::Unsupported(what) => DriverError::Unsupported(what),
        DriverError::Protocol { guid, message } => DriverError::Protocol {
            guid: *guid,
            message: message.clone(),
        },
        other => DriverError::Protocol {
            guid: None,
            message: other.to_string(),
        },
    }
}

/// Retries of one counter read: one (a connection the agent dropped is opened again); the next
/// poll is the real retry.
const COUNTER_READ_RETRIES: u32 = 1;

/// Reads the counters of one agent's ports; one answer per asked port, in order.
async fn read_agent(
    inner: &Inner,
    idx: usize,
    guid: Guid,
    ports: &[PortNum],
) -> Vec<Result<PortCounters, DriverError>> {
    // An agent the monitor already knows unreachable is not asked (no connect timeout per poll).
    if lock(&inner.agents[idx].health).unreachable {
        return ports.iter().map(|_| Err(DriverError::Unreachable { guid })).collect();
    }
    let how = CallKind {
        permits: &inner.counter_permits,
        max_retries: inner.cfg.max_retries.min(COUNTER_READ_RETRIES),
        marks_give_up: false,
        write: false,
    };
    let asked: Vec<u32> = ports.iter().map(|&p| u32::from(p)).collect();
    let reply = inner
        .call_as(idx, "port counters read", how, |mut c, epoch| {
            let r = inner.read_request(proto::ReadPortCountersRequest { ports: asked.clone() }, epoch);
            async move { c.read_port_counters(r).await }
        })
        .await;
    let table = match reply {
        Ok((t, _)) => t,
        Err(e) => return ports.iter().map(|_| Err(again(&e))).collect(),
    };
    let mut by_port: HashMap<u32, proto::PortCountersEntry> = HashMap::new();
    for e in table.ports {
        by_port.entry(e.port).or_insert(e);
    }
    let bad = |port: PortNum, message: String| DriverError::Protocol {
        guid: Some(guid),
        message: format!("port counters of {}[{port}]: {message}", fmt_guid(guid)),
    };
    ports
        .iter()
        .map(|&p| match by_port.get(&u32::from(p)) {
            None => Err(bad(p, "the agent did not answer this port".into())),
            Some(e) if !e.error.is_empty() => Err(bad(p, e.error.clone())),
            Some(e) => e
                .counters
                .map(PortCounters::from)
                .ok_or_else(|| bad(p, "the agent answered neither counters nor an error".into())),
        })
        .collect()
}

/// See [`SouthboundDriver::read_port_counters`](fabric_southbound::SouthboundDriver::read_port_counters)
/// and [`OobDriver`](crate::OobDriver)'s documentation of it.
pub(super) async fn read_port_counters(inner: &Arc<Inner>, ports: &[CounterPort]) -> Vec<CountersReading> {
    let mut out: Vec<Option<Result<PortCounters, DriverError>>> = (0..ports.len()).map(|_| None).collect();
    // Per agent: its switch GUID, the ports asked and where their answers go.
    let mut groups: HashMap<usize, (Guid, Vec<PortNum>, Vec<usize>)> = HashMap::new();
    let mut order = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        match *p {
            CounterPort::EndPort(_) => {
                out[i] = Some(Err(DriverError::Unsupported(
                    "end port counters (the oob agents manage switch ports only: read the leaf switch port facing the end port)",
                )));
            }
            CounterPort::Switch { switch, port } => match inner.agent_of(switch) {
                Err(e) => out[i] = Some(Err(e)),
                Ok(idx) => {
                    let g = groups.entry(idx).or_insert_with(|| {
                        order.push(idx);
                        (switch, Vec::new(), Vec::new())
                    });
                    g.1.push(port);
                    g.2.push(i);
                }
            },
        }
    }
    let mut set = JoinSet::new();
    for idx in order {
        let Some((guid, asked, slots)) = groups.remove(&idx) else {
            continue;
        };
        let inner = inner.clone();
        set.spawn(async move {
            let answers = read_agent(&inner, idx, guid, &asked).await;
            (slots, answers)
        });
    }
    while let Some(r) = set.join_next().await {
        // A task that panicked leaves its ports unanswered: they get an error below.
        if let Ok((slots, answers)) = r {
            for (slot, a) in slots.into_iter().zip(answers) {
                out[slot] = Some(a);
            }
        }
    }
    ports
        .iter()
        .zip(out)
        .map(|(&port, c)| CountersReading {
            port,
            counters: c.unwrap_or_else(|| {
                Err(DriverError::Protocol {
                    guid: None,
                    message: format!("port counters of {port}: the read task failed"),
                })
            }),
        })
        .collect()
}
