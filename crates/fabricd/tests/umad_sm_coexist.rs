//! A second subnet manager on the fabric stays standby: fabricd (umad driver, `sm_priority =
//! 14`) brings the simulated fabric up, then a real OpenSM (`-p 1`-like `sm_priority 1`, short
//! sweep and SMInfo polling intervals) is started on a CA of another leaf. OpenSM's sweep finds
//! fabricd's port (IsSM) and asks for its SMInfo over *directed route*; fabricd answers (GetResp
//! with the D bit, back along the return path), so OpenSM enters STANDBY and keeps polling the
//! master instead of taking the subnet over (without the directed-route answer it times out,
//! becomes master and reprograms every switch).
//!
//! OpenSM ignores a master whose SMInfo carries an SM_Key other than its own (`sm_key`, 1 by
//! default): fabricd runs with `sm_key = 1`.
//!
//! Checked from a third host: `sminfo -D <path>` to fabricd (its GUID, priority 14, MASTER) and
//! to OpenSM (its GUID, priority 1, STANDBY); the LFTs of a leaf and a spine (`ibroute`) and
//! OpenSM's port's MasterSMLID are unchanged after OpenSM has swept and polled for a while;
//! fabricd commits no new generation and its `sm_requests` counter grows. A SubnSet(SMInfo)
//! STANDBY (`sminfo -D -s 2 ... 4`) is answered with fabricd's SMInfo (still MASTER) and logged.
//!
//! Needs `ibsim` (ibsim-utils), the umad2sim shim (libumad2sim0), `opensm` and
//! infiniband-diags; a missing one fails the tests with an installation hint (tests/run-all.sh
//! installs them).

mod common;
mod umad_sim;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{run_with_deadline, status, test_dir, topology};
use fabric_ibsim_harness::{find_tool, ibroute, Ibsim, SHIM};
use fabric_topology::{EndPortId, Fabric, Remote};
use umad_sim::{config, next_generation};

const SPEC: &str = "PGFT(2;4,4;1,2;1,1)";
/// OpenSM's SMInfo polling period of the master while standby (4 missed polls make it master).
const POLL_MS: u64 = 500;

/// Fails the test (never skips it) when a tool or the shim is missing: `tests/run-all.sh`
/// installs them, so a missing one is a broken environment, not a reason to pass.
fn require_tools() {
    assert!(
        Path::new(SHIM).is_file(),
        "the umad2sim shim {SHIM} is not installed (apt-get install libumad2sim0 ibsim-utils)"
    );
    for t in ["ibsim", "opensm", "sminfo", "ibroute", "smpquery"] {
        // Panics with the packages to install.
        find_tool(t);
    }
}

/// The ibsim node id of an end port's CA.
fn node_id(f: &Fabric, e: EndPortId) -> String {
    format!("H-{:016x}", f.end_port(e).node_guid)
}

/// The leaf switch and port an end port is cabled to.
fn attach(f: &Fabric, e: EndPortId) -> (fabric_topology::SwitchId, fabric_topology::PortNum) {
    match f.end_port(e).attach {
        Some((sw, p)) => (sw, p),
        None => panic!("end port {e:?} is not cabled"),
    }
}

/// The `sminfo -D` / `smpquery -D` directed route ("0,1,...") from CA `from` (port 1) to CA
/// `to`: through the shared leaf, or up to a spine that reaches both leaves and down again.
fn dr_path(f: &Fabric, from: EndPortId, to: EndPortId) -> String {
    let (lf, _) = attach(f, from);
    let (lt, pt) = attach(f, to);
    let mut hops = vec![1u8];
    if lf != lt {
        let (up, down) = f
            .switch(lf)
            .external_ports()
            .find_map(|(p, port)| match port.remote {
                Remote::Switch { sw: spine, .. } => f
                    .switch(spine)
                    .external_ports()
                    .find(|(_, q)| matches!(q.remote, Remote::Switch { sw, .. } if sw == lt))
                    .map(|(q, _)| (p, q)),
                _ => None,
            })
            .expect("a spine above both leaves");
        hops.extend([up, down]);
    }
    hops.push(pt);
    let mut s = "0".to_string();
    for h in hops {
        s.push_str(&format!(",{h}"));
    }
    s
}

