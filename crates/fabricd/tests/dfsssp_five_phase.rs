//! Issue #19: a DFSSSP routing (seed 003 §5.2, DFSSSP's VL layering) updated through the
//! five-phase protocol after cable faults, through the daemon's own event loop over the mock
//! driver's `SLIMFLY(5;4)` (the Slim Fly paper's deployment), LMC 1.
//!
//! Cable faults (virtual link faults) are injected one at a time until a generation needs more
//! VL layers than the first one (so its SL-to-VL plan differs from the plan in force). For every
//! generation:
//!
//! * it commits, through the five-phase protocol (every subscriber gets its Unpath and Repath
//!   notices);
//! * **the SL-to-VL plan is in force before the new base tables**: at every LFT block write that
//!   changes a base-LID entry (recorded by the mock's write observer, with the plan the mock's
//!   ports hold at that instant), the plan in force maps every SL the new generation's routes
//!   use as the generation's plan does. A five-phase path that skipped or delayed the VL plan
//!   writes the base stage under the old plan, which maps the new layer's SL to VL 0: the test
//!   fails;
//! * the new layering is acyclic per VL **on the installed tables**: every route (from every
//!   switch to every LID, read from the mock's switches) is walked on the VL its SL maps to
//!   under the plan in force (the SLs the daemon publishes for PathRecords, `PathSls`), and each
//!   VL's channel-dependency graph is acyclic.
//!
//! A packet simulator moves one flow per end port through the tables the switches hold at
//! every instant (one hop per tick, a tick after every block write and every 0.3 ms); four
//! subscribers drain and move their flows to the escape LIDs at Unpath and back at Repath, as
//! an MPI library does. Checked: zero lost and zero reordered packets, every packet delivered.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fabric_mock::BlockWritten;
use fabric_routing::{EngineKind, Lfts, LidPlan, NO_ROUTE};
use fabric_topology::{EndPortId, Fabric, Guid, Lid, PortNum, Remote, SwitchId};
use fabric_update::{EscapeMask, SubscriberId};
use fabricd::event_loop::{FaultAccepted, FaultRequest, FaultTarget, LoopError, Request, UpdateNotice};
use fabricd::state::{Generation, Phase};
use tokio::sync::{mpsc, oneshot};

mod loop_harness;
use loop_harness::{links, start, until, Daemon};

const SPEC: &str = "SLIMFLY(5;4)";
const SUBSCRIBERS: usize = 4;
const HOP_LIMIT: usize = 16;
/// Faults injected at most while waiting for a generation with more layers.
const MAX_FAULTS: usize = 16;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug)]
struct Flow {
    src_leaf: SwitchId,
    dst: EndPortId,
    sub: usize,
    base: Lid,
    escape: Lid,
    on_escape: bool,
    paused: bool,
    next_seq: u64,
    delivered: u64,
    in_flight: u64,
    lost: u64,
    reordered: u64,
}

struct Packet {
    flow: u32,
    seq: u64,
    dlid: Lid,
    at: SwitchId,
    hops: usize,
}

/// One block write that changed at least one base-LID entry, with the plan in force then.
struct BaseWrite {
    seq: u64,
    plan: Option<[u8; 16]>,
}

struct Sim {
    phys: Fabric,
    mask: EscapeMask,
    tables: Lfts,
    flows: Vec<Flow>,
    packets: Vec<Packet>,
    sending: bool,
    writes: u64,
    escaped_packets: u64,
    base_writes: Vec<BaseWrite>,
    /// Unpath / Repath notices received, per generation.
    notices: HashMap<u64, (usize, usize)>,
}

impl Sim {
    fn new(phys: Fabric, lids: &LidPlan, tables: Lfts) -> Sim {
        let n = phys.num_end_ports() as u32;
        let flows = (0..n)
            .map(|i| {
                let d = EndPortId((i * 11 + 29) % n);
                let dst = if d.0 == i { EndPortId((i + 1) % n) } else { d };
                Flow {
                    src_leaf: phys.end_port(EndPortId(i)).attach.expect("end port cabled").0,
                    dst,
                    sub: i as usize % SUBSCRIBERS,
                    base: lids.base_lid(dst),
                    escape: lids.escape_lid(dst).expect("LMC 1: escape LIDs"),
                    on_escape: false,
                    paused: false,
                    next_seq: 0,
                    delivered: 0,
                    in_flight: 0,
                    lost: 0,
                    reordered: 0,
                }
            })
            .collect();
        Sim {
            mask: EscapeMask::new(lids),
            phys,
            tables,
            flows,
            packets: Vec::new(),
            sending: true,
            writes: 0,
            escaped_packets: 0,
            base_writes: Vec::new(),
            notices: HashMap::new(),
        }
    }

