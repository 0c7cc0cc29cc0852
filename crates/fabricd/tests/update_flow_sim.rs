//! Flow-level simulation of the five-phase update through the daemon's own event loop and the
//! built-in simulated fabric (issue 5 acceptance).
//!
//! The real [`EventLoop`] drives a [`MockFabric`] (`PGFT(3;4,4,4;1,4,4;1,1,1)`: 64 end ports,
//! 48 switches; block writes take about a millisecond each, four uploads in flight). The test
//! mirrors the switches' LFTs through the mock's write observer and moves packets:
//!
//! * one flow per end port (source → a distant destination), each attached to one of four
//!   subscribers registered with the loop (`Request::Subscribe`);
//! * a tick injects one packet per sending flow and moves every packet in flight one switch hop
//!   through the tables the switches hold *at that instant*; a tick runs after every block write
//!   (from the observer, so writes and hops interleave) and every 0.3 ms from a ticker thread;
//! * subscribers react to the loop's notices as a real MPI library would: stop sending, wait
//!   until their packets in flight have arrived, switch their flows' destination LID (base ↔
//!   escape), resume, ack (`Request::Ack`).
//!
//! Scenario (virtual link faults, five generations): link A down; link B down, and while that
//! generation is in Unpath link A comes back (benign: queued, the next generation); link C
//! down, and while that generation's escape stage is uploading link D goes down (breaking: the
//! generation restarts from Prepare).
//!
//! Checked:
//! * per-flow consistency: every packet was forwarded, at every hop, by the entries of one and
//!   the same generation for the LID it carries (each generation's tables are captured when
//!   its Repath notice arrives: the base stage is then complete and nothing of the next
//!   generation is written yet);
//! * every packet of every flow is delivered, in order (all subscribers ack);
//! * after every block write the channel-dependency graph of each LID set (base LIDs on the data
//!   VLs, escape LIDs on the escape VL) that carries traffic is acyclic (a set nobody uses may
//!   be transiently cyclic while its blocks are rewritten);
//! * the tables captured for each generation are those the loop published for it, and the
//!   fabric ends with the committed generation installed.
//!
//! Control run: the same faults installed by direct upload (`[update] five_phase = false`)
//! while the flows keep sending on the base LIDs: mixed-table packets appear (in at least one of
//! a few runs: whether a packet sits between two rewritten switches is a matter of timing).
//!
//! Restart in Unpath: a breaking fault arrives after subscriber 0 acked (its flows are on the
//! escape LIDs); base-LID traffic must stay consistent, escape-LID mixing is reported (the
//! documented limit of a restart after subscribers moved).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use fabric_mock::BlockWritten;
use fabric_routing::check::cdg_acyclic;
use fabric_routing::{EngineKind, Lfts, LidPlan, LidSet};
use fabric_topology::{EndPortId, Fabric, Guid, Lid, PortNum, Remote, SwitchId};
use fabric_update::{EscapeMask, SubscriberId};
use fabricd::event_loop::{FaultAccepted, FaultRequest, FaultTarget, LoopError, Request, UpdateNotice};
use fabricd::state::{Phase, Published};
use tokio::sync::{mpsc, oneshot};

mod loop_harness;
use loop_harness::{links, start, until, Daemon};

const SPEC: &str = "PGFT(3;4,4,4;1,4,4;1,1,1)";
const SUBSCRIBERS: usize = 4;
const HOP_LIMIT: usize = 16;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug)]
struct Flow {
    src_leaf: SwitchId,
    dst: EndPortId,
    sub: usize,
    base: Lid,
    on_escape: bool,
    /// Draining: not sending.
    paused: bool,
    next_seq: u64,
    delivered: u64,
    in_flight: u64,
    lost: u64,
    reordered: u64,
}

#[derive(Debug)]
struct Packet {
    flow: u32,
    seq: u64,
    dlid: Lid,
    at: SwitchId,
    hops: Vec<(SwitchId, PortNum)>,
}

/// A packet's flow, destination LID and hops (switch, output port).
type PathKey = (u32, Lid, Vec<(SwitchId, PortNum)>);

/// A fault the simulation injects into the loop at a precise moment.
struct Trigger {
    link: (Guid, PortNum),
    up: bool,
    /// Fire after the subscriber's ack (its flows are then on the escape LIDs), not before.
    after_ack: bool,
    /// The answer to the injection (the generation that includes it).
    reply: Option<oneshot::Receiver<Result<FaultAccepted, LoopError>>>,
}

