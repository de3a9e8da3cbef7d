//! The webhook's admission-mark keys on disk: a directory (a mounted Secret) whose
//! visible files are keys, named by id. The file that sorts last signs; every file
//! verifies, so a rotation adds the new key, waits until every replica reloaded it,
//! then removes the old one. Without a directory the server makes a random key at
//! start: marks then verify only on the replica that wrote them, so other replicas
//! judge such pods again (stricter, never looser).

use std::path::Path;

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

/// Read every key of `dir`; the one whose name sorts last signs.
pub fn load(dir: &Path) -> Result<MarkKeys, KeyError> {
    let io = |e: std::io::Error| KeyError::Io {
        path: dir.display().to_string(),
        message: e.to_string(),
    };
    let mut keys = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        let mut bytes = std::fs::read(&path).map_err(io)?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        keys.push((name.to_string(), bytes));
    }
    keys.sort();
    let empty = || KeyError::Empty {
        path: dir.display().to_string(),
    };
    let current = keys.pop().ok_or_else(empty)?;
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
