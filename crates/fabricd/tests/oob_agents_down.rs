//! The `oob` driver with agents that are down, end to end with real processes
//! (`fabric-agent-sim` and `fabricd`, LMC 1), issue 12 defect 1: a switch whose agent is down
//! must not stop the others from being programmed, and when its agent comes back its tables
//! are written at once. What the switches hold is always read from the agents themselves
//! (the simulator's control service traces every pair through the agents' LFT bytes).
//!
//! * `one_agent_down_at_start_...`: the regression test of the defect.
//! * `chaos_...`: seeded random agent kills and restores, cable faults and daemon `kill -9` +
//!   restart on one state directory; after every quiet period the routing and the status are
//!   checked. `FABRICD_CHAOS_SEED=<n>` replays a run (the seed is printed).

mod common;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::agent_sim::{oob_config, AgentSim, Agents, SimCtl};
use common::{free_port, http_get, lfts, run_with_deadline, status, test_dir, wait_status, Daemon};
use fabric_oob::proto::{GetPortsRequest, NeighbourKind};
use fabric_proto::v1 as pb;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// 8 leaves x 4 nodes = 32 end ports, 4 spines: 12 agents.
const SPEC: &str = "PGFT(2;4,8;1,4;1,1)";
const SWITCHES: u32 = 12;

fn config(inventory: &Path, prometheus: u16, deadline: &str) -> String {
    oob_config(
        inventory,
        &format!("unreachable_deadline = \"{deadline}\""),
        &format!(
            r#"
[routing]
lmc = 1

[prometheus]
listen = "127.0.0.1:{prometheus}"

[update]
coalesce_ms = 20
coalesce_max_ms = 200
"#
        ),
    )
    // The harness's default deadline is replaced by ours.
    .replace("unreachable_deadline = \"5s\"\n", "")
}

/// The cabling as the agents report it: spines (no end port) and, per leaf, its (port,
/// spine) uplinks.
struct Cabling {
    spines: Vec<u64>,
    uplinks: HashMap<u64, Vec<(u32, u64)>>,
}

async fn cabling(agents: &mut Agents) -> Cabling {
    let mut spines = Vec::new();
    let mut uplinks = HashMap::new();
    for (g, c) in &mut agents.0 {
        let t = c.get_ports(GetPortsRequest {}).await.expect("GetPorts").into_inner();
        let mut up = Vec::new();
        let mut cas = 0;
        for p in &t.ports {
            match p.neighbour.as_ref() {
                Some(n) if n.kind == NeighbourKind::Ca as i32 => cas += 1,
                Some(n) if n.kind == NeighbourKind::Switch as i32 => up.push((p.port, n.node_guid)),
                _ => {}
            }
        }
        if cas == 0 {
            spines.push(*g);
        } else {
            uplinks.insert(*g, up);
        }
    }
    spines.sort_unstable();
    Cabling { spines, uplinks }
}

/// (pairs checked, unreachable) on the base (`false`) or escape LIDs, through the agents.
async fn unreachable(ctl: &mut SimCtl, escape: bool) -> (u64, u64) {
    let r = ctl.verify(escape).await;
    (r.pairs_checked, r.unreachable_count)
}

/// The daemon is idle with nothing pending.
fn idle(s: &pb::Status) -> bool {
    s.phase == pb::Phase::Idle as i32 && s.pending_faults == 0 && s.generation >= 1
}

/// Status text of the blocks the daemon could not write (`N LFT blocks not written, ...`).
fn blocks_error(s: &pb::Status) -> bool {
    s.last_error.contains("LFT block") || s.last_error.contains("LID configuration")
}