struct Sim {
    phys: Fabric,
    lids: LidPlan,
    mask: EscapeMask,
    /// Mirror of what the switches hold (updated by the write observer).
    tables: Lfts,
    flows: Vec<Flow>,
    packets: Vec<Packet>,
    /// Distinct paths (flow, LID, hops) of the packets that left the fabric, with counts.
    paths: HashMap<PathKey, u64>,
    /// Tables of each generation, by number.
    generations: BTreeMap<u64, Lfts>,
    /// Tables when an Unpath notice arrived (escape stage of the new generation, base of the
    /// previous one): the routing escape-LID packets meet until the base stage.
    unpath_tables: Vec<Lfts>,
    sending: bool,
    ticks: u64,
    writes: u64,
    cdg_checks: u64,
    /// Block writes after which the CDG of a LID set carrying traffic was cyclic, and of an
    /// idle one.
    cyclic_live: u64,
    cyclic_idle: u64,
    /// Injected at the next block write (the escape stage of the generation just started).
    at_next_write: Option<Trigger>,
    /// Injected when subscriber 0 gets the Unpath notice of this generation, before it acks.
    at_unpath: Option<(u64, Trigger)>,
}

impl Sim {
    fn new(phys: Fabric, lids: LidPlan, tables: Lfts) -> Sim {
        let n = phys.num_end_ports() as u32;
        let mut flows = Vec::new();
        for i in 0..n {
            // A destination in another part of the tree (crossing several switch levels).
            let dst = EndPortId((i * 11 + 29) % n);
            let dst = if dst.0 == i { EndPortId((i + 1) % n) } else { dst };
            let (src_leaf, _) = phys.end_port(EndPortId(i)).attach.expect("end port cabled");
            flows.push(Flow {
                src_leaf,
                dst,
                sub: i as usize % SUBSCRIBERS,
                base: lids.base_lid(dst),
                on_escape: false,
                paused: false,
                next_seq: 0,
                delivered: 0,
                in_flight: 0,
                lost: 0,
                reordered: 0,
            });
        }
        Sim {
            mask: EscapeMask::new(&lids),
            phys,
            lids,
            tables,
            flows,
            packets: Vec::new(),
            paths: HashMap::new(),
            generations: BTreeMap::new(),
            unpath_tables: Vec::new(),
            sending: true,
            ticks: 0,
            writes: 0,
            cdg_checks: 0,
            cyclic_live: 0,
            cyclic_idle: 0,
            at_next_write: None,
            at_unpath: None,
        }
    }

    /// One tick: every packet moves one hop, then every sending flow injects one packet.
    fn tick(&mut self) {
        self.ticks += 1;
        let mut keep = Vec::with_capacity(self.packets.len());
        for mut p in std::mem::take(&mut self.packets) {
            let port = self.tables.get(p.at, p.dlid);
            p.hops.push((p.at, port));
            let remote = self.phys.switch(p.at).ports.get(port as usize).map(|x| x.remote);
            let f = &mut self.flows[p.flow as usize];
            let arrived = match remote {
                Some(Remote::Switch { sw, .. }) if p.hops.len() < HOP_LIMIT => {
                    p.at = sw;
                    keep.push(p);
                    continue;
                }
                Some(Remote::EndPort(e)) => e == f.dst,
                _ => false,
            };
            f.in_flight -= 1;
            if arrived {
                if p.seq != f.delivered + f.lost {
                    f.reordered += 1;
                }
                f.delivered += 1;
            } else {
                f.lost += 1;
            }
            *self.paths.entry((p.flow, p.dlid, p.hops)).or_default() += 1;
        }
        self.packets = keep;
        if !self.sending {
            return;
        }
        for (i, f) in self.flows.iter_mut().enumerate() {
            if f.paused {
                continue;
            }
            self.packets.push(Packet {
                flow: i as u32,
                seq: f.next_seq,
                dlid: if f.on_escape { f.base + 1 } else { f.base },
                at: f.src_leaf,
                hops: Vec::new(),
            });
            f.next_seq += 1;
            f.in_flight += 1;
        }
    }

