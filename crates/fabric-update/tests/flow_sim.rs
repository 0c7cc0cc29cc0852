//! Flow-level simulation of the five-phase update (issue 5 acceptance, protocol level).
//!
//! A 3-level PGFT is routed by Dmodc (base LIDs) and Up*/Down* (escape LIDs). Flows (source end
//! port → destination, each attached to a subscriber) send one packet per tick; every packet
//! advances one switch hop per tick through the tables the switches *currently* hold, and the
//! uploads write one LFT block per tick, so writes interleave with packets in flight. Virtual
//! link faults are injected; one arrives while a generation is being installed and is queued.
//!
//! Checked:
//! * per-flow consistency: every packet is forwarded, at every hop, by the entries of one and
//!   the same routing generation for the LID it carries (never a mix of old and new tables);
//! * every packet of an acked flow is delivered, in order;
//! * after every block write, the channel-dependency graphs of the base LIDs and of the escape
//!   LIDs are each acyclic;
//! * control run: the same scenario with a direct upload (no protocol) shows mixed-table packets.
//!
//! A subscriber that never acks (deadline test): the update proceeds after the deadline, the miss
//! is reported, and with the strict policy the generation is aborted and the base tables stay.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use fabric_ranking::{rank, RankOptions};
use fabric_routing::check::cdg_acyclic;
use fabric_routing::{
    assign_lids, route_all, EngineKind, Guid2Lid, LftBlockDiff, Lfts, LidPlan, LidSet, RoutingContext,
};
use fabric_topology::gen::generate_str;
use fabric_topology::{EndPortId, Fabric, FabricEvent, Lid, Remote, SwitchId};
use fabric_update::{
    split_writes, Action, DeadlinePolicy, EscapeMask, Input, Missed, Phase, Protocol, ProtocolConfig, Report,
    SubscriberId,
};

const SPEC: &str = "PGFT(3;4,4,4;1,4,4;1,1,1)";
const HOP_LIMIT: usize = 16;

fn route(f: &Fabric, lids: &LidPlan) -> Lfts {
    let ranking = rank(f, &RankOptions::default());
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids,
    };
    route_all(&ctx, EngineKind::Dmodc).expect("routing").lfts
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Move {
    #[default]
    None,
    ToEscape,
    ToBase,
}

#[derive(Debug)]
struct Flow {
    src: EndPortId,
    dst: EndPortId,
    sub: usize,
    on_escape: bool,
    next_seq: u64,
    delivered: u64,
    in_flight: usize,
    /// Packets that met a mix of generations / arrived out of order / were lost.
    mixed: u64,
    reordered: u64,
    lost: u64,
}

#[derive(Debug)]
struct Packet {
    flow: usize,
    seq: u64,
    dlid: Lid,
    at: SwitchId,
    hops: Vec<(SwitchId, u8)>,
}

#[derive(Debug, Default, Clone)]
struct Sub {
    /// Ack delay in ticks (`None`: never acks).
    ack_after: Option<u64>,
    moving: Move,
    notice: Option<(u64, Phase, u64)>,
}

struct Sim {
    phys: Fabric,
    lids: LidPlan,
    mask: EscapeMask,
    tables: Lfts,
    /// Every routing generation installed or targeted so far (consistency reference).
    routings: Vec<Lfts>,
    flows: Vec<Flow>,
    packets: Vec<Packet>,
    queue: VecDeque<LftBlockDiff>,
    tick: u64,
    writes: u64,
    cdg_checks: u64,
    /// Block writes after which the CDG of a LID set carrying traffic (packets in flight or a
    /// flow sending on it) was cyclic, and of an idle LID set (harmless: no packet uses it).
    cyclic_live: u64,
    cyclic_idle: u64,
    /// Per subscriber: its flows are draining (not sending).
    paused: Vec<bool>,
    sending: bool,
}