/// What the status must say, given what the test knows of the agents: with every agent up and
/// the daemon idle, every switch up, nothing pending, no error about blocks, `/ready` 200
/// unless some leaf's agent was down when the daemon started (`incomplete`: its end ports are
/// not routed; then not ready, the topology incomplete naming each); with an agent down, not
/// everything installed (its switch is not up). Always: `Status.ready` agrees with `/ready`,
/// and a listed unprogrammed switch means neither ready nor installed.
fn assert_status_truthful(s: &pb::Status, agents_down: usize, incomplete: &[u64], ready: &str) -> Result<(), String> {
    let mut bad = Vec::new();
    for leaf in incomplete {
        let name = format!("{leaf:#018x}");
        if s.ready
            || !s
                .not_ready_reason
                .contains(&format!("topology incomplete: switch {name}"))
                && !s.not_ready_reason.contains(&format!("({name}) lists"))
        {
            bad.push(format!(
                "leaf {name} was down at start, its end ports are not routed, yet ready={} ({})",
                s.ready, s.not_ready_reason
            ));
        }
    }
    if agents_down == 0 && incomplete.is_empty() {
        if !idle(s) {
            bad.push("not idle".to_string());
        }
        if s.switches_up != s.switches {
            bad.push(format!("{} of {} switches up", s.switches_up, s.switches));
        }
        if blocks_error(s) {
            bad.push(format!("last_error about blocks: {}", s.last_error));
        }
        if !ready.starts_with("HTTP/1.1 200") {
            bad.push(format!("/ready: {}", ready.lines().next().unwrap_or("")));
        }
        if !s.tables_installed || s.blocks_pending != 0 || s.unprogrammed_switch_count != 0 {
            bad.push(format!(
                "every agent up and idle, yet tables_installed={} blocks_pending={} unprogrammed={:?}",
                s.tables_installed, s.blocks_pending, s.unprogrammed_switches
            ));
        }
    } else if agents_down > 0 && s.switches_up >= s.switches {
        bad.push(format!(
            "{agents_down} agent(s) down but {} of {} switches up",
            s.switches_up, s.switches
        ));
    }
    // Status and /ready tell the same story, and an unprogrammed switch is never "ready".
    if s.ready != ready.starts_with("HTTP/1.1 200") {
        bad.push(format!(
            "Status.ready={} but /ready: {}",
            s.ready,
            ready.lines().next().unwrap_or("")
        ));
    }
    if s.unprogrammed_switch_count as usize != s.unprogrammed_switches.len()
        || (s.unprogrammed_switch_count > 0 && (s.ready || s.tables_installed))
    {
        bad.push(format!(
            "{} unprogrammed switches ({:?}) with ready={} tables_installed={}",
            s.unprogrammed_switch_count, s.unprogrammed_switches, s.ready, s.tables_installed
        ));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("status not truthful: {}; status {s:?}", bad.join("; ")))
    }
}

/// Every switch's LFT as the agents hold it equals the daemon's (rows padded with 255).
async fn agents_hold_daemon_tables(agents: &mut Agents, c: &mut fabric_proto::Client, only: Option<u64>) -> bool {
    let (_, daemon) = lfts(c).await;
    let blocks = daemon.values().map(|r| r.len().div_ceil(64)).max().unwrap_or(0) as u32;
    let held = agents.lfts(blocks).await;
    daemon
        .iter()
        .filter(|(g, _)| only.is_none_or(|o| o == **g))
        .all(|(g, row)| {
            let mut want = row.clone();
            want.resize(blocks as usize * 64, 255);
            held.get(g) == Some(&want)
        })
}

