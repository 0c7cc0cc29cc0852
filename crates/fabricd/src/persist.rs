//! The state directory: LID assignments (OpenSM `guid2lid` format), job mappings, virtual
//! faults, the progress of a five-phase update and the last committed routing generation, each
//! written atomically (temporary file, `fsync`, `rename`, `fsync` of the directory)
//! so that a crash at any point leaves either the old or the new file, never a torn one.
//!
//! The functions here do blocking file I/O: the event loop calls them through
//! `tokio::task::spawn_blocking`.
//!
//! **Trust.** The directory is used only when no other local user can have written into it:
//! it and its parent must be owned by the daemon's effective uid or by root, the directory
//! must not be writable by group or others, and its parent not either unless it is sticky
//! (`/tmp`). Files are read without following symlinks, and only when owned by the daemon's
//! uid or root and not writable by others (nor by a group other than the daemon's).
//! Temporaries are unnamed (`O_TMPFILE`, through the `atomic-write-file` crate), so no path
//! planted in the directory is ever opened for writing. [`check_private_dir`] is the same check for the socket directory.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fabric_routing::Guid2Lid;
use fabric_topology::{fmt_guid, parse_guid, Guid};
use serde::{Deserialize, Serialize};

/// File of the LID assignments (OpenSM `guid2lid` format).
pub const GUID2LID_FILE: &str = "guid2lid";
/// File of the M_Key in force on the fabric's ports (umad; mode 0600, never logged).
pub const M_KEY_FILE: &str = "m-key";
/// File of the job mappings (JSON).
pub const JOBS_FILE: &str = "jobs.json";
/// File of the virtual faults (JSON).
pub const VIRTUAL_FAULTS_FILE: &str = "virtual-faults.json";

/// File of the five-phase update in progress (JSON; absent when no update runs).
pub const UPDATE_PROGRESS_FILE: &str = "update-progress.json";

/// File of the last committed routing generation (JSON), so that numbering continues across
/// restarts.
pub const GENERATION_FILE: &str = "generation.json";

/// Version of the [`GENERATION_FILE`] format this daemon reads and writes.
const GENERATION_FILE_VERSION: u32 = 1;

/// The last routing generation committed (its number and when), as persisted in
/// [`GENERATION_FILE`] at every commit, before the commit is announced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommittedGeneration {
    /// Routing generation number (1 = the first one ever committed with this state directory).
    pub generation: u64,
    /// Wall-clock time of the commit, ms since the Unix epoch.
    pub committed_at_unix_ms: i64,
}

#[derive(Serialize, Deserialize)]
struct GenerationFile {
    version: u32,
    generation: u64,
    /// Optional in hand-written files (0: unknown).
    #[serde(default)]
    committed_at_unix_ms: i64,
}

/// Progress of the five-phase update, persisted at every phase change so that a restarted
/// daemon knows a generation was interrupted and which topology it was installing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateProgress {
    pub version: u32,
    pub generation: u64,
    pub attempt: u32,
    pub phase: fabric_update::Phase,
    /// Virtual faults of the target topology (physical ones are rediscovered).
    pub virtual_faults: Vec<VirtualFault>,
}

/// Errors of the state directory, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// The shared copy of a state file (`[ha]`: etcd) could not be written: the local file was
    /// left unchanged.
    #[error("{name}: not recorded in the shared state, the local file is unchanged: {message}")]
    Mirror { name: String, message: String },
    #[error("{dir} is not writable ({file}: {source})")]
    NotWritable {
        dir: PathBuf,
        file: PathBuf,
        source: io::Error,
    },
    /// A directory or file another local user may have written: refused.
    #[error(
        "{path}: {problem} (owner uid {owner}, mode {mode:04o}; fabricd runs as uid {euid}): refused, another \
         user could have planted or could replace its contents; make it owned by uid {euid} (or root) and \
         not writable by group or others (e.g. chown {euid} and chmod 0750), or choose another path"
    )]
    Untrusted {
        path: PathBuf,
        problem: &'static str,
        owner: u32,
        mode: u32,
        euid: u32,
    },
}

/// The daemon's effective uid.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn untrusted(path: &Path, problem: &'static str, meta: &fs::Metadata) -> PersistError {
    PersistError::Untrusted {
        path: path.to_path_buf(),
        problem,
        owner: meta.uid(),
        mode: meta.mode() & 0o7777,
        euid: effective_uid(),
    }
}

fn trusted_owner(meta: &fs::Metadata) -> bool {
    meta.uid() == effective_uid() || meta.uid() == 0
}

/// Checks that `dir` (a state or socket directory) can be trusted: it and its parent are
/// owned by the daemon's effective uid or root, `dir` is writable by nobody else, and its
/// parent is writable by nobody else unless it is sticky (`/tmp`: others cannot rename or
/// remove what is ours there). The error names the path, its owner and mode, once.
pub fn check_private_dir(dir: &Path) -> Result<(), PersistError> {
    let io = |source| PersistError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let meta = fs::metadata(dir).map_err(io)?;
    if !meta.is_dir() {
        return Err(PersistError::Io {
            path: dir.to_path_buf(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        });
    }
    if !trusted_owner(&meta) {
        return Err(untrusted(dir, "owned by another user", &meta));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted(dir, "writable by group or others", &meta));
    }
    let parent = match dir.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => return Ok(()),
    };
    let pmeta = fs::metadata(parent).map_err(|source| PersistError::Io {
        path: parent.to_path_buf(),
        source,
    })?;
    if !trusted_owner(&pmeta) {
        return Err(untrusted(parent, "parent directory owned by another user", &pmeta));
    }
    if pmeta.mode() & 0o022 != 0 && pmeta.mode() & 0o1000 == 0 {
        return Err(untrusted(
            parent,
            "parent directory writable by group or others and not sticky",
            &pmeta,
        ));
    }
    Ok(())
}

