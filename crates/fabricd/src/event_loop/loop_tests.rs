//! The event loop against the mock fabric, in paused time: the tests run on a current-thread
//! runtime whose clock only moves when every task is idle (then it jumps to the next timer),
//! so coalescing windows, backoffs, protocol deadlines and the mock's latencies take no wall
//! time and nothing depends on how fast the machine is. The loop's computations run on a
//! blocking thread that waits for the rayon pool, and state files are written on blocking
//! threads: tokio does not advance a paused clock while a blocking task runs, so no deadline
//! expires "early" while the routing is computed. Tests wait for what they need on the loop's
//! publish signal (a `watch`), the notice broadcast or a reply, never by polling.

use fabric_mock::{MockConfig, MockFabric};
use fabric_ranking::RankOptions;
use fabric_routing::EngineKind;
use fabric_topology::{Guid, PortNum, Remote};
use fabric_update::EscapeMask;
use tokio::sync::oneshot;

use super::*;
use arc_swap::ArcSwap;
use fabric_southbound::SouthboundDriver;
use tokio::sync::broadcast;

use crate::compute::{compute, ComputeInput, Computed};
use crate::config::{FaultInjectionConfig, UpdateConfig};
use crate::notify::Notifier;
use crate::persist::StateDir;
use crate::state::{Notice, Published};
use crate::telemetry::Telemetry;

struct Harness {
    tx: mpsc::Sender<Request>,
    published: Arc<ArcSwap<Published>>,
    mock: Arc<MockFabric>,
    pool: Arc<rayon::ThreadPool>,
    telemetry: Telemetry,
    task: tokio::task::JoinHandle<()>,
    /// Changes at every publish of a snapshot.
    publishes: tokio::sync::watch::Receiver<u64>,
    dir: Arc<tempfile::TempDir>,
    /// The loop's WatchEvents broadcast (subscribe to see notices from then on).
    notices: broadcast::Sender<Notice>,
}

fn settings(coalesce_ms: u64) -> LoopSettings {
    LoopSettings {
        update: UpdateConfig {
            coalesce_ms,
            coalesce_max_ms: coalesce_ms,
            ..UpdateConfig::default()
        },
        engine: EngineKind::Dmodc,
        topology: crate::topology_mode::TopologySetting::Auto,
        validate: true,
        incremental: true,
        job_aware: false,
        rank_options: Arc::new(RankOptions::default()),
        fault_injection: FaultInjectionConfig {
            enabled: true,
            allow_physical: true,
        },
        multicast: true,
        partitions: Arc::default(),
    }
}

fn start(settings: LoopSettings, mock_cfg: MockConfig) -> Harness {
    let fabric = fabric_topology::gen::generate_str("PGFT(2;4,6;1,3;1,1)", None).unwrap();
    let mock = Arc::new(MockFabric::new(fabric).with_config(mock_cfg).unwrap());
    start_on(settings, mock, Arc::new(tempfile::tempdir().unwrap()))
}

/// A loop over an existing simulated fabric and state directory (a restarted daemon).
fn start_on(settings: LoopSettings, mock: Arc<MockFabric>, dir: Arc<tempfile::TempDir>) -> Harness {
    let driver: Arc<dyn SouthboundDriver> = mock.clone();
    start_with(settings, mock, driver, dir)
}

/// A loop whose driver is `driver` (a wrapper of `mock`).
fn start_with(
    settings: LoopSettings,
    mock: Arc<MockFabric>,
    driver: Arc<dyn SouthboundDriver>,
    dir: Arc<tempfile::TempDir>,
) -> Harness {
    let fabric = mock.cabling().clone();
    let guid2lid = StateDir::open(dir.path()).unwrap().load_guid2lid().unwrap();
    let virtual_faults = StateDir::open(dir.path()).unwrap().load_virtual_faults().unwrap();
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap());
    let physical = Arc::new(fabric);
    let published = Arc::new(ArcSwap::from_pointee(Published::starting(
        physical.clone(),
        String::new(),
        false,
        "mock",
        1,
    )));
    let (notices, _) = broadcast::channel(1024);
    let watch = notices.clone();
    let telemetry = Telemetry::new();
    let (lp, tx) = EventLoop::new(
        LoopParams {
            settings,
            lmc: 1,
            max_lid: 0xBFFF,
            driver_name: "mock",
        },
        LoopIo {
            driver,
            state_dir: StateDir::open(dir.path()).unwrap(),
            pool: pool.clone(),
            published: published.clone(),
            notices,
            telemetry: telemetry.clone(),
            notifier: Notifier::default(),
            watchdog: None,
            on_ready: None,
            sa: None,
            sa_service: None,
            mcast_changes: None,
        },
        LoopInit {
            physical,
            guid2lid,
            jobs: Jobs::new(),
            virtual_faults,
        },
    );
    let publishes = lp.published_watch();
    let task = tokio::spawn(lp.run());
    Harness {
        tx,
        published,
        mock,
        pool,
        telemetry,
        task,
        publishes,
        dir,
        notices: watch,
    }
}

impl Harness {
    /// Waits (at most a generous 10 virtual minutes) until a published snapshot satisfies `f`.
    async fn until(&self, what: &str, f: impl Fn(&Published) -> bool) -> Arc<Published> {
        let mut publishes = self.publishes.clone();
        let seen = tokio::time::timeout(
            Duration::from_secs(600),
            publishes.wait_for(|_| f(&self.published.load())),
        )
        .await
        .map(|r| r.is_ok());
        match seen {
            Ok(true) => self.published.load_full(),
            Ok(false) => panic!("the loop stopped while waiting for {what}"),
            Err(_) => panic!("timed out waiting for {what}"),
        }
    }

    fn links(&self) -> Vec<(Guid, PortNum)> {
        let f = self.mock.cabling();
        let mut v = Vec::new();
        for s in f.switch_ids() {
            for (pn, p) in f.switch(s).external_ports() {
                if let Remote::Switch { sw, port } = p.remote {
                    if (s, pn) < (sw, port) {
                        v.push((f.switch(s).guid, pn));
                    }
                }
            }
        }
        v
    }