#[test]
fn one_agent_down_at_start_the_others_are_programmed_and_it_is_when_it_returns() {
    let dir = test_dir("oob-agent-down");
    let sim = AgentSim::start(&dir, SPEC, &[]);
    let http = free_port();
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, config(&sim.inventory, http, "5s")).expect("write config");
    run_with_deadline(120, async {
        let mut ctl = sim.control().await;
        let mut agents = sim.agents().await;
        let cab = cabling(&mut agents).await;
        assert_eq!((cab.spines.len(), cab.uplinks.len()), (4, 8));
        let spine = cab.spines[0];
        ctl.command(&format!("kill {spine:#x}")).await;

        // Started while the spine's agent is down: every other switch is programmed.
        let d = Daemon::spawn_with_config(&dir, &cfg, &[]);
        let mut c = d.ready().await;
        let s = wait_status(&d, &mut c, "first generation", Duration::from_secs(30), idle).await;
        let n = 32u64;
        assert_eq!(
            unreachable(&mut ctl, false).await,
            (n * (n - 1), 0),
            "base LIDs with one spine agent down; status {s:?}; log:\n{}",
            d.log_text()
        );
        assert_eq!(unreachable(&mut ctl, true).await, (n * (n - 1), 0), "escape LIDs");
        assert_eq!(s.switches_up, SWITCHES - 1, "{s:?}");
        assert_status_truthful(&s, 1, &[], &http_get(http, "/ready")).unwrap();
        let log = d.log_text();
        assert!(!log.contains("unknown switch GUID"), "{log}");

        // The agent comes back: its switch is up and its tables are written within seconds
        // (what its agent holds is what the daemon routed), long before any retry backoff.
        let written = ctl.counters().await.lft_blocks_written;
        let back = Instant::now();
        ctl.command(&format!("restore {spine:#x}")).await;
        let mut agents = sim.agents().await;
        loop {
            let s = status(&mut c).await;
            if s.switches_up == SWITCHES
                && idle(&s)
                && agents_hold_daemon_tables(&mut agents, &mut c, Some(spine)).await
            {
                let (_, daemon) = lfts(&mut c).await;
                assert!(
                    daemon[&spine].iter().filter(|&&p| p != 255).count() >= 64,
                    "the spine routes the end ports' LIDs"
                );
                break;
            }
            assert!(
                back.elapsed() < Duration::from_secs(10),
                "the restored spine's tables are not written after 10 s (status {s:?}); log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ctl.counters().await.lft_blocks_written > written);
        assert!(agents_hold_daemon_tables(&mut agents, &mut c, None).await);
        assert_eq!(unreachable(&mut ctl, false).await.1, 0);
        assert_eq!(unreachable(&mut ctl, true).await.1, 0);
        let s = wait_status(&d, &mut c, "no error about blocks", Duration::from_secs(10), |s| {
            idle(s) && !blocks_error(s)
        })
        .await;
        assert_status_truthful(&s, 0, &[], &http_get(http, "/ready")).unwrap();

        // A later cable fault is routed around (through the restored spine too).
        let (leaf, ups) = cab.uplinks.iter().next().map(|(l, u)| (*l, u.clone())).unwrap();
        let (port, _) = ups
            .iter()
            .find(|(_, sp)| *sp == spine)
            .copied()
            .expect("leaf-spine cable");
        ctl.command(&format!("link-down {leaf:#x} {port}")).await;
        let s = wait_status(&d, &mut c, "cable fault routed", Duration::from_secs(15), |x| {
            idle(x) && x.generation > s.generation && x.links_up < x.links
        })
        .await;
        assert!(agents_hold_daemon_tables(&mut agents, &mut c, None).await);
        let row = &agents.lfts(1).await[&leaf];
        assert!(
            !row.iter().any(|&p| u32::from(p) == port),
            "leaf {leaf:#x} forwards to its dead port {port}"
        );
        assert_eq!(unreachable(&mut ctl, false).await.1, 0);
        assert_eq!(unreachable(&mut ctl, true).await.1, 0);

        // `reroute --resync --wait` really rewrites every switch.
        let before = ctl.counters().await.lft_blocks_written;
        let (_, daemon) = lfts(&mut c).await;
        let blocks: u64 = daemon.values().map(|r| r.len().div_ceil(64) as u64).sum();
        let g = c
            .reroute(pb::RerouteRequest {
                wait: true,
                resync: true,
            })
            .await
            .expect("reroute --resync --wait")
            .into_inner()
            .generation;
        assert!(g > s.generation);
        let after = ctl.counters().await.lft_blocks_written;
        assert!(
            after - before >= blocks,
            "resync wrote {} blocks, the switches hold {blocks}",
            after - before
        );
        assert_eq!(unreachable(&mut ctl, false).await.1, 0);
        assert_eq!(unreachable(&mut ctl, true).await.1, 0);
    });
}

/// `fabricctl --socket S status [--json]` (off the async runtime's threads).
async fn fabricctl_status(d: &Daemon, json: bool) -> String {
    let socket = d.socket.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(common::fabricctl_binary());
        cmd.arg("--socket").arg(&socket).arg("status");
        if json {
            cmd.arg("--json");
        }
        cmd.output().expect("run fabricctl")
    })
    .await
    .expect("fabricctl task");
    assert!(out.status.success(), "fabricctl status: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Issue 12, defect "topo": a leaf whose agent is down when fabricd starts is discovered from
/// its neighbours only, without its end ports. When the agent comes back the leaf is
/// programmed, but its end ports stay unrouted until fabricd is restarted: the status must say
/// so (not ready, the switch named, the remedy given), never "ready".
#[test]
fn leaf_agent_down_at_start_its_end_ports_are_reported_unrouted_until_fabricd_restarts() {
    let dir = test_dir("oob-leaf-down");
    let sim = AgentSim::start(&dir, SPEC, &[]);
    let http = free_port();
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, config(&sim.inventory, http, "5s")).expect("write config");
    run_with_deadline(120, async {
        let mut ctl = sim.control().await;
        let mut agents = sim.agents().await;
        let cab = cabling(&mut agents).await;
        let leaf = *cab.uplinks.keys().min().expect("a leaf");
        ctl.command(&format!("kill {leaf:#x}")).await;

        let d = Daemon::spawn_with_config(&dir, &cfg, &[]);
        let mut c = d.ready().await;
        let s = wait_status(&d, &mut c, "first generation", Duration::from_secs(30), idle).await;
        assert_eq!(s.switches_up, SWITCHES - 1, "{s:?}");
        // 28 end ports known, the leaf's 4 unknown.
        assert_eq!(s.nodes, 28, "{s:?}");

        // The agent comes back: the leaf is programmed (what its agent holds is what the daemon
        // routed) ...
        ctl.command(&format!("restore {leaf:#x}")).await;
        let mut agents = sim.agents().await;
        let g0 = s.generation;
        let back = Instant::now();
        loop {
            let s = status(&mut c).await;
            if s.switches_up == SWITCHES
                && idle(&s)
                && s.generation > g0
                && agents_hold_daemon_tables(&mut agents, &mut c, Some(leaf)).await
            {
                break;
            }
            assert!(
                back.elapsed() < Duration::from_secs(15),
                "the restored leaf is not programmed after 15 s (status {s:?}); log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // ... but its end ports are not routed (they have no LID): through the agents' own
        // tables, no pair from them reaches its destination (4 x 31 pairs) ...
        let (pairs, lost) = unreachable(&mut ctl, false).await;
        assert_eq!((pairs, lost), (32 * 31, 4 * 31));
        // ... and everything the daemon reports says so.
        let s = wait_status(
            &d,
            &mut c,
            "topology incomplete reported",
            Duration::from_secs(10),
            |s| !s.ready && s.not_ready_reason.contains("topology incomplete"),
        )
        .await;
        let name = format!("{leaf:#018x}");
        assert!(
            s.not_ready_reason.contains(&name)
                && s.not_ready_reason.contains("lists 4 end ports unknown since start")
                && s.not_ready_reason.contains("restart fabricd"),
            "{}",
            s.not_ready_reason
        );
        let ready = http_get(http, "/ready");
        assert!(
            ready.starts_with("HTTP/1.1 503") && ready.contains("topology incomplete") && ready.contains(&name),
            "/ready: {ready}"
        );
        let text = fabricctl_status(&d, false).await;
        assert!(
            text.lines()
                .any(|l| l.starts_with("topology") && l.contains(&name) && l.contains("restart fabricd")),
            "fabricctl status:\n{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&fabricctl_status(&d, true).await).expect("status --json");
        let listed = json["topology_incomplete"].as_array().cloned().unwrap_or_default();
        assert!(
            listed.len() == 1 && listed[0].as_str().is_some_and(|t| t.contains(&name)),
            "status --json topology_incomplete: {}",
            json["topology_incomplete"]
        );
        let log = d.log_text();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("ERROR") && l.contains("topology incomplete"))
            .collect();
        assert!(
            errors.len() == 1 && errors[0].contains(&name) && errors[0].contains("systemctl restart fabricd"),
            "one ERROR line naming the leaf and the remedy; log:\n{log}"
        );

        // The remedy works: after a restart with every agent up, every pair is routed and the
        // daemon is ready.
        drop(c);
        drop(d);
        let d = Daemon::spawn_with_config(&dir, &cfg, &[]);
        let mut c = d.ready().await;
        let s = wait_status(&d, &mut c, "ready after the restart", Duration::from_secs(30), |s| {
            idle(s) && s.ready
        })
        .await;
        assert_eq!((s.switches_up, s.nodes), (SWITCHES, 32), "{s:?}");
        assert_eq!(unreachable(&mut ctl, false).await, (32 * 31, 0));
        assert_eq!(unreachable(&mut ctl, true).await, (32 * 31, 0));
        assert!(http_get(http, "/ready").starts_with("HTTP/1.1 200"));
    });
}

/// One action of the chaos test.
#[derive(Clone)]
enum Action {
    Kill(u64),
    Restore(u64),
    CableDown(u64, u32),
    CableUp(u64, u32),
    RestartDaemon,
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Kill(g) => write!(f, "kill agent {g:#x}"),
            Action::Restore(g) => write!(f, "restore agent {g:#x}"),
            Action::CableDown(l, p) => write!(f, "link-down {l:#x} {p}"),
            Action::CableUp(l, p) => write!(f, "link-up {l:#x} {p}"),
            Action::RestartDaemon => write!(f, "kill -9 fabricd, restart"),
        }
    }
}

