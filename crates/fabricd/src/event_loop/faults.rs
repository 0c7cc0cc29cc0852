//! Faults: physical changes reported by the driver, injected ones (virtual exclusions, or
//! physical through the driver, which runs as a task), and what a change does to a five-phase
//! update in progress.

use std::sync::Arc;

use fabric_topology::{fmt_guid, Fabric, FabricEvent, Guid, PortNum, Remote};
use fabric_update::Input as UInput;

use super::exclusion::{canonical_link, Exclusion};
use super::internal::{Internal, PhysicalFaultDone};
use super::request::Reply;
use super::{event_kind, EventLoop, FaultAccepted, FaultRequest, FaultTarget, LoopError};
use crate::compute::ComputeInput;
use crate::state::Notice;

impl EventLoop {
    pub(super) fn on_driver_event(&mut self, fe: FabricEvent) {
        if let Err(e) = self.cabling.check_event(&fe) {
            tracing::warn!(event = %fe, error = %e, "ignoring a driver event");
            return;
        }
        tracing::info!(event = %fe, "physical change");
        if let FabricEvent::SwitchUp(g) = fe {
            // A switch that comes back may have lost its tables: rewrite them whole.
            if let Some(id) = self.cabling.switch_by_guid(g) {
                self.resync.insert(id.0);
                self.side.mft_resync.insert(id.0);
            }
            // Its P_Key tables (port 0, enforcement on its ports) are written again too.
            let pkeys = std::sync::Arc::make_mut(&mut self.side.installed_pkeys);
            pkeys.retain(|p, _| !matches!(p, fabric_southbound::PkeyPort::SwitchPort(s, _) if *s == g));
        }
        if let FabricEvent::EndPortUp(g) = fe {
            // A node that comes back may have been reset: its P_Key table is written again.
            self.side.pkey_resync.insert(fabric_southbound::PkeyPort::EndPort(g));
        }
        self.io.telemetry.fault(event_kind(&fe), "driver");
        let _ = self.io.notices.send(Notice::TopologyChange {
            event: fe.clone(),
            physical: true,
        });
        self.pending_physical.push(fe.clone());
        if let Some(sa) = &self.io.sa {
            sa.physical_changed(&self.physical, &self.pending_physical);
        }
        self.note_change(true);
        self.change_during_update(&fe);
    }

    /// A change arrived: during a five-phase update, tell the protocol whether it breaks the
    /// routing being installed (some entry of the target's base or escape tables forwards
    /// through a port it kills: restart from Prepare) or not (queued for the next generation).
    fn change_during_update(&mut self, ev: &FabricEvent) {
        // A direct upload queues it; computing: the computation in flight is superseded by one
        // including the change; draining, folding or committing: what follows includes it.
        let Some(c) = self
            .install
            .as_ref()
            .filter(|i| i.five_phase)
            .and_then(|i| i.computed())
        else {
            return;
        };
        let reason = breaking_reason(&self.cabling, &c.ports_in_use, ev);
        tracing::info!(event = %ev, breaks_target = reason.is_some(), "change during an update");
        self.protocol_input(UInput::Fault {
            breaks_target: reason.is_some(),
            description: reason.unwrap_or_else(|| ev.to_string()),
        });
    }

    /// The canonical exclusion of a virtual fault.
    fn exclusion_of(&self, t: &FaultTarget) -> Exclusion {
        match *t {
            FaultTarget::Link { switch, port } => canonical_link(&self.cabling, switch, port),
            FaultTarget::Switch(g) => Exclusion::Switch(g),
            FaultTarget::Node(g) => Exclusion::Node(g),
        }
    }

