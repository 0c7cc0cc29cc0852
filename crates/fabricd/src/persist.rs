//! The state directory: LID assignments (OpenSM `guid2lid` format), job mappings, virtual
//! faults, the progress of a five-phase update and the last committed routing generation, each
//! written atomically (temporary file, `fsync`, `rename`, `fsync` of the directory)
//! so that a crash at any point leaves either the old or the new file, never a torn one.
//!
//! The functions here do blocking file I/O: the event loop calls them through
//! `tokio::task::spawn_blocking`.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use fabric_routing::Guid2Lid;
use fabric_topology::{fmt_guid, parse_guid, Guid};
use serde::{Deserialize, Serialize};

/// File of the LID assignments (OpenSM `guid2lid` format).
pub const GUID2LID_FILE: &str = "guid2lid";
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
}

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

/// The daemon's state directory.
#[derive(Clone, Debug)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Opens (creating if needed, mode 0750) the state directory.
    pub fn open(dir: &Path) -> Result<StateDir, PersistError> {
        let io = |source| PersistError::Io {
            path: dir.to_path_buf(),
            source,
        };
        fs::create_dir_all(dir).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = fs::metadata(dir).map_err(io)?;
            if meta.permissions().mode() & 0o007 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o750)).map_err(io)?;
            }
        }
        Ok(StateDir { dir: dir.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Reads a file of the directory (a regular file of at most
    /// [`fabric_topology::textfile::SMALL_TEXT_LIMIT`] bytes, UTF-8); `None` when it does not
    /// exist.
    pub fn read(&self, name: &str) -> Result<Option<String>, PersistError> {
        let path = self.file(name);
        match fabric_topology::textfile::read_text_file(&path, fabric_topology::textfile::SMALL_TEXT_LIMIT) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(fabric_topology::textfile::TextFileError::Io { source, .. }) => Err(PersistError::Io { path, source }),
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

    /// Replaces a file atomically: write `name.tmp`, fsync it, rename over `name`, fsync the
    /// directory.
    pub fn write_atomic(&self, name: &str, contents: &[u8]) -> Result<(), PersistError> {
        let path = self.file(name);
        let tmp = self.file(&format!(".{name}.tmp"));
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| PersistError::Io { path: p, source }
        };
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(io(&tmp))?;
            f.write_all(contents).map_err(io(&tmp))?;
            f.sync_all().map_err(io(&tmp))?;
        }
        fs::rename(&tmp, &path).map_err(io(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        Ok(())
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
        let mut text = serde_json::to_string_pretty(&f).map_err(|e| PersistError::Corrupt {
            path: self.file(JOBS_FILE),
            message: e.to_string(),
        })?;
        text.push('\n');
        self.write_atomic(JOBS_FILE, text.as_bytes())
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
        let mut text = serde_json::to_string_pretty(p).map_err(|e| PersistError::Corrupt {
            path: self.file(UPDATE_PROGRESS_FILE),
            message: e.to_string(),
        })?;
        text.push('\n');
        self.write_atomic(UPDATE_PROGRESS_FILE, text.as_bytes())
    }

    /// Removes the progress file (the update committed or was aborted).
    pub fn clear_update_progress(&self) -> Result<(), PersistError> {
        let path = self.file(UPDATE_PROGRESS_FILE);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(PersistError::Io { path, source }),
        }
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
        let mut text = serde_json::to_string_pretty(&f).map_err(|e| PersistError::Corrupt {
            path: self.file(GENERATION_FILE),
            message: e.to_string(),
        })?;
        text.push('\n');
        self.write_atomic(GENERATION_FILE, text.as_bytes())
    }

    pub fn save_virtual_faults(&self, faults: &[VirtualFault]) -> Result<(), PersistError> {
        let f = FaultsFile {
            version: 1,
            faults: faults.to_vec(),
        };
        let mut text = serde_json::to_string_pretty(&f).map_err(|e| PersistError::Corrupt {
            path: self.file(VIRTUAL_FAULTS_FILE),
            message: e.to_string(),
        })?;
        text.push('\n');
        self.write_atomic(VIRTUAL_FAULTS_FILE, text.as_bytes())
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
        std::os::unix::fs::symlink("/dev/zero", d.path().join(JOBS_FILE)).unwrap();
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
}
