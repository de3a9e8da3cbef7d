//! The webhook's admission-mark keys on disk: a directory (a mounted Secret) whose
//! visible files are keys, named by id. Of the files not named `ID.pending`, the one
//! that sorts last signs; every file verifies. A rotation goes the way the serving CA
//! rotates: the new key is added as `ID.pending` (it verifies on each replica as soon as
//! that replica reloads, and signs nowhere), then, once every replica has it, renamed to
//! `ID` (now it signs), and the old key is removed only after the templates it signed
//! are gone. A replica that meets a mark of a key id it does not know reads its keys
//! again once before judging (`server::mark_refresh`). Without a directory the server makes a random key at
//! start: marks then verify only on the replica that wrote them, so other replicas
//! judge such pods again (stricter, never looser).

use std::path::{Path, PathBuf};

use ring::rand::{SecureRandom, SystemRandom};
use trainplace_engine::MarkKeys;

/// Why a key directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error(
        "{path}: no usable key: put one file of at least 32 random bytes there (e.g. `openssl rand 32 > {path}/$(date +%Y-%m-%d)`), with a name without dots"
    )]
    Empty { path: String },
}

/// The files of a key directory that are keys: visible regular files, sorted by name.
/// Hidden entries (the `..data` links and timestamped directories of a mounted Secret)
/// are not. The loader and the reload watcher both use this, so they agree.
pub fn key_files(dir: &Path) -> Result<Vec<PathBuf>, KeyError> {
    let io = |e: std::io::Error| KeyError::Io {
        path: dir.display().to_string(),
        message: e.to_string(),
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let visible = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.starts_with('.'));
        if visible && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The suffix of a key that verifies but does not sign yet.
const PENDING: &str = ".pending";

/// Read every key of `dir`; of those not pending, the one whose name sorts last signs.
pub fn load(dir: &Path) -> Result<MarkKeys, KeyError> {
    let mut keys = Vec::new();
    let mut pending = Vec::new();
    for path in key_files(dir)? {
        let mut bytes = std::fs::read(&path).map_err(|e| KeyError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        // A key written as text (`echo ... > file`) ends with a newline that is not part
        // of it; random bytes may end with 0x0a too (one key in 256 of the chart's
        // `randBytes 32`), and those stay whole. Every replica reads the file the same
        // way, so they agree on the key either way.
        if bytes.last() == Some(&b'\n') && bytes.len() > MarkKeys::MIN_BYTES {
            bytes.pop();
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match name.strip_suffix(PENDING) {
            Some(id) => pending.push((id.to_string(), bytes)),
            None => keys.push((name.to_string(), bytes)),
        }
    }
    let empty = || KeyError::Empty {
        path: dir.display().to_string(),
    };
    let current = keys.pop().ok_or_else(empty)?;
    keys.extend(pending);
    MarkKeys::new(current, keys).ok_or_else(empty)
}

/// A key for this process only.
pub fn ephemeral() -> MarkKeys {
    let mut key = vec![0u8; 32];
    SystemRandom::new()
        .fill(&mut key)
        .expect("the operating system's random source works");
    MarkKeys::new(("ephemeral".into(), key), Vec::new()).expect("32 bytes make a key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_key_verifies_but_does_not_sign() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("2026-01-01"), [1u8; 32]).unwrap();
        std::fs::write(dir.path().join("2026-12-01.pending"), [2u8; 32]).unwrap();
        let keys = load(dir.path()).unwrap();
        assert_eq!(keys.current_id(), "2026-01-01");
        assert!(keys.knows("2026-12-01"));
        // Promoted: it signs, and the old key still verifies.
        std::fs::rename(
            dir.path().join("2026-12-01.pending"),
            dir.path().join("2026-12-01"),
        )
        .unwrap();
        let keys = load(dir.path()).unwrap();
        assert_eq!(keys.current_id(), "2026-12-01");
        assert!(keys.knows("2026-01-01"));
        // Only pending keys: nothing signs, which is an error, not a silent default.
        let only = tempfile::tempdir().unwrap();
        std::fs::write(only.path().join("k.pending"), [3u8; 32]).unwrap();
        assert!(load(only.path()).is_err());
    }

    #[test]
    fn random_bytes_ending_in_a_newline_are_a_whole_key() {
        // One of the chart's 32 random bytes in 256 is a final 0x0a: the server must start.
        let dir = tempfile::tempdir().unwrap();
        let mut key = [7u8; 32];
        key[31] = b'\n';
        std::fs::write(dir.path().join("k1"), key).unwrap();
        assert_eq!(load(dir.path()).unwrap().current_id(), "k1");
        // A key written as text keeps working: its newline is not part of it.
        let text = tempfile::tempdir().unwrap();
        std::fs::write(text.path().join("k2"), format!("{}\n", "a".repeat(40))).unwrap();
        assert_eq!(load(text.path()).unwrap().current_id(), "k2");
    }
}