    async fn subscribe(&self, name: &str) -> (SubscriberId, mpsc::Receiver<UpdateNotice>) {
        let (ntx, nrx) = mpsc::channel(16);
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Subscribe {
                name: name.into(),
                ports: Vec::new(),
                notices: ntx,
                reply,
            })
            .await
            .unwrap();
        (rx.await.unwrap().unwrap(), nrx)
    }

    async fn ack(&self, subscriber: SubscriberId, n: &UpdateNotice) {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::Ack {
                subscriber,
                generation: n.generation,
                phase: n.phase,
                reply,
            })
            .await
            .unwrap();
        rx.await.unwrap().unwrap();
    }

    async fn inject(
        &self,
        link: (Guid, PortNum),
        up: bool,
        wait: bool,
    ) -> oneshot::Receiver<Result<FaultAccepted, LoopError>> {
        let (reply, rx) = oneshot::channel();
        let req = FaultRequest {
            target: FaultTarget::Link {
                switch: link.0,
                port: link.1,
            },
            up,
            physical: false,
            wait,
        };
        self.tx.send(Request::Inject { req, reply }).await.unwrap();
        rx
    }
}

#[tokio::test(start_paused = true)]
async fn a_superseded_computation_is_discarded_and_the_newer_one_covers_both_faults() {
    let h = start(settings(0), MockConfig::default());
    h.until("generation 1", |p| p.generation() == 1).await;
    // Hold the routing pool's only thread so the next computations queue behind it.
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    h.pool.spawn(move || {
        let _ = blocked.recv();
    });
    let links = h.links();
    let a = h.inject(links[0], false, false).await.await.unwrap().unwrap();
    assert_eq!(a.generation, 1);
    h.until("prepare", |p| p.phase == Phase::Prepare).await;
    // Due at once (no coalescing): supersedes the computation that is still queued.
    let b = h.inject(links[1], false, true).await;
    // The older computation is dropped (and counted) as soon as the newer one starts.
    h.until("superseded", |p| p.discarded_generations == 1).await;
    release.send(()).unwrap();
    let b = b.await.unwrap().unwrap();
    assert_eq!(b.generation, 2, "both faults land in one generation");
    let p = h.until("idle", |p| p.phase == Phase::Idle).await;
    assert_eq!(p.discarded_generations, 1, "the stale result was discarded");
    let g = p.current.clone().unwrap();
    assert_eq!(g.number, 2);
    assert_eq!(g.timings.faults, 2);
    assert_eq!(g.virtual_faults, 2);
    assert_eq!(g.fabric.count_links().1 + 2, g.fabric.count_links().0);
    assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
}

#[tokio::test(start_paused = true)]
async fn faults_arriving_during_an_upload_are_queued_for_the_next_generation() {
    let slow = MockConfig {
        op_latency: Duration::from_millis(150),
        ..MockConfig::default()
    };
    // Direct upload: every change arriving during it waits for the next generation (with
    // the five-phase update, one that breaks the routing being installed restarts it).
    let mut s = settings(0);
    s.update.five_phase = false;
    let h = start(s, slow);
    h.until("generation 1", |p| p.generation() == 1).await;
    let links = h.links();
    let first = h.inject(links[0], false, true).await;
    h.until("update", |p| p.phase == Phase::Update).await;
    let second = h.inject(links[1], false, true).await;
    let p = h.until("queued", |p| p.pending_faults == 1).await;
    assert_eq!(p.phase, Phase::Update, "the upload is still running");
    assert_eq!(first.await.unwrap().unwrap().generation, 2);
    assert_eq!(second.await.unwrap().unwrap().generation, 3);
    let p = h.until("idle", |p| p.phase == Phase::Idle && p.generation() == 3).await;
    let g = p.current.clone().unwrap();
    assert_eq!(g.timings.faults, 1);
    assert_eq!(g.virtual_faults, 2);
    assert_eq!(p.pending_faults, 0);
    // Undoing one and repeating the other: one change, one no-op answered at once.
    let up = h.inject(links[0], true, true).await;
    let noop = h.inject(links[1], false, true).await.await.unwrap().unwrap();
    assert!(noop.event.ends_with("(no change)"), "{}", noop.event);
    assert_eq!(noop.generation, 3);
    assert_eq!(up.await.unwrap().unwrap().generation, 4);
}

#[tokio::test(start_paused = true)]
async fn failed_blocks_are_retried_until_the_fabric_holds_the_generation() {
    let mut s = settings(0);
    s.update.failed_generation_backoff_ms = 30;
    s.update.upload_retries = 0;
    let h = start(s, MockConfig::default());
    h.until("generation 1", |p| p.generation() == 1).await;
    // Every block write fails from now on.
    h.mock
        .set_config(MockConfig {
            error_rate: 1.0,
            max_retries: 0,
            ..MockConfig::default()
        })
        .unwrap();
    let links = h.links();
    let e = h.inject(links[0], false, true).await.await.unwrap().unwrap_err();
    assert!(e.to_string().contains("no LFT block could be written"), "{e}");
    let p = h.published.load_full();
    assert_eq!(p.generation(), 1, "nothing written: nothing committed");
    assert!(
        p.last_error.contains("no LFT block could be written"),
        "{}",
        p.last_error
    );
    assert!(
        p.installation.not_ready.is_none(),
        "generation 1 is still wholly installed"
    );
    // Retries keep failing (backoff doubles) without using generation numbers, until the
    // switches accept writes again.
    let before = h.mock.counters().write_attempts;
    h.until("retries", |_| h.mock.counters().write_attempts >= before + 3)
        .await;
    assert_eq!(h.published.load().generation(), 1);
    h.mock.set_config(MockConfig::default()).unwrap();
    let p = h
        .until("recovered", |p| {
            p.generation() == 2 && p.last_error.is_empty() && p.phase == Phase::Idle
        })
        .await;
    let cur = p.current.clone().unwrap();
    assert!(cur.timings.blocks_written > 0);
    let installed = h.mock.installed_lft_table();
    for sw in cur.fabric.switch_ids() {
        let want = cur.lfts.row(sw);
        assert_eq!(
            &installed.row(sw)[..want.len()],
            want,
            "switch {} holds the generation",
            sw.0
        );
    }
    assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
}

