//! fabricctl's exit codes and the one function that picks a code from an error chain.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success |
//! | 1 | difference found: `validate` found cabling differences, `verify` / `mcast verify` unreachable pairs or failed groups, `trace` did not reach the destination |
//! | 2 | usage error: bad arguments or options (clap's own errors, an option value fabricctl or the daemon refuses: gRPC `INVALID_ARGUMENT`, a TLS file that cannot be used) |
//! | 3 | daemon unreachable: no daemon at `--socket`, connection refused or lost, TLS handshake failed (gRPC `UNAVAILABLE` and transport errors) |
//! | 4 | not found: the daemon knows no such switch, end port, job, group (gRPC `NOT_FOUND`) |
//! | 5 | refused: the daemon refuses in its current state or configuration, e.g. fault injection disabled, no generation installed yet (gRPC `FAILED_PRECONDITION`, `PERMISSION_DENIED`, `UNAUTHENTICATED`) |
//! | 6 | any other failure: an input file that cannot be read or parsed, an internal error of the daemon, ... |

use std::fmt;

/// Exit code: success.
pub const OK: i32 = 0;
/// Exit code: a check found a difference (validate, verify, trace).
pub const DIFFERENCE: i32 = 1;
/// Exit code: bad arguments or options (clap's code for its own errors).
pub const USAGE: i32 = 2;
/// Exit code: the daemon cannot be reached.
pub const UNREACHABLE: i32 = 3;
/// Exit code: the daemon knows no such switch, end port, job, ...
pub const NOT_FOUND: i32 = 4;
/// Exit code: the daemon refuses in its current state or configuration.
pub const REFUSED: i32 = 5;
/// Exit code: any other failure.
pub const FAILURE: i32 = 6;

/// The exit codes and their meaning, for `--help` and the man page.
pub const TABLE: &[(i32, &str)] = &[
    (OK, "success"),
    (
        DIFFERENCE,
        "difference found (validate, verify, mcast verify, trace not reached)",
    ),
    (
        USAGE,
        "usage error: bad arguments or options, or the daemon refused them (INVALID_ARGUMENT)",
    ),
    (
        UNREACHABLE,
        "daemon unreachable: no daemon at --socket, connection refused or lost, TLS failure",
    ),
    (
        NOT_FOUND,
        "not found: no such switch, end port, job or group (NOT_FOUND)",
    ),
    (
        REFUSED,
        "refused: e.g. fault injection disabled (FAILED_PRECONDITION, PERMISSION_DENIED)",
    ),
    (
        FAILURE,
        "any other failure (unreadable input file, internal error, ...)",
    ),
];

/// A check that ran and found a difference (exit code 1); the message says what.
#[derive(Debug)]
pub struct Difference(pub String);

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Difference {}

/// Arguments fabricctl itself refuses after parsing (exit code 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A failed gRPC call, kept whole so that its code picks the exit code; shown as one line
/// (`fabric_proto::describe_status`: code, message, transport chain, TLS hint).
#[derive(Debug)]
pub struct DaemonError(pub tonic::Status);

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fabric_proto::describe_status(&self.0))
    }
}

impl std::error::Error for DaemonError {}

/// A [`Difference`] as an `anyhow::Error` (`return Err(difference(...))`).
pub fn difference(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Difference(msg.into()))
}

/// A [`Usage`] error as an `anyhow::Error`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(msg.into()))
}

/// The exit code of a gRPC status code.
pub fn code_of_status(code: tonic::Code) -> i32 {
    use tonic::Code as C;
    match code {
        C::Unavailable | C::DeadlineExceeded | C::Cancelled => UNREACHABLE,
        C::NotFound => NOT_FOUND,
        C::FailedPrecondition | C::PermissionDenied | C::Unauthenticated => REFUSED,
        C::InvalidArgument | C::OutOfRange => USAGE,
        _ => FAILURE,
    }
}

/// The exit code of a failure: the first error of the chain that fabricctl knows decides
/// (a difference, a usage error, a gRPC status, a connection or transport error); anything
/// else is [`FAILURE`].
pub fn exit_code(err: &anyhow::Error) -> i32 {
    for cause in err.chain() {
        if cause.is::<Difference>() {
            return DIFFERENCE;
        }
        if cause.is::<Usage>() || cause.is::<clap::Error>() {
            return USAGE;
        }
        if let Some(DaemonError(s)) = cause.downcast_ref::<DaemonError>() {
            return code_of_status(s.code());
        }
        if let Some(s) = cause.downcast_ref::<tonic::Status>() {
            return code_of_status(s.code());
        }
        if let Some(c) = cause.downcast_ref::<fabric_proto::ConnectError>() {
            return match c {
                fabric_proto::ConnectError::Transport { .. } => UNREACHABLE,
                fabric_proto::ConnectError::Tls(_) | fabric_proto::ConnectError::Usage(_) => USAGE,
            };
        }
        if cause.is::<tonic::transport::Error>() {
            return UNREACHABLE;
        }
    }
    FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn status_codes_map_to_documented_exit_codes() {
        let st = |c: tonic::Code| anyhow::Error::new(DaemonError(tonic::Status::new(c, "x")));
        assert_eq!(exit_code(&st(tonic::Code::Unavailable)), UNREACHABLE);
        assert_eq!(exit_code(&st(tonic::Code::NotFound)), NOT_FOUND);
        assert_eq!(exit_code(&st(tonic::Code::FailedPrecondition)), REFUSED);
        assert_eq!(exit_code(&st(tonic::Code::PermissionDenied)), REFUSED);
        assert_eq!(exit_code(&st(tonic::Code::InvalidArgument)), USAGE);
        assert_eq!(exit_code(&st(tonic::Code::Internal)), FAILURE);
        // A bare tonic::Status in the chain counts too.
        let bare = anyhow::Error::new(tonic::Status::not_found("no job"));
        assert_eq!(exit_code(&bare), NOT_FOUND);
    }

    #[test]
    fn the_first_known_cause_decides_through_context() {
        let e = Err::<(), _>(DaemonError(tonic::Status::not_found("no switch")))
            .context("what-if")
            .unwrap_err();
        assert_eq!(exit_code(&e), NOT_FOUND);
        assert!(format!("{e:#}").contains("no switch"), "{e:#}");
        let d = Err::<(), _>(Difference("3 pairs unreachable".into()))
            .context("verify")
            .unwrap_err();
        assert_eq!(exit_code(&d), DIFFERENCE);
        assert_eq!(exit_code(&usage("link-down needs --port")), USAGE);
        assert_eq!(exit_code(&anyhow::anyhow!("cannot read x.topo")), FAILURE);
    }

    #[test]
    fn connection_errors_are_unreachable_and_bad_options_usage() {
        let t = fabric_proto::ConnectError::Transport {
            target: "/nowhere.sock".into(),
            detail: "No such file or directory".into(),
            hint: None,
        };
        assert_eq!(exit_code(&anyhow::Error::new(t)), UNREACHABLE);
        let u = fabric_proto::ConnectError::Usage("--tls-ca needs https://".into());
        assert_eq!(exit_code(&anyhow::Error::new(u)), USAGE);
    }

    #[test]
    fn the_table_lists_every_code_once() {
        let codes: Vec<i32> = TABLE.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes, (0..=6).collect::<Vec<_>>());
    }
}