impl Sim {
    fn new() -> Sim {
        let phys = generate_str(SPEC, None).expect("generate");
        let lids = assign_lids(&phys, &Guid2Lid::new(), 1, 0xBFFF).expect("lids");
        let tables = route(&phys, &lids);
        let n = phys.num_end_ports() as u32;
        let mut flows = Vec::new();
        for i in 0..3 * n {
            let src = i % n;
            let mut dst = (i * 11 + 29 + (i / n) * 17) % n;
            if dst == src {
                dst = (dst + 1) % n;
            }
            flows.push(Flow {
                src: EndPortId(src),
                dst: EndPortId(dst),
                sub: (i % 4) as usize,
                on_escape: false,
                next_seq: 0,
                delivered: 0,
                in_flight: 0,
                mixed: 0,
                reordered: 0,
                lost: 0,
            });
        }
        Sim {
            mask: EscapeMask::new(&lids),
            routings: vec![tables.clone()],
            phys,
            lids,
            tables,
            flows,
            packets: Vec::new(),
            queue: VecDeque::new(),
            tick: 0,
            writes: 0,
            cdg_checks: 0,
            cyclic_live: 0,
            cyclic_idle: 0,
            paused: vec![false; 4],
            sending: true,
        }
    }

    /// Uplinks (switch, port) of distinct leaves, to fail.
    fn fault_links(&self) -> Vec<FabricEvent> {
        let mut out = Vec::new();
        let mut seen = Vec::new();
        for ep in [EndPortId(0), EndPortId(20), EndPortId(45)] {
            let (leaf, _) = self.phys.end_port(ep).attach.expect("attached");
            if seen.contains(&leaf) {
                continue;
            }
            seen.push(leaf);
            let s = self.phys.switch(leaf);
            let (port, _) = s
                .external_ports()
                .find(|(_, p)| matches!(p.remote, Remote::Switch { .. }))
                .expect("an uplink");
            out.push(FabricEvent::LinkDown { switch: s.guid, port });
        }
        out
    }

    /// Queues block writes in a scrambled but deterministic order: a parallel upload completes
    /// its blocks in no particular order.
    fn enqueue(&mut self, mut writes: Vec<LftBlockDiff>) {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ writes.len() as u64;
        for i in (1..writes.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            writes.swap(i, (x % (i as u64 + 1)) as usize);
        }
        self.queue.extend(writes);
    }

    fn target(&mut self, excluded: &[FabricEvent]) -> Lfts {
        let f = self.phys.apply(excluded).expect("apply");
        let t = route(&f, &self.lids);
        self.routings.push(t.clone());
        t
    }

    fn step_packets(&mut self) {
        let mut keep = Vec::with_capacity(self.packets.len());
        let mut arrived = Vec::new();
        for mut p in std::mem::take(&mut self.packets) {
            let port = self.tables.get(p.at, p.dlid);
            p.hops.push((p.at, port));
            let sw = self.phys.switch(p.at);
            let remote = sw.ports.get(port as usize).map(|x| x.remote).unwrap_or_default();
            match remote {
                Remote::Switch { sw, .. } if p.hops.len() < HOP_LIMIT => {
                    p.at = sw;
                    keep.push(p);
                }
                Remote::EndPort(e) if e == self.flows[p.flow].dst => arrived.push((p, true)),
                _ => arrived.push((p, false)),
            }
        }
        self.packets = keep;
        for (p, ok) in arrived {
            let consistent = self
                .routings
                .iter()
                .any(|r| p.hops.iter().all(|&(s, port)| r.get(s, p.dlid) == port));
            let f = &mut self.flows[p.flow];
            f.in_flight -= 1;
            if !consistent {
                f.mixed += 1;
            }
            if !ok {
                f.lost += 1;
                continue;
            }
            if p.seq != f.delivered + f.lost {
                f.reordered += 1;
            }
            f.delivered += 1;
        }
    }

    fn inject(&mut self) {
        if !self.sending {
            return;
        }
        for (i, f) in self.flows.iter_mut().enumerate() {
            if self.paused[f.sub] {
                continue;
            }
            let base = self.lids.base_lid(f.dst);
            let dlid = if f.on_escape { base + 1 } else { base };
            let (at, _) = self.phys.end_port(f.src).attach.expect("attached");
            self.packets.push(Packet {
                flow: i,
                seq: f.next_seq,
                dlid,
                at,
                hops: Vec::new(),
            });
            f.next_seq += 1;
            f.in_flight += 1;
        }
    }