/// A forced reroute on an unchanged fabric (the daemon's re-sweep, compared with OpenSM's
/// heavy sweep after SIGHUP) is a full recomputation: the generation covering it routes in full
/// although the one before routed incrementally, writes nothing, and reports its compute time.
#[tokio::test(start_paused = true)]
async fn a_forced_reroute_recomputes_everything_and_reports_its_compute_time() {
    let h = start(settings(0), MockConfig::default());
    h.until("generation 1", |p| p.generation() == 1).await;
    let links = h.links();
    let a = h.inject(links[0], false, true).await.await.unwrap().unwrap();
    assert_eq!(a.generation, 2);
    let p = h
        .until("generation 2", |p| p.generation() == 2 && p.phase == Phase::Idle)
        .await;
    let g2 = p.current.clone().unwrap();
    assert_eq!(
        g2.route_path, "incremental",
        "a fault re-routes from the installed state"
    );
    assert!(!g2.full_recompute);
    for n in [3, 4] {
        let (reply, rx) = oneshot::channel();
        h.tx.send(Request::Reroute {
            resync: false,
            wait: true,
            reply: Some(reply),
        })
        .await
        .unwrap();
        assert_eq!(rx.await.unwrap().unwrap(), n);
        let p = h
            .until("the reroute's generation", |p| {
                p.generation() == n && p.phase == Phase::Idle
            })
            .await;
        let g = p.current.clone().unwrap();
        assert!(g.full_recompute, "generation {n}");
        assert_eq!(g.route_path, "full:no-previous", "generation {n}");
        assert!(g.timings.compute_ms > 0.0);
        assert_eq!(g.timings.blocks_written, 0, "the same tables");
        assert_eq!(g.lfts, g2.lfts);
    }
    // The next change routes incrementally again.
    h.inject(links[0], true, true).await.await.unwrap().unwrap();
    let p = h
        .until("generation 5", |p| p.generation() == 5 && p.phase == Phase::Idle)
        .await;
    let g5 = p.current.clone().unwrap();
    assert!(!g5.full_recompute);
    assert_eq!(g5.route_path, "incremental");
}

#[tokio::test(start_paused = true)]
async fn refused_requests_change_nothing() {
    let mut s = settings(0);
    s.fault_injection.enabled = false;
    let h = start(s, MockConfig::default());
    h.until("generation 1", |p| p.generation() == 1).await;
    let links = h.links();
    let e = h.inject(links[0], false, true).await.await.unwrap().unwrap_err();
    assert!(
        matches!(e, LoopError::FailedPrecondition(ref m) if m.contains("disabled")),
        "{e:?}"
    );
    let (reply, rx) = oneshot::channel();
    h.tx.send(Request::ClearJob {
        id: "nope".into(),
        reply,
    })
    .await
    .unwrap();
    assert!(matches!(rx.await.unwrap(), Err(LoopError::NotFound(_))));
    let (reply, rx) = oneshot::channel();
    let req = FaultRequest {
        target: FaultTarget::Link { switch: 0x1, port: 1 },
        up: false,
        physical: false,
        wait: false,
    };
    let mut s = settings(0);
    s.fault_injection.enabled = true;
    h.tx.send(Request::Reload(Box::new(s))).await.unwrap();
    h.tx.send(Request::Inject { req, reply }).await.unwrap();
    let e = rx.await.unwrap().unwrap_err();
    assert_eq!(
        e,
        LoopError::InvalidArgument("unknown switch GUID 0x0000000000000001".into())
    );
    let p = h.published.load_full();
    assert_eq!((p.generation(), p.pending_faults, p.virtual_faults), (1, 0, 0));
}

async fn next_notice(rx: &mut mpsc::Receiver<UpdateNotice>) -> UpdateNotice {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a notice within 10 s")
        .expect("stream open")
}

/// Entries of every switch for the LIDs `keep` selects.
fn entries(t: &Lfts, switches: usize, top: Lid, keep: impl Fn(Lid) -> bool) -> Vec<u8> {
    let mut v = Vec::new();
    for s in 0..switches {
        for lid in 1..=top {
            if keep(lid) {
                v.push(t.get(fabric_topology::SwitchId(s as u32), lid));
            }
        }
    }
    v
}

fn update_settings(unpath_ms: u64, policy: fabric_update::DeadlinePolicy) -> LoopSettings {
    let mut s = settings(0);
    s.update.unpath_deadline_ms = unpath_ms;
    s.update.repath_deadline_ms = unpath_ms;
    s.update.missed_ack_policy = policy;
    s
}

