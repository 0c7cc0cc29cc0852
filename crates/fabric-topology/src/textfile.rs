//! Bounded reading of the text files fabricd and fabricctl are given (topologies, LFT dumps,
//! `guid2lid`, root GUID files, state files, the configuration).
//!
//! [`read_text_file`] reads at most a stated number of bytes and refuses what is not a regular
//! file (`/dev/zero`, a FIFO, a directory), so that a wrong path cannot exhaust the memory of the
//! machine or block a start; invalid UTF-8 is reported with its line.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Limit of small text files: configuration, state files, `guid2lid`, root GUID lists (16 MiB).
pub const SMALL_TEXT_LIMIT: u64 = 16 << 20;

/// Limit of large text files: topologies and LFT dumps of the largest fabrics (1 GiB).
pub const LARGE_TEXT_LIMIT: u64 = 1 << 30;

/// Why a text file could not be read; every variant names the path.
#[derive(Debug, thiserror::Error)]
pub enum TextFileError {
    #[error("{}: cannot read: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not a regular file ({kind}); give the path of a text file", .path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{}: larger than the limit of {} MiB for this file", .path.display(), .limit >> 20)]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{}:{line}: invalid UTF-8 text", .path.display())]
    Utf8 { path: PathBuf, line: usize },
}

impl TextFileError {
    /// The 1-based line of the error (invalid UTF-8), 0 when it concerns the file as a whole.
    pub fn line(&self) -> usize {
        match self {
            TextFileError::Utf8 { line, .. } => *line,
            _ => 0,
        }
    }

    /// The error without the path (for callers whose own error type names the file).
    pub fn reason(&self) -> String {
        match self {
            TextFileError::Io { source, .. } => format!("cannot read: {source}"),
            TextFileError::NotRegular { kind, .. } => {
                format!("not a regular file ({kind}); give the path of a text file")
            }
            TextFileError::TooLarge { limit, .. } => {
                format!("larger than the limit of {} MiB for this file", limit >> 20)
            }
            TextFileError::Utf8 { .. } => "invalid UTF-8 text".to_string(),
        }
    }

    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, TextFileError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Reads a UTF-8 text file of at most `limit` bytes. Symbolic links are followed; the target
/// must be a regular file.
pub fn read_text_file(path: &Path, limit: u64) -> Result<String, TextFileError> {
    let file = std::fs::File::open(path).map_err(|source| TextFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    read_open_text_file(file, path, limit)
}

/// [`read_text_file`] of a file the caller opened itself (with its own flags, e.g.
/// `O_NOFOLLOW`, and checks); `path` is only for the errors.
pub fn read_open_text_file(file: std::fs::File, path: &Path, limit: u64) -> Result<String, TextFileError> {
    let io = |source| TextFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = regular_file_metadata(&file, path)?;
    if meta.len() > limit {
        return Err(TextFileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    // The file may grow between the check and the read: never read more than the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(TextFileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|e| TextFileError::Utf8 {
        path: path.to_path_buf(),
        line: utf8_error_line(e.as_bytes(), e.utf8_error().valid_up_to()),
    })
}

/// The metadata of an open file that must be a regular file (a device, FIFO or directory is
/// refused, never read): for readers that stream a file themselves.
pub fn regular_file_metadata(file: &std::fs::File, path: &Path) -> Result<std::fs::Metadata, TextFileError> {
    let meta = file.metadata().map_err(|source| TextFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let ft = meta.file_type();
    if !ft.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let kind = if ft.is_dir() {
            "a directory"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(TextFileError::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    Ok(meta)
}

/// 1-based line of the byte at `offset`.
pub fn utf8_error_line(bytes: &[u8], offset: usize) -> usize {
    bytes[..offset.min(bytes.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("textfile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&d);
        d
    }

    #[test]
    fn reads_bounded_regular_utf8_files_and_names_what_is_wrong() {
        let p = tmp("ok");
        std::fs::write(&p, "a\nb\n").unwrap();
        assert_eq!(read_text_file(&p, 4).unwrap(), "a\nb\n");
        let e = read_text_file(&p, 3).unwrap_err();
        assert!(matches!(e, TextFileError::TooLarge { limit: 3, .. }), "{e}");
        assert!(
            e.to_string().starts_with(&format!("{}: larger than", p.display())),
            "{e}"
        );
        std::fs::write(&p, b"ok\nok\nbad \xff here\n").unwrap();
        let e = read_text_file(&p, 100).unwrap_err();
        assert_eq!(e.to_string(), format!("{}:3: invalid UTF-8 text", p.display()));
        assert_eq!(e.line(), 3);
        std::fs::remove_file(&p).unwrap();
        let e = read_text_file(&p, 100).unwrap_err();
        assert!(e.is_not_found(), "{e}");
        let e = read_text_file(Path::new("/dev/zero"), 100).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero: not a regular file (a character device); give the path of a text file"
        );
        let e = read_text_file(&std::env::temp_dir(), 100).unwrap_err();
        assert!(
            matches!(
                e,
                TextFileError::NotRegular {
                    kind: "a directory",
                    ..
                }
            ),
            "{e}"
        );
    }
}