    /// Writes one queued block; checks both CDGs. Returns whether the queue became empty.
    fn write_one(&mut self) -> bool {
        if let Some(w) = self.queue.pop_front() {
            self.tables
                .block_mut(w.switch, w.block as usize)
                .copy_from_slice(&w.entries);
            self.writes += 1;
            for set in [LidSet::Base, LidSet::Escape] {
                let esc = set == LidSet::Escape;
                let live = self.packets.iter().any(|p| self.mask.is_escape(p.dlid) == esc)
                    || (self.sending && self.flows.iter().any(|f| f.on_escape == esc && !self.paused[f.sub]));
                if !cdg_acyclic(&self.phys, &self.lids, &self.tables, set) {
                    if live {
                        self.cyclic_live += 1;
                    } else {
                        self.cyclic_idle += 1;
                    }
                }
            }
            self.cdg_checks += 2;
            return self.queue.is_empty();
        }
        false
    }
}

/// A notice reaches the subscribers (a dead one ignores it).
fn notify(subscribers: &mut [Sub], list: &[SubscriberId], generation: u64, ph: Phase, tick: u64) {
    for s in list {
        let sub = &mut subscribers[s.0 as usize];
        if sub.ack_after.is_none() {
            continue;
        }
        sub.moving = if ph == Phase::Unpath {
            Move::ToEscape
        } else {
            Move::ToBase
        };
        sub.notice = Some((generation, ph, tick));
    }
}

/// Outcome of a protocol run.
struct RunResult {
    sim: Sim,
    reports: Vec<Report>,
    aborts: Vec<(String, Report)>,
    final_target: Lfts,
}

