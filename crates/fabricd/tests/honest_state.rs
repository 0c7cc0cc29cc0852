//! What fabricd reports (READY, `/ready`, committed generations, Status) is true of the
//! switches and of the state directory (docs/operations.md, "Failure semantics"): real
//! `fabricd` processes with the mock driver, failures injected through `[driver.mock]`
//! (`error_rate`, `unreachable_switches`, reloaded by SIGHUP) and through read-only mounts of
//! the state directory (root ignores mode bits; a read-only tmpfs refuses root too).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;
use fabric_proto::Client;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";

/// A free loopback port for the Prometheus endpoint.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The daemon's config: the harness defaults plus `mock` lines in `[driver.mock]`, fast
/// retries of failed generations and a Prometheus endpoint on `port`.
fn config_text(mock: &str, port: u16) -> String {
    let mut opts = Opts::new(SMALL);
    opts.extra = format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n");
    opts.config_text()
        .replace("[driver.mock]\n", &format!("[driver.mock]\n{mock}\n"))
        .replace("[update]\n", "[update]\nfailed_generation_backoff_ms = 50\n")
}

/// Rewrites the config and reloads it (SIGHUP), waiting until the daemon applied it.
async fn reload(d: &Daemon, text: &str) {
    let before = d.log_text().matches("configuration reloaded").count();
    std::fs::write(&d.config, text).expect("write config");
    d.signal(libc::SIGHUP);
    until(d, "the reload", |_| {
        d.log_text().matches("configuration reloaded").count() > before
    })
    .await;
}

