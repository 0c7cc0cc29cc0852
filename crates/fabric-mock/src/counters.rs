//! Port counters of the simulated fabric: one [`PortCounters`] per switch external port and per
//! end port, read by [`SouthboundDriver::read_port_counters`](fabric_southbound::SouthboundDriver::read_port_counters)
//! and raised by drills ([`PacketSimulator::add_port_errors`](fabric_southbound::PacketSimulator::add_port_errors),
//! [`MockFabric::add_port_counters`]).
//!
//! What moves the counters:
//!
//! * **drills**: `add_port_errors` adds a delta to one port, saturating every field at its IBA
//!   width ([`PortCounters::add_saturating`]), as the hardware does;
//! * **link losses**: a live link taken down (`set_port_state(.., false)`), a switch powered off
//!   and an end port powered off add 1 to `link_downed` on the surviving ends of each link that
//!   was live (both ends for a cable taken down; the neighbours' ports for a switch or end port
//!   powered off), as LinkDownedCounter does;
//! * **reboots**: when [`MockConfig::reset_on_power_cycle`](crate::MockConfig) is set, powering a
//!   switch back on resets its ports' counters to 0, with its tables;
//! * **background errors** ([`MockConfig::port_error_rates`](crate::MockConfig)): listed ports
//!   gain errors at a configured rate, accrued with the mock's clock and added when the
//!   port's counters are read (see [`PortErrorRate`]);
//! * nothing else: the mock moves no traffic (traces are checks, not packets), so the data,
//!   packet and `xmit_wait` counters stay 0 unless a drill adds to them.
//!
//! Reads honour the mock's latency (one [`MockConfig::op_latency`](crate::MockConfig) per batch)
//! and reachability: ports of a powered-off switch or of one listed in
//! [`MockConfig::unreachable_switches`](crate::MockConfig) answer [`DriverError::Unreachable`]
//! naming the switch, an end port that is down answers it naming the port GUID. Reads never
//! fail at random ([`MockConfig::error_rate`](crate::MockConfig) is about block writes).

use std::sync::atomic::Ordering;

use fabric_southbound::{Counter, CounterPort, CountersReading, DriverError, PortCounters};
use fabric_topology::{EndPortId, Remote, SwitchId};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use crate::{lock, read, MockFabric};

/// One port that gains errors by itself ([`MockConfig::port_error_rates`](crate::MockConfig)).
///
/// Over an interval of `t` seconds the port gains `per_second · t` errors of `counter` on
/// average: the whole part, plus one more with the probability of the fractional part, drawn
/// from a generator seeded by [`MockConfig::seed`](crate::MockConfig) and the port. Errors
/// accrue on the mock's clock (tokio time: paused test clocks advance it) from the moment the
/// rate is configured, and are added (saturating) whenever counters are read. The port counts
/// whatever the state of its link or switch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortErrorRate {
    /// The port that gains errors.
    pub port: CounterPort,
    /// The counter it gains (usually an error counter, e.g. [`Counter::SymbolErrors`]).
    pub counter: Counter,
    /// Mean count per second (finite, at least 0).
    pub per_second: f64,
}

/// Accrual state of one [`PortErrorRate`].
#[derive(Debug)]
struct Background {
    slot: Slot,
    counter: Counter,
    per_second: f64,
    since: Instant,
    rng: ChaCha8Rng,
}

/// The counters of every port (switch ports indexed like `MockFabric::port_up`).
#[derive(Debug, Default)]
pub(crate) struct CounterStore {
    pub(crate) switch: Vec<PortCounters>,
    pub(crate) end: Vec<PortCounters>,
    background: Vec<Background>,
}

/// Where one port's counters are kept.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Switch(SwitchId, usize),
    End(EndPortId),
}

/// One more LinkDowned, nothing else.
fn one_link_down() -> PortCounters {
    PortCounters {
        link_downed: 1,
        ..PortCounters::default()
    }
}

impl CounterStore {
    fn get_mut(&mut self, s: Slot) -> &mut PortCounters {
        match s {
            Slot::Switch(_, i) => &mut self.switch[i],
            Slot::End(ep) => &mut self.end[ep.idx()],
        }
    }