/// Runs the scenario through the protocol. `subs[k]` = ack delay of subscriber k in ticks.
fn run_protocol(subs: [Option<u64>; 4], config: ProtocolConfig) -> RunResult {
    let mut sim = Sim::new();
    let faults = sim.fault_links();
    assert!(faults.len() >= 2, "need two faults");
    let t0 = Instant::now();
    let mut p = Protocol::new(config);
    let mut subscribers: Vec<Sub> = subs
        .iter()
        .map(|a| Sub {
            ack_after: *a,
            ..Sub::default()
        })
        .collect();
    for k in 0..4 {
        assert!(p
            .on(
                t0,
                Input::SubscriberJoined {
                    subscriber: SubscriberId(k as u64)
                }
            )
            .is_empty());
    }
    let mut excluded: Vec<FabricEvent> = Vec::new();
    let mut queued: Vec<FabricEvent> = Vec::new();
    let mut target: Option<Lfts> = None;
    let mut inputs: VecDeque<Input> = VecDeque::new();
    let mut deadlines: BTreeMap<u64, u64> = BTreeMap::new();
    let mut upload: Option<(bool, fabric_update::AttemptId)> = None;
    let mut reports = Vec::new();
    let mut aborts = Vec::new();
    let mut generation = 0u64;
    let mut second_injected = false;
    let mut installed_target = sim.tables.clone();
    while sim.tick < 3000 {
        sim.tick += 1;
        let now = t0 + Duration::from_millis(sim.tick);
        if sim.tick == 40 {
            queued.push(faults[0].clone());
        }
        // The second fault arrives while generation 1 is in Unpath: queued for the next one.
        if !second_injected && p.phase() == Phase::Unpath {
            second_injected = true;
            queued.push(faults[1].clone());
            inputs.push_back(Input::Fault {
                breaks_target: false,
                description: faults[1].to_string(),
            });
        }
        if p.phase() == Phase::Idle && !queued.is_empty() {
            excluded.append(&mut queued);
            generation += 1;
            inputs.push_back(Input::Begin { generation });
        }
        // Deadlines.
        let due: Vec<u64> = deadlines
            .iter()
            .filter(|(_, &t)| t <= sim.tick)
            .map(|(&k, _)| k)
            .collect();
        for k in due {
            deadlines.remove(&k);
            inputs.push_back(Input::Deadline { token: k });
        }
        // Subscribers: drain, move, ack.
        for (k, s) in subscribers.iter_mut().enumerate() {
            let Some((g, ph, since)) = s.notice else { continue };
            if s.moving != Move::None {
                let mine = sim.flows.iter().filter(|f| f.sub == k);
                if mine.clone().all(|f| f.in_flight == 0) {
                    let esc = s.moving == Move::ToEscape;
                    for f in sim.flows.iter_mut().filter(|f| f.sub == k) {
                        f.on_escape = esc;
                    }
                    s.moving = Move::None;
                }
            }
            if s.moving == Move::None {
                if let Some(d) = s.ack_after {
                    if sim.tick >= since + d {
                        s.notice = None;
                        inputs.push_back(Input::Ack {
                            subscriber: SubscriberId(k as u64),
                            generation: g,
                            phase: ph,
                        });
                    }
                }
            }
        }
        // Uploads: one block per tick.
        if let Some((escape, at)) = upload {
            if sim.queue.is_empty() || sim.write_one() {
                upload = None;
                if escape {
                    inputs.push_back(Input::EscapeUploaded { at, result: Ok(()) });
                } else {
                    let t = target.as_ref().expect("target");
                    let verified = &sim.tables == t;
                    inputs.push_back(Input::BaseUploaded {
                        at,
                        result: if verified {
                            Ok(())
                        } else {
                            Err("read-back mismatch".into())
                        },
                    });
                }
            }
        }
        // Protocol.
        while let Some(i) = inputs.pop_front() {
            for a in p.on(now, i) {
                match a {
                    Action::PhaseChanged { .. } => {}
                    Action::Compute { at } => {
                        target = Some(sim.target(&excluded));
                        inputs.push_back(Input::Computed { at, result: Ok(()) });
                    }
                    Action::UploadEscape { at } => {
                        let t = target.as_ref().expect("target");
                        let st = split_writes(&sim.tables, &sim.tables.diff(t), &sim.mask);
                        sim.enqueue(st.escape);
                        upload = Some((true, at));
                    }
                    Action::UploadBase { at } => {
                        let t = target.as_ref().expect("target");
                        let st = split_writes(&sim.tables, &sim.tables.diff(t), &sim.mask);
                        assert!(st.escape.is_empty(), "escape stage already installed");
                        sim.enqueue(st.base);
                        upload = Some((false, at));
                    }
                    Action::NotifyUnpath {
                        generation,
                        subscribers: list,
                        ..
                    } => notify(&mut subscribers, &list, generation, Phase::Unpath, sim.tick),
                    Action::NotifyRepath {
                        generation,
                        subscribers: list,
                        ..
                    } => notify(&mut subscribers, &list, generation, Phase::Repath, sim.tick),
                    Action::ArmDeadline { token, after } => {
                        deadlines.insert(token, sim.tick + after.as_millis() as u64);
                    }
                    Action::Commit { at, report } => {
                        installed_target = target.clone().expect("target");
                        reports.push(report);
                        inputs.push_back(Input::Committed { at });
                    }
                    Action::Abort { reason, report, .. } => {
                        aborts.push((reason, report));
                    }
                    Action::Restart { .. } => panic!("no restart expected"),
                }
            }
        }
        // Paused: subscribers draining stop sending.
        sim.paused = subscribers.iter().map(|s| s.moving != Move::None).collect();
        sim.inject();
        sim.step_packets();
        if sim.tick == 2800 {
            sim.sending = false;
        }
    }
    assert!(sim.packets.is_empty(), "every packet left the fabric");
    RunResult {
        sim,
        reports,
        aborts,
        final_target: installed_target,
    }
}

/// The same faults installed by a direct upload while all flows keep sending on base LIDs.
fn run_direct() -> Sim {
    let mut sim = Sim::new();
    let faults = sim.fault_links();
    let mut excluded = Vec::new();
    while sim.tick < 1500 {
        sim.tick += 1;
        if sim.tick % 400 == 40 && (sim.tick / 400) < faults.len() as u64 {
            excluded.push(faults[(sim.tick / 400) as usize].clone());
            let t = sim.target(&excluded);
            let d = sim.tables.diff(&t);
            sim.enqueue(d);
        }
        sim.write_one();
        sim.inject();
        sim.step_packets();
        if sim.tick == 1400 {
            sim.sending = false;
        }
    }
    sim
}

