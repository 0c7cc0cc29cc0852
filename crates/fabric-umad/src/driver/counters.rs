//! Port counters ([`SouthboundDriver::read_port_counters`](fabric_southbound::SouthboundDriver::read_port_counters)):
//! Performance Management GMPs from the manager's port to the agent of each port.
//!
//! * **Addressing:** a switch port is read at the switch's LID with PortSelect = the port; an
//!   end port at its own LID with PortSelect = its port number. Both come from the records
//!   of the last sweep and LID configuration (a port without a LID cannot be read yet).
//! * **Capabilities:** each agent's ClassPortInfo is read once (cached per switch GUID or end
//!   port GUID, forgotten when a read of that agent times out, since the device may have been
//!   replaced). With [`CAP_EXT_WIDTH`](crate::mad::CAP_EXT_WIDTH) or its NoIETF variant the
//!   data and packet counters come from PortCountersExtended (64 bits), otherwise from
//!   PortCounters (32 bits, saturating); the error counters always come from PortCounters.
//! * **Budget:** every MAD goes through the transport's PerfMgt lane (`perf_window` in
//!   flight, apart from the SMPs, and only while no SMP waits); all of a batch is queued at
//!   once and the lane paces it.
//! * **Errors per port:** a port that cannot be read (unknown, no LID, timeout, MAD status)
//!   gets its own error naming its GUID; the others are still read.

use std::collections::HashMap;

use fabric_southbound::{CounterPort, CountersReading, DriverError, PortCounters};
use fabric_topology::{fmt_guid, Guid};

use super::inner::{lock, Inner};
use crate::mad::*;
use crate::transport::{wait_perf, PerfReply, TransportError};

/// Where a port's counters are read: the agent's key (switch GUID or end-port GUID), its LID
/// and the PortSelect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) agent: Guid,
    pub(super) lid: u16,
    pub(super) port: u8,
    /// The agent is a switch's (else an end port's).
    pub(super) switch: bool,
}

/// Reads the counters of `ports`, one answer per port in the order asked.
pub(super) async fn read_port_counters(inner: &Inner, ports: &[CounterPort]) -> Vec<CountersReading> {
    let targets: Vec<Result<Target, DriverError>> = {
        let st = lock(&inner.state);
        ports.iter().map(|p| resolve(&st, *p)).collect()
    };
    // ClassPortInfo of the agents not known yet, all queued at once.
    let mut agents: HashMap<Guid, u16> = HashMap::new();
    for t in targets.iter().flatten() {
        agents.entry(t.agent).or_insert(t.lid);
    }
    let cached: HashMap<Guid, u16> = lock(&inner.perf_caps).clone();
    let asked: Vec<(Guid, _)> = agents
        .iter()
        .filter(|(g, _)| !cached.contains_key(g))
        .map(|(&g, &lid)| (g, inner.tp.submit_perf(lid, PerfMad::get(ATTR_CLASS_PORT_INFO, 0))))
        .collect();
    let mut caps: HashMap<Guid, Result<u16, TransportError>> = cached.into_iter().map(|(g, c)| (g, Ok(c))).collect();
    for (g, rx) in asked {
        let r = match wait_perf(rx).await {
            Ok(r) if r.mad.status() == 0 => Ok(class_port_info_cap_mask(r.mad.data())),
            Ok(r) => Err(TransportError::Mad(format!("MAD status {:#06x}", r.mad.status()))),
            Err(e) => Err(e),
        };
        if let Ok(c) = r {
            lock(&inner.perf_caps).insert(g, c);
        }
        caps.insert(g, r);
    }
    // PortCounters (and PortCountersExtended) of every port, all queued at once.
    let pending: Vec<_> = targets
        .into_iter()
        .map(|t| {
            let t = t?;
            let cap = match caps.get(&t.agent) {
                Some(Ok(c)) => *c,
                Some(Err(e)) => return Err(perf_err(t, "ClassPortInfo", e.clone())),
                // Every target's agent was asked or cached above.
                None => return Err(perf_err(t, "ClassPortInfo", TransportError::Mad("not asked".into()))),
            };
            let pc = inner.tp.submit_perf(t.lid, PerfMad::get(ATTR_PORT_COUNTERS, t.port));
            let ext = has_extended_counters(cap).then(|| {
                inner
                    .tp
                    .submit_perf(t.lid, PerfMad::get(ATTR_PORT_COUNTERS_EXT, t.port))
            });
            Ok((t, cap, pc, ext))
        })
        .collect();
    let mut out = Vec::with_capacity(ports.len());
    for (&port, p) in ports.iter().zip(pending) {
        let counters = match p {
            Err(e) => Err(e),
            Ok((t, cap, pc, ext)) => {
                let pc = wait_perf(pc).await;
                let ext = match ext {
                    Some(rx) => Some(wait_perf(rx).await),
                    None => None,
                };
                let r = assemble(t, cap, pc, ext);
                if matches!(r, Err(DriverError::Transient { .. })) {
                    lock(&inner.perf_caps).remove(&t.agent);
                }
                r
            }
        };
        out.push(CountersReading { port, counters });
    }
    out
}

