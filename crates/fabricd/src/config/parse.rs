//! [`Config::parse`] and [`Config::load`]: TOML text to a validated configuration, every
//! problem with its line and key path.

use std::path::Path;

use super::{Config, ConfigError, ConfigIssue};

impl Config {
    /// Parses and validates a configuration text; `source_name` is used in messages.
    pub fn parse(text: &str, source_name: &str) -> Result<Config, ConfigError> {
        let err = |issues| ConfigError {
            source_name: source_name.to_string(),
            issues,
        };
        let mut table: toml::Table = match text.parse() {
            Ok(t) => t,
            Err(e) => {
                let e: toml::de::Error = e;
                let line = e.span().map(|s| line_of(text, s.start));
                // The TOML reader has no words for some errors (`key =` at the end of the text).
                let message = match e.message().trim() {
                    "" => "invalid TOML: a value is missing or malformed".to_string(),
                    m => m.to_string(),
                };
                return Err(err(vec![ConfigIssue {
                    line,
                    path: String::new(),
                    message,
                }]));
            }
        };
        let doc = text.parse::<toml_edit::ImDocument<String>>().ok();
        let mut issues = Vec::new();
        // serde stops at the first error: record it, remove the offending key, try again.
        let config = loop {
            match serde_path_to_error::deserialize::<_, Config>(toml::Value::Table(table.clone())) {
                Ok(c) => break Some(c),
                Err(e) => {
                    let mut path: Vec<String> = e.path().iter().map(segment_name).collect();
                    let inner = e.into_inner().message().to_string();
                    // Make sure an unknown key is named by its own path.
                    if let Some(key) = unknown_field_name(&inner) {
                        if path.last() != Some(&key) {
                            path.push(key);
                        }
                    }
                    let line = doc.as_ref().and_then(|d| key_line(d, &path, text));
                    issues.push(ConfigIssue {
                        line,
                        path: path.join("."),
                        message: inner,
                    });
                    if !remove_path(&mut table, &path) || issues.len() > 200 {
                        break None;
                    }
                }
            }
        };
        if let Some(c) = &config {
            for (path, message) in c.validate() {
                let keys: Vec<String> = path.split('.').map(str::to_string).collect();
                let line = doc.as_ref().and_then(|d| key_line(d, &keys, text));
                issues.push(ConfigIssue { line, path, message });
            }
        }
        match config {
            Some(c) if issues.is_empty() => Ok(c),
            _ => Err(err(issues)),
        }
    }

    /// Reads and parses a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = fabric_topology::textfile::read_text_file(path, fabric_topology::textfile::SMALL_TEXT_LIMIT)
            .map_err(|e| ConfigError {
                source_name: name.clone(),
                issues: vec![ConfigIssue {
                    line: (e.line() > 0).then_some(e.line()),
                    path: String::new(),
                    message: e.reason(),
                }],
            })?;
        Config::parse(&text, &name)
    }
}

fn segment_name(s: &serde_path_to_error::Segment) -> String {
    match s {
        serde_path_to_error::Segment::Seq { index } => index.to_string(),
        serde_path_to_error::Segment::Map { key } => key.clone(),
        serde_path_to_error::Segment::Enum { variant } => variant.clone(),
        serde_path_to_error::Segment::Unknown => "?".into(),
    }
}

/// Extracts `foo` from serde's "unknown field `foo`, expected ..." message.
fn unknown_field_name(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_string())
}

/// Removes the value at `path` from the table; false if nothing was removed.
fn remove_path(table: &mut toml::Table, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut cur = table;
    for p in parents {
        if matches!(cur.get(p), Some(toml::Value::Array(_))) {
            // An element of an array is bad: drop the whole array.
            return cur.remove(p).is_some();
        }
        match cur.get_mut(p) {
            Some(toml::Value::Table(t)) => cur = t,
            _ => return false,
        }
    }
    cur.remove(last).is_some()
}

/// Line (1-based) of the key at `path` in the document, falling back to the nearest parent.
fn key_line(doc: &toml_edit::ImDocument<String>, path: &[String], text: &str) -> Option<usize> {
    let mut item: &toml_edit::Item = doc.as_item();
    let mut best: Option<usize> = None;
    for p in path {
        let table = item.as_table_like()?;
        let (key, value) = table.get_key_value(p)?;
        if let Some(span) = key.span().or_else(|| value.span()) {
            best = Some(line_of(text, span.start));
        }
        item = value;
    }
    best
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