#[test]
fn five_phase_update_keeps_every_acked_flow_consistent_delivered_and_in_order() {
    let r = run_protocol([Some(0), Some(3), Some(10), Some(1)], ProtocolConfig::default());
    assert_eq!(r.reports.len(), 2, "two generations (the second fault was queued)");
    assert!(r.aborts.is_empty());
    assert_eq!(r.reports[0].queued_faults.len(), 1);
    for rep in &r.reports {
        assert!(rep.missed.is_empty(), "{rep:?}");
    }
    assert_eq!(r.sim.tables, r.final_target, "the fabric holds the last generation");
    assert!(r.sim.writes > 0 && r.sim.cdg_checks > 0);
    assert_eq!(r.sim.cyclic_live, 0, "a LID set carrying traffic had a cyclic CDG");
    eprintln!(
        "five-phase: {} block writes, {} CDG checks, {} transient cycles on idle LID sets",
        r.sim.writes, r.sim.cdg_checks, r.sim.cyclic_idle
    );
    for (i, f) in r.sim.flows.iter().enumerate() {
        assert_eq!(f.mixed, 0, "flow {i} met mixed tables");
        assert_eq!(f.lost, 0, "flow {i} lost packets");
        assert_eq!(f.reordered, 0, "flow {i} reordered");
        assert_eq!(f.delivered, f.next_seq, "flow {i}: every packet delivered");
        assert!(f.delivered > 1000);
    }
}

#[test]
fn control_direct_upload_shows_mixed_table_packets() {
    let sim = run_direct();
    let mixed: u64 = sim.flows.iter().map(|f| f.mixed).sum();
    let lost: u64 = sim.flows.iter().map(|f| f.lost).sum();
    let reordered: u64 = sim.flows.iter().map(|f| f.reordered).sum();
    eprintln!(
        "direct upload: {mixed} mixed-table packets, {lost} lost, {reordered} reordered, {} block writes, \
         cyclic CDG of a live LID set after {} writes",
        sim.writes, sim.cyclic_live
    );
    assert!(mixed > 0, "the direct upload must expose mixed-table packets");
}

#[test]
fn subscriber_that_never_acks_is_reported_and_update_proceeds() {
    let cfg = ProtocolConfig {
        unpath_deadline: Duration::from_millis(200),
        repath_deadline: Duration::from_millis(200),
        ..ProtocolConfig::default()
    };
    let r = run_protocol([Some(0), Some(2), None, Some(1)], cfg);
    assert_eq!(r.reports.len(), 2);
    for rep in &r.reports {
        assert_eq!(
            rep.missed,
            vec![
                Missed {
                    subscriber: SubscriberId(2),
                    phase: Phase::Unpath
                },
                Missed {
                    subscriber: SubscriberId(2),
                    phase: Phase::Repath
                }
            ]
        );
        assert!(rep.durations[&Phase::Unpath] >= Duration::from_millis(200));
    }
    assert_eq!(r.sim.tables, r.final_target);
    for (i, f) in r.sim.flows.iter().enumerate().filter(|(_, f)| f.sub != 2) {
        assert_eq!((f.mixed, f.lost, f.reordered), (0, 0, 0), "acked flow {i}");
        assert_eq!(f.delivered, f.next_seq);
    }
}

#[test]
fn strict_policy_aborts_and_keeps_the_previous_base_routing() {
    let cfg = ProtocolConfig {
        unpath_deadline: Duration::from_millis(100),
        policy: DeadlinePolicy::Abort,
        ..ProtocolConfig::default()
    };
    let r = run_protocol([Some(0), None, Some(0), Some(0)], cfg);
    assert!(r.reports.is_empty(), "nothing committed");
    assert!(!r.aborts.is_empty());
    let original = &r.sim.routings[0];
    // Every base-LID entry is still the original routing's.
    for s in 0..r.sim.phys.num_switches() as u32 {
        for lid in 1..=r.sim.lids.top() {
            if !r.sim.mask.is_escape(lid) {
                assert_eq!(r.sim.tables.get(SwitchId(s), lid), original.get(SwitchId(s), lid));
            }
        }
    }
    for (i, f) in r.sim.flows.iter().enumerate() {
        assert_eq!((f.mixed, f.lost, f.reordered), (0, 0, 0), "flow {i}");
        assert!(!f.on_escape, "flow {i} was sent back to the base LIDs");
    }
}
