//! Logging through `tracing`: plain text or JSON lines on stderr (JSON fields typed: numbers,
//! booleans, arrays; [`format::Json`]), each line prefixed with its journald priority when
//! stderr is connected to the journal ([`format::JournalPrefix`]), with a filter that a
//! `SIGHUP` reload can change at run time.

pub mod format;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Registry};

use self::format::{JournalPrefix, Json};
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

/// Whether stderr is connected to the journal: `$JOURNAL_STREAM` (`DEVICE:INODE`, set by
/// systemd for a unit whose output goes to the journal) names the file stderr is. A child
/// that inherited the variable but writes elsewhere is not (sd_journal_stream_fd(3)).
pub fn stderr_is_journal() -> bool {
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(st) = rustix::fs::fstat(std::io::stderr()) else {
        return false;
    };
    // dev_t and ino_t are u64 on Linux but not on every target.
    #[allow(clippy::unnecessary_cast)]
    let (dev, ino) = (st.st_dev as u64, st.st_ino as u64);
    journal_stream_matches(&v.to_string_lossy(), dev, ino)
}

/// `$JOURNAL_STREAM`'s `DEVICE:INODE` (decimal) against a file's device and inode.
fn journal_stream_matches(var: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = var.trim().split_once(':') else {
        return false;
    };
    d.parse::<u64>() == Ok(dev) && i.parse::<u64>() == Ok(ino)
}

/// The line format of the log on stderr: [`LogFormat`], timestamps, and whether each line
/// starts with its journald priority (`<6>`).
#[derive(Debug, Clone, Copy)]
pub struct LineFormat {
    /// Text or JSON.
    pub format: LogFormat,
    /// A timestamp on each line.
    pub timestamps: bool,
    /// The sd-daemon priority prefix on each line.
    pub journal: bool,
    /// ANSI colours (text on a terminal).
    pub ansi: bool,
}

impl LineFormat {
    /// The format for `cfg` in this process: under systemd with stderr connected to the
    /// journal ([`stderr_is_journal`]) no timestamps (journald adds its own) and priorities.
    pub fn for_process(cfg: &LogConfig) -> LineFormat {
        let journal = stderr_is_journal();
        LineFormat {
            format: cfg.format,
            timestamps: cfg.timestamps && !journal,
            journal,
            ansi: !journal && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        }
    }

