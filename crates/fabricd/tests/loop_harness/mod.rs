//! The daemon's event loop over the mock driver, wired as `daemon::run` wires it, shared by the
//! in-process update tests (`update_flow_sim`, `dfsssp_five_phase`): start, wait for a state,
//! list the cables.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use fabric_mock::{MockConfig, MockFabric};
use fabric_ranking::RankOptions;
use fabric_routing::EngineKind;
use fabric_topology::{Fabric, Guid, PortNum, Remote};
use fabricd::config::{FaultInjectionConfig, UpdateConfig};
use fabricd::event_loop::{EventLoop, LoopInit, LoopIo, LoopParams, LoopSettings, Request};
use fabricd::notify::Notifier;
use fabricd::persist::{Jobs, StateDir};
use fabricd::state::Published;
use fabricd::telemetry::Telemetry;
use tokio::sync::{broadcast, mpsc};

/// The daemon's loop over a simulated fabric, as `daemon::run` wires it.
pub struct Daemon {
    pub tx: mpsc::Sender<Request>,
    pub published: Arc<ArcSwap<Published>>,
    pub mock: Arc<MockFabric>,
    pub task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

/// Starts the loop on the generated fabric `spec` (mock: 1 ms per operation, one at a time,
/// otherwise its defaults), LMC 1, routing the base LIDs with `engine`, five-phase updates or direct uploads.
pub fn start(spec: &str, engine: EngineKind, five_phase: bool) -> Daemon {
    start_with(spec, engine, five_phase, 1, MockConfig::default())
}

/// [`start`] with LID mask control `lmc` and the mock configured by `mock` (its operation
/// latency and parallelism are set as in [`start`]).
pub fn start_with(spec: &str, engine: EngineKind, five_phase: bool, lmc: u8, mock: MockConfig) -> Daemon {
    let fabric = fabric_topology::gen::generate_str(spec, None).expect("generator");
    let cfg = MockConfig {
        op_latency: Duration::from_millis(1),
        max_parallel: 1,
        ..mock
    };
    let mock = Arc::new(MockFabric::new(fabric).with_config(cfg).expect("mock config"));
    let dir = tempfile::tempdir().expect("tempdir");
    let physical = Arc::new(mock.cabling().clone());
    let published = Arc::new(ArcSwap::from_pointee(Published::starting(
        physical.clone(),
        String::new(),
        false,
        "mock",
        1,
    )));
    let settings = LoopSettings {
        update: UpdateConfig {
            coalesce_ms: 0,
            coalesce_max_ms: 0,
            upload_batch_blocks: 16,
            upload_parallelism: 4,
            five_phase,
            unpath_deadline_ms: 20_000,
            repath_deadline_ms: 20_000,
            ..UpdateConfig::default()
        },
        engine,
        topology: fabricd::topology_mode::TopologySetting::Auto,
        validate: true,
        incremental: true,
        job_aware: false,
        rank_options: Arc::new(RankOptions::default()),
        fault_injection: FaultInjectionConfig {
            enabled: true,
            allow_physical: false,
        },
        multicast: true,
        partitions: Arc::default(),
    };
    let (notices, _) = broadcast::channel(1024);
    let (lp, tx) = EventLoop::new(
        LoopParams {
            settings,
            lmc,
            max_lid: 0xBFFF,
            driver_name: "mock",
        },
        LoopIo {
            driver: mock.clone(),
            state_dir: StateDir::open(dir.path()).expect("state dir"),
            pool: Arc::new(rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("pool")),
            published: published.clone(),
            notices,
            telemetry: Telemetry::new(),
            notifier: Notifier::default(),
            watchdog: None,
            on_ready: None,
            sa: None,
            sa_service: None,
            mcast_changes: None,
        },
        LoopInit {
            physical,
            guid2lid: fabric_routing::Guid2Lid::new(),
            jobs: Jobs::new(),
            virtual_faults: Vec::new(),
        },
    );
    Daemon {
        tx,
        published,
        mock,
        task: tokio::spawn(lp.run()),
        _dir: dir,
    }
}

/// Waits (up to 60 s) until the published state satisfies `f`.
pub async fn until(d: &Daemon, what: &str, f: impl Fn(&Published) -> bool) -> Arc<Published> {
    for _ in 0..12_000 {
        let p = d.published.load_full();
        if f(&p) {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Switch-to-switch links (lower end), one per cable, in a deterministic order.
pub fn links(f: &Fabric) -> Vec<(Guid, PortNum)> {
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