    /// A block write took effect on a switch: mirror it, check both CDGs, move the packets.
    fn written(&mut self, w: &BlockWritten<'_>) {
        let b = w.block as usize;
        if w.switch.idx() < self.tables.num_switches() && b < self.tables.num_blocks() {
            self.tables.block_mut(w.switch, b).copy_from_slice(w.entries);
        }
        self.writes += 1;
        for set in [LidSet::Base, LidSet::Escape] {
            let esc = set == LidSet::Escape;
            let live = self.packets.iter().any(|p| self.mask.is_escape(p.dlid) == esc)
                || (self.sending && self.flows.iter().any(|f| !f.paused && f.on_escape == esc));
            if !cdg_acyclic(&self.phys, &self.lids, &self.tables, set) {
                if live {
                    self.cyclic_live += 1;
                } else {
                    self.cyclic_idle += 1;
                }
            }
            self.cdg_checks += 1;
        }
        self.tick();
    }

    /// Packets (delivered or lost) whose hops match the entries of no single routing, on the
    /// base LIDs and on the escape LIDs.
    fn mixed(&self) -> (u64, u64) {
        let mut out = (0, 0);
        for ((_, dlid, hops), n) in &self.paths {
            let consistent = self
                .generations
                .values()
                .chain(&self.unpath_tables)
                .any(|t| hops.iter().all(|&(s, port)| t.get(s, *dlid) == port));
            if !consistent {
                if self.mask.is_escape(*dlid) {
                    out.1 += n;
                } else {
                    out.0 += n;
                }
            }
        }
        out
    }
}

fn fault(link: (Guid, PortNum), up: bool) -> (Request, oneshot::Receiver<Result<FaultAccepted, LoopError>>) {
    let (reply, rx) = oneshot::channel();
    let req = FaultRequest {
        target: FaultTarget::Link {
            switch: link.0,
            port: link.1,
        },
        up,
        physical: false,
        wait: true,
    };
    (Request::Inject { req, reply }, rx)
}

/// Injects a virtual link fault and waits for the generation that includes it.
async fn inject(d: &Daemon, link: (Guid, PortNum), up: bool) -> u64 {
    let (ev, rx) = fault(link, up);
    d.tx.send(ev).await.expect("loop running");
    answer(rx).await
}

async fn answer(rx: oneshot::Receiver<Result<FaultAccepted, LoopError>>) -> u64 {
    tokio::time::timeout(Duration::from_secs(30), rx)
        .await
        .expect("committed within 30 s")
        .expect("loop answered")
        .expect("fault accepted")
        .generation
}

/// Records the tables the switches hold now as those of generation `g`.
fn capture(sim: &Mutex<Sim>, g: u64) {
    let mut s = lock(sim);
    let t = s.tables.clone();
    s.generations.insert(g, t);
}