#[test]
fn chaos_agents_cables_and_daemon_kills_keep_the_fabric_routed_and_the_status_true() {
    let seed: u64 = std::env::var("FABRICD_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("chaos seed {seed} (replay: FABRICD_CHAOS_SEED={seed})");
    let dir = test_dir("oob-chaos");
    let sim = AgentSim::start(&dir, SPEC, &[]);
    let http = free_port();
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, config(&sim.inventory, http, "1s")).expect("write config");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut log = String::new();
    let t0 = Instant::now();
    run_with_deadline(240, async {
        let mut ctl = sim.control().await;
        let mut agents = sim.agents().await;
        let cab = cabling(&mut agents).await;
        let leaves: Vec<u64> = {
            let mut v: Vec<u64> = cab.uplinks.keys().copied().collect();
            v.sort_unstable();
            v
        };
        let mut d = Daemon::spawn_with_config(&dir, &cfg, &[]);
        let mut c = d.ready().await;
        let mut killed: BTreeSet<u64> = BTreeSet::new();
        // Leaves whose agent was down when the running daemon started: their end ports are
        // unknown to it (not routed) until it is restarted with their agent up.
        let mut incomplete: BTreeSet<u64> = BTreeSet::new();
        let mut cables_down: BTreeSet<(u64, u32)> = BTreeSet::new();
        let mut round = 0;
        // Rounds until ~100 s have passed (each round: a burst of actions, a quiet period and
        // the checks); the last round restores everything.
        loop {
            round += 1;
            let last = t0.elapsed() > Duration::from_secs(100) || round > 25;
            let mut actions = Vec::new();
            if last {
                actions.extend(killed.iter().map(|&g| Action::Restore(g)));
                actions.extend(cables_down.iter().map(|&(l, p)| Action::CableUp(l, p)));
                if !incomplete.is_empty() {
                    // Only a restart routes the end ports of a leaf that was down at start.
                    actions.push(Action::RestartDaemon);
                }
            } else {
                for _ in 0..rng.gen_range(1..=3) {
                    let a = match rng.gen_range(0..10) {
                        0..=2 if killed.len() < 2 => {
                            let all: Vec<u64> = cab.spines.iter().chain(&leaves).copied().collect();
                            let g = all[rng.gen_range(0..all.len())];
                            if killed.contains(&g) {
                                continue;
                            }
                            Action::Kill(g)
                        }
                        0..=4 if !killed.is_empty() => {
                            let v: Vec<u64> = killed.iter().copied().collect();
                            Action::Restore(v[rng.gen_range(0..v.len())])
                        }
                        5..=6 if cables_down.len() < 2 => {
                            let leaf = leaves[rng.gen_range(0..leaves.len())];
                            let ups = &cab.uplinks[&leaf];
                            let (port, _) = ups[rng.gen_range(0..ups.len())];
                            // At most one cable down per leaf: every leaf keeps 3 uplinks.
                            if cables_down.iter().any(|&(l, _)| l == leaf) {
                                continue;
                            }
                            Action::CableDown(leaf, port)
                        }
                        7 if !cables_down.is_empty() => {
                            let v: Vec<(u64, u32)> = cables_down.iter().copied().collect();
                            let (l, p) = v[rng.gen_range(0..v.len())];
                            Action::CableUp(l, p)
                        }
                        // A daemon started while a leaf's agent is down does not know the
                        // leaf's end ports (see docs/operations.md): once the agent is back,
                        // the status must say the topology is incomplete.
                        8..=9 => Action::RestartDaemon,
                        _ => continue,
                    };
                    actions.push(a);
                }
            }
            for a in actions {
                let _ = writeln!(log, "{:>6.1}s round {round}: {a:?}", t0.elapsed().as_secs_f64());
                match a {
                    Action::Kill(g) => {
                        ctl.command(&format!("kill {g:#x}")).await;
                        killed.insert(g);
                    }
                    Action::Restore(g) => {
                        ctl.command(&format!("restore {g:#x}")).await;
                        killed.remove(&g);
                    }
                    Action::CableDown(l, p) => {
                        ctl.command(&format!("link-down {l:#x} {p}")).await;
                        cables_down.insert((l, p));
                    }
                    Action::CableUp(l, p) => {
                        ctl.command(&format!("link-up {l:#x} {p}")).await;
                        cables_down.remove(&(l, p));
                    }
                    Action::RestartDaemon => {
                        d.kill9();
                        d = Daemon::spawn_with_config(&dir, &cfg, &[]);
                        c = d.client().await;
                        incomplete = killed.iter().filter(|g| leaves.contains(g)).copied().collect();
                    }
                }
                // Some actions land in the middle of the previous one's generation.
                tokio::time::sleep(Duration::from_millis(rng.gen_range(0..400))).await;
            }

            // Quiet period: the daemon settles (past the unreachable deadline of 1 s).
            let leaf_down = killed.iter().any(|g| leaves.contains(g));
            // Leaves back since the daemon started without them: the status must say so.
            let unrouted: Vec<u64> = incomplete.difference(&killed).copied().collect();
            let quiet = Instant::now();
            let mut stable_since: Option<Instant> = None;
            let mut last_gen = 0;
            let verdict = loop {
                let s = match c.get_status(pb::GetStatusRequest {}).await {
                    Ok(s) => s.into_inner(),
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let settled = idle(&s) && s.generation == last_gen;
                last_gen = s.generation;
                stable_since = if settled {
                    stable_since.or(Some(Instant::now()))
                } else {
                    None
                };
                let stable = stable_since.is_some_and(|t| t.elapsed() > Duration::from_millis(1500));
                let mut problem = None;
                if stable {
                    problem = assert_status_truthful(&s, killed.len(), &unrouted, &http_get(http, "/ready")).err();
                    if problem.is_none() && !leaf_down && !unrouted.is_empty() {
                        // What the status says is true: pairs are lost through the agents' tables.
                        if ctl.verify(false).await.unreachable_count == 0 {
                            problem = Some(format!(
                                "leaves {unrouted:x?} reported unrouted, yet every pair is reachable"
                            ));
                        }
                    } else if problem.is_none() && !leaf_down {
                        // Every connected pair through the agents' own tables. (A leaf whose
                        // agent is down cannot be reprogrammed: not checked then.)
                        for escape in [false, true] {
                            let r = ctl.verify(escape).await;
                            if r.unreachable_count > 0 {
                                problem = Some(format!(
                                    "{} of {} pairs unreachable on the {} LIDs, e.g. {:?}",
                                    r.unreachable_count,
                                    r.pairs_checked,
                                    if escape { "escape" } else { "base" },
                                    r.unreachable.first()
                                ));
                                break;
                            }
                        }
                    }
                    if problem.is_none() {
                        break Ok(s);
                    }
                }
                if quiet.elapsed() > Duration::from_secs(25) {
                    break Err(problem.unwrap_or_else(|| format!("never settled: {s:?}")));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            match verdict {
                Ok(s) => {
                    let _ = writeln!(
                        log,
                        "{:>6.1}s round {round}: checked (generation {}, {} agent(s) down, {} cable(s) down, pairs {})",
                        t0.elapsed().as_secs_f64(),
                        s.generation,
                        killed.len(),
                        cables_down.len(),
                        if leaf_down {
                            "not checked"
                        } else if !unrouted.is_empty() {
                            "lost, reported: topology incomplete"
                        } else {
                            "all reachable"
                        }
                    );
                }
                Err(e) => panic!(
                    "chaos seed {seed}, round {round}: {e}\nevent log:\n{log}\nfabricd log:\n{}",
                    d.log_text()
                ),
            }
            if last {
                break;
            }
        }
        eprintln!("chaos seed {seed}: {round} rounds in {:.0?}\n{log}", t0.elapsed());
    });
}