/// Creates a new file (mode 0640) with `O_CREAT|O_EXCL|O_NOFOLLOW`: fails with
/// `AlreadyExists` when anything, a symlink included, is at `path`; never opens it.
/// Replaces `path` atomically with `contents` and the given mode (set before any byte is
/// written): `atomic_write_file` with the old file's mode and owner not carried over.
fn write_file_atomically(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    use atomic_write_file::unix::OpenOptionsExt as _;
    let mut f = atomic_write_file::OpenOptions::new()
        .preserve_mode(false)
        .preserve_owner(false)
        .mode(mode)
        .open(path)?;
    f.as_file().set_permissions(fs::Permissions::from_mode(mode))?;
    f.write_all(contents)?;
    f.commit()
}

/// Name of the file [`StateDir::probe_writable`] creates and removes.
pub const PROBE_FILE: &str = ".fabricd-write-probe";

/// One end port of a job, as persisted: the port GUID plus the name it had when mapped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPort {
    /// Port GUID, `0x` + 16 hex digits.
    pub guid: String,
    pub name: String,
}

impl JobPort {
    pub fn new(guid: Guid, name: &str) -> Self {
        JobPort {
            guid: fmt_guid(guid),
            name: name.to_string(),
        }
    }
    /// The port GUID (validated on load).
    pub fn port_guid(&self) -> Guid {
        parse_guid(&self.guid).unwrap_or(0)
    }
}

/// Job id → end ports, in a stable order.
pub type Jobs = BTreeMap<String, Vec<JobPort>>;

#[derive(Serialize, Deserialize)]
struct JobsFile {
    version: u32,
    jobs: Jobs,
}

/// A virtual fault (excluded from routing), as persisted.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum VirtualFault {
    /// The link on this switch port (canonical end: the lower (GUID, port) of the two ends).
    Link {
        switch: String,
        port: u8,
    },
    Switch {
        switch: String,
    },
    Node {
        port_guid: String,
    },
}

#[derive(Serialize, Deserialize)]
struct FaultsFile {
    version: u32,
    faults: Vec<VirtualFault>,
}

/// Version of the [`UPDATE_PROGRESS_FILE`] format this daemon reads and writes.
pub const UPDATE_PROGRESS_VERSION: u32 = 1;

/// The state files two managers share under `[ha]` (kept in etcd; the state directory is the
/// local cache): the LID plan, jobs, virtual faults, update progress, generation number, the
/// SA registry (`sa_store`) and port health (`health::store`). Never the M_Key (`m-key`): a
/// secret stays on its machine.
pub const SHARED_FILES: &[&str] = &[
    GUID2LID_FILE,
    JOBS_FILE,
    VIRTUAL_FAULTS_FILE,
    UPDATE_PROGRESS_FILE,
    GENERATION_FILE,
    "sa-registry.json",
    "health.json",
];

/// Whether `name` is one of the [`SHARED_FILES`].
pub fn is_shared_file(name: &str) -> bool {
    SHARED_FILES.contains(&name)
}

/// Where the shared state files go before the local file (`[ha]`: etcd through
/// `fabric_ha::SharedState`). Called from blocking code (the state directory's callers run on
/// blocking threads or accept a short block); an error is the write's error, and the local file
/// is then left unchanged.
pub trait StateMirror: Send + Sync + std::fmt::Debug {
    /// Records `bytes` as the content of the shared file `name`.
    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String>;
    /// Removes the shared file `name` (absent: success).
    fn delete(&self, name: &str) -> Result<(), String>;
}

/// The daemon's state directory.
#[derive(Clone, Debug)]
pub struct StateDir {
    dir: PathBuf,
    /// `[ha]`: the shared files go there first (see [`StateMirror`]).
    mirror: Option<std::sync::Arc<dyn StateMirror>>,
}