#[tokio::test(start_paused = true)]
async fn five_phase_escape_stage_before_unpath_base_stage_before_repath() {
    let h = start(
        update_settings(10_000, fabric_update::DeadlinePolicy::Proceed),
        MockConfig::default(),
    );
    let p1 = h.until("generation 1", |p| p.generation() == 1).await;
    let g1 = p1.current.clone().unwrap();
    let (id, mut rx) = h.subscribe("job-a").await;
    h.until("subscribed", |p| p.subscribers == 1).await;
    let ns = g1.fabric.num_switches();
    let top = g1.lids.top();
    let mask = EscapeMask::new(&g1.lids);
    let before = h.mock.installed_lft_table();
    let done = h.inject(h.links()[0], false, true).await;

    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase, n.deadline_ms), (2, Phase::Unpath, 10_000));
    assert_eq!(h.published.load_full().phase, Phase::Unpath);
    let mid = h.mock.installed_lft_table();
    assert_eq!(
        entries(&mid, ns, top, |l| !mask.is_escape(l)),
        entries(&before, ns, top, |l| !mask.is_escape(l)),
        "no base LID entry changes before the subscribers moved"
    );
    assert_ne!(
        entries(&mid, ns, top, |l| mask.is_escape(l)),
        entries(&before, ns, top, |l| mask.is_escape(l)),
        "the escape stage is installed before Unpath"
    );
    h.ack(id, &n).await;

    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (2, Phase::Repath));
    let p = h.published.load_full();
    assert_eq!(
        (p.generation(), p.phase),
        (1, Phase::Repath),
        "not committed before Repath"
    );
    let installed = h.mock.installed_lft_table();
    h.ack(id, &n).await;
    let r = done.await.unwrap().unwrap();
    assert_eq!(r.generation, 2);
    let p = h.until("idle", |p| p.phase == Phase::Idle).await;
    let g2 = p.current.clone().unwrap();
    assert_eq!(
        entries(&installed, ns, top, |_| true),
        entries(&g2.lfts, ns, top, |_| true),
        "the whole generation is installed before Repath"
    );
    assert!(p.missed_acks.is_empty());
    assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
    assert_eq!(h.mock.verify_all_pairs(true).unreachable_count, 0);
}

/// The mock driver with an escape VL that is not ready until released: `escape_vl_ready`
/// waits for `release`, then answers Ok or (with `fail`) an error naming a GUID and port.
struct SlowEscapeVl {
    mock: Arc<MockFabric>,
    ready: std::sync::atomic::AtomicBool,
    calls: std::sync::atomic::AtomicUsize,
    /// The number of calls, to wait on.
    called: tokio::sync::watch::Sender<usize>,
    release: tokio::sync::Semaphore,
    fail: bool,
}

#[async_trait::async_trait]
impl SouthboundDriver for SlowEscapeVl {
    fn caps(&self) -> fabric_southbound::DriverCaps {
        self.mock.caps()
    }
    async fn discover(&self) -> Result<Fabric, fabric_southbound::DriverError> {
        self.mock.discover().await
    }
    fn subscribe_events(&self) -> mpsc::UnboundedReceiver<FabricEvent> {
        self.mock.subscribe_events()
    }
    async fn configure_lids(&self, f: &Fabric, l: &LidPlan) -> Result<(), fabric_southbound::DriverError> {
        self.mock.configure_lids(f, l).await
    }
    async fn write_lft_blocks(
        &self,
        b: &[fabric_southbound::LftBlockWrite],
    ) -> Result<fabric_southbound::WriteReport, fabric_southbound::DriverError> {
        self.mock.write_lft_blocks(b).await
    }
    async fn read_lft_block(
        &self,
        s: Guid,
        b: u32,
    ) -> Result<[u8; fabric_routing::BLOCK_SIZE], fabric_southbound::DriverError> {
        self.mock.read_lft_block(s, b).await
    }
    async fn set_port_state(&self, s: Guid, p: PortNum, up: bool) -> Result<(), fabric_southbound::DriverError> {
        self.mock.set_port_state(s, p, up).await
    }
    async fn set_switch_state(&self, s: Guid, up: bool) -> Result<(), fabric_southbound::DriverError> {
        self.mock.set_switch_state(s, up).await
    }
    async fn escape_vl_ready(&self) -> Result<(), fabric_southbound::DriverError> {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        self.called.send_replace(n);
        let permit = self.release.acquire().await;
        drop(permit);
        if self.fail {
            return Err(fabric_southbound::DriverError::Protocol {
                guid: Some(0x20),
                message: "SLtoVLMappingTable Set on switch 0x0000000000000020 input port 3 output port 5: \
                          no reply"
                    .into(),
            });
        }
        self.ready.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
    fn escape_vl_status(&self) -> fabric_southbound::EscapeVlStatus {
        fabric_southbound::EscapeVlStatus {
            ready: self.ready.load(std::sync::atomic::Ordering::SeqCst),
            ..Default::default()
        }
    }
}

fn slow_escape_vl(fail: bool) -> (Harness, Arc<SlowEscapeVl>) {
    let fabric = fabric_topology::gen::generate_str("PGFT(2;4,6;1,3;1,1)", None).unwrap();
    let mock = Arc::new(MockFabric::new(fabric));
    let d = Arc::new(SlowEscapeVl {
        mock: mock.clone(),
        ready: false.into(),
        calls: 0.into(),
        called: tokio::sync::watch::Sender::new(0),
        release: tokio::sync::Semaphore::new(0),
        fail,
    });
    let h = start_with(
        update_settings(10_000, fabric_update::DeadlinePolicy::Proceed),
        mock,
        d.clone(),
        Arc::new(tempfile::tempdir().unwrap()),
    );
    (h, d)
}

#[tokio::test(start_paused = true)]
async fn a_five_phase_update_waits_in_prepare_for_the_escape_vl() {
    use std::sync::atomic::Ordering::SeqCst;
    let (h, d) = slow_escape_vl(false);
    let calls = |n: usize| {
        let mut called = d.called.subscribe();
        async move {
            let waited = tokio::time::timeout(Duration::from_secs(600), called.wait_for(|c| *c >= n)).await;
            waited.expect("escape VL requested").map_or(0, |c| *c)
        }
    };
    // The first generation is a direct upload: it needs no escape VL. Once it is committed
    // the loop asks the driver to program it, in the background.
    h.until("generation 1", |p| p.generation() == 1).await;
    assert_eq!(calls(1).await, 1, "escape VL requested after the first commit");
    let (id, mut rx) = h.subscribe("job-a").await;
    h.until("subscribed", |p| p.subscribers == 1).await;
    let before = h.mock.installed_lft_table();
    let done = h.inject(h.links()[0], false, true).await;
    assert_eq!(calls(2).await, 2, "the five-phase update asks for the escape VL");
    // Held in Prepare: no Unpath notice, no escape stage written.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(rx.try_recv().is_err(), "no Unpath before the escape VL is ready");
    assert_eq!(h.published.load_full().phase, Phase::Prepare);
    assert_eq!(h.published.load_full().generation(), 1);
    assert_eq!(h.mock.installed_lft_table(), before, "nothing written while waiting");
    // Ready: the five-phase update goes on.
    d.release.add_permits(1);
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (2, Phase::Unpath));
    h.ack(id, &n).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (2, Phase::Repath));
    h.ack(id, &n).await;
    assert_eq!(done.await.unwrap().unwrap().generation, 2);
    // Ready from now on: the next update does not ask again.
    let done = h.inject(h.links()[1], false, true).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (3, Phase::Unpath));
    h.ack(id, &n).await;
    let n = next_notice(&mut rx).await;
    h.ack(id, &n).await;
    assert_eq!(done.await.unwrap().unwrap().generation, 3);
    assert_eq!(d.calls.load(SeqCst), 2);
    assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
}

