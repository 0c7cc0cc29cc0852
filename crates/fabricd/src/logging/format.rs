//! The two line formats of the daemon's log beyond tracing-subscriber's own: JSON objects
//! whose fields keep their types, and the sd-daemon priority prefix (`<3>` ... `<7>`) that
//! journald reads when stderr is connected to the journal.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The sd-daemon (syslog) priority of a level: ERROR 3, WARN 4, INFO 6, DEBUG and TRACE 7.
pub fn journal_priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

/// Prefixes every event line of the inner format with its priority (`<6>`), which journald
/// strips and records as the entry's PRIORITY (SyslogLevelPrefix=, on by default).
#[derive(Debug, Clone)]
pub struct JournalPrefix<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for JournalPrefix<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        write!(writer, "<{}>", journal_priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

/// One JSON object per event: `timestamp` (RFC 3339, when on), `level`, `target` and `fields`
/// (`message` and the event's fields). Numbers and booleans stay numbers and booleans; a field
/// recorded with `?` whose text is a JSON array or object (a `Vec` of numbers or strings) is
/// that array or object; everything else is a string.
#[derive(Debug, Clone, Copy)]
pub struct Json {
    /// Write the `timestamp` key.
    pub timestamps: bool,
}

impl<S, N> FormatEvent<S, N> for Json
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let mut obj = Map::new();
        if self.timestamps {
            let mut t = String::new();
            SystemTime.format_time(&mut Writer::new(&mut t))?;
            obj.insert("timestamp".into(), Value::String(t));
        }
        obj.insert("level".into(), Value::String(meta.level().to_string()));
        obj.insert("target".into(), Value::String(meta.target().to_string()));
        obj.insert("fields".into(), Value::Object(fields.0));
        let line = serde_json::to_string(&Value::Object(obj)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{line}")
    }
}

/// The fields of one event as typed JSON values.
#[derive(Default)]
pub struct JsonFields(pub Map<String, Value>);

impl JsonFields {
    fn put(&mut self, field: &Field, v: Value) {
        self.0.insert(field.name().to_string(), v);
    }
}

impl Visit for JsonFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(
            field,
            serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number),
        );
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        let v = i64::try_from(value).map_or_else(|_| Value::String(value.to_string()), Value::from);
        self.put(field, v);
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        let v = u64::try_from(value).map_or_else(|_| Value::String(value.to_string()), Value::from);
        self.put(field, v);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        let structured = field.name() != "message"
            && ((text.starts_with('[') && text.ends_with(']')) || (text.starts_with('{') && text.ends_with('}')));
        let v = if structured {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        } else {
            Value::String(text)
        };
        self.put(field, v);
    }
}
