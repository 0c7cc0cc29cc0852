//! Logging through `tracing`: plain text (for journald) or JSON lines on stderr, with a filter
//! that a `SIGHUP` reload can change at run time.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Registry};

use crate::config::{LogConfig, LogFormat};

/// Changes the log filter of the running process.
#[derive(Clone)]
pub struct LogHandle {
    inner: Option<reload::Handle<EnvFilter, Registry>>,
}

impl std::fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogHandle")
            .field("installed", &self.inner.is_some())
            .finish()
    }
}

impl LogHandle {
    /// A handle that changes nothing (tests, embedding).
    pub fn noop() -> LogHandle {
        LogHandle { inner: None }
    }

    /// Replaces the filter directive (e.g. `debug`, `fabricd=trace,info`).
    pub fn set_level(&self, directive: &str) -> Result<(), String> {
        let filter = EnvFilter::try_new(directive).map_err(|e| format!("invalid filter {directive:?}: {e}"))?;
        match &self.inner {
            Some(h) => h.reload(filter).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}

/// Installs the global subscriber. `RUST_LOG`, when set, overrides `cfg.level` at start-up.
pub fn init(cfg: &LogConfig) -> Result<LogHandle, String> {
    let directive = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| cfg.level.clone());
    let filter = EnvFilter::try_new(&directive).map_err(|e| format!("invalid log filter {directive:?}: {e}"))?;
    let (filter, handle) = reload::Layer::new(filter);
    // Under systemd with stderr connected to the journal ($JOURNAL_STREAM), journald adds its
    // own timestamps.
    let timestamps = cfg.timestamps && std::env::var_os("JOURNAL_STREAM").is_none();
    let registry = tracing_subscriber::registry().with(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let res = match (cfg.format, timestamps) {
        (LogFormat::Text, true) => registry
            .with(
                fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(ansi)
                    .with_target(true),
            )
            .try_init(),
        (LogFormat::Text, false) => registry
            .with(
                fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(ansi)
                    .with_target(true)
                    .without_time(),
            )
            .try_init(),
        (LogFormat::Json, true) => registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .try_init(),
        (LogFormat::Json, false) => registry
            .with(fmt::layer().json().with_writer(std::io::stderr).without_time())
            .try_init(),
    };
    res.map_err(|e| format!("cannot install the log subscriber: {e}"))?;
    Ok(LogHandle { inner: Some(handle) })
}

/// Text that came from a client (subscriber names, job ids, end-port keys, reasons that quote
/// them), made safe for one log line: control characters (newline, carriage return, escape,
/// C1 controls) and the Unicode line and paragraph separators are written as Rust escapes
/// (`\n`, `\u{1b}`), so a client cannot forge log lines or terminal sequences. Use it for
/// every client-given field logged: `tracing::info!(name = %untrusted(&name), ...)`.
pub fn untrusted(text: &str) -> Untrusted<'_> {
    Untrusted(text)
}

/// See [`untrusted`].
#[derive(Clone, Copy, Debug)]
pub struct Untrusted<'a>(pub &'a str);

impl std::fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write;
        for c in self.0.chars() {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::untrusted;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(untrusted("rack-1 job é").to_string(), "rack-1 job é");
        assert_eq!(
            untrusted("x\nINFO fabricd: forged\r\u{1b}[2J\u{85}\u{2028}").to_string(),
            "x\\nINFO fabricd: forged\\r\\u{1b}[2J\\u{85}\\u{2028}"
        );
    }
}