/// Polls until `f` holds of the status (30 s at most).
async fn until_status(d: &Daemon, c: &mut Client, what: &str, f: impl Fn(&pb::Status) -> bool) -> pb::Status {
    let t = Instant::now();
    loop {
        let s = status(c).await;
        if f(&s) {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "never saw {what}; last status {s:?}; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Polls until `/ready` answers 200 (30 s at most).
async fn until_ready(d: &Daemon, port: u16) {
    until(d, "/ready 200", |_| {
        http_get(port, "/ready").starts_with("HTTP/1.1 200")
    })
    .await;
}

async fn until(d: &Daemon, what: &str, f: impl Fn(&Daemon) -> bool) {
    let t = Instant::now();
    while !f(d) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "never saw {what}; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A tmpfs mounted on a directory (unmounted on drop).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, read_only: bool) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("mount point");
        // mode=0750: the daemon would otherwise tighten the mode of a fresh tmpfs (1777).
        let opts = if read_only { "ro,mode=0750" } else { "rw,mode=0750" };
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "fabricd-test"])
            .arg(dir)
            .status()
            .expect("run mount");
        assert!(
            st.success(),
            "mount -t tmpfs on {} failed (these tests run as root)",
            dir.display()
        );
        Tmpfs(dir.to_path_buf())
    }

    fn remount(&self, read_only: bool) {
        let opts = if read_only { "remount,ro" } else { "remount,rw" };
        let st = Command::new("mount")
            .args(["-o", opts])
            .arg(&self.0)
            .status()
            .expect("run mount");
        assert!(st.success(), "mount -o {opts} {} failed", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// `[driver.mock] error_rate = 1.0`: no LFT block can be written. No generation is
/// committed (numbers are not consumed), nothing says ready, waiters get an error, Status
/// names the failure; once writes work again the first generation is number 1.
#[test]
fn nothing_written_is_nothing_committed() {
    run_with_deadline(120, async {
        let dir = test_dir("nothing-written");
        let port = free_port();
        let failing = config_text("error_rate = 1.0\nmax_retries = 0", port);
        let config = dir.join("fabricd.toml");
        std::fs::write(&config, &failing).expect("write config");
        let d = Daemon::spawn_with_config(&dir, &config, &[]);
        let mut c = d.client().await;

        // The first attempt failed: nothing is installed.
        let s = until_status(&d, &mut c, "an error", |s| !s.last_error.is_empty()).await;
        assert_eq!(s.generation, 0, "no generation committed: {s:?}");
        // Several attempts fail (each retried with backoff).
        until(&d, "three failed attempts", |d| {
            d.log_text().matches("no LFT block could be written").count() >= 3
        })
        .await;
        let s = status(&mut c).await;
        assert_eq!(s.generation, 0, "no generation committed: {s:?}");
        assert!(!s.ready && !s.tables_installed, "{s:?}");
        assert!(s.last_error.contains("no LFT block could be written"), "{s:?}");
        assert!(
            s.not_ready_reason.starts_with("not ready: no generation installed: ")
                && s.not_ready_reason.contains("no LFT block could be written"),
            "{s:?}"
        );
        let r = http_get(port, "/ready");
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        assert!(r.contains("not ready: no generation installed"), "{r}");
        assert!(http_get(port, "/metrics").contains("fabricd_generation 0"));
        assert!(!d.log_text().contains("fabricd ready"), "{}", d.log_text());

        // Waiters get an error, not a generation number.
        let t = topology(&mut c).await;
        let (sw, p) = switch_links(&t)[0];
        let e = c
            .inject_fault(link_req(sw, p, false, false, true))
            .await
            .expect_err("inject --wait must fail when nothing was installed");
        assert!(e.message().contains("no LFT block could be written"), "{e:?}");
        let e = c
            .reroute(pb::RerouteRequest {
                wait: true,
                resync: true,
            })
            .await
            .expect_err("reroute --resync --wait must fail when nothing was written");
        assert!(e.message().contains("no LFT block could be written"), "{e:?}");
        assert_eq!(status(&mut c).await.generation, 0);

        // Writes work again: the retry installs generation 1 (no number was used before).
        reload(&d, &config_text("", port)).await;
        // Without waiting out the backoff the failures grew.
        c.reroute(pb::RerouteRequest {
            wait: false,
            resync: false,
        })
        .await
        .expect("reroute");
        let s = until_status(&d, &mut c, "generation 1", |s| s.generation >= 1).await;
        assert_eq!(s.generation, 1, "failed attempts consume no generation number");
        let s = until_status(&d, &mut c, "ready", |s| s.ready).await;
        assert!(s.tables_installed && s.last_error.is_empty(), "{s:?}");
        assert!(http_get(port, "/ready").starts_with("HTTP/1.1 200"));
        until(&d, "the ready log line", |d| d.log_text().contains("fabricd ready")).await;
        // The virtual fault injected while nothing could be written is routed.
        assert_eq!(s.virtual_faults, 1);
    });
}

/// One switch takes no block (`unreachable_switches`): the generation is committed as
/// incomplete, Status lists the switch, `/ready` answers 503 naming it; once the switch takes
/// its blocks (retried with backoff) the list empties and `/ready` answers 200.
#[test]
fn an_unprogrammed_switch_is_listed_until_programmed() {
    run_with_deadline(120, async {
        let dir = test_dir("unprogrammed");
        let port = free_port();
        let config = dir.join("fabricd.toml");
        std::fs::write(&config, config_text("", port)).expect("write config");
        let d = Daemon::spawn_with_config(&dir, &config, &[]);
        let mut c = d.ready().await;
        until_ready(&d, port).await;

        let t = topology(&mut c).await;
        let leaf = t.switches.iter().find(|s| s.level == Some(0)).expect("a leaf").clone();
        reload(
            &d,
            &config_text(&format!("unreachable_switches = [\"0x{:016x}\"]", leaf.guid), port),
        )
        .await;
        // A resync rewrites every block: every switch but the leaf takes them.
        let g = c
            .reroute(pb::RerouteRequest {
                wait: true,
                resync: true,
            })
            .await
            .expect("an incomplete generation is committed")
            .into_inner()
            .generation;
        assert_eq!(g, 2);
        let r = http_get(port, "/ready");
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        assert!(
            r.contains("not ready: 1 switch unprogrammed: ") && r.contains(&leaf.name),
            "{r}"
        );
        let s = status(&mut c).await;
        assert_eq!(s.unprogrammed_switch_count, 1, "{s:?}");
        let u = &s.unprogrammed_switches[0];
        assert_eq!((u.guid, u.name.as_str()), (leaf.guid, leaf.name.as_str()));
        assert!(u.blocks_pending > 0 && s.blocks_pending == u.blocks_pending, "{s:?}");
        assert!(u.last_error.contains("unreachable"), "{u:?}");
        assert!(!s.ready && !s.tables_installed, "{s:?}");
        assert!(http_get(port, "/metrics").contains("fabricd_unprogrammed_switches 1"));
        assert!(d.log_text().contains("committed incomplete"), "{}", d.log_text());
        // Retries that write nothing (only the leaf's blocks are due) commit nothing.
        until(&d, "a failed retry", |d| {
            d.log_text()
                .contains("generation not committed: no LFT block could be written")
        })
        .await;
        assert_eq!(status(&mut c).await.generation, 2);

        // The leaf is reachable again: its blocks are written by the retry.
        reload(&d, &config_text("", port)).await;
        let s = until_status(&d, &mut c, "every switch programmed", |s| s.ready).await;
        assert!(
            s.unprogrammed_switches.is_empty() && s.tables_installed && s.blocks_pending == 0,
            "{s:?}"
        );
        assert_eq!(s.generation, 3, "one retry installed the leaf's blocks");
        assert!(http_get(port, "/ready").starts_with("HTTP/1.1 200"));
        assert!(http_get(port, "/metrics").contains("fabricd_unprogrammed_switches 0"));
        assert!(
            d.log_text().contains(&format!("switch {} programmed", leaf.name)),
            "{}",
            d.log_text()
        );
        // Every pair is reachable through what the switches hold.
        assert_eq!(verify(&mut c).await.unreachable_count, 0);
    });
}

/// A state directory that cannot be written (read-only mount; root too) stops the start with
/// an error naming it.
#[test]
fn an_unwritable_state_directory_stops_the_start() {
    let dir = test_dir("ro-state-start");
    let state = dir.join("state");
    let _ro = Tmpfs::mount(&state, true);
    let port = free_port();
    let config = dir.join("fabricd.toml");
    std::fs::write(&config, config_text("", port)).expect("write config");
    let mut d = Daemon::spawn_with_config(&dir, &config, &[]);
    let code = d.wait_exit(Duration::from_secs(30));
    assert_ne!(code, Some(0), "fabricd must not start; log:\n{}", d.log_text());
    let log = d.log_text();
    assert!(
        log.contains(&format!("{} is not writable", state.display())),
        "the error names the directory:\n{log}"
    );
    assert!(log.contains("Read-only file system"), "{log}");
    assert!(!log.contains("fabricd ready"), "{log}");
}

/// The state directory becomes read-only at run time: the daemon keeps serving, Status names
/// the failure, `/ready` answers 503, `fabricd_persistence_ok` is 0, one ERROR line; all
/// clear once it is writable again.
#[test]
fn a_state_directory_failing_at_run_time_is_reported() {
    run_with_deadline(120, async {
        let dir = test_dir("ro-state-run");
        let state = dir.join("state");
        let fs = Tmpfs::mount(&state, false);
        let port = free_port();
        let config = dir.join("fabricd.toml");
        std::fs::write(&config, config_text("", port)).expect("write config");
        let d = Daemon::spawn_with_config(&dir, &config, &[]);
        let mut c = d.ready().await;
        until_ready(&d, port).await;

        fs.remount(true);
        let reroute = |c: &mut Client| {
            let mut c = c.clone();
            async move {
                c.reroute(pb::RerouteRequest {
                    wait: true,
                    resync: false,
                })
                .await
                .expect("the tables are installed: the generation is committed")
                .into_inner()
                .generation
            }
        };
        assert_eq!(reroute(&mut c).await, 2);
        assert_eq!(reroute(&mut c).await, 3);
        let r = http_get(port, "/ready");
        assert!(
            r.starts_with("HTTP/1.1 503") && r.contains("state directory not writable"),
            "{r}"
        );
        let s = status(&mut c).await;
        assert!(
            s.persistence_error.contains(&state.display().to_string())
                && s.persistence_error.contains("Read-only file system"),
            "{s:?}"
        );
        assert!(!s.ready, "{s:?}");
        assert!(s.tables_installed, "the switches hold every table: {s:?}");
        assert!(s.not_ready_reason.contains("state directory not writable"), "{s:?}");
        assert!(http_get(port, "/metrics").contains("fabricd_persistence_ok 0"));
        let log = d.log_text();
        assert_eq!(
            log.matches("cannot persist state").count(),
            1,
            "one ERROR per change of state, not one per commit:\n{log}"
        );

        fs.remount(false);
        assert_eq!(reroute(&mut c).await, 4);
        let s = until_status(&d, &mut c, "ready", |s| s.ready).await;
        assert!(s.persistence_error.is_empty(), "{s:?}");
        assert!(http_get(port, "/ready").starts_with("HTTP/1.1 200"));
        assert!(http_get(port, "/metrics").contains("fabricd_persistence_ok 1"));
        assert!(d.log_text().contains("state directory writable again"));
        drop(c);
        drop(d);
    });
}