    /// The formatting layer, writing to `writer`.
    pub fn layer<S, W>(self, writer: W) -> Box<dyn tracing_subscriber::Layer<S> + Send + Sync + 'static>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
        W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
    {
        use tracing_subscriber::Layer as _;
        let base = fmt::layer().with_writer(writer).with_ansi(self.ansi && !self.journal);
        let text = fmt::format().with_target(true).with_ansi(self.ansi && !self.journal);
        match (self.format, self.timestamps, self.journal) {
            (LogFormat::Json, timestamps, false) => base.event_format(Json { timestamps }).boxed(),
            (LogFormat::Json, timestamps, true) => base.event_format(JournalPrefix(Json { timestamps })).boxed(),
            (LogFormat::Text, true, false) => base.event_format(text).boxed(),
            (LogFormat::Text, false, false) => base.event_format(text.without_time()).boxed(),
            (LogFormat::Text, true, true) => base.event_format(JournalPrefix(text)).boxed(),
            (LogFormat::Text, false, true) => base.event_format(JournalPrefix(text.without_time())).boxed(),
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
    let registry = tracing_subscriber::registry().with(filter);
    let layer = LineFormat::for_process(cfg).layer(std::io::stderr);
    registry
        .with(layer)
        .try_init()
        .map_err(|e| format!("cannot install the log subscriber: {e}"))?;
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
    use std::sync::{Arc, Mutex};

    use tracing::Level;
    use tracing_subscriber::layer::SubscriberExt;

    use super::format::journal_priority;
    use super::{journal_stream_matches, untrusted, LineFormat};
    use crate::config::LogFormat;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for Buf {
        type Writer = Buf;
        fn make_writer(&'w self) -> Buf {
            self.clone()
        }
    }

    /// The lines `f` writes through `format`.
    fn lines(format: LineFormat, f: impl FnOnce()) -> Vec<String> {
        let buf = Buf::default();
        let sub = tracing_subscriber::registry().with(format.layer(buf.clone()));
        tracing::subscriber::with_default(sub, f);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_string).collect()
    }

    fn fmt(format: LogFormat, journal: bool) -> LineFormat {
        LineFormat {
            format,
            timestamps: false,
            journal,
            ansi: false,
        }
    }

    #[test]
    fn json_fields_keep_their_types() {
        let l = lines(fmt(LogFormat::Json, false), || {
            let keys = vec!["log.level".to_string(), "metrics.random_perms".to_string()];
            let hops: Vec<u8> = vec![0, 1, 3];
            tracing::info!(
                generation = 7u64,
                delta = -2i64,
                routed_ms = 12.5,
                valid = true,
                applied = ?keys,
                return_path = ?hops,
                switch = %"0x0002c90200000003",
                fault = ?Some(3),
                "generation {} committed",
                7
            );
        });
        assert_eq!(l.len(), 1, "{l:?}");
        let v: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
        let f = &v["fields"];
        assert_eq!(v["level"], "INFO");
        assert!(v["target"].as_str().unwrap().starts_with("fabricd"));
        assert!(v.get("timestamp").is_none());
        assert_eq!(f["message"], "generation 7 committed");
        assert_eq!(f["generation"], 7);
        assert_eq!(f["delta"], -2);
        assert_eq!(f["routed_ms"], 12.5);
        assert_eq!(f["valid"], true);
        assert_eq!(f["applied"], serde_json::json!(["log.level", "metrics.random_perms"]));
        assert_eq!(f["return_path"], serde_json::json!([0, 1, 3]));
        assert_eq!(f["switch"], "0x0002c90200000003");
        assert_eq!(f["fault"], "Some(3)");
    }

    #[test]
    fn journal_lines_start_with_their_priority() {
        for format in [LogFormat::Text, LogFormat::Json] {
            let l = lines(fmt(format, true), || {
                tracing::error!("e");
                tracing::warn!("w");
                tracing::info!("i");
                tracing::debug!("d");
                tracing::trace!("t");
            });
            let prefixes: Vec<&str> = l.iter().map(|x| &x[..3]).collect();
            assert_eq!(prefixes, ["<3>", "<4>", "<6>", "<7>", "<7>"], "{format:?}: {l:?}");
            if format == LogFormat::Json {
                let v: serde_json::Value = serde_json::from_str(&l[1][3..]).unwrap();
                assert_eq!(v["level"], "WARN");
            }
        }
        // Not on the journal: no prefix.
        let l = lines(fmt(LogFormat::Text, false), || tracing::warn!("w"));
        assert!(l[0].trim_start().starts_with("WARN"), "{l:?}");
        assert_eq!(journal_priority(&Level::INFO), 6);
    }

    #[test]
    fn journal_stream_names_device_and_inode() {
        assert!(journal_stream_matches("8:12345", 8, 12345));
        assert!(journal_stream_matches(" 8:12345\n", 8, 12345));
        assert!(!journal_stream_matches("8:12346", 8, 12345));
        assert!(!journal_stream_matches("garbage", 8, 12345));
        assert!(!journal_stream_matches("", 8, 12345));
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(untrusted("rack-1 job é").to_string(), "rack-1 job é");
        assert_eq!(
            untrusted("x\nINFO fabricd: forged\r\u{1b}[2J\u{85}\u{2028}").to_string(),
            "x\\nINFO fabricd: forged\\r\\u{1b}[2J\\u{85}\\u{2028}"
        );
    }
}