    /// Adds the background errors accrued until `now`.
    fn accrue(&mut self, now: Instant) {
        let mut gained = Vec::with_capacity(self.background.len());
        for b in &mut self.background {
            let mean = b.per_second * now.saturating_duration_since(b.since).as_secs_f64();
            b.since = now;
            let whole = mean.floor();
            let extra = u64::from(b.rng.gen::<f64>() < mean - whole);
            let mut delta = PortCounters::default();
            // `as` saturates for floats beyond u64.
            *delta.get_mut(b.counter) = (whole as u64).saturating_add(extra);
            gained.push((b.slot, delta));
        }
        for (slot, delta) in gained {
            self.get_mut(slot).add_saturating(&delta);
        }
    }
}

impl MockFabric {
    /// The slot of `port`: an external port (1..=N) of a known switch, or a known end port.
    fn counter_slot(&self, port: CounterPort) -> Result<Slot, DriverError> {
        match port {
            CounterPort::Switch { switch, port } => {
                let sw = self.switch_id(switch)?;
                if port == 0 || port > self.topo.switch(sw).nports {
                    return Err(DriverError::InvalidPort {
                        guid: switch,
                        port,
                        reason: "no such external port",
                    });
                }
                Ok(Slot::Switch(sw, self.port_idx(sw, port)))
            }
            CounterPort::EndPort(g) => self
                .topo
                .end_port_by_guid(g)
                .map(Slot::End)
                .ok_or(DriverError::UnknownEndPort(g)),
        }
    }

    /// The counters of one port now, whatever the state of its switch (tests and simulators).
    pub fn port_counters(&self, port: CounterPort) -> Result<PortCounters, DriverError> {
        let s = self.counter_slot(port)?;
        let mut store = lock(&self.port_counters);
        store.accrue(Instant::now());
        Ok(*store.get_mut(s))
    }

    /// Replaces the background error sources (from [`MockConfig::port_error_rates`](crate::MockConfig));
    /// an unknown port is a configuration error naming it. Accrual restarts now.
    pub(crate) fn set_background_errors(&self, rates: &[crate::PortErrorRate], seed: u64) -> Result<(), DriverError> {
        let now = Instant::now();
        let mut background = Vec::with_capacity(rates.len());
        for (i, r) in rates.iter().enumerate() {
            let slot = self
                .counter_slot(r.port)
                .map_err(|e| DriverError::Config(format!("port_error_rates[{i}]: {}: {e}", r.port)))?;
            let key = match r.port {
                CounterPort::Switch { switch, port } => switch.rotate_left(8) ^ u64::from(port),
                CounterPort::EndPort(g) => g,
            };
            background.push(Background {
                slot,
                counter: r.counter,
                per_second: r.per_second,
                since: now,
                rng: crate::switch_rng(seed ^ i as u64, key),
            });
        }
        let mut store = lock(&self.port_counters);
        store.accrue(now);
        store.background = background;
        Ok(())
    }

    /// Adds `delta` to the counters of one port (saturating each field at its IBA width) and
    /// returns the port's counters after it. The port counts whatever the state of its switch,
    /// link or management path. Errors name the unknown switch, port or end port.
    pub fn add_port_counters(&self, port: CounterPort, delta: &PortCounters) -> Result<PortCounters, DriverError> {
        let s = self.counter_slot(port)?;
        let mut store = lock(&self.port_counters);
        let c = store.get_mut(s);
        c.add_saturating(delta);
        Ok(*c)
    }

    /// A cable taken down (called once its state changed): one `link_downed` more on both
    /// ends, when the link was live (its switch, and the switch or end port at the other end,
    /// up).
    pub(crate) fn count_link_down(&self, sw: SwitchId, port: fabric_topology::PortNum) {
        if !self.switch_up[sw.idx()].load(Ordering::SeqCst) {
            return;
        }
        let far = match self.topo.switch(sw).ports[port as usize].remote {
            Remote::Switch { sw: r, port: rp } if self.switch_up[r.idx()].load(Ordering::SeqCst) => {
                Some(Slot::Switch(r, self.port_idx(r, rp)))
            }
            Remote::EndPort(ep) if self.end_port_up[ep.idx()].load(Ordering::SeqCst) => Some(Slot::End(ep)),
            _ => None,
        };
        let Some(far) = far else { return };
        let mut store = lock(&self.port_counters);
        store.switch[self.port_idx(sw, port)].add_saturating(&one_link_down());
        store.get_mut(far).add_saturating(&one_link_down());
    }