/// The agent, LID and PortSelect of `port` in the driver's records.
pub(super) fn resolve(st: &super::state::State, port: CounterPort) -> Result<Target, DriverError> {
    match port {
        CounterPort::Switch { switch, port } => {
            let s = st
                .sw_by_guid
                .get(&switch)
                .map(|&i| &st.switches[i])
                .ok_or(DriverError::UnknownSwitch(switch))?;
            if port == 0 || port > s.nports {
                return Err(DriverError::InvalidPort {
                    guid: switch,
                    port,
                    reason: "not an external port of the switch (counters are read for ports 1..=N)",
                });
            }
            if !s.up {
                return Err(DriverError::Unreachable { guid: switch });
            }
            if s.lid == 0 {
                return Err(DriverError::Protocol {
                    guid: Some(switch),
                    message: format!("counters of port {port}: the switch has no LID yet (LIDs not configured)"),
                });
            }
            Ok(Target {
                agent: switch,
                lid: s.lid,
                port,
                switch: true,
            })
        }
        CounterPort::EndPort(g) => {
            let c = st
                .ca_by_guid
                .get(&g)
                .map(|&i| &st.cas[i])
                .ok_or(DriverError::UnknownEndPort(g))?;
            let lid = c.info.lid();
            if !c.up || lid == 0 {
                return Err(DriverError::Protocol {
                    guid: Some(g),
                    message: format!(
                        "counters of end port {} (port {}): {}",
                        fmt_guid(g),
                        c.port_num,
                        if c.up {
                            "no LID yet (LIDs not configured)"
                        } else {
                            "the port is down"
                        }
                    ),
                });
            }
            Ok(Target {
                agent: g,
                lid,
                port: c.port_num,
                switch: false,
            })
        }
    }
}

/// The counters of one port from its PortCounters reply and, when the agent has extended
/// counters, its PortCountersExtended reply.
pub(super) fn assemble(
    t: Target,
    cap: u16,
    pc: Result<PerfReply, TransportError>,
    ext: Option<Result<PerfReply, TransportError>>,
) -> Result<PortCounters, DriverError> {
    let data = |r: Result<PerfReply, TransportError>, what: &'static str| -> Result<PerfMad, DriverError> {
        let r = r.map_err(|e| perf_err(t, what, e))?;
        if r.mad.status() != 0 {
            return Err(DriverError::Protocol {
                guid: Some(t.agent),
                message: format!("{what} of port {}: MAD status {:#06x}", t.port, r.mad.status()),
            });
        }
        if r.mad.port_select() != t.port {
            return Err(DriverError::Protocol {
                guid: Some(t.agent),
                message: format!(
                    "{what} of port {}: the answer is for port {}",
                    t.port,
                    r.mad.port_select()
                ),
            });
        }
        Ok(r.mad)
    };
    let mut c = port_counters(data(pc, "PortCounters")?.data(), cap);
    if let Some(ext) = ext {
        apply_extended(&mut c, data(ext, "PortCountersExtended")?.data());
    }
    Ok(c)
}