impl StateDir {
    /// Opens (creating if needed, mode 0750) the state directory, refusing one that another
    /// user owns or may write (see the module documentation), and removes temporaries left by
    /// a crash.
    pub fn open(dir: &Path) -> Result<StateDir, PersistError> {
        let io = |source| PersistError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let existed = fs::symlink_metadata(dir).is_ok();
        fs::create_dir_all(dir).map_err(io)?;
        if !existed {
            // Ours from the start: whatever the umask gave it, nobody else may write it.
            fs::set_permissions(dir, fs::Permissions::from_mode(0o750)).map_err(io)?;
        }
        check_private_dir(dir)?;
        let meta = fs::metadata(dir).map_err(io)?;
        if meta.mode() & 0o007 != 0 && meta.uid() == effective_uid() {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o750)).map_err(io)?;
        }
        let s = StateDir {
            dir: dir.to_path_buf(),
            mirror: None,
        };
        s.remove_stale_temporaries();
        Ok(s)
    }

    /// The same directory, every write and removal of a [shared file](SHARED_FILES) going to
    /// `mirror` first (`[ha]`, while leader).
    pub fn with_mirror(&self, mirror: std::sync::Arc<dyn StateMirror>) -> StateDir {
        StateDir {
            dir: self.dir.clone(),
            mirror: Some(mirror),
        }
    }

    /// Whether writes of shared files go to a mirror.
    pub fn is_mirrored(&self) -> bool {
        self.mirror.is_some()
    }

    /// The shared files present in the directory, by name (their bytes; read as [`Self::read`]
    /// reads): what a first leader uploads when the shared state is empty.
    pub fn read_shared_files(&self) -> Result<BTreeMap<String, Vec<u8>>, PersistError> {
        let mut out = BTreeMap::new();
        for &name in SHARED_FILES {
            if let Some(text) = self.read(name)? {
                out.insert(name.to_string(), text.into_bytes());
            }
        }
        Ok(out)
    }

    /// Makes the local shared files what `files` holds (the shared state a new leader loaded):
    /// each written atomically, the shared files absent from `files` removed; never mirrored.
    /// Names that are not shared files are refused (an error naming them).
    pub fn replace_shared_files(&self, files: &BTreeMap<String, Vec<u8>>) -> Result<(), PersistError> {
        if let Some(name) = files.keys().find(|n| !is_shared_file(n)) {
            return Err(PersistError::Corrupt {
                path: self.file(name),
                message: format!("not a shared state file (expected one of {SHARED_FILES:?})"),
            });
        }
        for &name in SHARED_FILES {
            match files.get(name) {
                Some(bytes) => self.write_local(name, bytes, 0o640)?,
                None => self.remove_local(name)?,
            }
        }
        Ok(())
    }

    fn mirror_of(&self, name: &str) -> Option<&dyn StateMirror> {
        self.mirror.as_deref().filter(|_| is_shared_file(name))
    }

    /// Removes a file of the directory (absent: success), from the mirror first when shared.
    pub fn remove(&self, name: &str) -> Result<(), PersistError> {
        if let Some(m) = self.mirror_of(name) {
            m.delete(name).map_err(|message| PersistError::Mirror {
                name: name.to_string(),
                message,
            })?;
        }
        self.remove_local(name)
    }

    fn remove_local(&self, name: &str) -> Result<(), PersistError> {
        let path = self.file(name);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(PersistError::Io { path, source }),
        }
    }

    /// Removes `.NAME.*.tmp` files a crash left (unlinking never follows a symlink).
    fn remove_stale_temporaries(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') && name.ends_with(".tmp") {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Checks that state files can be replaced, the way they are: creates, writes, fsyncs and
    /// renames a probe file, then removes it. Mode bits say nothing for root or on a read-only
    /// mount; this does what a commit will do.
    pub fn probe_writable(&self) -> Result<(), PersistError> {
        let target = self.file(PROBE_FILE);
        let not_writable = |file: &Path| {
            let (dir, file) = (self.dir.clone(), file.to_path_buf());
            move |source| PersistError::NotWritable { dir, file, source }
        };
        let res = self.write_atomic(PROBE_FILE, b"fabricd write probe\n");
        if let Err(PersistError::Io { path, source }) = res {
            // `write_atomic` removed its temporary itself.
            return Err(not_writable(&path)(source));
        }
        res?;
        fs::remove_file(&target).map_err(not_writable(&target))
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Reads a file of the directory (a regular file of at most
    /// [`fabric_topology::textfile::SMALL_TEXT_LIMIT`] bytes, UTF-8); `None` when it does not
    /// exist. A symlink is not followed (an error), and a file owned by another user (not
    /// root), writable by others, or writable by a group other than the daemon's is refused.
    pub fn read(&self, name: &str) -> Result<Option<String>, PersistError> {
        use fabric_topology::textfile::{read_open_text_file, TextFileError, SMALL_TEXT_LIMIT};
        let path = self.file(name);
        let io = |source| PersistError::Io {
            path: path.clone(),
            source,
        };
        let f = match OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Err(io(io::Error::other(
                    "a symbolic link: refused (state files are never read through links)",
                )))
            }
            Err(source) => return Err(io(source)),
        };
        let meta = f.metadata().map_err(io)?;
        if !trusted_owner(&meta) {
            return Err(untrusted(&path, "owned by another user", &meta));
        }
        // Group-writable is tolerated for the daemon's own group (files an older fabricd wrote
        // under umask 002); writable by others never.
        let group_ok = meta.gid() == rustix::process::getegid().as_raw();
        if meta.mode() & 0o002 != 0 || (meta.mode() & 0o020 != 0 && !group_ok) {
            return Err(untrusted(&path, "writable by group or others", &meta));
        }
        match read_open_text_file(f, &path, SMALL_TEXT_LIMIT) {
            Ok(s) => Ok(Some(s)),
            Err(TextFileError::Io { source, .. }) => Err(PersistError::Io { path, source }),
            // Not text at all: invalid UTF-8 names its line.
            Err(e) if e.line() > 0 => Err(PersistError::Corrupt {
                message: e.reason(),
                path: PathBuf::from(format!("{}:{}", path.display(), e.line())),
            }),
            // Not a regular file, or too large: cannot be read.
            Err(e) => Err(PersistError::Io {
                source: io::Error::new(io::ErrorKind::InvalidInput, e.reason()),
                path,
            }),
        }
    }

    /// Writes `value` as pretty JSON and a final newline into `name`, atomically (see
    /// [`Self::write_atomic`]).
    fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<(), PersistError> {
        let mut text = serde_json::to_string_pretty(value).map_err(|e| PersistError::Corrupt {
            path: self.file(name),
            message: e.to_string(),
        })?;
        text.push('\n');
        self.write_atomic(name, text.as_bytes())
    }

    /// Replaces a file atomically with [`atomic_write_file`] (the workspace's one atomic write):
    /// an unnamed temporary in the same directory (`O_TMPFILE`, so a crash leaves nothing and no
    /// planted path is ever opened), fsync, link and rename over `name`, fsync of the directory.
    /// The file gets mode 0640 and the daemon's ownership, whatever the old file had.
    pub fn write_atomic(&self, name: &str, contents: &[u8]) -> Result<(), PersistError> {
        self.write_atomic_mode(name, contents, 0o640)
    }

    /// [`Self::write_atomic`], the file readable by its owner only (`0600`, set before any
    /// byte is written): for secrets, never mirrored.
    pub fn write_atomic_private(&self, name: &str, contents: &[u8]) -> Result<(), PersistError> {
        self.write_local(name, contents, 0o600)
    }

    /// A shared file goes to the mirror first (its failure is the write's error, the local file
    /// unchanged), then to the local file.
    fn write_atomic_mode(&self, name: &str, contents: &[u8], mode: u32) -> Result<(), PersistError> {
        if let Some(m) = self.mirror_of(name) {
            m.put(name, contents).map_err(|message| PersistError::Mirror {
                name: name.to_string(),
                message,
            })?;
        }
        self.write_local(name, contents, mode)
    }

    fn write_local(&self, name: &str, contents: &[u8], mode: u32) -> Result<(), PersistError> {
        let path = self.file(name);
        write_file_atomically(&path, contents, mode).map_err(|source| PersistError::Io { path, source })
    }

    /// The persisted LID assignments (empty when none were saved).
    pub fn load_guid2lid(&self) -> Result<Guid2Lid, PersistError> {
        match self.read(GUID2LID_FILE)? {
            None => Ok(Guid2Lid::new()),
            Some(text) => {
                let path = self.file(GUID2LID_FILE);
                Guid2Lid::parse(&text, &path.display().to_string()).map_err(|e| PersistError::Corrupt {
                    path,
                    message: e.to_string(),
                })
            }
        }
    }

    /// The M_Key in force on the fabric's ports (`m-key`, owner-readable only), if one was
    /// saved: the key a restarted or standby manager must use (the ports refuse any other).
    pub fn load_m_key(&self) -> Result<Option<u64>, PersistError> {
        let Some(text) = self.read(M_KEY_FILE)? else {
            return Ok(None);
        };
        let t = text.trim();
        let parsed = t.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok());
        parsed.map(Some).ok_or_else(|| PersistError::Corrupt {
            path: self.file(M_KEY_FILE),
            // Never the content: it is a secret.
            message: "not a 0x-prefixed 64-bit hexadecimal M_Key".into(),
        })
    }

    /// Saves the M_Key in force (see [`Self::load_m_key`]).
    pub fn save_m_key(&self, key: u64) -> Result<(), PersistError> {
        self.write_atomic_private(M_KEY_FILE, format!("0x{key:016x}\n").as_bytes())
    }

    pub fn save_guid2lid(&self, g: &Guid2Lid) -> Result<(), PersistError> {
        self.write_atomic(GUID2LID_FILE, g.to_text().as_bytes())
    }

    /// The persisted job mappings (empty when none were saved).
    pub fn load_jobs(&self) -> Result<Jobs, PersistError> {
        let Some(text) = self.read(JOBS_FILE)? else {
            return Ok(Jobs::new());
        };
        let path = self.file(JOBS_FILE);
        let f: JobsFile = serde_json::from_str(&text).map_err(|e| PersistError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        for (id, ports) in &f.jobs {
            for p in ports {
                if parse_guid(&p.guid).is_none() {
                    return Err(PersistError::Corrupt {
                        path,
                        message: format!("job {id:?}: {:?} is not a GUID", p.guid),
                    });
                }
            }
        }
        Ok(f.jobs)
    }

    pub fn save_jobs(&self, jobs: &Jobs) -> Result<(), PersistError> {
        let f = JobsFile {
            version: 1,
            jobs: jobs.clone(),
        };
        self.write_json(JOBS_FILE, &f)
    }

    /// The persisted virtual faults.
    pub fn load_virtual_faults(&self) -> Result<Vec<VirtualFault>, PersistError> {
        let Some(text) = self.read(VIRTUAL_FAULTS_FILE)? else {
            return Ok(Vec::new());
        };
        let path = self.file(VIRTUAL_FAULTS_FILE);
        let f: FaultsFile = serde_json::from_str(&text).map_err(|e| PersistError::Corrupt {
            path,
            message: e.to_string(),
        })?;
        Ok(f.faults)
    }

    /// The interrupted update, if any. A file that cannot be parsed, of another format version,
    /// or with generation 0 or one above `i64::MAX` (the next start numbers from it: `u64::MAX`
    /// would overflow) is an error naming the file and the field. (Virtual faults that do not
    /// match the fabric are dropped with a warning by the event loop.)
    pub fn load_update_progress(&self) -> Result<Option<UpdateProgress>, PersistError> {
        let Some(text) = self.read(UPDATE_PROGRESS_FILE)? else {
            return Ok(None);
        };
        let corrupt = |message: String| PersistError::Corrupt {
            path: self.file(UPDATE_PROGRESS_FILE),
            message: format!(
                "{message}: the interrupted update cannot be recovered from this file; remove it to start \
                 without recovery (the first generation then rewrites every table that differs)"
            ),
        };
        let p: UpdateProgress = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if p.version != UPDATE_PROGRESS_VERSION {
            return Err(corrupt(format!(
                "version: {} (this fabricd reads version {UPDATE_PROGRESS_VERSION})",
                p.version
            )));
        }
        if p.generation == 0 || i64::try_from(p.generation).is_err() {
            return Err(corrupt(format!(
                "generation: {} is out of range (1..={})",
                p.generation,
                i64::MAX
            )));
        }
        Ok(Some(p))
    }

    pub fn save_update_progress(&self, p: &UpdateProgress) -> Result<(), PersistError> {
        self.write_json(UPDATE_PROGRESS_FILE, p)
    }

    /// Removes the progress file (the update committed or was aborted).
    pub fn clear_update_progress(&self) -> Result<(), PersistError> {
        self.remove(UPDATE_PROGRESS_FILE)
    }

    /// The last committed routing generation; `None` when none was ever committed with this
    /// directory (no file). A file that cannot be read or parsed, of another format version, or
    /// holding generation 0 (or one above `i64::MAX`, the range of the Prometheus gauge) is an
    /// error naming the file: the daemon refuses to start rather than number generations again
    /// from below numbers its subscribers have already seen.
    pub fn load_last_generation(&self) -> Result<Option<CommittedGeneration>, PersistError> {
        let Some(text) = self.read(GENERATION_FILE)? else {
            return Ok(None);
        };
        let path = self.file(GENERATION_FILE);
        let corrupt = |message: String| PersistError::Corrupt {
            path: path.clone(),
            message: format!(
                "{message}: the last committed routing generation is unknown; write the last number \
                 seen (e.g. the fabricd_generation gauge) into the file as \
                 {{\"version\": 1, \"generation\": N}}, or remove the file to restart the numbering"
            ),
        };
        let f: GenerationFile = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if f.version != GENERATION_FILE_VERSION {
            return Err(corrupt(format!(
                "format version {} (this fabricd reads version {GENERATION_FILE_VERSION})",
                f.version
            )));
        }
        if f.generation == 0 || i64::try_from(f.generation).is_err() {
            return Err(corrupt(format!("generation {} is out of range", f.generation)));
        }
        Ok(Some(CommittedGeneration {
            generation: f.generation,
            committed_at_unix_ms: f.committed_at_unix_ms,
        }))
    }

    /// Records `g` as the last committed routing generation (atomically).
    pub fn save_last_generation(&self, g: &CommittedGeneration) -> Result<(), PersistError> {
        let f = GenerationFile {
            version: GENERATION_FILE_VERSION,
            generation: g.generation,
            committed_at_unix_ms: g.committed_at_unix_ms,
        };
        self.write_json(GENERATION_FILE, &f)
    }

    pub fn save_virtual_faults(&self, faults: &[VirtualFault]) -> Result<(), PersistError> {
        let f = FaultsFile {
            version: 1,
            faults: faults.to_vec(),
        };
        self.write_json(VIRTUAL_FAULTS_FILE, &f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(&d.path().join("state")).unwrap();
        s.write_atomic("x", b"one").unwrap();
        s.write_atomic("x", b"two").unwrap();
        assert_eq!(s.read("x").unwrap().as_deref(), Some("two"));
        let names: Vec<_> = fs::read_dir(s.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("x")]);
        assert_eq!(s.read("absent").unwrap(), None);
    }

    #[test]
    fn the_m_key_is_kept_owner_readable_only_and_a_corrupt_file_names_no_key() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(&d.path().join("state")).unwrap();
        assert_eq!(s.load_m_key().unwrap(), None);
        s.save_m_key(0x7fff_0000_1234_abcd).unwrap();
        assert_eq!(s.load_m_key().unwrap(), Some(0x7fff_0000_1234_abcd));
        let mode = fs::metadata(s.path().join(M_KEY_FILE)).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "the M_Key file is the owner's only");
        // A later save keeps the mode (the temporary is restricted before it is written).
        s.save_m_key(0x42).unwrap();
        assert_eq!(fs::metadata(s.path().join(M_KEY_FILE)).unwrap().mode() & 0o777, 0o600);
        fs::write(s.path().join(M_KEY_FILE), "0xnot-hex secret-ish\n").unwrap();
        let e = s.load_m_key().unwrap_err().to_string();
        assert!(e.contains("m-key") && !e.contains("secret-ish"), "{e}");
    }

    #[test]
    fn jobs_and_faults_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        assert!(s.load_jobs().unwrap().is_empty());
        let mut jobs = Jobs::new();
        jobs.insert(
            "job-1".into(),
            vec![JobPort::new(0x101, "n0"), JobPort::new(0x111, "n1")],
        );
        s.save_jobs(&jobs).unwrap();
        assert_eq!(s.load_jobs().unwrap(), jobs);
        assert_eq!(jobs["job-1"][1].port_guid(), 0x111);
        let faults = vec![
            VirtualFault::Link {
                switch: fmt_guid(0x10),
                port: 5,
            },
            VirtualFault::Node {
                port_guid: fmt_guid(0x101),
            },
        ];
        s.save_virtual_faults(&faults).unwrap();
        assert_eq!(s.load_virtual_faults().unwrap(), faults);
    }

    #[test]
    fn corrupt_files_are_reported_with_their_path() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        s.write_atomic(JOBS_FILE, b"{ not json").unwrap();
        let e = s.load_jobs().unwrap_err().to_string();
        assert!(e.contains("jobs.json"), "{e}");
        s.write_atomic(JOBS_FILE, br#"{"version":1,"jobs":{"j":[{"guid":"zz","name":"x"}]}}"#)
            .unwrap();
        let e = s.load_jobs().unwrap_err().to_string();
        assert!(e.contains("\"zz\" is not a GUID"), "{e}");
    }

    /// Numbers from state files are checked on load (issue #12, defect 9): a progress file with
    /// generation u64::MAX broke the next start (`previous + 1` overflows).
    #[test]
    fn update_progress_with_an_out_of_range_generation_is_refused_naming_the_field() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        let good = UpdateProgress {
            version: 1,
            generation: 7,
            attempt: 0,
            phase: fabric_update::Phase::Update,
            virtual_faults: vec![VirtualFault::Switch {
                switch: "0x0000000000000010".into(),
            }],
        };
        s.save_update_progress(&good).unwrap();
        assert_eq!(s.load_update_progress().unwrap(), Some(good.clone()));
        for (generation, version) in [(u64::MAX, 1), (i64::MAX as u64 + 1, 1), (0, 1), (7, 2)] {
            let bad = UpdateProgress {
                generation,
                version,
                ..good.clone()
            };
            s.save_update_progress(&bad).unwrap();
            let e = s.load_update_progress().unwrap_err().to_string();
            assert!(e.contains(UPDATE_PROGRESS_FILE), "{e}");
            let field = if version == 1 { "generation: " } else { "version: " };
            assert!(e.contains(field), "{e}");
            assert!(e.contains("remove it"), "{e}");
        }
        s.clear_update_progress().unwrap();
        assert_eq!(s.load_update_progress().unwrap(), None);
    }

    /// State files are read bounded, as UTF-8 with the line of a bad byte, never from a device.
    #[test]
    fn state_files_are_read_bounded_and_utf8_errors_name_the_line() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        s.write_atomic(GUID2LID_FILE, b"0x10 0x1 0x1\n0x20 \xff 0x2\n").unwrap();
        let e = s.load_guid2lid().unwrap_err().to_string();
        assert!(e.contains("guid2lid:2: invalid UTF-8 text"), "{e}");
        // A LID recorded for two GUIDs is refused (was: one of them silently renumbered and the
        // file rewritten).
        s.write_atomic(GUID2LID_FILE, b"0x10 0x2 0x3\n0x20 0x3 0x3\n").unwrap();
        let e = s.load_guid2lid().unwrap_err().to_string();
        assert!(e.contains("guid2lid") && e.contains(":2: LID 0x0003"), "{e}");
        std::fs::remove_file(d.path().join(GUID2LID_FILE)).unwrap();
        // A link to a device is not followed; a directory in the file's place is not read.
        std::os::unix::fs::symlink("/dev/zero", d.path().join(JOBS_FILE)).unwrap();
        let e = s.load_jobs().unwrap_err().to_string();
        assert!(e.contains("jobs.json") && e.contains("a symbolic link: refused"), "{e}");
        std::fs::remove_file(d.path().join(JOBS_FILE)).unwrap();
        std::fs::create_dir(d.path().join(JOBS_FILE)).unwrap();
        let e = s.load_jobs().unwrap_err().to_string();
        assert!(e.contains("jobs.json") && e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn last_generation_round_trips_and_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        assert_eq!(s.load_last_generation().unwrap(), None, "no file: nothing committed");
        let g7 = CommittedGeneration {
            generation: 7,
            committed_at_unix_ms: 1_763_800_000_123,
        };
        s.save_last_generation(&g7).unwrap();
        assert_eq!(s.load_last_generation().unwrap(), Some(g7));
        // The format other tools read: a versioned JSON object.
        let v: serde_json::Value = serde_json::from_str(&s.read(GENERATION_FILE).unwrap().unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"version": 1, "generation": 7, "committed_at_unix_ms": 1_763_800_000_123_i64})
        );
        let g8 = CommittedGeneration {
            generation: 8,
            committed_at_unix_ms: 1_763_800_001_000,
        };
        s.save_last_generation(&g8).unwrap();
        assert_eq!(s.load_last_generation().unwrap(), Some(g8));
        // Written by hand (unknown fields are ignored, as in the other files).
        s.write_atomic(
            GENERATION_FILE,
            br#"{"version": 1, "generation": 42, "note": "restored from the logs"}"#,
        )
        .unwrap();
        assert_eq!(
            s.load_last_generation().unwrap(),
            Some(CommittedGeneration {
                generation: 42,
                committed_at_unix_ms: 0
            })
        );
    }

    #[test]
    fn a_corrupt_generation_file_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        let cases: [(&[u8], &str); 7] = [
            (b"", "EOF"),
            (b"{ \"version\": 1, \"generation\": ", "EOF"),
            (b"7\n", "invalid type"),
            (
                br#"{"version":1,"generation":-3,"committed_at_unix_ms":0}"#,
                "invalid value",
            ),
            (
                br#"{"version":2,"generation":3,"committed_at_unix_ms":0}"#,
                "format version 2",
            ),
            (
                br#"{"version":1,"generation":0,"committed_at_unix_ms":0}"#,
                "generation 0 is out of range",
            ),
            (
                br#"{"version":1,"generation":18446744073709551615,"committed_at_unix_ms":0}"#,
                "out of range",
            ),
        ];
        for (text, why) in cases {
            s.write_atomic(GENERATION_FILE, text).unwrap();
            let e = s.load_last_generation().unwrap_err();
            assert!(matches!(e, PersistError::Corrupt { .. }), "{e:?}");
            let e = e.to_string();
            let path = d.path().join(GENERATION_FILE).display().to_string();
            assert!(e.starts_with(&format!("{path}: ")), "{e}");
            assert!(e.contains(why), "{:?}: {e}", String::from_utf8_lossy(text));
            assert!(e.contains("remove the file"), "the message says what to do: {e}");
        }
    }

    /// A file standing for one root owns elsewhere (e.g. /etc/shadow).
    fn victim(d: &Path) -> PathBuf {
        let v = d.join("victim");
        fs::write(&v, "precious\n").unwrap();
        v
    }

    #[test]
    fn a_symlink_planted_at_a_temporary_path_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let v = victim(d.path());
        let s = StateDir::open(&d.path().join("state")).unwrap();
        // The temporary name fabricd used before (fixed), and a symlink at the exact path
        // the creation function is given.
        std::os::unix::fs::symlink(&v, s.path().join(".jobs.json.tmp")).unwrap();
        let mut jobs = Jobs::new();
        jobs.insert("j".into(), vec![JobPort::new(0x101, "n0")]);
        s.save_jobs(&jobs).unwrap();
        assert_eq!(s.load_jobs().unwrap(), jobs);
        assert_eq!(
            fs::read_to_string(&v).unwrap(),
            "precious\n",
            "the symlink target was overwritten"
        );
        let planted = s.path().join(".x.tmp");
        std::os::unix::fs::symlink(&v, &planted).unwrap();
        s.write_atomic("x", b"new\n").unwrap();
        assert_eq!(fs::read_to_string(s.path().join("x")).unwrap(), "new\n");
        assert_eq!(fs::read_to_string(&v).unwrap(), "precious\n");
    }

    #[test]
    fn a_symlinked_state_file_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let v = victim(d.path());
        let s = StateDir::open(&d.path().join("state")).unwrap();
        std::os::unix::fs::symlink(&v, s.path().join(JOBS_FILE)).unwrap();
        let e = s.load_jobs().unwrap_err();
        assert!(matches!(e, PersistError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains(JOBS_FILE), "{e}");
    }

    /// Untrusted paths are refused with one message naming the path, its owner and mode
    /// (tests run as root: the other user is uid 65534, nobody).
    #[test]
    fn a_state_directory_another_user_prepared_is_refused() {
        use std::os::unix::fs::chown;
        let d = tempfile::tempdir().unwrap();
        // Owned by another user, with a planted virtual fault.
        let other = d.path().join("other");
        fs::create_dir(&other).unwrap();
        fs::set_permissions(&other, fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(
            other.join(VIRTUAL_FAULTS_FILE),
            r#"{"version":1,"faults":[{"kind":"switch","switch":"0x0000000000000010"}]}"#,
        )
        .unwrap();
        chown(&other, Some(65534), Some(65534)).unwrap();
        let e = StateDir::open(&other).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, PersistError::Untrusted { owner: 65534, .. }), "{e:?}");
        let path = other.display().to_string();
        assert!(
            text.starts_with(&format!("{path}: owned by another user (owner uid 65534, mode 0755")),
            "{text}"
        );
        assert_eq!(text.matches(&path).count(), 1, "the path once: {text}");
        // Ours but writable by others.
        let open = d.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let e = StateDir::open(&open).unwrap_err().to_string();
        assert!(
            e.contains("writable by group or others") && e.contains("mode 0777"),
            "{e}"
        );
        // Ours, inside a directory of another user (who could swap it).
        let theirs = d.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        chown(&theirs, Some(65534), None).unwrap();
        let e = StateDir::open(&theirs.join("state")).unwrap_err().to_string();
        assert!(e.contains("parent directory owned by another user"), "{e}");
        // A sticky world-writable parent (/tmp) is fine.
        let tmp = d.path().join("tmp");
        fs::create_dir(&tmp).unwrap();
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).unwrap();
        StateDir::open(&tmp.join("state")).unwrap();
        // A trusted directory with a file planted by another user.
        let s = StateDir::open(&d.path().join("state")).unwrap();
        let f = s.path().join(VIRTUAL_FAULTS_FILE);
        fs::write(&f, r#"{"version":1,"faults":[]}"#).unwrap();
        chown(&f, Some(65534), None).unwrap();
        let e = s.load_virtual_faults().unwrap_err().to_string();
        assert!(e.contains("owned by another user (owner uid 65534"), "{e}");
        // Ours, writable by others: refused; by our own group (umask 002): read.
        chown(&f, Some(0), None).unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o646)).unwrap();
        let e = s.load_virtual_faults().unwrap_err().to_string();
        assert!(
            e.contains("writable by group or others") && e.contains("mode 0646"),
            "{e}"
        );
        chown(&f, None, Some(rustix::process::getegid().as_raw())).unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o664)).unwrap();
        assert_eq!(s.load_virtual_faults().unwrap(), vec![]);
    }

    #[cfg(unix)]
    #[test]
    fn an_unreadable_generation_file_is_an_io_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        // A directory where the file should be: reading it fails whatever the user (root too).
        fs::create_dir(d.path().join(GENERATION_FILE)).unwrap();
        let e = s.load_last_generation().unwrap_err();
        assert!(matches!(e, PersistError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains(GENERATION_FILE), "{e}");
    }

    /// A mirror that records every call (in order, with the local file's content at the time)
    /// and fails while `fail` is set.
    #[derive(Debug, Default)]
    struct FakeMirror {
        dir: PathBuf,
        log: std::sync::Mutex<Vec<String>>,
        fail: std::sync::atomic::AtomicBool,
    }

    impl FakeMirror {
        fn local(&self, name: &str) -> String {
            fs::read_to_string(self.dir.join(name)).unwrap_or_else(|_| "<absent>".into())
        }
        fn failing(&self) -> Result<(), String> {
            if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
                Err("etcd 127.0.0.1:1: unreachable".into())
            } else {
                Ok(())
            }
        }
    }

    impl StateMirror for FakeMirror {
        fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
            let local = self.local(name);
            self.log.lock().unwrap().push(format!(
                "put {name} {} (local: {})",
                String::from_utf8_lossy(bytes).trim(),
                local.trim()
            ));
            self.failing()
        }
        fn delete(&self, name: &str) -> Result<(), String> {
            let local = self.local(name);
            self.log
                .lock()
                .unwrap()
                .push(format!("delete {name} (local: {})", local.trim()));
            self.failing()
        }
    }

    fn mirrored() -> (tempfile::TempDir, StateDir, std::sync::Arc<FakeMirror>) {
        let d = tempfile::tempdir().unwrap();
        let plain = StateDir::open(&d.path().join("state")).unwrap();
        let m = std::sync::Arc::new(FakeMirror {
            dir: plain.path().to_path_buf(),
            ..FakeMirror::default()
        });
        let s = plain.with_mirror(m.clone());
        (d, s, m)
    }

    #[test]
    fn shared_files_go_to_the_mirror_before_the_local_file() {
        let (_d, s, m) = mirrored();
        assert!(s.is_mirrored());
        s.write_atomic(GENERATION_FILE, b"one").unwrap();
        s.write_atomic(GENERATION_FILE, b"two").unwrap();
        s.write_atomic("not-shared", b"x").unwrap();
        s.save_m_key(0x1234).unwrap();
        s.write_atomic(UPDATE_PROGRESS_FILE, b"p").unwrap();
        s.clear_update_progress().unwrap();
        let log = m.log.lock().unwrap().clone();
        assert_eq!(
            log,
            vec![
                // The mirror saw each write while the local file still had the old content.
                "put generation.json one (local: <absent>)",
                "put generation.json two (local: one)",
                "put update-progress.json p (local: <absent>)",
                "delete update-progress.json (local: p)",
            ]
        );
        assert_eq!(s.read(GENERATION_FILE).unwrap().as_deref(), Some("two"));
        assert_eq!(s.read(UPDATE_PROGRESS_FILE).unwrap(), None);
        assert_eq!(s.load_m_key().unwrap(), Some(0x1234));
    }

    #[test]
    fn the_m_key_is_never_mirrored_and_the_sa_registry_and_health_are() {
        assert!(!is_shared_file(M_KEY_FILE));
        assert!(is_shared_file(crate::sa_store::SA_REGISTRY_FILE));
        assert!(is_shared_file(crate::health::store::HEALTH_FILE));
        for f in [
            GUID2LID_FILE,
            JOBS_FILE,
            VIRTUAL_FAULTS_FILE,
            UPDATE_PROGRESS_FILE,
            GENERATION_FILE,
        ] {
            assert!(is_shared_file(f), "{f}");
        }
        let (_d, s, m) = mirrored();
        // Even through the plain write (a mistaken caller): the name decides.
        s.write_atomic(M_KEY_FILE, b"0x0000000000000001\n").unwrap();
        s.save_m_key(7).unwrap();
        s.remove(M_KEY_FILE).unwrap();
        assert!(m.log.lock().unwrap().is_empty());
    }

    #[test]
    fn a_failing_mirror_leaves_the_local_file_unchanged_and_names_the_file() {
        let (_d, s, m) = mirrored();
        s.save_jobs(&Jobs::new()).unwrap();
        s.write_atomic(UPDATE_PROGRESS_FILE, b"p").unwrap();
        let before = fs::read(s.path().join(JOBS_FILE)).unwrap();
        m.fail.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut jobs = Jobs::new();
        jobs.insert("j1".into(), vec![JobPort::new(0x10, "n1")]);
        let e = s.save_jobs(&jobs).unwrap_err().to_string();
        assert!(
            e.contains("jobs.json") && e.contains("not recorded in the shared state") && e.contains("unreachable"),
            "{e}"
        );
        assert_eq!(fs::read(s.path().join(JOBS_FILE)).unwrap(), before);
        // A removal too: the local progress file stays.
        assert!(s.clear_update_progress().is_err());
        assert_eq!(s.read(UPDATE_PROGRESS_FILE).unwrap().as_deref(), Some("p"));
        // Back: the write goes through.
        m.fail.store(false, std::sync::atomic::Ordering::SeqCst);
        s.save_jobs(&jobs).unwrap();
        assert_eq!(s.load_jobs().unwrap(), jobs);
    }

    #[test]
    fn the_shared_files_are_replaced_and_read_locally_without_the_mirror() {
        let (_d, s, m) = mirrored();
        fs::write(s.path().join(UPDATE_PROGRESS_FILE), b"stale").unwrap();
        s.save_m_key(9).unwrap();
        let mut files = BTreeMap::new();
        files.insert(GUID2LID_FILE.to_string(), b"0x10 1 1\n".to_vec());
        files.insert(GENERATION_FILE.to_string(), b"{}".to_vec());
        s.replace_shared_files(&files).unwrap();
        assert!(m.log.lock().unwrap().is_empty(), "never mirrored");
        // What the shared state lacks is removed locally (a stale progress file would recover a
        // finished update); the M_Key stays.
        assert_eq!(s.read(UPDATE_PROGRESS_FILE).unwrap(), None);
        assert_eq!(s.load_m_key().unwrap(), Some(9));
        assert_eq!(s.read_shared_files().unwrap(), files);
        files.insert("m-key".into(), b"0x1".to_vec());
        let e = s.replace_shared_files(&files).unwrap_err().to_string();
        assert!(e.contains("m-key") && e.contains("not a shared state file"), "{e}");
    }
}