    pub(super) fn on_inject(&mut self, req: FaultRequest, reply: Reply<FaultAccepted>) {
        if self.shutting_down.is_some() {
            let _ = reply.send(Err(LoopError::ShuttingDown));
            return;
        }
        let fi = &self.settings.fault_injection;
        if !fi.enabled {
            let _ = reply.send(Err(LoopError::FailedPrecondition(
                "fault injection is disabled (set [fault_injection] enabled = true and reload)".into(),
            )));
            return;
        }
        if req.physical && !fi.allow_physical {
            let _ = reply.send(Err(LoopError::FailedPrecondition(
                "physical fault injection is disabled (set [fault_injection] allow_physical = true and reload)".into(),
            )));
            return;
        }
        let event = req.target.event(req.up);
        if let Err(e) = self.cabling.check_event(&event) {
            let _ = reply.send(Err(LoopError::InvalidArgument(e.to_string())));
            return;
        }
        let before = self.schedule.change_seq();
        if req.physical {
            self.start_physical_fault(req, reply, before);
            return;
        }
        self.virtual_fault(req, reply, before);
    }

    /// The port-health monitor isolates or restores a link (a virtual fault that is no drill:
    /// no `[fault_injection]` gate).
    pub(super) fn on_isolate(&mut self, switch: Guid, port: PortNum, isolate: bool, reply: Reply<FaultAccepted>) {
        if self.shutting_down.is_some() {
            let _ = reply.send(Err(LoopError::ShuttingDown));
            return;
        }
        let req = FaultRequest {
            target: FaultTarget::Link { switch, port },
            up: !isolate,
            physical: false,
            wait: false,
        };
        if let Err(e) = self.cabling.check_event(&req.target.event(req.up)) {
            let _ = reply.send(Err(LoopError::InvalidArgument(e.to_string())));
            return;
        }
        let before = self.schedule.change_seq();
        self.virtual_fault(req, reply, before);
    }

    /// Adds or removes a virtual fault (an exclusion) and answers.
    fn virtual_fault(&mut self, req: FaultRequest, reply: Reply<FaultAccepted>, before: u64) {
        let event = req.target.event(req.up);
        let x = self.exclusion_of(&req.target);
        let changed = if req.up {
            self.exclusions.remove(&x)
        } else {
            self.exclusions.insert(x)
        };
        if changed {
            tracing::info!(event = %event, "virtual fault");
            self.io.telemetry.fault(event_kind(&event), "virtual");
            let _ = self.io.notices.send(Notice::TopologyChange {
                event: event.clone(),
                physical: false,
            });
            self.note_change(true);
            self.change_during_update(&event);
        }
        self.answer_inject(&req, reply, before);
    }

    /// Answers an injection whose change (if any) is noted: at once, or once a generation
    /// covering it is committed (`wait`). `before`: the change number when it arrived.
    fn answer_inject(&mut self, req: &FaultRequest, reply: Reply<FaultAccepted>, before: u64) {
        let event = req.target.event(req.up);
        let changed = self.schedule.change_seq() > before;
        let text = if changed {
            event.to_string()
        } else {
            format!("{event} (no change)")
        };
        if req.wait && changed {
            self.waiters.injection(self.schedule.change_seq(), text, reply);
        } else {
            let _ = reply.send(Ok(FaultAccepted {
                event: text,
                generation: self.generation(),
            }));
        }
        self.maybe_start();
    }

    /// Asks the driver to change the physical state, in a task (answered by
    /// [`Internal::PhysicalFaultDone`]).
    fn start_physical_fault(&mut self, req: FaultRequest, reply: Reply<FaultAccepted>, before: u64) {
        // The switch, and the port to set (none: the whole switch). Physically, a node is
        // taken down by its cable: the leaf port it hangs on.
        let (switch, port) = match req.target {
            FaultTarget::Link { switch, port } => (switch, Some(port)),
            FaultTarget::Switch(g) => (g, None),
            FaultTarget::Node(g) => match node_cable(&self.cabling, g) {
                Ok((switch, port)) => (switch, Some(port)),
                Err(e) => return drop(reply.send(Err(e))),
            },
        };
        let id = self.next_physical_fault;
        self.next_physical_fault += 1;
        let d = self.io.driver.clone();
        let task = self.tasks.spawn(async move {
            let r = match port {
                Some(port) => d.set_port_state(switch, port, req.up).await,
                None => d.set_switch_state(switch, req.up).await,
            };
            let result = r.map_err(|e| LoopError::FailedPrecondition(format!("driver refused the fault: {e}")));
            Internal::PhysicalFaultDone(Box::new(PhysicalFaultDone {
                id,
                req,
                reply,
                before,
                result,
            }))
        });
        self.physical_faults.insert(id, task);
    }