#[tokio::test(start_paused = true)]
async fn an_escape_vl_that_cannot_be_programmed_gives_a_direct_upload() {
    let (h, d) = slow_escape_vl(true);
    h.until("generation 1", |p| p.generation() == 1).await;
    let (_id, mut rx) = h.subscribe("job-a").await;
    h.until("subscribed", |p| p.subscribers == 1).await;
    d.release.add_permits(10);
    let done = h.inject(h.links()[0], false, true).await;
    let r = tokio::time::timeout(Duration::from_secs(10), done)
        .await
        .expect("committed without waiting for acks")
        .unwrap()
        .unwrap();
    assert_eq!(r.generation, 2);
    assert!(rx.try_recv().is_err(), "subscribers are never moved to the escape LIDs");
    let p = h.until("idle", |p| p.phase == Phase::Idle).await;
    assert_eq!(p.generation(), 2);
    assert!(p.missed_acks.is_empty());
    assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_that_never_acks_is_reported_and_the_update_proceeds() {
    let h = start(
        update_settings(150, fabric_update::DeadlinePolicy::Proceed),
        MockConfig::default(),
    );
    h.until("generation 1", |p| p.generation() == 1).await;
    let (_id, mut rx) = h.subscribe("silent").await;
    let t = Instant::now();
    let r = h.inject(h.links()[0], false, true).await.await.unwrap().unwrap();
    assert_eq!(r.generation, 2);
    assert!(t.elapsed() >= Duration::from_millis(300), "both deadlines waited");
    assert_eq!(next_notice(&mut rx).await.phase, Phase::Unpath);
    assert_eq!(next_notice(&mut rx).await.phase, Phase::Repath);
    let p = h.published.load_full();
    assert_eq!(
        p.missed_acks,
        vec!["silent (unpath)".to_string(), "silent (repath)".to_string()]
    );
    let m = h.telemetry.encode();
    assert!(
        m.contains("fabricd_update_missed_acks_total{phase=\"unpath\"} 1"),
        "{m}"
    );
    assert!(m.contains("fabricd_update_subscribers 1"), "{m}");
    assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
}

#[tokio::test(start_paused = true)]
async fn strict_policy_aborts_the_generation_and_keeps_the_base_routing() {
    let h = start(
        update_settings(150, fabric_update::DeadlinePolicy::Abort),
        MockConfig::default(),
    );
    let p1 = h.until("generation 1", |p| p.generation() == 1).await;
    let g1 = p1.current.clone().unwrap();
    let mask = EscapeMask::new(&g1.lids);
    let (ns, top) = (g1.fabric.num_switches(), g1.lids.top());
    let (_id, _rx) = h.subscribe("silent").await;
    let r = h.inject(h.links()[0], false, true).await.await.unwrap();
    let e = r.expect_err("the generation is aborted");
    assert!(e.to_string().contains("unpath deadline"), "{e}");
    let p = h.published.load_full();
    assert_eq!(p.generation(), 1);
    assert!(p.last_error.contains("aborted"), "{}", p.last_error);
    assert_eq!(p.missed_acks, vec!["silent (unpath)".to_string()]);
    let now = h.mock.installed_lft_table();
    assert_eq!(
        entries(&now, ns, top, |l| !mask.is_escape(l)),
        entries(&g1.lfts, ns, top, |l| !mask.is_escape(l)),
        "the previous base routing stays installed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_that_disconnects_is_dropped_without_waiting_for_its_deadline() {
    let h = start(
        update_settings(60_000, fabric_update::DeadlinePolicy::Proceed),
        MockConfig::default(),
    );
    h.until("generation 1", |p| p.generation() == 1).await;
    let (id, mut rx) = h.subscribe("leaver").await;
    let done = h.inject(h.links()[0], false, true).await;
    assert_eq!(next_notice(&mut rx).await.phase, Phase::Unpath);
    drop(rx);
    h.tx.send(Request::Unsubscribe { subscriber: id }).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), done)
        .await
        .expect("no wait for the 60 s deadline")
        .unwrap()
        .unwrap();
    assert_eq!(r.generation, 2);
    let p = h.until("idle", |p| p.phase == Phase::Idle).await;
    assert_eq!(p.subscribers, 0);
    assert!(p.missed_acks.is_empty());
}

/// The next `UpdateRestarted` notice (other notices skipped), or `None` when none comes
/// within `wait`.
async fn next_restart(rx: &mut broadcast::Receiver<Notice>, wait: Duration) -> Option<(u64, u32, String)> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => return None,
            Ok(Ok(Notice::UpdateRestarted {
                generation,
                attempt,
                reason,
            })) => return Some((generation, attempt, reason)),
            Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(broadcast::error::RecvError::Closed)) => return None,
        }
    }
}

/// The routing of the cabling with `links` excluded, computed from scratch (fresh LIDs).
fn from_scratch(mock: &MockFabric, links: &[(Guid, PortNum)]) -> Computed {
    let exclusions = links
        .iter()
        .map(|&(switch, port)| FabricEvent::LinkDown { switch, port })
        .collect();
    compute(ComputeInput::from_scratch(Arc::new(mock.cabling().clone()), exclusions)).expect("routing from scratch")
}

