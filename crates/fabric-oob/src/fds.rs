//! The file-descriptor and port budget of one management endpoint per switch.
//!
//! Out-of-band management opens one TCP connection per switch agent: the driver holds one
//! descriptor per agent, and the simulator (`fabric-agent-sim`) holds two per agent (its
//! listening socket and the driver's accepted connection). Thousands of switches exceed the
//! usual soft limit of 1024 open files, so both processes raise their soft `RLIMIT_NOFILE` to
//! the hard limit at start ([`raise_fd_limit`]) and then compare what they need with the limit
//! really in force ([`check_fds`]), failing with a message that says what to raise rather than
//! with `EMFILE` in the middle of a discovery. On one host the agents' listening ports and the
//! driver's outgoing connections also come out of the ephemeral port range
//! ([`ephemeral_port_range`], [`check_ports`]).

use std::fmt;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Descriptors kept free for everything that is not an agent connection: the runtime, the
/// standard streams, the control service and its clients, the daemon's own gRPC socket and
/// clients, state files, the log.
pub const FD_RESERVE: u64 = 256;

/// Highest soft limit set when the hard limit is unlimited (Linux refuses more than
/// `fs.nr_open`, 1 048 576 by default).
const UNLIMITED_CAP: u64 = 1 << 20;

/// The process's open-file limits (`RLIMIT_NOFILE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdLimits {
    /// The limit in force (the soft limit).
    pub soft: u64,
    /// The most the soft limit may be raised to without privileges; `None` = unlimited.
    pub hard: Option<u64>,
}

impl fmt::Display for FdLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.hard {
            Some(h) => write!(f, "{} open files (hard limit {h})", self.soft),
            None => write!(f, "{} open files (hard limit unlimited)", self.soft),
        }
    }
}

/// The limits in force.
pub fn fd_limits() -> FdLimits {
    let r = getrlimit(Resource::Nofile);
    FdLimits {
        soft: r.current.unwrap_or(u64::MAX),
        hard: r.maximum,
    }
}

/// The soft limit [`raise_fd_limit`] aims at, given the current limits: the hard limit (capped
/// at 2^20 when unlimited); never below the current soft limit.
pub fn raise_target(cur: FdLimits) -> u64 {
    cur.hard
        .unwrap_or(UNLIMITED_CAP)
        .min(UNLIMITED_CAP.max(cur.soft))
        .max(cur.soft)
}

/// Raises the soft open-file limit to the hard limit (never lowers it) and returns the limits
/// then in force. A refusal by the kernel leaves the limits as they were (what the caller then
/// checks with [`check_fds`]).
pub fn raise_fd_limit() -> FdLimits {
    let cur = fd_limits();
    let target = raise_target(cur);
    if target > cur.soft {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(target),
                maximum: cur.hard,
            },
        );
    }
    fd_limits()
}

/// Descriptors an `oob` driver with `agents` agents needs: one connection per agent plus
/// [`FD_RESERVE`].
pub fn driver_fds(agents: usize) -> u64 {
    agents as u64 + FD_RESERVE
}

/// Descriptors the agent simulator serving `agents` agents needs: a listening socket and the
/// driver's connection per agent, plus [`FD_RESERVE`]. Clients that connect to every agent
/// besides the driver (tests reading the tables back) need one more per agent.
pub fn simulator_fds(agents: usize) -> u64 {
    2 * agents as u64 + FD_RESERVE
}

/// Too few descriptors for the agents (see [`check_fds`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{agents} switch agents need about {needed} open files ({per_agent} per agent and {reserve} in reserve) but the \
     limit is {limits}; raise it (`ulimit -n`, systemd `LimitNOFILE=`, /etc/security/limits.conf){}",
    if self.hard_suffices() { "" } else { " including the hard limit" }
)]
pub struct FdBudgetError {
    /// Agents to serve or reach.
    pub agents: usize,
    /// Descriptors needed.
    pub needed: u64,
    /// Descriptors per agent.
    pub per_agent: u64,
    /// [`FD_RESERVE`].
    pub reserve: u64,
    /// The limits in force.
    pub limits: FdLimits,
}

impl FdBudgetError {
    fn hard_suffices(&self) -> bool {
        self.limits.hard.is_none_or(|h| h >= self.needed)
    }
}

/// Checks that `needed` descriptors (for `agents` agents) fit the soft limit in `limits`.
pub fn check_fds(agents: usize, needed: u64, limits: FdLimits) -> Result<(), FdBudgetError> {
    if needed <= limits.soft {
        return Ok(());
    }
    let per_agent = (needed.saturating_sub(FD_RESERVE))
        .checked_div(agents as u64)
        .unwrap_or(0);
    Err(FdBudgetError {
        agents,
        needed,
        per_agent,
        reserve: FD_RESERVE,
        limits,
    })
}

/// The ephemeral port range (`net.ipv4.ip_local_port_range`), inclusive: the ports a socket
/// bound to port 0 and an outgoing connection take. `None` when it cannot be read (not Linux).
pub fn ephemeral_port_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    parse_port_range(&text)
}

