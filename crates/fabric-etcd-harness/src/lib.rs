//! A private etcd cluster for tests: `n` members of the real `etcd` (Debian `etcd-server`,
//! installed by `tests/run-all.sh`) on loopback ports, in a temporary directory, stopped and
//! removed when the [`EtcdCluster`] is dropped.
//!
//! Members can be killed (`SIGKILL`), frozen (`SIGSTOP` / `SIGCONT`) and restarted on their
//! data directory, which is how the tests take quorum away and give it back. The members use
//! short raft timings (heartbeat 50 ms, election 500 ms) so that a lost etcd leader is replaced
//! within a second.
//!
//! A missing `etcd` binary is a failure, never a skip: the test command installs it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The `etcd` binary (`FABRIC_ETCD` overrides).
pub fn etcd_binary() -> PathBuf {
    std::env::var_os("FABRIC_ETCD").map_or_else(|| PathBuf::from("etcd"), PathBuf::from)
}

/// One member of the cluster.
pub struct Member {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    stopped: bool,
}

impl Member {
    /// `http://127.0.0.1:<client port>`.
    pub fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

/// A local etcd cluster (see the crate documentation).
pub struct EtcdCluster {
    dir: PathBuf,
    token: String,
    members: Vec<Member>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// GET `path` on `127.0.0.1:port` (HTTP/1.0): the status line and body, or `None`.
fn http_get(port: u16, path: &str, timeout: Duration) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

impl EtcdCluster {
    /// Starts `n` members and waits until every one reports healthy (at most 30 s; panics
    /// with the members' logs otherwise).
    pub fn start(n: usize) -> EtcdCluster {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        assert!(n >= 1, "an etcd cluster has at least one member");
        let seq = SEQ.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("fabric-etcd-{}-{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create the etcd test directory");
        let members = (0..n)
            .map(|i| {
                let name = format!("m{i}");
                Member {
                    data_dir: dir.join(format!("{name}.etcd")),
                    log: dir.join(format!("{name}.log")),
                    name,
                    client_port: free_port(),
                    peer_port: free_port(),
                    child: None,
                    stopped: false,
                }
            })
            .collect();
        let mut c = EtcdCluster {
            token: format!("fabric-test-{}-{seq}", std::process::id()),
            dir,
            members,
        };
        for i in 0..n {
            c.spawn(i, "new");
        }
        c.wait_healthy(Duration::from_secs(30));
        c
    }

    /// The temporary directory (data directories and logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The members.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Client URLs of every member (`http://127.0.0.1:port`), the `[ha] etcd_endpoints` value.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::client_url).collect()
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize, state: &str) {
        let initial = self.initial_cluster();
        let m = &mut self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&m.log)
            .expect("cannot open the etcd member log");
        let child = Command::new(etcd_binary())
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&m.data_dir)
            .arg("--listen-client-urls")
            .arg(m.client_url())
            .arg("--advertise-client-urls")
            .arg(m.client_url())
            .arg("--listen-peer-urls")
            .arg(m.peer_url())
            .arg("--initial-advertise-peer-urls")
            .arg(m.peer_url())
            .arg("--initial-cluster")
            .arg(&initial)
            .arg("--initial-cluster-token")
            .arg(&self.token)
            .arg("--initial-cluster-state")
            .arg(state)
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--logger", "zap", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}): install Debian's etcd-server (tests/run-all.sh does)",
                    etcd_binary().display()
                )
            });
        m.child = Some(child);
        m.stopped = false;
    }

    /// Whether member `i` answers `/health` with `"health":"true"` (it has a raft leader).
    pub fn member_healthy(&self, i: usize) -> bool {
        let m = &self.members[i];
        m.child.is_some()
            && !m.stopped
            && http_get(m.client_port, "/health", Duration::from_millis(500))
                .is_some_and(|r| r.contains("\"health\":\"true\""))
    }

    /// Waits until every running, non-frozen member is healthy; panics with the logs after
    /// `timeout`.
    pub fn wait_healthy(&self, timeout: Duration) {
        let end = Instant::now() + timeout;
        loop {
            let all = (0..self.members.len())
                .filter(|&i| self.members[i].child.is_some() && !self.members[i].stopped)
                .all(|i| self.member_healthy(i));
            if all {
                return;
            }
            assert!(
                Instant::now() < end,
                "etcd cluster not healthy after {timeout:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The tail of every member's log.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for m in &self.members {
            let text = std::fs::read_to_string(&m.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            out.push_str(&format!("--- {} ({})\n", m.name, m.log.display()));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// SIGKILL of member `i` (its data directory is kept: [`restart`](Self::restart) rejoins).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.members[i].stopped = false;
    }

    /// SIGSTOP of member `i`.
    pub fn freeze(&mut self, i: usize) {
        if let Some(pid) = self.members[i].pid() {
            signal(pid, "STOP");
            self.members[i].stopped = true;
        }
    }

    /// SIGCONT of member `i`.
    pub fn thaw(&mut self, i: usize) {
        if let Some(pid) = self.members[i].pid() {
            signal(pid, "CONT");
            self.members[i].stopped = false;
        }
    }

    /// Starts member `i` again on its data directory (after [`kill`](Self::kill)).
    pub fn restart(&mut self, i: usize) {
        assert!(self.members[i].child.is_none(), "member {i} is running");
        self.spawn(i, "existing");
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                if m.stopped {
                    signal(c.id(), "CONT");
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_members_start_and_lose_then_regain_quorum() {
        let mut c = EtcdCluster::start(3);
        assert_eq!(c.endpoints().len(), 3);
        c.kill(2);
        // Two of three: still a quorum.
        c.wait_healthy(Duration::from_secs(10));
        c.kill(1);
        let end = Instant::now() + Duration::from_secs(10);
        while c.member_healthy(0) {
            assert!(Instant::now() < end, "one member of three still claims a leader");
            std::thread::sleep(Duration::from_millis(100));
        }
        c.restart(1);
        c.wait_healthy(Duration::from_secs(20));
        assert!(c.member_healthy(0) && c.member_healthy(1));
    }
}