    /// Every packet moves one hop through the tables held now, then every sending flow injects
    /// one packet.
    fn tick(&mut self) {
        let mut keep = Vec::with_capacity(self.packets.len());
        for mut p in std::mem::take(&mut self.packets) {
            let port = self.tables.get(p.at, p.dlid);
            p.hops += 1;
            let remote = (port != NO_ROUTE)
                .then(|| self.phys.switch(p.at).ports.get(port as usize).map(|x| x.remote))
                .flatten();
            let f = &mut self.flows[p.flow as usize];
            let arrived = match remote {
                Some(Remote::Switch { sw, .. }) if p.hops < HOP_LIMIT => {
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
        }
        self.packets = keep;
        if !self.sending {
            return;
        }
        for (i, f) in self.flows.iter_mut().enumerate() {
            if f.paused {
                continue;
            }
            let dlid = if f.on_escape { f.escape } else { f.base };
            self.escaped_packets += u64::from(f.on_escape);
            self.packets.push(Packet {
                flow: i as u32,
                seq: f.next_seq,
                dlid,
                at: f.src_leaf,
                hops: 0,
            });
            f.next_seq += 1;
            f.in_flight += 1;
        }
    }

    /// A block write took effect: note whether it changed a base-LID entry (and the plan in
    /// force), mirror it, move the packets.
    fn written(&mut self, w: &BlockWritten<'_>, plan: Option<[u8; 16]>) {
        let b = w.block as usize;
        if w.switch.idx() < self.tables.num_switches() && b < self.tables.num_blocks() {
            let old = self.tables.block_mut(w.switch, b);
            let base_changed = (0..old.len()).any(|i| {
                let lid = (b * old.len() + i) as Lid;
                lid != 0 && old[i] != w.entries[i] && !self.mask.is_escape(lid)
            });
            old.copy_from_slice(w.entries);
            if base_changed {
                self.base_writes.push(BaseWrite { seq: w.seq, plan });
            }
        }
        self.writes += 1;
        self.tick();
    }
}

/// Injects a virtual link fault and waits for the generation that includes it.
async fn inject(d: &Daemon, link: (Guid, PortNum)) -> u64 {
    let (reply, rx) = oneshot::channel::<Result<FaultAccepted, LoopError>>();
    let req = FaultRequest {
        target: FaultTarget::Link {
            switch: link.0,
            port: link.1,
        },
        up: false,
        physical: false,
        wait: true,
    };
    d.tx.send(Request::Inject { req, reply }).await.expect("loop running");
    tokio::time::timeout(Duration::from_secs(60), rx)
        .await
        .expect("committed within 60 s")
        .expect("loop answered")
        .expect("fault accepted")
        .generation
}

/// A subscriber: at Unpath drains and moves its flows to the escape LIDs, at Repath back to
/// the base LIDs, then acks.
async fn subscriber(k: usize, tx: mpsc::Sender<Request>, sim: Arc<Mutex<Sim>>, ready: oneshot::Sender<()>) {
    let (ntx, mut nrx) = mpsc::channel::<UpdateNotice>(16);
    let (reply, rx) = oneshot::channel();
    tx.send(Request::Subscribe {
        name: format!("job-{k}"),
        ports: Vec::new(),
        notices: ntx,
        reply,
    })
    .await
    .expect("loop running");
    let id: SubscriberId = rx.await.expect("answer").expect("subscribed");
    let _ = ready.send(());
    while let Some(n) = nrx.recv().await {
        let to_escape = n.phase == Phase::Unpath;
        {
            let mut s = lock(&sim);
            let e = s.notices.entry(n.generation).or_default();
            match n.phase {
                Phase::Unpath => e.0 += 1,
                Phase::Repath => e.1 += 1,
                _ => {}
            }
            for f in s.flows.iter_mut().filter(|f| f.sub == k) {
                f.paused = true;
            }
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
    }
}

/// Whether each VL's channel-dependency graph is acyclic when every route (from every switch to
/// every routed LID of `t`) runs on the VL that `plan` gives its SL in `g`'s PathSls; panics on a
/// route that loops or ends nowhere. Returns (VLs with routes, acyclic per VL).
fn acyclic_per_vl(f: &Fabric, g: &Generation, t: &Lfts, plan: &[u8; 16]) -> Vec<(u8, bool)> {
    let sls = &g.vl.as_ref().expect("dfsssp generation has a layering").path_sls;
    let stride = 1 + f
        .switch_ids()
        .map(|s| usize::from(f.switch(s).nports))
        .max()
        .unwrap_or(0);
    let chan = |s: SwitchId, p: PortNum| s.idx() * stride + usize::from(p);
    let mut deps: HashMap<u8, HashSet<(usize, usize)>> = HashMap::new();
    for s0 in f.switch_ids() {
        for lid in 1..=g.lids.top() {
            if t.get(s0, lid) == NO_ROUTE {
                continue;
            }
            let dlid = u16::try_from(lid).expect("unicast LID");
            let sl = sls
                .sl(f.switch(s0).guid, dlid)
                .expect("PathSls covers every routed LID");
            let vl = plan[usize::from(sl & 0x0f)];
            let e = deps.entry(vl).or_default();
            let (mut s, mut prev) = (s0, None);
            for hop in 0.. {
                assert!(hop < HOP_LIMIT, "route from switch {} to LID {lid} loops", s0.0);
                let p = t.get(s, lid);
                assert_ne!(
                    p, NO_ROUTE,
                    "route from switch {} to LID {lid} ends at switch {}",
                    s0.0, s.0
                );
                if p == 0 {
                    break;
                }
                let c = chan(s, p);
                if let Some(q) = prev {
                    e.insert((q, c));
                }
                match f.switch(s).ports[usize::from(p)].remote {
                    Remote::Switch { sw, .. } => {
                        prev = Some(c);
                        s = sw;
                    }
                    Remote::EndPort(_) => break,
                    Remote::None => panic!("route from switch {} to LID {lid}: uncabled port", s0.0),
                }
            }
        }
    }
    let mut out: Vec<(u8, bool)> = deps.into_iter().map(|(vl, e)| (vl, kahn_acyclic(&e))).collect();
    out.sort_unstable();
    out
}

fn kahn_acyclic(edges: &HashSet<(usize, usize)>) -> bool {
    let mut indeg: HashMap<usize, usize> = HashMap::new();
    let mut out: HashMap<usize, Vec<usize>> = HashMap::new();
    for &(a, b) in edges {
        indeg.entry(a).or_default();
        *indeg.entry(b).or_default() += 1;
        out.entry(a).or_default().push(b);
    }
    let mut ready: Vec<usize> = indeg.iter().filter(|(_, &d)| d == 0).map(|(&n, _)| n).collect();
    let mut seen = 0;
    while let Some(n) = ready.pop() {
        seen += 1;
        for &m in out.get(&n).map_or(&[][..], Vec::as_slice) {
            let d = indeg.get_mut(&m).expect("node");
            *d -= 1;
            if *d == 0 {
                ready.push(m);
            }
        }
    }
    seen == indeg.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dfsssp_five_phase_update_on_the_slim_fly_programs_the_vl_plan_before_the_base_tables() {
    let d = start(SPEC, EngineKind::Dfsssp, true);
    let p = until(&d, "generation 1", |p| p.generation() == 1 && p.phase == Phase::Idle).await;
    let g1 = p.current.clone().expect("generation 1");
    assert_eq!(g1.engine, "dfsssp", "the agnostic mode keeps dfsssp");
    let layers1 = g1.vl.as_ref().expect("layering").layers;
    assert!(layers1 >= 2, "DFSSSP on SLIMFLY(5;4) needs several layers");
    let installed = d.mock.installed_lft_table();
    let mut tables = Lfts::new(g1.fabric.num_switches(), g1.lids.top());
    for s in g1.fabric.switch_ids() {
        for lid in 1..=g1.lids.top() {
            tables.set(s, lid, installed.get(s, lid));
        }
    }
    let sim = Arc::new(Mutex::new(Sim::new(d.mock.cabling().clone(), &g1.lids, tables)));
    let observed = sim.clone();
    let mock = Arc::downgrade(&d.mock);
    d.mock.set_write_observer(Some(Arc::new(move |w: &BlockWritten<'_>| {
        let plan = mock.upgrade().and_then(|m| m.data_vl_plan_in_force());
        lock(&observed).written(w, plan);
    })));
    let stop = Arc::new(AtomicBool::new(false));
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

    let cables = links(d.mock.cabling());
    let mut layers_seen = vec![layers1];
    let mut checked_generations = 0;
    for i in 0..MAX_FAULTS {
        let before = lock(&sim).base_writes.last().map_or(0, |w| w.seq);
        let cable = cables[(i * 37 + 5) % cables.len()];
        let g = inject(&d, cable).await;
        assert_eq!(g, i as u64 + 2, "one generation per fault");
        let p = until(&d, "the fault's generation", |p| {
            p.generation() == g && p.phase == Phase::Idle
        })
        .await;
        let cur = p.current.clone().expect("generation");
        assert!(cur.routing_check.valid, "generation {g} is valid");
        let vl = cur.vl.clone().expect("dfsssp generation has a layering");
        // Five-phase: every subscriber was told to leave and to come back.
        assert_eq!(
            lock(&sim).notices.get(&g).copied(),
            Some((SUBSCRIBERS, SUBSCRIBERS)),
            "generation {g} went through Unpath and Repath"
        );
        // The plan the mock's ports hold is the generation's.
        let in_force = d.mock.data_vl_plan_in_force().expect("a plan was programmed");
        let used: HashSet<u8> = vl.path_sls.sl.iter().copied().collect();
        for &sl in &used {
            let sl = usize::from(sl & 0x0f);
            assert_eq!(
                in_force[sl], vl.plan.sl_to_vl[sl],
                "generation {g}: SL {sl} in the plan in force"
            );
        }
        // Every base-entry write of this update happened under the generation's plan.
        let s = lock(&sim);
        let writes: Vec<&BaseWrite> = s.base_writes.iter().filter(|w| w.seq > before).collect();
        assert!(!writes.is_empty(), "generation {g} changed base entries");
        for w in &writes {
            let plan = w
                .plan
                .unwrap_or_else(|| panic!("generation {g}: base write {} with no VL plan", w.seq));
            for &sl in &used {
                let sl = usize::from(sl & 0x0f);
                assert_eq!(
                    plan[sl], vl.plan.sl_to_vl[sl],
                    "generation {g} ({} layers): base write {} before its VL plan was in force (SL {sl})",
                    vl.layers, w.seq
                );
            }
        }
        drop(s);
        // Acyclic per VL on the tables the switches hold.
        let installed = d.mock.installed_lft_table();
        let per_vl = acyclic_per_vl(d.mock.cabling(), &cur, &installed, &in_force);
        assert!(
            per_vl.len() > usize::from(vl.layers),
            "{per_vl:?}: base layers and the escape VL"
        );
        assert!(per_vl.iter().all(|&(_, ok)| ok), "generation {g}: cyclic VL {per_vl:?}");
        checked_generations += 1;
        layers_seen.push(vl.layers);
        if vl.layers > layers1 {
            break;
        }
    }
    assert!(
        layers_seen.iter().any(|&l| l > layers1),
        "no fault of {MAX_FAULTS} raised the layers above {layers1}: the plan change was not exercised ({layers_seen:?})"
    );

    lock(&sim).sending = false;
    for _ in 0..2000 {
        if lock(&sim).packets.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    stop.store(true, Ordering::Relaxed);
    ticker.join().expect("ticker");
    d.mock.set_write_observer(None);
    for s in subs {
        s.abort();
        let _ = s.await;
    }
    let _ = d.tx.send(Request::Shutdown).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), d.task).await;

    let s = lock(&sim);
    let sent: u64 = s.flows.iter().map(|f| f.next_seq).sum();
    eprintln!(
        "dfsssp five-phase on {SPEC}: {checked_generations} updates, layers {layers_seen:?}, {} block writes \
         ({} changing base entries), {sent} packets ({} on escape LIDs)",
        s.writes,
        s.base_writes.len(),
        s.escaped_packets
    );
    assert!(s.escaped_packets > 100, "flows used the escape LIDs during the updates");
    for (i, f) in s.flows.iter().enumerate() {
        assert_eq!((f.lost, f.reordered), (0, 0), "flow {i}");
        assert_eq!(f.delivered, f.next_seq, "flow {i}: every packet delivered");
        assert!(f.delivered > 50, "flow {i} sent {} packets", f.delivered);
    }
}