    /// A switch about to be powered off: one `link_downed` more on the far end of each of its
    /// live links (switch peers that are up, end ports that are up).
    pub(crate) fn count_switch_loss(&self, sw: SwitchId) {
        let mut store = lock(&self.port_counters);
        for (pn, p) in self.topo.switch(sw).external_ports() {
            if !self.port_up[self.port_idx(sw, pn)].load(Ordering::SeqCst) {
                continue;
            }
            match p.remote {
                Remote::Switch { sw: r, port: rp } if self.switch_up[r.idx()].load(Ordering::SeqCst) && r != sw => {
                    store.switch[self.port_idx(r, rp)].add_saturating(&one_link_down());
                }
                Remote::EndPort(ep) if self.end_port_up[ep.idx()].load(Ordering::SeqCst) => {
                    store.end[ep.idx()].add_saturating(&one_link_down());
                }
                _ => {}
            }
        }
    }

    /// An end port about to be powered off: one `link_downed` more on the switch port facing it
    /// when that link was live.
    pub(crate) fn count_end_port_loss(&self, ep: EndPortId) {
        let Some((sw, pn)) = self.topo.end_port(ep).attach else {
            return;
        };
        if self.switch_up[sw.idx()].load(Ordering::SeqCst) && self.port_up[self.port_idx(sw, pn)].load(Ordering::SeqCst)
        {
            lock(&self.port_counters).switch[self.port_idx(sw, pn)].add_saturating(&one_link_down());
        }
    }

    /// A switch rebooted: its ports' counters back to 0.
    pub(crate) fn reset_switch_counters(&self, sw: SwitchId) {
        let n = self.topo.switch(sw).nports as usize;
        let first = self.port_idx(sw, 0);
        let mut store = lock(&self.port_counters);
        store.switch[first..=first + n].fill(PortCounters::default());
    }

    /// The answer for one port of a counters read: its counters, or why it cannot be read.
    fn read_one_counter(&self, port: CounterPort) -> Result<PortCounters, DriverError> {
        let s = self.counter_slot(port)?;
        let down = match (s, port) {
            (Slot::Switch(sw, _), CounterPort::Switch { switch, .. }) => (!self.switch_up[sw.idx()]
                .load(Ordering::SeqCst)
                || read(&self.config).unreachable_switches.contains(&switch))
            .then_some(switch),
            (Slot::End(ep), CounterPort::EndPort(g)) => {
                (!self.end_port_up[ep.idx()].load(Ordering::SeqCst)).then_some(g)
            }
            _ => None,
        };
        if let Some(guid) = down {
            return Err(DriverError::Unreachable { guid });
        }
        Ok(*lock(&self.port_counters).get_mut(s))
    }

    /// [`SouthboundDriver::read_port_counters`](fabric_southbound::SouthboundDriver::read_port_counters)
    /// of the mock: one latency for the batch, one answer per port in the order asked.
    pub(crate) async fn read_counters(&self, ports: &[CounterPort]) -> Vec<CountersReading> {
        self.sleep_op().await;
        lock(&self.port_counters).accrue(Instant::now());
        ports
            .iter()
            .map(|&port| CountersReading {
                port,
                counters: self.read_one_counter(port),
            })
            .collect()
    }
}

/// A fresh store for a fabric: `switch_ports` slots (every switch's ports 0..=N) and one per
/// end port.
pub(crate) fn new_store(switch_ports: usize, end_ports: usize) -> CounterStore {
    CounterStore {
        switch: vec![PortCounters::default(); switch_ports],
        end: vec![PortCounters::default(); end_ports],
        background: Vec::new(),
    }
}
