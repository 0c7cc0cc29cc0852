//! The umad driver under ibsim when the fabric side misbehaves:
//!
//! * SA queries: `saquery` (infiniband-diags, under the umad2sim shim on another simulated host)
//!   sends SubnAdm MADs (class 0x03, QP1) to the master SM's LID, i.e. to fabricd. The shim
//!   used to kill fabricd on them (no agent of that class: `pthread_mutex_lock(mutex=0x30)` in
//!   `libumad2sim.so`). fabricd has no SA yet: every query must get a clean "not supported"
//!   answer (MAD status 0x000C) at once, and fabricd must stay alive and serving.
//! * The simulator down at start: the shim's `open()` of the umad device waits for ibsim. A
//!   fabricd started before the simulator must say what it waits for (device, simulator socket
//!   and node), stop promptly with status 0 on SIGTERM (it used to need `kill -9`), and come up
//!   by itself once the simulator starts.
//! * The simulator stops answering during discovery (SIGSTOP once the device is open): SIGTERM
//!   still ends the start at once (it used to wait for every SMP of the discovery to time out).
//!
//! Needs `ibsim` (ibsim-utils), the umad2sim shim (libumad2sim0) and infiniband-diags; a
//! missing tool fails the tests.

mod common;
mod umad_sim;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{run_with_deadline, status, test_dir, topology, Daemon};
use fabric_ibsim_harness::{Ibsim, SHIM};
use fabric_topology::{EndPortId, Fabric};
use umad_sim::{config, next_generation, spawn_daemon};

const SPEC: &str = "PGFT(2;4,4;1,2;1,1)";

/// The ibsim node id of an end port's CA.
fn node_id(f: &Fabric, e: EndPortId) -> String {
    format!("H-{:016x}", f.end_port(e).node_guid)
}

/// Panics (with the daemon's log) when the daemon process has exited.
fn assert_alive(d: &mut Daemon, after: &str) {
    let st = d.child.as_mut().expect("daemon child").try_wait().expect("try_wait");
    assert!(
        st.is_none(),
        "fabricd died ({st:?}) after {after}; log:\n{}",
        d.log_text()
    );
}

/// Waits until the daemon's log has a line containing every one of `pats`.
fn wait_log(d: &Daemon, pats: &[&str], within: Duration) -> String {
    let t0 = Instant::now();
    loop {
        let log = d.log_text();
        if let Some(l) = log.lines().find(|l| pats.iter().all(|p| l.contains(p))) {
            return l.to_string();
        }
        assert!(
            t0.elapsed() < within,
            "no log line with {pats:?} within {within:?}; log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The last `sa_requests=N` of the daemon's umad counters line.
fn sa_requests(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("umad SMP counters"))
        .filter_map(|l| l.split("sa_requests=").nth(1))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .next_back()
        .unwrap_or(0)
}

#[test]
fn saquery_from_another_host_is_answered_and_fabricd_keeps_serving() {
    let dir = test_dir("umad-saquery");
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let me = EndPortId(0);
    let other = EndPortId(f.end_ports().len() as u32 - 1);
    let other_host = node_id(&f, other);
    let sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), node_id(&f, me));
    std::fs::write(dir.join("fabricd.toml"), config("")).expect("write config");
    let env = sim.env();
    let mut d = spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    let d = &mut d;
    run_with_deadline(120, async move {
        let mut c = d.ready().await;
        let up = next_generation(d, &mut c, 0, Duration::from_secs(20)).await;
        let topo = topology(&mut c).await;
        let lid_of = |e: EndPortId| {
            let guid = f.end_port(e).port_guid;
            topo.end_ports
                .iter()
                .find(|p| p.guid == guid)
                .unwrap_or_else(|| panic!("end port 0x{guid:016x} not in the topology"))
                .base_lid
                .to_string()
        };
        let (my_lid, other_lid) = (lid_of(me), lid_of(other));
        let pair = format!("{other_lid}:{my_lid}");
        // The NodeRecord table (SubnAdmGetTable: its first MAD under the shim), one NodeRecord,
        // a PathRecord: answered (the SA of fabricd), not timed out.
        for (args, dump) in [
            (vec![], "NodeRecord dump"),
            (vec!["NR", my_lid.as_str()], "NodeRecord dump"),
            (vec!["-p", "--src-to-dst", pair.as_str()], "PathRecord dump"),
        ] {
            let (ok, text) = sim.tool_on(&other_host, "saquery", &args);
            assert_alive(d, &format!("saquery {args:?}"));
            assert!(ok && text.contains(dump), "saquery {args:?} was not answered:\n{text}");
        }
        // An attribute fabricd does not serve (VLArbitrationTableRecord): "not supported" at
        // once, not a timeout.
        let (ok, text) = sim.tool_on(&other_host, "saquery", &["VLAR"]);
        assert_alive(d, "saquery VLAR");
        assert!(!ok, "saquery VLAR succeeded:\n{text}");
        assert!(
            text.contains("0x000c") && !text.to_lowercase().contains("timed out"),
            "saquery VLAR did not get the \"not supported\" status at once:\n{text}"
        );
        // Still serving: gRPC, the same generation, SMInfo answered from the other host.
        let st = status(&mut c).await;
        assert_eq!(st.generation, up.generation, "a new generation after the SA queries");
        let (ok, text) = sim.tool_on(&other_host, "sminfo", &[&my_lid]);
        assert!(
            ok && text.contains("SMINFO_MASTER"),
            "sminfo {my_lid} after the SA queries:\n{text}"
        );
        let t0 = Instant::now();
        while sa_requests(&d.log_text()) < 4 {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "sa_requests below 4 in the counters; log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_alive(d, "the checks");
    });
}

/// fabricd under the shim on simulator socket `sock` (no simulator there yet), in `dir`.
fn spawn_before_simulator(dir: &Path, sock: &str, host: &str) -> Daemon {
    std::fs::write(dir.join("fabricd.toml"), config("")).expect("write config");
    let env = [("IBSIM_SOCKNAME", sock), ("SIM_HOST", host), ("LD_PRELOAD", SHIM)];
    spawn_daemon(dir, &dir.join("fabricd.toml"), &env)
}

#[test]
fn fabricd_started_before_the_simulator_says_so_stops_on_sigterm_and_comes_up_with_it() {
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let host = node_id(&f, EndPortId(0));

    // No simulator at all: the wait is logged with the device and the simulator, and SIGTERM
    // stops the daemon at once with status 0.
    let dir = test_dir("umad-sim-down");
    let sock = Ibsim::new_sock_name();
    let mut d = spawn_before_simulator(&dir, &sock, &host);
    // The signal handlers are installed before this line; then past the first warning (after
    // 1 s of waiting on the device).
    wait_log(&d, &["fabricd starting"], Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(1500));
    d.signal(libc::SIGTERM);
    // A deadline for the stop, not a performance measure: without the fix it never comes.
    assert_eq!(d.wait_exit(Duration::from_secs(5)), Some(0), "log:\n{}", d.log_text());
    wait_log(
        &d,
        &[
            "not open yet",
            "/dev/infiniband/umad0",
            &format!("IBSIM_SOCKNAME={sock}"),
            &host,
        ],
        Duration::from_millis(1),
    );
    wait_log(&d, &["stopped while starting"], Duration::from_millis(1));

    // The simulator starts after the daemon: the daemon discovers the fabric and commits.
    let dir = test_dir("umad-sim-late");
    let sock = Ibsim::new_sock_name();
    let mut d = spawn_before_simulator(&dir, &sock, &host);
    wait_log(&d, &["not open yet", &sock], Duration::from_secs(10));
    let _sim = Ibsim::start_on_sock(&dir, &fabric_topology::ibnet::write(&f), host.clone(), sock);
    run_with_deadline(90, async {
        let mut c = d.ready().await;
        let st = next_generation(&d, &mut c, 0, Duration::from_secs(20)).await;
        assert!(st.generation >= 1);
        let topo = topology(&mut c).await;
        assert_eq!(topo.switches.len(), f.num_switches(), "switches discovered");
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(10)), Some(0), "log:\n{}", d.log_text());
}

/// Sends `sig` to process `pid` (one of ours).
fn send_signal(pid: u32, sig: i32) {
    let target = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("a process id");
    let signal = rustix::process::Signal::from_named_raw(sig).expect("a named signal");
    let rc = rustix::process::kill_process(target, signal);
    assert!(rc.is_ok(), "kill({pid}, {sig}) failed: {rc:?}");
}

/// True once the daemon runs its umad transport thread (named `fabric-umad`): the device is
/// open and discovery is starting.
fn transport_thread_runs(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == "fabric-umad"))
        })
        .unwrap_or(false)
}

