//! `[slurm]`: keeps Slurm's topology file in step with the fabric.
//!
//! A task subscribed to the daemon's notices: after every committed generation it renders the
//! generation's topology (the routed fabric: physical state with virtual faults applied, and its
//! ranking) in the configured format (`fabric_slurm`), and when the text differs from what the
//! file holds it replaces the file atomically (temporary file in the same directory, fsync,
//! rename, fsync of the directory) and runs the configured command (e.g. `scontrol reconfigure`)
//! under a timeout. The text holds no generation number or time, so a generation that changes
//! only routing (a reroute, a job mapping) leaves the file and Slurm alone. Failures (a file
//! that cannot be written, a command that fails or times out) are logged and retried at the
//! next commit; they never stop the daemon. The event loop is not involved: the task reads the
//! published snapshot.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use fabric_slurm::{Format, SlurmTopology};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::state::{Notice, Published};

/// The Slurm file format in configuration (`tree`, `block`, `yaml`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SlurmFormat {
    /// `topology.conf` for topology/tree.
    #[default]
    Tree,
    /// `topology.conf` for topology/block.
    Block,
    /// `topology.yaml` (a tree and a block topology).
    Yaml,
}

impl From<SlurmFormat> for Format {
    fn from(f: SlurmFormat) -> Format {
        match f {
            SlurmFormat::Tree => Format::Tree,
            SlurmFormat::Block => Format::Block,
            SlurmFormat::Yaml => Format::Yaml,
        }
    }
}

/// `[slurm]`: Slurm's topology file, rewritten when the topology changes. Off unless
/// `topology_file` is set. Not reloadable (a restart applies a change).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmConfig {
    /// The file to keep up to date (absolute path); unset: off.
    pub topology_file: Option<PathBuf>,
    pub format: SlurmFormat,
    /// Program and arguments run after each rewrite (no shell); empty: none.
    pub command: Vec<String>,
    /// The command is killed after this many seconds.
    pub command_timeout_s: u64,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            topology_file: None,
            format: SlurmFormat::Tree,
            command: Vec::new(),
            command_timeout_s: 60,
        }
    }
}

impl SlurmConfig {
    /// Semantic checks: (key path, reason).
    pub fn validate(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        if let Some(p) = &self.topology_file {
            if !p.is_absolute() {
                v.push((
                    "slurm.topology_file".into(),
                    format!("{} is not an absolute path", p.display()),
                ));
            }
        }
        if self.command.first().is_some_and(String::is_empty) {
            v.push(("slurm.command".into(), "the program (first element) is empty".into()));
        }
        if self.command_timeout_s == 0 {
            v.push(("slurm.command_timeout_s".into(), "must be at least 1 second".into()));
        }
        v
    }
}

/// Replaces `path` with `text`: a temporary in the same directory, fsync, rename, fsync of the
/// directory.
pub fn write_atomic(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.fabricd-{}.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(text)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::File::open(&dir).and_then(|d| d.sync_all())
}

/// The task state: what the file holds.
struct Writer {
    config: SlurmConfig,
    path: PathBuf,
    /// The file's text as last read or written (`None`: unknown, write at the next commit).
    current: Option<Vec<u8>>,
    /// Generation last rendered.
    rendered: u64,
}

impl Writer {
    /// Renders the committed generation; rewrites and runs the command when the text changed.
    async fn on_commit(&mut self, published: &Published) {
        let Some(generation) = published.current.clone() else {
            return;
        };
        if generation.number == self.rendered {
            return;
        }
        self.rendered = generation.number;
        let format = Format::from(self.config.format);
        let topo = tokio::task::spawn_blocking(move || {
            let t = SlurmTopology::build(&generation.fabric, &generation.ranking);
            (t.render(format), t.warnings.len(), t.hosts.len(), t.switches.len())
        })
        .await;
        let Ok((text, warnings, hosts, switches)) = topo else {
            return;
        };
        if self.current.as_deref() == Some(text.as_bytes()) {
            return;
        }
        let path = self.path.clone();
        let bytes = text.clone().into_bytes();
        let written = tokio::task::spawn_blocking(move || write_atomic(&path, &bytes)).await;
        match written {
            Ok(Ok(())) => {
                tracing::info!(
                    file = %self.path.display(),
                    format = %format,
                    generation = self.rendered,
                    hosts,
                    switches,
                    warnings,
                    "slurm: topology file rewritten"
                );
                self.current = Some(text.into_bytes());
            }
            Ok(Err(e)) => {
                tracing::warn!(file = %self.path.display(), error = %e, "slurm: cannot write the topology file (retried at the next commit)");
                self.current = None;
                self.rendered = 0;
                return;
            }
            Err(_) => return,
        }
        self.run_command().await;
    }

    async fn run_command(&self) {
        let Some((program, args)) = self.config.command.split_first() else {
            return;
        };
        let timeout = Duration::from_secs(self.config.command_timeout_s);
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args).stdin(std::process::Stdio::null()).kill_on_drop(true);
        let line = self.config.command.join(" ");
        match tokio::time::timeout(timeout, cmd.output()).await {
            Err(_) => {
                tracing::warn!(command = %line, timeout_s = self.config.command_timeout_s, "slurm: command timed out, killed");
            }
            Ok(Err(e)) => tracing::warn!(command = %line, error = %e, "slurm: cannot run the command"),
            Ok(Ok(out)) if out.status.success() => tracing::info!(command = %line, "slurm: command done"),
            Ok(Ok(out)) => tracing::warn!(
                command = %line,
                status = %out.status,
                stderr = %String::from_utf8_lossy(&out.stderr).trim(),
                "slurm: command failed"
            ),
        }
    }
}

/// Starts the task when `[slurm] topology_file` is set. `notices` must be subscribed before
/// the event loop starts (so the first commit is seen).
pub fn spawn(
    config: &SlurmConfig,
    published: Arc<ArcSwap<Published>>,
    mut notices: broadcast::Receiver<Notice>,
) -> Option<tokio::task::JoinHandle<()>> {
    let path = config.topology_file.clone()?;
    let current = std::fs::read(&path).ok();
    tracing::info!(file = %path.display(), format = ?config.format, command = %config.command.join(" "), "slurm: topology file kept up to date");
    let mut w = Writer {
        config: config.clone(),
        path,
        current,
        rendered: 0,
    };
    Some(tokio::spawn(async move {
        w.on_commit(&published.load_full()).await;
        loop {
            match notices.recv().await {
                Ok(Notice::GenerationCommitted { generation, .. }) => {
                    // The notice goes out just before the snapshot that holds the generation.
                    for _ in 0..500 {
                        if published
                            .load()
                            .current
                            .as_ref()
                            .is_some_and(|g| g.number >= generation)
                        {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    w.on_commit(&published.load_full()).await;
                }
                Err(broadcast::error::RecvError::Lagged(_)) => w.on_commit(&published.load_full()).await,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }))
}
