//! systemd notifications through the `sd-notify` crate: `READY=1` after the first routing is
//! installed, `WATCHDOG=1` pings from the event loop, `STOPPING=1` on shutdown, `RELOADING=1`
//! on SIGHUP, `STATUS=...` lines for `systemctl status`.
//!
//! Without `$NOTIFY_SOCKET` (not started by systemd) every call is a no-op. The socket is the
//! one in the environment at each call (`sd_notify::notify`); a Linux abstract socket
//! (`@name`, which `sd-notify` does not address) is reached directly.

use std::io;
use std::time::Duration;

use sd_notify::NotifyState;

/// A handle on the service manager's notification socket.
#[derive(Clone, Debug, Default)]
pub struct Notifier {
    /// `$NOTIFY_SOCKET` when the notifier was made (`None`: a no-op notifier).
    socket: Option<String>,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET` (absent or empty: a no-op notifier).
    pub fn from_env() -> Notifier {
        let socket = std::env::var("NOTIFY_SOCKET").ok().filter(|s| !s.is_empty());
        Notifier { socket }
    }

    /// Whether a service manager listens.
    pub fn enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// Sends the given state changes in one datagram.
    pub fn send(&self, states: &[NotifyState<'_>]) -> io::Result<()> {
        match self.socket.as_deref() {
            None => Ok(()),
            Some(s) if s.starts_with('@') => send_abstract(&s[1..], &message(states)),
            Some(_) => sd_notify::notify(states),
        }
    }

    /// `READY=1` with a status line and the main pid.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.send(&[
            NotifyState::Ready,
            NotifyState::Status(status),
            NotifyState::MainPid(std::process::id()),
        ])
    }

    /// `READY=1` with a status line (the end of a reload).
    pub fn reloaded(&self, status: &str) -> io::Result<()> {
        self.send(&[NotifyState::Ready, NotifyState::Status(status)])
    }

    /// `STOPPING=1`.
    pub fn stopping(&self) -> io::Result<()> {
        self.send(&[NotifyState::Stopping, NotifyState::Status("stopping")])
    }

    /// `RELOADING=1` with the monotonic time systemd requires of `Type=notify-reload` (the
    /// caller sends [`Notifier::reloaded`] when done).
    pub fn reloading(&self) -> io::Result<()> {
        let now = NotifyState::monotonic_usec_now()?;
        self.send(&[NotifyState::Reloading, now])
    }

    /// `WATCHDOG=1`.
    pub fn watchdog(&self) -> io::Result<()> {
        self.send(&[NotifyState::Watchdog])
    }

    /// `STATUS=...`.
    pub fn status(&self, status: &str) -> io::Result<()> {
        self.send(&[NotifyState::Status(status)])
    }
}

/// The datagram `sd_notify` sends: one `KEY=VALUE` line per state.
fn message(states: &[NotifyState<'_>]) -> String {
    states.iter().map(|s| format!("{s}\n")).collect()
}

fn send_abstract(name: &str, msg: &str) -> io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    std::os::unix::net::UnixDatagram::unbound()?.send_to_addr(msg.as_bytes(), &addr)?;
    Ok(())
}

/// The watchdog ping period: half of `$WATCHDOG_USEC` when the watchdog is enabled for this
/// process (`$WATCHDOG_PID` absent or equal to our pid; `sd_notify::watchdog_enabled`).
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().filter(|d| !d.is_zero()).map(|d| d / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn messages_are_one_line_per_state() {
        assert_eq!(
            message(&[NotifyState::Ready, NotifyState::Status("routing installed")]),
            "READY=1\nSTATUS=routing installed\n"
        );
        assert_eq!(message(&[NotifyState::Watchdog]), "WATCHDOG=1\n");
    }

    #[test]
    fn abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("fabricd-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        let n = Notifier {
            socket: Some(format!("@{name}")),
        };
        assert!(n.enabled());
        n.watchdog().unwrap();
        n.stopping().unwrap();
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1\n");
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1\nSTATUS=stopping\n");
    }

    #[test]
    fn disabled_without_socket() {
        let n = Notifier::default();
        assert!(!n.enabled());
        n.ready("x").unwrap();
    }
}
