//! systemd notification protocol (`sd_notify`) over `$NOTIFY_SOCKET`, in a few lines: `READY=1`
//! after the first routing is installed, `WATCHDOG=1` pings from the event loop, `STOPPING=1` on
//! shutdown, `STATUS=...` lines for `systemctl status`.
//!
//! Without `$NOTIFY_SOCKET` (not started by systemd) every call is a no-op.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

/// Where notifications go.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    Path(PathBuf),
    /// Linux abstract socket (`@name` in `$NOTIFY_SOCKET`).
    Abstract(Vec<u8>),
}

/// A handle on the service manager's notification socket.
#[derive(Clone, Debug, Default)]
pub struct Notifier {
    target: Option<Target>,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET` (absent: a no-op notifier).
    pub fn from_env() -> Notifier {
        Notifier::from_socket(std::env::var_os("NOTIFY_SOCKET").map(PathBuf::from))
    }

    /// From an explicit socket address (`@name` = abstract).
    pub fn from_socket(socket: Option<PathBuf>) -> Notifier {
        let target = socket.and_then(|p| {
            let s = p.as_os_str().as_encoded_bytes();
            match s.first() {
                None => None,
                Some(b'@') => Some(Target::Abstract(s[1..].to_vec())),
                Some(_) => Some(Target::Path(p)),
            }
        });
        Notifier { target }
    }

    /// Whether a service manager listens.
    pub fn enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Sends one notification message (newline-separated `KEY=VALUE` assignments).
    pub fn notify(&self, msg: &str) -> io::Result<()> {
        let Some(t) = &self.target else { return Ok(()) };
        let sock = UnixDatagram::unbound()?;
        match t {
            Target::Path(p) => sock.send_to(msg.as_bytes(), p)?,
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                sock.send_to_addr(msg.as_bytes(), &addr)?
            }
        };
        Ok(())
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.notify(&format!("READY=1\nSTATUS={status}\nMAINPID={}", std::process::id()))
    }

    /// `STOPPING=1`.
    pub fn stopping(&self) -> io::Result<()> {
        self.notify("STOPPING=1\nSTATUS=stopping")
    }

    /// `RELOADING=1` (the caller sends [`Notifier::ready`] when done).
    pub fn reloading(&self) -> io::Result<()> {
        self.notify("RELOADING=1")
    }

    /// `WATCHDOG=1`.
    pub fn watchdog(&self) -> io::Result<()> {
        self.notify("WATCHDOG=1")
    }

    /// `STATUS=...`.
    pub fn status(&self, status: &str) -> io::Result<()> {
        self.notify(&format!("STATUS={status}"))
    }
}

/// The watchdog ping period: half of `$WATCHDOG_USEC` when the watchdog is enabled for this
/// process (`$WATCHDOG_PID` absent or equal to our pid).
pub fn watchdog_interval() -> Option<Duration> {
    watchdog_interval_from(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

fn watchdog_interval_from(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok()? != me {
            return None;
        }
    }
    let usec: u64 = usec?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_reach_a_bound_socket() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("notify.sock");
        let rx = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::from_socket(Some(path));
        assert!(n.enabled());
        n.ready("routing installed").unwrap();
        n.stopping().unwrap();
        let mut buf = [0u8; 256];
        let len = rx.recv(&mut buf).unwrap();
        let msg = std::str::from_utf8(&buf[..len]).unwrap();
        assert!(msg.starts_with("READY=1\nSTATUS=routing installed\nMAINPID="), "{msg}");
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1\nSTATUS=stopping");
    }

    #[test]
    fn abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("fabricd-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        Notifier::from_socket(Some(PathBuf::from(format!("@{name}"))))
            .watchdog()
            .unwrap();
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1");
    }

    #[test]
    fn disabled_without_socket() {
        let n = Notifier::from_socket(None);
        assert!(!n.enabled());
        n.ready("x").unwrap();
    }

    #[test]
    fn watchdog_period_is_half_and_pid_checked() {
        assert_eq!(
            watchdog_interval_from(Some("2000000"), None, 5),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            watchdog_interval_from(Some("2000000"), Some("5"), 5),
            Some(Duration::from_secs(1))
        );
        assert_eq!(watchdog_interval_from(Some("2000000"), Some("6"), 5), None);
        assert_eq!(watchdog_interval_from(Some("0"), None, 5), None);
        assert_eq!(watchdog_interval_from(None, None, 5), None);
        assert_eq!(watchdog_interval_from(Some("x"), None, 5), None);
    }
}