/// A transport failure reading `what` of `t` as a driver error naming the agent's GUID and the
/// port (a switch's timeout is [`DriverError::Transient`], whose text has no room for the port:
/// the reading names it).
fn perf_err(t: Target, what: &'static str, e: TransportError) -> DriverError {
    match e {
        TransportError::Timeout { attempts } if !t.switch => DriverError::Protocol {
            guid: Some(t.agent),
            message: format!(
                "{what} of end port {} (port {}): no reply after {attempts} attempt(s)",
                fmt_guid(t.agent),
                t.port
            ),
        },
        TransportError::Timeout { attempts } => DriverError::Transient {
            guid: t.agent,
            op: what,
            attempts,
        },
        TransportError::Closed => DriverError::Protocol {
            guid: Some(t.agent),
            message: format!("{what} of port {}: umad transport closed", t.port),
        },
        TransportError::Mad(m) => DriverError::Protocol {
            guid: Some(t.agent),
            message: format!("{what} of port {}: {m}", t.port),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::super::state::tests::{two_by_two, CA, L0, L1, S0, S1};
    use super::*;
    use crate::config::UmadConfig;
    use crate::transport::{RawPort, Transport, TransportParams, UMAD_HDR_LEN};

    /// Performance Management Agents by LID: the CapabilityMask each advertises (`None`: the
    /// agent never answers). PortCounters answers carry SymbolErrorCounter = LID * 100 + port,
    /// PortCountersExtended ones PortXmitData = 2^40 + port. Counts the ClassPortInfo Gets per
    /// LID.
    struct Pmas {
        caps: HashMap<u16, Option<u16>>,
        asked_cap: Arc<Mutex<HashMap<u16, usize>>>,
        answers: VecDeque<Vec<u8>>,
    }

    impl RawPort for Pmas {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
            let lid = u16::from_be_bytes([buf[28], buf[29]]);
            let req = PerfMad::parse(&buf[UMAD_HDR_LEN..]).expect("a PerfMgt MAD");
            let Some(Some(cap)) = self.caps.get(&lid).copied() else {
                return Ok(());
            };
            let port = req.port_select();
            let data = match req.attr_id() {
                ATTR_CLASS_PORT_INFO => {
                    *self.asked_cap.lock().unwrap().entry(lid).or_default() += 1;
                    encode_class_port_info(cap)
                }
                ATTR_PORT_COUNTERS => encode_port_counters(
                    &PortCounters {
                        symbol_errors: u64::from(lid) * 100 + u64::from(port),
                        ..PortCounters::default()
                    },
                    port,
                ),
                _ => encode_port_counters_ext(
                    &PortCounters {
                        xmit_data: (1 << 40) + u64::from(port),
                        ..PortCounters::default()
                    },
                    port,
                ),
            };
            let mut p = buf.to_vec();
            p[UMAD_HDR_LEN..].copy_from_slice(&req.response(0, &data).bytes);
            self.answers.push_back(p);
            Ok(())
        }
        fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
            let p = self.answers.pop_front()?;
            buf[..p.len()].copy_from_slice(&p);
            Some(p.len())
        }
        fn wait(&mut self, _: Duration) {}
        fn agent(&self, class: u8) -> u32 {
            u32::from(class)
        }
    }

    #[tokio::test]
    async fn a_batch_reads_every_agent_and_fails_only_the_silent_one() {
        let mut st = two_by_two();
        for (g, lid) in [(L0, 7), (L1, 8), (S0, 9), (S1, 10)] {
            st.switches[st.sw_by_guid[&g]].lid = lid;
        }
        let mut ca = st.cas[0].info.clone();
        ca.set_lid(12);
        st.cas[0].info = ca;
        let asked_cap = Arc::new(Mutex::new(HashMap::new()));
        let pmas = Pmas {
            // L0 extended, L1 32-bit only, S0 silent, S1 extended (NoIETF), the CA extended.
            caps: [
                (7, Some(0x1300)),
                (8, Some(0)),
                (9, None),
                (10, Some(0x0400)),
                (12, Some(0x1200)),
            ]
            .into(),
            asked_cap: asked_cap.clone(),
            answers: VecDeque::new(),
        };
        let (ttx, trx) = mpsc::unbounded_channel();
        let params = TransportParams {
            timeout: Duration::from_millis(20),
            retries: 1,
            window: 4,
            perf_window: 2,
        };
        let inner = Inner::new(UmadConfig::default(), Transport::start(pmas, params, ttx), trx);
        *lock(&inner.state) = st;
        let sw = |g: Guid, port: u8| CounterPort::Switch { switch: g, port };
        let ports = [
            sw(L0, 1),
            sw(L1, 2),
            sw(S0, 1),
            sw(S1, 2),
            CounterPort::EndPort(CA),
            sw(L0, 3),
        ];
        for round in 0..2 {
            let got = read_port_counters(&inner, &ports).await;
            assert_eq!(
                got.iter().map(|r| r.port).collect::<Vec<_>>(),
                ports,
                "in the order asked"
            );
            let c = |i: usize| got[i].counters.as_ref().map_err(ToString::to_string).cloned();
            assert_eq!(c(0).unwrap().symbol_errors, 701);
            assert_eq!(c(0).unwrap().xmit_data, (1 << 40) + 1, "extended width");
            assert_eq!(
                (c(1).unwrap().symbol_errors, c(1).unwrap().xmit_data),
                (802, 0),
                "32-bit only"
            );
            let e = c(2).unwrap_err();
            assert!(e.contains(&fmt_guid(S0)) && e.contains("ClassPortInfo"), "{e}");
            assert_eq!(c(3).unwrap().xmit_data, (1 << 40) + 2, "NoIETF extended width");
            assert_eq!(c(4).unwrap().symbol_errors, 1201, "end port: its LID, its port");
            assert_eq!(c(5).unwrap().symbol_errors, 703);
            // ClassPortInfo once per agent that answered; the silent one is asked every batch.
            let asked = asked_cap.lock().unwrap().clone();
            assert_eq!(asked, [(7, 1), (8, 1), (10, 1), (12, 1)].into(), "round {round}");
        }
        let s = inner.tp.stats();
        assert_eq!(s.perf_failures.load(std::sync::atomic::Ordering::Relaxed), 2);
        assert_eq!(s.sent.load(std::sync::atomic::Ordering::Relaxed), 0, "no SMP");
    }

    #[test]
    fn ports_resolve_to_their_agent_lid_and_port_select() {
        let mut st = two_by_two();
        let sw = |g: Guid, port: u8| CounterPort::Switch { switch: g, port };
        // No LIDs yet: a clear error naming the switch and port.
        let e = resolve(&st, sw(L0, 2)).unwrap_err();
        assert!(
            e.to_string().contains("port 2") && e.to_string().contains("no LID"),
            "{e}"
        );
        st.switches[st.sw_by_guid[&L0]].lid = 7;
        let mut ca = st.cas[0].info.clone();
        ca.set_lid(12);
        st.cas[0].info = ca;
        assert_eq!(
            resolve(&st, sw(L0, 3)).unwrap(),
            Target {
                agent: L0,
                lid: 7,
                port: 3,
                switch: true
            }
        );
        assert_eq!(
            resolve(&st, CounterPort::EndPort(CA)).unwrap(),
            Target {
                agent: CA,
                lid: 12,
                port: 1,
                switch: false
            }
        );
        assert!(matches!(
            resolve(&st, sw(L0, 0)),
            Err(DriverError::InvalidPort { port: 0, .. })
        ));
        assert!(matches!(
            resolve(&st, sw(L0, 5)),
            Err(DriverError::InvalidPort { port: 5, .. })
        ));
        assert!(matches!(
            resolve(&st, sw(0x99, 1)),
            Err(DriverError::UnknownSwitch(0x99))
        ));
        assert!(matches!(
            resolve(&st, CounterPort::EndPort(0x98)),
            Err(DriverError::UnknownEndPort(0x98))
        ));
        st.switches[st.sw_by_guid[&S1]].up = false;
        assert!(matches!(
            resolve(&st, sw(S1, 1)),
            Err(DriverError::Unreachable { guid: S1 })
        ));
        st.cas[0].up = false;
        let e = resolve(&st, CounterPort::EndPort(CA)).unwrap_err();
        assert!(e.to_string().contains("down"), "{e}");
    }

    fn reply(attr: u16, port: u8, status: u16, data: &[u8; PERF_DATA_SIZE]) -> Result<PerfReply, TransportError> {
        Ok(PerfReply {
            mad: PerfMad::get(attr, port).response(status, data),
            attempts: 1,
        })
    }

    #[test]
    fn replies_assemble_into_counters_or_a_port_error() {
        let t = Target {
            agent: L0,
            lid: 7,
            port: 3,
            switch: true,
        };
        let c = PortCounters {
            rcv_errors: 41,
            xmit_data: 0xffff_ffff,
            xmit_wait: 9,
            ..PortCounters::default()
        };
        let wide = PortCounters {
            xmit_data: 1 << 40,
            ..c
        };
        // 32-bit counters only, no XmitWait capability.
        let got = assemble(
            t,
            0,
            reply(ATTR_PORT_COUNTERS, 3, 0, &encode_port_counters(&c, 3)),
            None,
        )
        .unwrap();
        assert_eq!((got.rcv_errors, got.xmit_data, got.xmit_wait), (41, 0xffff_ffff, 0));
        // Extended: the 64-bit data counter.
        let got = assemble(
            t,
            CAP_EXT_WIDTH | CAP_XMIT_WAIT,
            reply(ATTR_PORT_COUNTERS, 3, 0, &encode_port_counters(&c, 3)),
            Some(reply(ATTR_PORT_COUNTERS_EXT, 3, 0, &encode_port_counters_ext(&wide, 3))),
        )
        .unwrap();
        assert_eq!(got, wide);
        // Errors name the GUID and the port.
        let e = assemble(t, 0, reply(ATTR_PORT_COUNTERS, 3, 0x1c, &[0; 64]), None).unwrap_err();
        assert!(
            e.to_string().contains("port 3") && e.to_string().contains("0x001c"),
            "{e}"
        );
        let e = assemble(
            t,
            0,
            reply(ATTR_PORT_COUNTERS, 4, 0, &encode_port_counters(&c, 4)),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("for port 4"), "{e}");
        let e = assemble(t, 0, Err(TransportError::Timeout { attempts: 4 }), None).unwrap_err();
        assert!(e.is_transient() && e.to_string().contains(&fmt_guid(L0)), "{e}");
        let ca = Target {
            agent: CA,
            lid: 12,
            port: 1,
            switch: false,
        };
        let e = assemble(ca, 0, Err(TransportError::Timeout { attempts: 4 }), None).unwrap_err();
        assert!(
            e.to_string()
                .contains("end port 0x0000000000000100 (port 1): no reply after 4"),
            "{e}"
        );
    }
}
