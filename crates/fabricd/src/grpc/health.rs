//! GetHealth, ClearHealth and the InjectPortErrors drill (the port-health monitor,
//! `crate::health`).

use std::sync::Arc;

use fabric_proto::v1 as pb;
use fabric_southbound::{Counter, CounterPort, PortCounters};
use fabric_topology::Fabric;
use tonic::{Request, Response, Status};

use super::request::{resolve_end_port, resolve_switch};
use super::FabricService;
use crate::health::{ClearTarget, HealthHandle, PortHealth, PortState};

impl FabricService {
    fn health(&self) -> Result<&Arc<HealthHandle>, Status> {
        self.shared
            .health
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("the port-health monitor is not running"))
    }

    pub(super) async fn handle_get_health(
        &self,
        req: Request<pb::GetHealthRequest>,
    ) -> Result<Response<pb::HealthReport>, Status> {
        let req = req.into_inner();
        let s = self.health()?.snapshot();
        let p = self.snapshot();
        let limit = if req.limit == 0 { usize::MAX } else { req.limit as usize };
        let ports: Vec<pb::PortHealth> = s
            .ports
            .iter()
            .filter(|h| req.all || h.notable())
            .take(limit)
            .map(|h| port_health(h))
            .collect();
        let f = &s.fabric;
        Ok(Response::new(pb::HealthReport {
            enabled: s.enabled,
            counters_note: s.counters_note.clone(),
            polls: s.polls,
            last_poll_unix_ms: s.last_poll_unix_ms,
            interval_s: s.interval_s,
            policy: s.policy.clone(),
            isolated: s
                .isolated
                .iter()
                .map(|i| pb::HealthIsolation {
                    switch_guid: i.link().map_or(0, |l| l.0),
                    port: u32::from(i.port),
                    port_seen: i.port_seen.clone(),
                    cause: i.cause.clone(),
                    value: i.value,
                    threshold: i.threshold,
                    reason: i.reason.clone(),
                    at_unix_ms: i.at_unix_ms,
                })
                .collect(),
            refused: s.refused.clone(),
            summary: Some(pb::FabricHealthSummary {
                switches_up: f.switches_up,
                switches_down: f.switches_down,
                links_up: f.links_up,
                links_down: f.links_down,
                end_ports_up: f.end_ports_up,
                end_ports_down: f.end_ports_down,
                ports_read: f.ports_read,
                ports_unreadable: f.ports_unreadable,
                ports_with_errors: f.ports_with_errors,
                warning_ports: f.warning_ports,
                isolated_links: f.isolated_ports,
                flapping_ports: f.flapping_ports,
            }),
            ports,
            ports_total: s.ports.len() as u32,
            driver: p.driver.to_string(),
            generation: p.generation(),
        }))
    }

    pub(super) async fn handle_clear_health(
        &self,
        req: Request<pb::ClearHealthRequest>,
    ) -> Result<Response<pb::ClearHealthResponse>, Status> {
        let req = req.into_inner();
        let target = if req.all {
            if !req.switch.is_empty() || !req.node.is_empty() {
                return Err(Status::invalid_argument("give either all or one port, not both"));
            }
            ClearTarget::All
        } else {
            ClearTarget::Port(resolve_port(
                &self.snapshot().cabling,
                &req.switch,
                req.port,
                &req.node,
            )?)
        };
        let cleared = self.health()?.clear(target).await.map_err(Status::unavailable)?;
        Ok(Response::new(pb::ClearHealthResponse { cleared }))
    }

    pub(super) async fn handle_inject_port_errors(
        &self,
        req: Request<pb::InjectPortErrorsRequest>,
    ) -> Result<Response<pb::InjectPortErrorsResponse>, Status> {
        let req = req.into_inner();
        if !self.health()?.fault_injection() {
            return Err(Status::failed_precondition(
                "fault injection is disabled (set [fault_injection] enabled = true and reload)",
            ));
        }
        let p = self.snapshot();
        let port = resolve_port(&p.cabling, &req.switch, req.port, &req.node)?;
        if req.counters.is_empty() {
            return Err(Status::invalid_argument("no counter given (e.g. symbol_errors = 100)"));
        }
        let mut delta = PortCounters::default();
        for (name, &n) in &req.counters {
            let c = Counter::from_name(name).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "unknown counter {name:?}; one of: {}",
                    Counter::ALL.map(Counter::name).join(", ")
                ))
            })?;
            *delta.get_mut(c) = n;
        }
        let sim = self.shared.simulator.as_ref().ok_or_else(|| {
            Status::failed_precondition(format!(
                "driver {:?} does not simulate port counters (mock driver only; on a real fabric use the \
                 simulator's own error injection, e.g. ibsim)",
                p.driver
            ))
        })?;
        sim.add_port_errors(port, &delta).map_err(|e| match e {
            fabric_southbound::TraceError::Unsupported(what) => {
                Status::failed_precondition(format!("driver {:?} does not simulate {what}", p.driver))
            }
            other => Status::invalid_argument(other.to_string()),
        })?;
        tracing::info!(port = %port, counters = ?req.counters, "drill: port errors injected");
        Ok(Response::new(pb::InjectPortErrorsResponse { port: port.to_string() }))
    }
}

/// A switch port (switch GUID or name, port) or an end port (GUID or name).
fn resolve_port(f: &Fabric, switch: &str, port: u32, node: &str) -> Result<CounterPort, Status> {
    match (switch.trim().is_empty(), node.trim().is_empty()) {
        (false, true) => {
            let s = f.switch(resolve_switch(f, switch)?);
            if port == 0 || port > u32::from(s.nports) {
                return Err(Status::invalid_argument(format!(
                    "switch {} has no port {port} (ports 1..={})",
                    fabric_topology::fmt_guid(s.guid),
                    s.nports
                )));
            }
            Ok(CounterPort::Switch {
                switch: s.guid,
                port: port as u8,
            })
        }
        (true, false) => {
            let ep = resolve_end_port(f, node).map_err(Status::invalid_argument)?;
            Ok(CounterPort::EndPort(f.end_port(ep).port_guid))
        }
        _ => Err(Status::invalid_argument(
            "name one port: a switch (GUID or name) and a port, or an end port (node)",
        )),
    }
}

fn port_health(h: &PortHealth) -> pb::PortHealth {
    let (switch_guid, port, end_port_guid) = match h.port {
        CounterPort::Switch { switch, port } => (switch, u32::from(port), 0),
        CounterPort::EndPort(g) => (0, 0, g),
    };
    pb::PortHealth {
        switch_guid,
        port,
        end_port_guid,
        name: h.name.clone(),
        remote: h.remote.clone(),
        state: match h.state {
            PortState::Ok => pb::PortHealthState::Ok,
            PortState::Warning => pb::PortHealthState::Warning,
            PortState::Isolated => pb::PortHealthState::Isolated,
        } as i32,
        reason: h.reason.clone(),
        counters: h
            .counters
            .iter()
            .map(|c| pb::CounterValue {
                counter: c.counter.name().into(),
                value: c.value,
                has_rate: c.rate.is_some(),
                rate: c.rate.unwrap_or(0.0),
                saturated: c.saturated,
            })
            .collect(),
        max_error_rate: h.max_error_rate,
        flaps: h.flaps,
        read_error: h.read_error.clone(),
    }
}