/// The last `sm_requests=N` the daemon logged (its umad counters line, every second when they
/// change); 0 before the first.
fn sm_requests(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("umad SMP counters"))
        .filter_map(|l| l.split("sm_requests=").nth(1))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .next_back()
        .unwrap_or(0)
}

/// A running OpenSM attached to an ibsim node, with a private config, log and cache directory;
/// killed on drop.
struct OpenSm {
    child: Child,
    log: PathBuf,
    stdout: PathBuf,
}

impl Drop for OpenSm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl OpenSm {
    /// Starts `opensm -F <conf>` on node `host` of `sim` with SM priority `priority`.
    fn start(sim: &Ibsim, dir: &Path, host: &str, priority: u8) -> OpenSm {
        Self::start_with(sim, dir, host, priority, &[])
    }

    /// [`OpenSm::start`] with more `key value` lines of its configuration.
    fn start_with(sim: &Ibsim, dir: &Path, host: &str, priority: u8, extra: &[(&str, &str)]) -> OpenSm {
        let osm = dir.join("opensm");
        std::fs::create_dir_all(&osm).expect("opensm dir");
        let conf = osm.join("opensm.conf");
        // The default configuration, then the lines this test needs.
        let mut gen = Command::new("opensm")
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run opensm -c");
        let t0 = Instant::now();
        while gen.try_wait().expect("wait opensm -c").is_none() {
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = gen.kill();
                panic!("opensm -c did not finish within 10 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut text = std::fs::read_to_string(&conf).expect("opensm -c wrote no config");
        let log = osm.join("opensm.log");
        let pml = osm.join("per-module-logging.conf");
        // The SMInfo receiver and the SM state manager at verbose level: their "Found master
        // SM" and polling lines explain a failure.
        std::fs::write(&pml, "osm_sminfo_rcv.c=0x07\nosm_sm_state_mgr.c=0x07\n").expect("write pml");
        for (key, value) in [
            ("log_file", log.display().to_string()),
            ("accum_log_file", "FALSE".to_string()),
            ("force_log_flush", "TRUE".to_string()),
            ("dump_files_dir", format!("{}/", osm.display())),
            ("per_module_logging_file", pml.display().to_string()),
            ("sm_priority", priority.to_string()),
            ("sm_key", "0x0000000000000001".to_string()),
            ("sweep_interval", "1".to_string()),
            ("sminfo_polling_timeout", POLL_MS.to_string()),
            ("polling_retry_number", "4".to_string()),
        ]
        .into_iter()
        .chain(extra.iter().map(|&(k, v)| (k, v.to_string())))
        {
            let mut found = false;
            text = text
                .lines()
                .map(|l| {
                    if l.split_whitespace().next() == Some(key) {
                        found = true;
                        format!("{key} {value}")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            assert!(found, "no `{key}` line in the config opensm -c wrote");
        }
        std::fs::write(&conf, text + "\n").expect("write opensm.conf");
        let stdout = osm.join("stdout");
        let out = std::fs::File::create(&stdout).expect("opensm stdout");
        let mut cmd = Command::new("opensm");
        cmd.arg("-F")
            .arg(&conf)
            .current_dir(&osm)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out);
        for (k, v) in sim.env() {
            cmd.env(k, v);
        }
        cmd.env("SIM_HOST", host).env("OSM_CACHE_DIR", &osm);
        OpenSm {
            child: cmd.spawn().expect("start opensm"),
            log,
            stdout,
        }
    }

    fn log_text(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let out = std::fs::read_to_string(&self.stdout).unwrap_or_default();
        format!("{log}\n--- stdout ---\n{out}")
    }

    /// Waits until the log has a line containing `pat`.
    fn wait_for(&mut self, pat: &str, within: Duration) {
        let t0 = Instant::now();
        loop {
            if std::fs::read_to_string(&self.log).unwrap_or_default().contains(pat) {
                return;
            }
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!("opensm exited ({s}) before {pat:?}:\n{}", self.log_text());
            }
            assert!(
                t0.elapsed() < within,
                "no {pat:?} from opensm within {within:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn opensm_on_another_host_stays_standby_while_fabricd_is_master() {
    require_tools();
    let dir = test_dir("umad-sm-coexist");
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    // fabricd on the first CA; OpenSM on a CA of another leaf; the tools on a third leaf.
    let me = EndPortId(0);
    let leaf_of = |e: EndPortId| attach(&f, e).0;
    let ids: Vec<EndPortId> = (0..f.end_ports().len() as u32).map(EndPortId).collect();
    let osm_ep = *ids.iter().find(|&&e| leaf_of(e) != leaf_of(me)).expect("another leaf");
    let tool_ep = *ids
        .iter()
        .find(|&&e| leaf_of(e) != leaf_of(me) && leaf_of(e) != leaf_of(osm_ep))
        .expect("a third leaf");
    let tool_host = node_id(&f, tool_ep);
    let sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), node_id(&f, me));
    let cfg = config("").replace("window = 16", "window = 16\nsm_priority = 14\nsm_key = 1");
    std::fs::write(dir.join("fabricd.toml"), cfg).expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(60, async {
        let mut c = d.ready().await;
        let up = next_generation(&d, &mut c, 0, Duration::from_secs(20)).await;
        let topo = topology(&mut c).await;
        let lid_of = |guid: u64| {
            topo.end_ports
                .iter()
                .find(|e| e.guid == guid)
                .unwrap_or_else(|| panic!("end port 0x{guid:016x} not in the topology"))
                .base_lid
        };
        let my_guid = f.end_port(me).port_guid;
        let osm_guid = f.end_port(osm_ep).port_guid;
        let my_lid = lid_of(my_guid);
        let osm_lid = lid_of(osm_guid);
        let switch_lids: Vec<String> = [0u32, 1]
            .iter()
            .map(|&level| {
                let sw = topo.switches.iter().find(|s| s.level == Some(level)).expect("switch");
                sw.lid.to_string()
            })
            .collect();
        let tables = || -> Vec<_> { switch_lids.iter().map(|l| ibroute(&sim, &[l.as_str()])).collect() };
        let before = tables();
        assert!(before.iter().all(|t| !t.is_empty()), "no LFT entries: {before:?}");
        let requests_before = sm_requests(&d.log_text());

        let mut osm = OpenSm::start(&sim, &dir, &node_id(&f, osm_ep), 1);
        // OpenSM's first heavy sweep meets fabricd's port (IsSM), gets its SMInfo over directed
        // route (MASTER, priority 14, SM_Key 1) and stands by.
        osm.wait_for("Entering STANDBY state", Duration::from_secs(20));
        // As standby it polls the master every POLL_MS; four unanswered polls would make it
        // master. Give it several.
        std::thread::sleep(Duration::from_millis(6 * POLL_MS));
        let log = osm.log_text();
        assert!(
            !log.contains("Entering MASTER state"),
            "OpenSM took the subnet over:\n{log}"
        );
        assert!(
            !log.contains("non-matching sm_key"),
            "OpenSM ignored fabricd's SMInfo (SM_Key):\n{log}"
        );
        assert!(
            !log.contains("Timeout while getting attribute 0x20"),
            "an SMInfo poll of the master went unanswered:\n{log}"
        );
        assert!(
            log.contains(&format!(
                "Found master SM. Updating sm_state_mgr master_guid: 0x{my_guid:016x}"
            )),
            "OpenSM did not record fabricd as master:\n{log}"
        );

        // `sminfo` over directed route from a third host: fabricd is the master...
        let path_me = dr_path(&f, tool_ep, me);
        let (ok, text) = sim.tool_on(&tool_host, "sminfo", &["-D", &path_me]);
        assert!(ok, "sminfo -D {path_me} failed:\n{text}");
        assert!(text.contains(&format!("sm guid 0x{my_guid:x},")), "{text}");
        assert!(text.contains("priority 14 state 3 SMINFO_MASTER"), "{text}");
        // ... and OpenSM is standby.
        let path_osm = dr_path(&f, tool_ep, osm_ep);
        let (ok, text) = sim.tool_on(&tool_host, "sminfo", &["-D", &path_osm]);
        assert!(ok, "sminfo -D {path_osm} failed:\n{text}");
        assert!(text.contains(&format!("sm guid 0x{osm_guid:x},")), "{text}");
        assert!(text.contains("priority 1 state 2 SMINFO_STANDBY"), "{text}");

        // A SubnSet(SMInfo) STANDBY (modifier 4, as a master sends to the SMs it outranks)
        // changes nothing: the answer is fabricd's SMInfo, still master, and the request is
        // logged with its modifier.
        let (ok, text) = sim.tool_on(&tool_host, "sminfo", &["-D", "-s", "2", "-p", "3", &path_me, "4"]);
        assert!(ok, "sminfo -D -s 2 {path_me} 4 failed:\n{text}");
        assert!(text.contains("priority 14 state 3 SMINFO_MASTER"), "{text}");
        let (ok, text) = sim.tool_on(&tool_host, "sminfo", &["-D", &path_me]);
        assert!(ok && text.contains("state 3 SMINFO_MASTER"), "{text}");

        // OpenSM reprogrammed nothing: the switch tables are fabricd's, and OpenSM's own port
        // still names fabricd's LID as its master SM.
        assert_eq!(tables(), before, "LFTs changed after OpenSM swept");
        let (ok, pi) = sim.tool("smpquery", &["portinfo", &osm_lid.to_string(), "1"]);
        assert!(ok, "smpquery portinfo {osm_lid} failed:\n{pi}");
        let sm_lid = pi
            .lines()
            .find_map(|l| l.strip_prefix("SMLid:"))
            .map(|v| v.trim_start_matches('.').trim().to_string())
            .unwrap_or_else(|| panic!("no SMLid in\n{pi}"));
        assert_eq!(sm_lid, my_lid.to_string(), "OpenSM's port master SM LID");

        // fabricd: still the generation it committed, and the polls were counted.
        let st = status(&mut c).await;
        assert_eq!(
            st.generation, up.generation,
            "a new generation while OpenSM swept: {st:?}"
        );
        let t0 = Instant::now();
        loop {
            let n = sm_requests(&d.log_text());
            // At least the first sweep's SMInfo and a few polls (each also `sminfo -D`).
            if n >= requests_before + 4 {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "sm_requests {requests_before} -> {n}; daemon log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let log = d.log_text();
        assert!(
            log.contains("SMInfo polled on the manager's port") && log.contains("directed_route=true"),
            "no directed-route SMInfo request logged:\n{log}"
        );
        assert!(
            log.contains("another subnet manager sent SubnSet(SMInfo)") && log.contains("modifier=\"STANDBY\""),
            "the SubnSet(SMInfo) STANDBY was not logged:\n{log}"
        );
        drop(osm);
    });
}

/// The fabric and simulator of the takeover tests, with the first CA as the simulator's default
/// host. A missing tool fails the test ([`require_tools`]).
fn takeover_setup(name: &str) -> (common::TestDir, Fabric, Ibsim) {
    require_tools();
    let dir = test_dir(name);
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), node_id(&f, EndPortId(0)));
    (dir, f, sim)
}

/// The LIDs a running OpenSM (started by [`OpenSm::start`] in `dir`) assigned, from its
/// `guid2lid` cache.
fn opensm_lids(dir: &Path) -> fabric_routing::Guid2Lid {
    let cache = dir.join("opensm").join("guid2lid");
    let t0 = Instant::now();
    while !cache.is_file() {
        assert!(t0.elapsed() < Duration::from_secs(10), "OpenSM wrote no guid2lid");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let text = std::fs::read_to_string(&cache).expect("guid2lid");
    fabric_routing::Guid2Lid::parse(&text, "opensm guid2lid").expect("parse OpenSM's guid2lid")
}

/// Taking a fabric over from another subnet manager keeps its addresses: a real OpenSM (LMC 1)
/// brings the simulated fabric up and is stopped; fabricd starts with an empty state directory
/// and keeps every LID OpenSM assigned (read from OpenSM's `guid2lid` cache), although its own
/// fresh plan for this fabric is different (checked, so the test cannot pass by coincidence).
#[test]
fn fabricd_keeps_the_lids_of_the_subnet_manager_it_takes_over_from() {
    let (dir, f, sim) = takeover_setup("umad-takeover");
    let osm_ep = EndPortId(f.end_ports().len() as u32 - 1);

    // OpenSM programs the fabric with LMC 1, then goes away.
    let osm_lids = {
        let mut osm = OpenSm::start_with(&sim, &dir, &node_id(&f, osm_ep), 1, &[("lmc", "1")]);
        osm.wait_for("SUBNET UP", Duration::from_secs(30));
        let lids = opensm_lids(&dir);
        drop(osm);
        lids
    };
    let fresh = fabric_routing::assign_lids(&f, &fabric_routing::Guid2Lid::default(), 1, 0xBFFF).expect("plan");
    let osm_base = |guid: u64| osm_lids.get(guid).map(|(min, _)| min);
    let differs = f
        .end_port_ids()
        .any(|e| osm_base(f.end_port(e).port_guid) != Some(fresh.base_lid(e)));
    assert!(
        differs,
        "OpenSM's LIDs equal fabricd's fresh plan: the test would prove nothing"
    );

    std::fs::write(dir.join("fabricd.toml"), config("")).expect("write config");
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &sim.env());
    run_with_deadline(60, async {
        let mut c = d.ready().await;
        let topo = topology(&mut c).await;
        for e in &topo.end_ports {
            assert_eq!(
                Some(e.base_lid),
                osm_base(e.guid),
                "end port 0x{:016x}: fabricd's LID vs OpenSM's\n{}",
                e.guid,
                d.log_text()
            );
        }
        for s in &topo.switches {
            assert_eq!(Some(s.lid), osm_base(s.guid), "switch 0x{:016x}", s.guid);
        }
        assert!(
            d.log_text().contains("keeping the LIDs in force on the fabric"),
            "{}",
            d.log_text()
        );
        let st = status(&mut c).await;
        assert!(st.generation >= 1);
    });
}

/// A standby fabricd: a real OpenSM (priority 12, LMC 1) is master; fabricd (priority 5) finds
/// it during discovery, stands by (logs it, answers SMInfo as STANDBY, installs nothing: no
/// generation, OpenSM stays master) and polls it; when OpenSM dies fabricd takes the subnet over
/// within a few polls, keeping OpenSM's LIDs.
#[test]
fn a_standby_fabricd_takes_over_when_the_master_dies() {
    let (dir, f, sim) = takeover_setup("umad-standby");
    let me = EndPortId(0);
    let osm_ep = EndPortId(f.end_ports().len() as u32 - 1);
    let tool_ep = EndPortId(f.end_ports().len() as u32 / 2);
    let mut osm = OpenSm::start_with(&sim, &dir, &node_id(&f, osm_ep), 12, &[("lmc", "1")]);
    osm.wait_for("SUBNET UP", Duration::from_secs(30));
    let osm_lids = opensm_lids(&dir);
    let osm_guid = f.end_port(osm_ep).port_guid;

    let cfg = config("").replace(
        "window = 16",
        "window = 16\nsm_priority = 5\nsm_key = 1\nsm_poll_interval_ms = 100\nsm_poll_retries = 3",
    );
    std::fs::write(dir.join("fabricd.toml"), cfg).expect("write config");
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &sim.env());
    let standby_line = format!("standby: subnet manager 0x{osm_guid:016x} (priority 12) is master");
    let t0 = Instant::now();
    while !d.log_text().contains(&standby_line) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "fabricd did not stand by:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Standing by for a while: OpenSM stays master and sees no other master; fabricd installs
    // nothing and answers SMInfo as a standby.
    std::thread::sleep(Duration::from_millis(1000));
    let log = d.log_text();
    assert!(!log.contains("generation committed"), "{log}");
    assert!(!log.contains("taking the subnet over"), "{log}");
    let path_me = dr_path(&f, tool_ep, me);
    let (ok, text) = sim.tool_on(&node_id(&f, tool_ep), "sminfo", &["-D", &path_me]);
    assert!(ok, "sminfo -D {path_me} failed:\n{text}");
    assert!(text.contains("priority 5 state 2 SMINFO_STANDBY"), "{text}");
    let osm_log = osm.log_text();
    assert!(!osm_log.contains("Entering STANDBY state"), "{osm_log}");

    // The master dies: fabricd takes over and keeps its LIDs.
    drop(osm);
    run_with_deadline(60, async {
        let mut c = d.ready().await;
        assert!(d.log_text().contains("taking the subnet over"), "{}", d.log_text());
        let topo = topology(&mut c).await;
        for e in &topo.end_ports {
            assert_eq!(
                Some(e.base_lid),
                osm_lids.get(e.guid).map(|(min, _)| min),
                "end port 0x{:016x}",
                e.guid
            );
        }
        let (ok, text) = sim.tool_on(&node_id(&f, tool_ep), "sminfo", &["-D", &path_me]);
        assert!(ok && text.contains("state 3 SMINFO_MASTER"), "{text}");
    });
}

/// A pair of fabricd instances on two management hosts: the first (priority 12) is master and
/// programs the fabric; the second (priority 5) finds it (its port advertises IsSM, its SMInfo
/// says MASTER), stands by without writing anything, and when the master is killed (`kill -9`)
/// takes over with the same LIDs.
#[test]
fn a_fabricd_pair_fails_over_keeping_the_lids() {
    let (dir, f, sim) = takeover_setup("umad-pair");
    let a_ep = EndPortId(0);
    let b_ep = EndPortId(f.end_ports().len() as u32 - 1);
    let tool_ep = EndPortId(f.end_ports().len() as u32 / 2);
    let (dir_a, dir_b) = (dir.join("a"), dir.join("b"));
    for (d, prio) in [(&dir_a, 12), (&dir_b, 5)] {
        std::fs::create_dir_all(d).expect("dir");
        let cfg = config("").replace(
            "window = 16",
            &format!("window = 16\nsm_priority = {prio}\nsm_poll_interval_ms = 100\nsm_poll_retries = 3"),
        );
        std::fs::write(d.join("fabricd.toml"), cfg).expect("config");
    }
    let host_b = node_id(&f, b_ep);
    let env_b: Vec<(&str, &str)> = sim
        .env()
        .into_iter()
        .map(|(k, v)| if k == "SIM_HOST" { (k, host_b.as_str()) } else { (k, v) })
        .collect();
    let mut a = umad_sim::spawn_daemon(&dir_a, &dir_a.join("fabricd.toml"), &sim.env());
    run_with_deadline(90, async {
        let mut ca = a.ready().await;
        let lids = |t: &fabric_proto::v1::Topology| -> Vec<(u64, u32)> {
            let mut v: Vec<(u64, u32)> = t.end_ports.iter().map(|e| (e.guid, e.base_lid)).collect();
            v.extend(t.switches.iter().map(|s| (s.guid, s.lid)));
            v.sort_unstable();
            v
        };
        let lids_a = lids(&topology(&mut ca).await);
        let st_a = status(&mut ca).await;
        let gen_a = st_a.generation;
        let full = st_a.last_reroute.expect("bring-up timings").blocks_written;
        assert!(full > 0, "the master wrote no LFT block");

        let b = umad_sim::spawn_daemon(&dir_b, &dir_b.join("fabricd.toml"), &env_b);
        let a_guid = f.end_port(a_ep).port_guid;
        let line = format!("standby: subnet manager 0x{a_guid:016x} (priority 12) is master");
        let t0 = Instant::now();
        while !b.log_text().contains(&line) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "B did not stand by:\n{}",
                b.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert!(!b.log_text().contains("generation committed"), "{}", b.log_text());
        assert_eq!(
            status(&mut ca).await.generation,
            gen_a,
            "the standby disturbed the master"
        );
        let path_b = dr_path(&f, tool_ep, b_ep);
        let (ok, text) = sim.tool_on(&node_id(&f, tool_ep), "sminfo", &["-D", &path_b]);
        assert!(ok && text.contains("priority 5 state 2 SMINFO_STANDBY"), "{text}");

        drop(ca);
        a.kill9();
        let mut cb = b.ready().await;
        assert!(b.log_text().contains("taking the subnet over"), "{}", b.log_text());
        assert_eq!(lids(&topology(&mut cb).await), lids_a, "LIDs after the failover");
        // The switches already hold the master's routes: the takeover reads them and writes only
        // the blocks that differ (same topology, same LIDs: well under a tenth of a bring-up).
        let takeover = status(&mut cb)
            .await
            .last_reroute
            .expect("takeover timings")
            .blocks_written;
        assert!(
            takeover * 10 < full,
            "takeover wrote {takeover} LFT blocks, the bring-up {full}:\n{}",
            b.log_text()
        );
        let (ok, text) = sim.tool_on(&node_id(&f, tool_ep), "sminfo", &["-D", &path_b]);
        assert!(ok && text.contains("priority 5 state 3 SMINFO_MASTER"), "{text}");
    });
}