/// A subscriber: drains, moves its flows, acks; records each generation's tables at Repath;
/// subscriber 0 also fires the `at_unpath` trigger.
async fn subscriber(k: usize, tx: mpsc::Sender<Request>, sim: Arc<Mutex<Sim>>, ready: oneshot::Sender<()>) {
    let (ntx, mut nrx) = mpsc::channel::<UpdateNotice>(16);
    let (reply, rx) = oneshot::channel();
    let ports = Vec::new();
    tx.send(Request::Subscribe {
        name: format!("job-{k}"),
        ports,
        notices: ntx,
        reply,
    })
    .await
    .expect("loop running");
    let id: SubscriberId = rx.await.expect("answer").expect("subscribed");
    let _ = ready.send(());
    while let Some(n) = nrx.recv().await {
        if n.phase == Phase::Repath {
            let mut s = lock(&sim);
            let t = s.tables.clone();
            s.generations.entry(n.generation).or_insert(t);
        }
        if n.phase == Phase::Unpath {
            let mut s = lock(&sim);
            if !s.unpath_tables.contains(&s.tables) {
                let t = s.tables.clone();
                s.unpath_tables.push(t);
            }
        }
        let mut fire_after_ack = None;
        if k == 0 && n.phase == Phase::Unpath {
            let trigger = {
                let mut s = lock(&sim);
                match s.at_unpath.take() {
                    Some((g, t)) if g == n.generation => Some(t),
                    other => {
                        s.at_unpath = other;
                        None
                    }
                }
            };
            match trigger {
                Some(t) if t.after_ack => fire_after_ack = Some(t),
                Some(mut t) => {
                    let (ev, rx) = fault(t.link, t.up);
                    tx.send(ev).await.expect("loop running");
                    t.reply = Some(rx);
                    lock(&sim).at_unpath = Some((0, t));
                }
                None => {}
            }
        }
        // Drain: stop sending, wait for the packets in flight, switch the LID, resume.
        let to_escape = n.phase == Phase::Unpath;
        for f in lock(&sim).flows.iter_mut().filter(|f| f.sub == k) {
            f.paused = true;
        }
        loop {
            {
                let mut s = lock(&sim);
                if s.flows.iter().filter(|f| f.sub == k).all(|f| f.in_flight == 0) {
                    for f in s.flows.iter_mut().filter(|f| f.sub == k) {
                        f.on_escape = to_escape;
                        f.paused = false;
                    }
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Subscribers answer at different speeds.
        tokio::time::sleep(Duration::from_millis(2 * k as u64)).await;
        let (reply, rx) = oneshot::channel();
        tx.send(Request::Ack {
            subscriber: id,
            generation: n.generation,
            phase: n.phase,
            reply,
        })
        .await
        .expect("loop running");
        rx.await.expect("answer").expect("ack accepted");
        if let Some(mut t) = fire_after_ack.take() {
            let (ev, rx) = fault(t.link, t.up);
            tx.send(ev).await.expect("loop running");
            t.reply = Some(rx);
            lock(&sim).at_unpath = Some((0, t));
        }
    }
}

/// What a run leaves behind.
struct Outcome {
    sim: Sim,
    last: Arc<Published>,
    /// Mixed-table packets on the base and on the escape LIDs.
    mixed: (u64, u64),
    final_tables_match: bool,
    /// Restarts of generation 2 (restart scenario).
    restarts: Vec<String>,
    /// The tables of every generation the loop published (polled every millisecond).
    published: BTreeMap<u64, Arc<Lfts>>,
}

/// The scenarios of [`run`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// Five-phase: a relink queued during Unpath, a restart during an escape-stage upload.
    FivePhase,
    /// The same faults by direct upload.
    Direct,
    /// Five-phase: a breaking fault after subscriber 0 moved to the escape LIDs (Unpath).
    RestartInUnpath,
}

async fn run(scenario: Scenario) -> Outcome {
    let five_phase = scenario != Scenario::Direct;
    let d = start(SPEC, EngineKind::Dmodc, five_phase);
    let p = until(&d, "generation 1", |p| p.generation() == 1 && p.phase == Phase::Idle).await;
    let g1 = p.current.clone().expect("generation 1");
    let installed = d.mock.installed_lft_table();
    let mut tables = Lfts::new(g1.fabric.num_switches(), g1.lids.top());
    for s in g1.fabric.switch_ids() {
        for lid in 1..=g1.lids.top() {
            tables.set(s, lid, installed.get(s, lid));
        }
    }
    let sim = Arc::new(Mutex::new(Sim::new(
        d.mock.cabling().clone(),
        (*g1.lids).clone(),
        tables,
    )));
    capture(&sim, 1);

    // Mirror every block write and move the packets between writes; fire the trigger.
    let tx = d.tx.clone();
    let observed = sim.clone();
    d.mock.set_write_observer(Some(Arc::new(move |w: &BlockWritten<'_>| {
        let mut s = lock(&observed);
        s.written(w);
        if let Some(t) = s.at_next_write.as_mut() {
            if t.reply.is_none() {
                let (ev, rx) = fault(t.link, t.up);
                if tx.try_send(ev).is_ok() {
                    t.reply = Some(rx);
                }
            }
        }
    })));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (published, stop) = (d.published.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seen: BTreeMap<u64, Arc<Lfts>> = BTreeMap::new();
            while !stop.load(Ordering::Relaxed) {
                if let Some(g) = published.load().current.as_ref() {
                    seen.entry(g.number).or_insert_with(|| g.lfts.clone());
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            seen
        })
    };
    let ticker = {
        let (sim, stop) = (sim.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                lock(&sim).tick();
                std::thread::sleep(Duration::from_micros(300));
            }
        })
    };
    let mut subs = Vec::new();
    for k in 0..SUBSCRIBERS {
        let (ready, ok) = oneshot::channel();
        subs.push(tokio::spawn(subscriber(k, d.tx.clone(), sim.clone(), ready)));
        ok.await.expect("subscribed");
    }
    tokio::time::sleep(Duration::from_millis(30)).await;

    let l = links(d.mock.cabling());
    let (a, b, c, dd) = (l[0], l[13], l[27], l[40]);
    let mut restarts = Vec::new();
    if scenario == Scenario::RestartInUnpath {
        // A down; B goes down once subscriber 0 has moved: generation 2 restarts in Unpath.
        lock(&sim).at_unpath = Some((
            2,
            Trigger {
                link: b,
                up: false,
                after_ack: true,
                reply: None,
            },
        ));
        assert_eq!(inject(&d, a, false).await, 2);
        let cut = lock(&sim)
            .at_unpath
            .take()
            .and_then(|(_, t)| t.reply)
            .expect("fault sent");
        assert_eq!(answer(cut).await, 2);
        restarts = until(&d, "generation 2", |p| p.generation() == 2 && p.phase == Phase::Idle)
            .await
            .update_restarts
            .clone();
        assert_eq!(inject(&d, c, false).await, 3);
    } else if five_phase {
        assert_eq!(inject(&d, a, false).await, 2);
        // Generation 2's tables were captured at its Repath. B down; A comes back while generation 3 is in Unpath: queued for generation 4.
        lock(&sim).at_unpath = Some((
            3,
            Trigger {
                link: a,
                up: true,
                after_ack: false,
                reply: None,
            },
        ));
        assert_eq!(inject(&d, b, false).await, 3);
        let relink = lock(&sim)
            .at_unpath
            .take()
            .and_then(|(_, t)| t.reply)
            .expect("relink sent");
        assert_eq!(answer(relink).await, 4);
        let p = until(&d, "generation 4", |p| p.generation() == 4 && p.phase == Phase::Idle).await;
        assert!(
            p.update_restarts.is_empty(),
            "the relink was queued: {:?}",
            p.update_restarts
        );
        // C down; D goes down while generation 5's escape stage uploads: restart from Prepare.
        lock(&sim).at_next_write = Some(Trigger {
            link: dd,
            up: false,
            after_ack: false,
            reply: None,
        });
        assert_eq!(inject(&d, c, false).await, 5);
        let cut = lock(&sim)
            .at_next_write
            .take()
            .and_then(|t| t.reply)
            .expect("fault sent");
        assert_eq!(answer(cut).await, 5, "the restarted generation includes it");
    } else {
        // Direct upload: each generation's tables are what the switches hold after its commit
        // (the next change is injected only then).
        assert_eq!(inject(&d, a, false).await, 2);
        capture(&sim, 2);
        for (g, (link, up)) in [(b, false), (a, true), (c, false), (dd, false)].into_iter().enumerate() {
            let g = g as u64 + 3;
            assert_eq!(inject(&d, link, up).await, g);
            capture(&sim, g);
        }
    }
    let last = until(&d, "idle", |p| p.phase == Phase::Idle).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    lock(&sim).sending = false;
    for _ in 0..2000 {
        if lock(&sim).packets.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let published = watcher.await.expect("watcher");
    ticker.join().expect("ticker");
    d.mock.set_write_observer(None);
    for s in subs {
        s.abort();
        let _ = s.await;
    }
    let _ = d.tx.send(Request::Shutdown).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), d.task).await;

    let sim = Arc::try_unwrap(sim)
        .map_err(|_| "simulation still shared")
        .expect("observer removed")
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let cur = last.current.clone().expect("a generation");
    let final_tables_match = cur
        .fabric
        .switch_ids()
        .all(|s| (1..=cur.lids.top()).all(|lid| sim.tables.get(s, lid) == cur.lfts.get(s, lid)));
    Outcome {
        mixed: sim.mixed(),
        sim,
        last,
        final_tables_match,
        restarts,
        published,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_phase_update_through_the_daemon_keeps_every_flow_consistent_delivered_and_in_order() {
    let t = Instant::now();
    let o = run(Scenario::FivePhase).await;
    let s = &o.sim;
    let sent: u64 = s.flows.iter().map(|f| f.next_seq).sum();
    let escaped: u64 = s
        .paths
        .iter()
        .filter(|((_, dlid, _), _)| s.mask.is_escape(*dlid))
        .map(|(_, n)| n)
        .sum();
    eprintln!(
        "five-phase through the loop: {} generations, {} block writes, {} ticks, {sent} packets ({} on escape LIDs), \
         {} distinct paths, {} CDG checks ({} transiently cyclic on an idle LID set), {:.1} s",
        o.last.generation(),
        s.writes,
        s.ticks,
        escaped,
        s.paths.len(),
        s.cdg_checks,
        s.cyclic_idle,
        t.elapsed().as_secs_f64()
    );
    assert_eq!(o.last.generation(), 5);
    assert_eq!(o.last.update_restarts.len(), 1, "{:?}", o.last.update_restarts);
    assert!(
        o.last.update_restarts[0].contains("link-down"),
        "{:?}",
        o.last.update_restarts
    );
    assert_eq!(o.last.current.as_ref().map(|g| g.virtual_faults), Some(3), "B, C and D");
    assert!(o.final_tables_match, "the fabric holds generation 5");
    // The tables captured at each Repath are the generation the loop published.
    let top = o.last.current.as_ref().map_or(0, |g| g.lids.top());
    assert_eq!(o.published.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
    for (g, t) in &s.generations {
        let p = &o.published[g];
        for sw in s.phys.switch_ids() {
            for lid in 1..=top {
                assert_eq!(
                    t.get(sw, lid),
                    p.get(sw, lid),
                    "generation {g} switch {} LID {lid}",
                    sw.0
                );
            }
        }
    }
    assert_eq!(
        s.generations.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5],
        "every generation's tables were captured at its Repath"
    );
    assert!(s.writes > 100 && s.cdg_checks > 200, "{} writes", s.writes);
    assert_eq!(s.cyclic_live, 0, "a LID set carrying traffic had a cyclic CDG");
    assert_eq!(o.mixed, (0, 0), "packets forwarded by entries of different generations");
    assert!(
        escaped > 1000,
        "flows used the escape LIDs during the updates ({escaped} packets)"
    );
    for (i, f) in s.flows.iter().enumerate() {
        assert_eq!((f.lost, f.reordered), (0, 0), "flow {i}");
        assert_eq!(f.delivered, f.next_seq, "flow {i}: every packet delivered");
        assert!(f.delivered > 100, "flow {i} sent {} packets", f.delivered);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_direct_upload_through_the_daemon_shows_mixed_table_packets() {
    // Whether a packet is between two rewritten switches while the tables change depends on the
    // interleaving of the block writes with the ticker thread: on a loaded machine one run can
    // miss every window. The control holds if any of a few runs exposes mixed packets (five-phase
    // above must show none in its single run).
    const ATTEMPTS: usize = 4;
    let mut seen = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let o = run(Scenario::Direct).await;
        let s = &o.sim;
        let lost: u64 = s.flows.iter().map(|f| f.lost).sum();
        let reordered: u64 = s.flows.iter().map(|f| f.reordered).sum();
        eprintln!(
            "direct upload through the loop (run {attempt}): {} mixed-table packets, {lost} lost, {reordered} reordered, \
             {} block writes, cyclic CDG of a live LID set after {} writes",
            o.mixed.0, s.writes, s.cyclic_live
        );
        assert!(o.final_tables_match);
        assert!(s.writes > 100, "{} writes", s.writes);
        seen.push(o.mixed.0);
        if o.mixed.0 > 0 {
            return;
        }
    }
    panic!("the direct upload must expose mixed-table packets (mixed per run: {seen:?})");
}

/// The documented limit of a restart after subscribers moved: packets on the escape LIDs while
/// the new escape stage is written may meet both escape routings (measured, not asserted);
/// base-LID traffic stays consistent and the final topology is installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_in_unpath_keeps_base_traffic_consistent() {
    let o = run(Scenario::RestartInUnpath).await;
    let s = &o.sim;
    let lost: u64 = s.flows.iter().map(|f| f.lost).sum();
    let reordered: u64 = s.flows.iter().map(|f| f.reordered).sum();
    eprintln!(
        "restart in unpath: {} mixed-table packets on base LIDs, {} on escape LIDs, {lost} lost, {reordered} \
         reordered, cyclic CDG of a live LID set after {} of {} writes",
        o.mixed.0, o.mixed.1, s.cyclic_live, s.writes
    );
    assert_eq!(o.restarts.len(), 1, "{:?}", o.restarts);
    assert_eq!(o.last.generation(), 3);
    assert_eq!(o.last.current.as_ref().map(|g| g.virtual_faults), Some(3));
    assert!(o.final_tables_match);
    assert_eq!(o.mixed.0, 0, "base-LID packets met one generation each");
}