#[test]
fn sigterm_is_heard_while_discovery_is_stalled_by_a_stopped_simulator() {
    // A bigger fabric (discovery takes a while) and long SMP deadlines: without the stop
    // request being heard, the stalled discovery would last 6 x 2 s per SMP.
    let f = fabric_topology::gen::generate_str("PGFT(2;16,32;1,16;1,1)", None).expect("generate");
    let host = node_id(&f, EndPortId(0));
    let cfg = config("").replace("timeout_ms = 200\nretries = 3", "timeout_ms = 2000\nretries = 5");
    assert!(cfg.contains("timeout_ms = 2000"), "config template changed:\n{cfg}");
    // The simulator must stop during discovery; a daemon that finished it first proves
    // nothing, so the set-up is tried again (a few times at most).
    for attempt in 1..=5 {
        let dir = test_dir(&format!("umad-sim-stalls-{attempt}"));
        let sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host.clone());
        std::fs::write(dir.join("fabricd.toml"), &cfg).expect("write config");
        let env = sim.env();
        let d = spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
        let t0 = Instant::now();
        while !transport_thread_runs(d.pid()) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the device never opened; log:\n{}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        send_signal(sim.pid(), libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(300));
        if d.log_text().contains("fabric discovered") {
            send_signal(sim.pid(), libc::SIGCONT);
            eprintln!("attempt {attempt}: discovery finished before the simulator stopped; again");
            continue;
        }
        d.signal(libc::SIGTERM);
        // The daemon leaves the stalled discovery at once (a deadline, not a performance
        // measure: without the fix it waits for its SMPs to time out, 12 s each) ...
        let heard = std::panic::catch_unwind(|| wait_log(&d, &["stopped while starting"], Duration::from_secs(3)));
        // ... and does not go on once the simulator answers again.
        send_signal(sim.pid(), libc::SIGCONT);
        std::thread::sleep(Duration::from_secs(2));
        let log = d.log_text();
        assert!(
            !log.contains("fabric discovered"),
            "discovery went on after SIGTERM; log:\n{log}"
        );
        assert!(heard.is_ok(), "SIGTERM not heard during discovery; log:\n{log}");
        // The exit itself is not checked: it runs the umad2sim shim's exit handler, which
        // talks to the simulator and can deadlock against the shim's receiver thread while the
        // simulator, running again, still delivers replies to the abandoned SMPs. (Without the
        // shim, or with the simulator never stopped, the other tests check exit status 0.)
        return;
    }
    panic!("discovery always finished before the simulator could be stopped");
}