/// Parses the text of `/proc/sys/net/ipv4/ip_local_port_range` (`"32768\t60999\n"`).
pub fn parse_port_range(text: &str) -> Option<(u16, u16)> {
    let mut it = text.split_whitespace().map(str::parse::<u16>);
    match (it.next(), it.next(), it.next()) {
        (Some(Ok(lo)), Some(Ok(hi)), None) if lo <= hi => Some((lo, hi)),
        _ => None,
    }
}

/// What the ephemeral port range says about `agents` agents listening on ephemeral ports of one
/// host (the simulator) with their driver on the same host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortBudget {
    /// Room for the listeners and the driver's connections.
    Fits,
    /// Room for the listeners but not for as many outgoing connections besides (a driver on
    /// this host may fail to connect). The message says what to widen.
    Tight(String),
    /// Not even the listeners fit.
    TooSmall(String),
}

/// Compares the ephemeral port range `(lo, hi)` with `agents` listeners plus as many outgoing
/// connections on the same host and [`FD_RESERVE`] ports for everything else.
pub fn check_ports(agents: usize, (lo, hi): (u16, u16)) -> PortBudget {
    let size = u64::from(hi - lo) + 1;
    let n = agents as u64;
    let widen = format!("the ephemeral port range {lo}-{hi} (net.ipv4.ip_local_port_range, {size} ports)");
    if n > size {
        PortBudget::TooSmall(format!(
            "{agents} agents listening on ephemeral ports do not fit in {widen}: widen it (sysctl) or bind a \
             prepared inventory (--reuse-inventory)"
        ))
    } else if 2 * n + FD_RESERVE > size {
        PortBudget::Tight(format!(
            "{agents} agents listening on ephemeral ports and a driver on this host connecting to each need about {} \
             ports of {widen}: widen it (sysctl) if the driver fails to connect",
            2 * n + FD_RESERVE
        ))
    } else {
        PortBudget::Fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_per_agent() {
        assert_eq!(driver_fds(6804), 6804 + FD_RESERVE);
        assert_eq!(simulator_fds(6804), 2 * 6804 + FD_RESERVE);
        // The old fixed cap of 4096 agents fits the usual 1024 soft limit once raised to a
        // typical hard limit (524 288), and 6 804 agents fit a hard limit of 20 000.
        let l = FdLimits {
            soft: 20_000,
            hard: Some(20_000),
        };
        assert_eq!(check_fds(6804, simulator_fds(6804), l), Ok(()));
        assert_eq!(check_fds(6804, driver_fds(6804), l), Ok(()));
    }

    #[test]
    fn a_short_limit_names_what_is_needed_and_what_to_raise() {
        let l = FdLimits {
            soft: 1024,
            hard: Some(4096),
        };
        let e = check_fds(5120, simulator_fds(5120), l).unwrap_err();
        assert_eq!((e.needed, e.per_agent), (2 * 5120 + FD_RESERVE, 2));
        let m = e.to_string();
        assert!(
            m.contains("5120 switch agents need about 10496 open files (2 per agent"),
            "{m}"
        );
        assert!(m.contains("limit is 1024 open files (hard limit 4096)"), "{m}");
        assert!(m.contains("including the hard limit"), "{m}");
        // A hard limit that would suffice: only the soft one is to raise.
        let l = FdLimits { soft: 1024, hard: None };
        let m = check_fds(900, driver_fds(900), l).unwrap_err().to_string();
        assert!(m.contains("(hard limit unlimited)") && !m.contains("including"), "{m}");
    }

    #[test]
    fn raise_target_is_the_hard_limit_and_never_lowers() {
        let t = |soft, hard| raise_target(FdLimits { soft, hard });
        assert_eq!(t(1024, Some(524_288)), 524_288);
        assert_eq!(t(1024, Some(20_000)), 20_000);
        assert_eq!(t(1024, None), 1 << 20);
        assert_eq!(t(20_000, Some(20_000)), 20_000);
        // Already above the cap (set by an administrator): kept.
        assert_eq!(t(2 << 20, None), 2 << 20);
    }

    #[test]
    fn raising_reaches_the_hard_limit() {
        let after = raise_fd_limit();
        assert_eq!(after, fd_limits());
        assert_eq!(after.soft, raise_target(after), "{after}");
        // Idempotent.
        assert_eq!(raise_fd_limit(), after);
    }

    #[test]
    fn port_range_parsing_and_budget() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_port_range("60999 32768"), None);
        assert_eq!(parse_port_range("x y"), None);
        assert_eq!(parse_port_range("1 2 3"), None);
        let r = (32768, 60999);
        assert_eq!(check_ports(6804, r), PortBudget::Fits);
        assert!(matches!(check_ports(14_000, r), PortBudget::Tight(m) if m.contains("32768-60999")));
        assert!(matches!(check_ports(30_000, r), PortBudget::TooSmall(m) if m.contains("28232 ports")));
    }
}