    pub(super) fn on_physical_fault_done(&mut self, done: PhysicalFaultDone) {
        let PhysicalFaultDone {
            id,
            req,
            reply,
            before,
            result,
        } = done;
        self.physical_faults.remove(&id);
        if let Err(e) = result {
            let _ = reply.send(Err(e));
            return;
        }
        // The driver reports the change on its stream before returning: take it now so the
        // waiter covers it.
        while let Ok(fe) = self.driver_rx.try_recv() {
            self.on_driver_event(fe);
        }
        self.answer_inject(&req, reply, before);
    }

    /// The input of a computation of the current state (every change so far, like the next
    /// generation would see it) with `down` taken down too: a maintenance plan (`WhatIf`).
    pub(super) fn what_if_input(&self, down: &[FaultTarget]) -> Result<Box<ComputeInput>, LoopError> {
        if self.shutting_down.is_some() {
            return Err(LoopError::ShuttingDown);
        }
        let mut exclusions: Vec<FabricEvent> = self.exclusions.iter().map(|x| x.down_event()).collect();
        for t in down {
            let ev = t.event(false);
            self.cabling
                .check_event(&ev)
                .map_err(|e| LoopError::InvalidArgument(e.to_string()))?;
            exclusions.push(ev);
        }
        let mut input = self.compute_input(0, exclusions, Arc::default(), Arc::default(), false);
        (input.validate, input.ports_in_use) = (false, false);
        Ok(Box::new(input))
    }
}

/// The leaf port the end port `g` hangs on (switch GUID, port).
fn node_cable(cabling: &Fabric, g: fabric_topology::Guid) -> Result<(fabric_topology::Guid, PortNum), LoopError> {
    let ep = cabling
        .end_port_by_guid(g)
        .ok_or_else(|| LoopError::InvalidArgument(format!("unknown end port GUID {}", fmt_guid(g))))?;
    let Some((sw, port)) = cabling.end_port(ep).attach else {
        return Err(LoopError::InvalidArgument(format!(
            "end port {} is not cabled",
            fmt_guid(g)
        )));
    };
    Ok((cabling.switch(sw).guid, port))
}

/// Why `ev` breaks the routing whose used ports are `used`, or `None` when it does not.
///
/// A change breaks a routing when a port it kills is one that some LFT entry forwards through:
/// both ends of a link going down; the ports of the neighbours facing a switch going down (the
/// dead switch's own entries no longer matter). A port facing an end port carries only that end
/// port's own traffic, which no routing can save: an end port or its cable going down breaks
/// nothing. Changes bringing something up never break a routing.
pub(crate) fn breaking_reason(cabling: &Fabric, used: &crate::compute::PortUse, ev: &FabricEvent) -> Option<String> {
    use fabric_topology::SwitchId;
    let mut cut: Vec<(SwitchId, PortNum)> = Vec::new();
    match *ev {
        FabricEvent::LinkDown { switch, port } => {
            let sid = cabling.switch_by_guid(switch)?;
            if let Remote::Switch { sw, port: rp } = cabling.switch(sid).ports.get(port as usize)?.remote {
                cut.push((sid, port));
                cut.push((sw, rp));
            }
        }
        FabricEvent::SwitchDown(g) => {
            let sid = cabling.switch_by_guid(g)?;
            for (_, p) in cabling.switch(sid).external_ports() {
                if let Remote::Switch { sw, port } = p.remote {
                    cut.push((sw, port));
                }
            }
        }
        _ => return None,
    }
    let (sw, port) = cut.into_iter().find(|&(s, p)| used.in_use(s, p))?;
    Some(format!(
        "{ev} cuts switch {} port {port}, which the routing being installed forwards through",
        fmt_guid(cabling.switch(sw).guid)
    ))
}