/// A fault on a link that the routing being installed uses arrives in `phase`: the
/// generation restarts from Prepare and installs the routing of the final topology.
async fn breaking_fault_in(phase: Phase) {
    // Slow block writes in Update so that the fault arrives while the base stage uploads.
    let cfg = MockConfig {
        op_latency: Duration::from_millis(if phase == Phase::Update { 40 } else { 0 }),
        max_parallel: 4,
        ..MockConfig::default()
    };
    let h = start(update_settings(10_000, fabric_update::DeadlinePolicy::Proceed), cfg);
    h.until("generation 1", |p| p.generation() == 1).await;
    let (id, mut rx) = h.subscribe("job").await;
    let mut watch = h.notices.subscribe();
    let links = h.links();
    let (a, b) = (links[0], links[3]);
    let first = h.inject(a, false, true).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (2, Phase::Unpath));
    match phase {
        Phase::Unpath => {}
        Phase::Update => {
            h.ack(id, &n).await;
            h.until("update", |p| p.phase == Phase::Update).await;
        }
        Phase::Repath => {
            h.ack(id, &n).await;
            assert_eq!(next_notice(&mut rx).await.phase, Phase::Repath);
        }
        _ => unreachable!("restart phases are unpath, update, repath"),
    }
    let second = h.inject(b, false, true).await;
    let (generation, attempt, reason) = next_restart(&mut watch, Duration::from_secs(10))
        .await
        .expect("an update_restarted notice");
    assert_eq!((generation, attempt), (2, 1));
    assert!(
        reason.contains(&format!("link-down {}[{}]", fmt_guid(b.0), b.1)),
        "{reason}"
    );
    let p = h.until("restart in status", |p| !p.update_restarts.is_empty()).await;
    assert_eq!(p.update_restarts.len(), 1);
    assert!(
        p.update_restarts[0].starts_with("attempt 1: "),
        "{:?}",
        p.update_restarts
    );
    // The same generation is notified again once the new escape stage is installed.
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (2, Phase::Unpath));
    h.ack(id, &n).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (2, Phase::Repath));
    h.ack(id, &n).await;
    assert_eq!(first.await.unwrap().unwrap().generation, 2);
    assert_eq!(
        second.await.unwrap().unwrap().generation,
        2,
        "one generation covers both"
    );
    let p = h.until("idle", |p| p.phase == Phase::Idle && p.generation() == 2).await;
    let g = p.current.clone().unwrap();
    assert_eq!(g.virtual_faults, 2);
    assert_eq!(p.pending_faults, 0);
    assert_eq!(p.update_restarts.len(), 1, "kept in status after the commit");
    // The installed routing is the from-scratch routing of the final topology.
    let scratch = from_scratch(&h.mock, &[a, b]);
    let only_a = from_scratch(&h.mock, &[a]);
    assert_ne!(*only_a.lfts, *scratch.lfts, "the second fault changes the routing");
    assert_eq!(*g.lids, *scratch.lids);
    assert_eq!(*g.lfts, *scratch.lfts, "generation 2 is the routing of both faults");
    let installed = h.mock.installed_lft_table();
    for sw in g.fabric.switch_ids() {
        let want = scratch.lfts.row(sw);
        assert_eq!(&installed.row(sw)[..want.len()], want, "switch {} holds it", sw.0);
    }
    assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
    assert_eq!(h.mock.verify_all_pairs(true).unreachable_count, 0);
    let m = h.telemetry.encode();
    assert!(m.contains("fabricd_update_restarts_total 1"), "{m}");
    assert!(StateDir::open(h.dir.path())
        .unwrap()
        .load_update_progress()
        .unwrap()
        .is_none());
}

#[tokio::test(start_paused = true)]
async fn a_breaking_fault_during_unpath_restarts_from_prepare_and_installs_the_final_topology() {
    breaking_fault_in(Phase::Unpath).await;
}

#[tokio::test(start_paused = true)]
async fn a_breaking_fault_during_the_base_upload_restarts_once_the_upload_is_drained() {
    breaking_fault_in(Phase::Update).await;
}

#[tokio::test(start_paused = true)]
async fn a_breaking_fault_during_repath_restarts_from_prepare() {
    breaking_fault_in(Phase::Repath).await;
}

