//! Output of the remote subcommands: stdout writes that end quietly on a closed pipe, JSON,
//! GUIDs, and one gRPC call with its error as one line.

use std::future::Future;

use anyhow::Result;
use serde_json::Value;

/// Writes to stdout; a closed stdout (`fabricctl ... | head`) ends the program quietly instead
/// of panicking like `println!`.
macro_rules! out {
    ($($t:tt)*) => {
        $crate::remote::write_stdout(format_args!($($t)*))
    };
}

/// What [`out!`] does, for the offline commands too (`fabricctl topo gen | head`).
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    stdout_result(std::io::stdout().lock().write_fmt(args));
}

/// [`write_stdout`] of content streamed by `fill` (big dumps), flushed: a closed pipe ends
/// quietly.
pub(crate) fn write_stdout_with(fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    stdout_result(fill(&mut out).and_then(|()| out.flush()));
}

fn stdout_result(r: std::io::Result<()>) {
    if let Err(e) = r {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("fabricctl: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

macro_rules! outln {
    ($($t:tt)*) => {{
        out!($($t)*);
        out!("\n");
    }};
}

pub(super) fn guid(g: u64) -> String {
    format!("0x{g:016x}")
}

/// A gRPC error, shown as a one-line message (`InvalidArgument: unknown switch ...`; a
/// transport failure carries its cause and, for TLS, what to check) and kept whole for the
/// exit code ([`crate::exit::exit_code`]).
pub(super) fn status_err(s: tonic::Status) -> anyhow::Error {
    anyhow::Error::new(crate::exit::DaemonError(s))
}

pub(super) fn print_json(v: &Value) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Awaits one gRPC call and returns its reply; the error is [`status_err`]'s one line.
pub(super) async fn ask<T>(call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>) -> Result<T> {
    Ok(call.await.map_err(status_err)?.into_inner())
}