#[tokio::test(start_paused = true)]
async fn a_generation_broken_more_than_max_restarts_times_is_aborted_then_retried() {
    let mut s = update_settings(10_000, fabric_update::DeadlinePolicy::Proceed);
    s.update.failed_generation_backoff_ms = 50;
    let h = start(s, MockConfig::default());
    h.until("generation 1", |p| p.generation() == 1).await;
    let (id, mut rx) = h.subscribe("job").await;
    let mut watch = h.notices.subscribe();
    let links = h.links();
    let faults = [links[0], links[3], links[7], links[10], links[14]];
    let first = h.inject(faults[0], false, true).await;
    let max = fabric_update::ProtocolConfig::default().max_restarts;
    let mut later = Vec::new();
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let mut blocked = Some(blocked);
    for (i, &link) in faults[1..=max as usize + 1].iter().enumerate() {
        let n = next_notice(&mut rx).await;
        assert_eq!((n.generation, n.phase), (2, Phase::Unpath), "attempt {i}");
        if i == max as usize {
            // The retry after the abort is due at once (the last fault is pending): hold the
            // routing pool's only thread so that it cannot begin before Status is read.
            let blocked = blocked.take().unwrap();
            h.pool.spawn(move || {
                let _ = blocked.recv();
            });
        }
        later.push(h.inject(link, false, true).await);
        if i < max as usize {
            let r = next_restart(&mut watch, Duration::from_secs(10))
                .await
                .expect("a restart");
            assert_eq!((r.0, r.1), (2, i as u32 + 1));
        }
    }
    // One breaking fault too many: the generation is given up, the installed routing kept.
    let e = first.await.unwrap().expect_err("aborted");
    assert!(e.to_string().contains("after 3 restarts"), "{e}");
    let p = h.until("aborted", |p| p.last_error.contains("aborted")).await;
    assert_eq!(p.generation(), 1);
    assert_eq!(p.update_restarts.len(), max as usize);
    release.send(()).unwrap();
    // Retried with every fault: the subscriber acks it through.
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (2, Phase::Unpath));
    h.ack(id, &n).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (2, Phase::Repath));
    h.ack(id, &n).await;
    let p = h
        .until("generation 2", |p| p.generation() == 2 && p.phase == Phase::Idle)
        .await;
    let g = p.current.clone().unwrap();
    assert_eq!(g.virtual_faults, faults.len());
    // The retried generation counts every change it routes, the aborted attempt's too.
    assert_eq!(g.timings.faults as usize, faults.len(), "{:?}", g.timings);
    assert!(p.last_error.is_empty(), "{}", p.last_error);
    assert_eq!(*g.lfts, *from_scratch(&h.mock, &faults).lfts);
    let installed = h.mock.installed_lft_table();
    for sw in g.fabric.switch_ids() {
        let want = g.lfts.row(sw);
        assert_eq!(&installed.row(sw)[..want.len()], want, "switch {}", sw.0);
    }
    // The waiters of the faults the given-up attempts covered were told so; the fault
    // that arrived last was never part of one.
    let last = later.pop().unwrap();
    for r in later {
        assert!(r.await.unwrap().is_err());
    }
    assert_eq!(last.await.unwrap().unwrap().generation, 2);
    assert!(h
        .telemetry
        .encode()
        .contains(&format!("fabricd_update_restarts_total {max}")));
}

#[tokio::test(start_paused = true)]
async fn a_benign_fault_during_unpath_is_queued_for_the_next_generation() {
    let h = start(
        update_settings(10_000, fabric_update::DeadlinePolicy::Proceed),
        MockConfig::default(),
    );
    h.until("generation 1", |p| p.generation() == 1).await;
    let links = h.links();
    let (a, b) = (links[0], links[3]);
    assert_eq!(h.inject(a, false, true).await.await.unwrap().unwrap().generation, 2);
    let (id, mut rx) = h.subscribe("job").await;
    let mut watch = h.notices.subscribe();
    let fault = h.inject(b, false, true).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (3, Phase::Unpath));
    // Relinking `a` uses no port of the routing being installed: queued.
    let relink = h.inject(a, true, true).await;
    let p = h.until("queued", |p| p.pending_faults == 1).await;
    assert_eq!(p.phase, Phase::Unpath, "no restart");
    h.ack(id, &n).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (3, Phase::Repath));
    h.ack(id, &n).await;
    assert_eq!(fault.await.unwrap().unwrap().generation, 3);
    // The queued relink is the next generation, with its own notices.
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (4, Phase::Unpath));
    h.ack(id, &n).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (4, Phase::Repath));
    h.ack(id, &n).await;
    assert_eq!(relink.await.unwrap().unwrap().generation, 4);
    let p = h.until("idle", |p| p.phase == Phase::Idle && p.generation() == 4).await;
    assert!(p.update_restarts.is_empty());
    assert_eq!(next_restart(&mut watch, Duration::from_millis(50)).await, None);
    assert!(h.telemetry.encode().contains("fabricd_update_restarts_total 0"));
    let g = p.current.clone().unwrap();
    assert_eq!(g.virtual_faults, 1);
    assert_eq!(*g.lfts, *from_scratch(&h.mock, &[b]).lfts);
    assert_eq!(h.mock.verify_all_pairs(true).unreachable_count, 0);
}

/// kill -9 of the daemon in `phase` of a five-phase update (the loop task is aborted; the
/// simulated switches keep their tables), then a restart on the same state directory.
async fn crash_and_restart_in(phase: Phase) {
    let s = update_settings(60_000, fabric_update::DeadlinePolicy::Proceed);
    let cfg = MockConfig {
        op_latency: Duration::from_millis(if phase == Phase::Update { 300 } else { 0 }),
        ..MockConfig::default()
    };
    let h = start(s.clone(), cfg);
    h.until("generation 1", |p| p.generation() == 1).await;
    let link = h.links()[0];
    let (id, mut rx) = h.subscribe("job").await;
    let _accepted = h.inject(link, false, false).await;
    let n = next_notice(&mut rx).await;
    assert_eq!(n.phase, Phase::Unpath);
    match phase {
        Phase::Unpath => {}
        Phase::Update => {
            h.ack(id, &n).await;
            h.until("update", |p| p.phase == Phase::Update).await;
        }
        Phase::Repath => {
            h.ack(id, &n).await;
            assert_eq!(next_notice(&mut rx).await.phase, Phase::Repath);
        }
        _ => unreachable!("crash phases are unpath, update, repath"),
    }
    let progress = StateDir::open(h.dir.path())
        .unwrap()
        .load_update_progress()
        .unwrap()
        .expect("progress persisted");
    assert_eq!((progress.generation, progress.phase.name()), (2, phase.name()));
    assert_eq!(progress.virtual_faults.len(), 1);
    let (mock, dir) = (h.mock.clone(), h.dir.clone());
    let Harness { task, .. } = h;
    task.abort();
    let _ = task.await;
    mock.set_config(MockConfig::default()).unwrap();

    let h = start_on(s, mock, dir);
    let p = h
        .until("converged", |p| {
            p.generation() >= 1 && p.phase == Phase::Idle && p.last_error.is_empty()
        })
        .await;
    let cur = p.current.clone().unwrap();
    assert!(
        cur.excluded_links.contains(&link),
        "the interrupted generation's fault is routed around"
    );
    assert!(
        cur.number > progress.generation,
        "the recovery generation {} comes after the interrupted one",
        cur.number
    );
    assert_eq!(
        StateDir::open(h.dir.path())
            .unwrap()
            .load_last_generation()
            .unwrap()
            .map(|g| g.generation),
        Some(cur.number),
        "the generation file holds the last commit"
    );
    let installed = h.mock.installed_lft_table();
    for sw in cur.fabric.switch_ids() {
        let want = cur.lfts.row(sw);
        assert_eq!(
            &installed.row(sw)[..want.len()],
            want,
            "switch {} holds the routing",
            sw.0
        );
    }
    let nb = cur.lfts.num_blocks() * cur.fabric.num_switches();
    assert!(
        (cur.timings.blocks_written as usize) < nb,
        "read back: only differing blocks are written ({} of {nb})",
        cur.timings.blocks_written
    );
    if phase == Phase::Repath {
        assert_eq!(cur.timings.blocks_written, 0, "everything was installed before Repath");
    }
    assert_eq!(h.mock.verify_all_pairs(false).unreachable_count, 0);
    assert_eq!(h.mock.verify_all_pairs(true).unreachable_count, 0);
    let st = StateDir::open(h.dir.path()).unwrap();
    assert_eq!(st.load_update_progress().unwrap(), None, "progress cleared");
    assert_eq!(st.load_virtual_faults().unwrap().len(), 1, "the fault is persisted");
}

#[tokio::test(start_paused = true)]
async fn kill_in_unpath_then_restart_converges() {
    crash_and_restart_in(Phase::Unpath).await;
}

#[tokio::test(start_paused = true)]
async fn kill_in_update_then_restart_converges() {
    crash_and_restart_in(Phase::Update).await;
}

#[tokio::test(start_paused = true)]
async fn kill_in_repath_then_restart_converges() {
    crash_and_restart_in(Phase::Repath).await;
}

/// The next notice of a `WatchEvents` broadcast, lagging skipped.
async fn next_watch(rx: &mut broadcast::Receiver<Notice>) -> Notice {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Ok(n)) => return n,
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            other => panic!("no WatchEvents notice: {other:?}"),
        }
    }
}

/// Generation numbers continue across a restart on the same state directory (the loop task
/// is stopped; the simulated switches keep their tables): the first generation of the new
/// loop is the last committed + 1 and still a direct upload (this process has installed
/// nothing yet, whatever the number), the next one a five-phase update whose notices,
/// progress file, commit and generation file all carry the continued number.
#[tokio::test(start_paused = true)]
async fn generation_numbers_continue_after_a_restart() {
    let s = update_settings(10_000, fabric_update::DeadlinePolicy::Proceed);
    let h = start(s.clone(), MockConfig::default());
    h.until("generation 1", |p| p.generation() == 1).await;
    let links = h.links();
    for (i, &l) in links[..2].iter().enumerate() {
        let r = h.inject(l, false, true).await.await.unwrap().unwrap();
        assert_eq!(r.generation, i as u64 + 2);
    }
    let st = StateDir::open(h.dir.path()).unwrap();
    let saved = st.load_last_generation().unwrap().expect("generation file");
    let g3 = h
        .until("generation 3", |p| p.generation() == 3)
        .await
        .current
        .clone()
        .unwrap();
    assert_eq!(
        (saved.generation, saved.committed_at_unix_ms),
        (3, g3.timings.committed_at_unix_ms)
    );
    let (mock, dir) = (h.mock.clone(), h.dir.clone());
    let Harness { task, .. } = h;
    task.abort();
    let _ = task.await;

    let h = start_on(s, mock, dir);
    let mut watch = h.notices.subscribe();
    let (id, mut rx) = h.subscribe("job").await;
    assert_eq!(
        h.published.load_full().generation(),
        0,
        "subscribed before the first generation of the new loop commits"
    );
    // Committed without any notice to the subscriber (a direct upload; a five-phase update
    // would wait for its ack up to the 10 s deadline).
    let p = h.until("generation 4", |p| p.generation() == 4).await;
    assert_eq!(p.current.as_ref().unwrap().timings.generation, 4);
    assert!(rx.try_recv().is_err(), "no update notice for the first generation");
    loop {
        match next_watch(&mut watch).await {
            Notice::PhaseChanged { generation, .. } => assert_eq!(generation, 4),
            Notice::GenerationCommitted { generation, .. } => {
                assert_eq!(generation, 4);
                break;
            }
            other => panic!("unexpected notice {other:?}"),
        }
    }
    assert_eq!(st.load_last_generation().unwrap().map(|g| g.generation), Some(4));

    let done = h.inject(links[2], false, true).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (5, Phase::Unpath));
    assert_eq!(h.published.load_full().phase_generation, 5);
    let progress = st.load_update_progress().unwrap().expect("progress file");
    assert_eq!((progress.generation, progress.phase), (5, Phase::Unpath));
    h.ack(id, &n).await;
    let n = next_notice(&mut rx).await;
    assert_eq!((n.generation, n.phase), (5, Phase::Repath));
    h.ack(id, &n).await;
    assert_eq!(done.await.unwrap().unwrap().generation, 5);
    let mut phases = Vec::new();
    loop {
        match next_watch(&mut watch).await {
            // Idle after the commit of 4 names the installed generation, the others 5.
            Notice::PhaseChanged { generation, phase } => {
                assert_eq!(generation, if phase == Phase::Idle { 4 } else { 5 }, "{phase:?}");
                phases.push(phase);
            }
            Notice::GenerationCommitted { generation, timings } => {
                assert_eq!((generation, timings.generation), (5, 5));
                break;
            }
            Notice::TopologyChange { .. } => {}
            other => panic!("unexpected notice {other:?}"),
        }
    }
    assert!(
        phases.contains(&Phase::Unpath) && phases.contains(&Phase::Repath),
        "{phases:?}"
    );
    assert_eq!(st.load_last_generation().unwrap().map(|g| g.generation), Some(5));
    // The progress file goes in the same step as the commit is announced.
    assert_eq!(
        st.load_update_progress().unwrap(),
        None,
        "the progress file of generation 5 stays after its commit"
    );
}
