//! A mark of a key id this replica does not know: the key was added to the Secret and
//! another replica, which reloaded first, signed with it. Before judging such a review
//! the replica reads its key directory once (at most once a second, whatever the
//! request rate), so a rotation never refuses a pod because of which replica it reached.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use trainplace_engine::ADMITTED;
use trainplace_engine::MarkKeys;

/// Where the keys come from, and when they were last read because of an unknown id.
#[derive(Clone, Default)]
pub struct MarkRefresh {
    dir: Arc<ArcSwapOption<PathBuf>>,
    last_ms: Arc<AtomicU64>,
}

impl MarkRefresh {
    /// Read keys from `dir` on an unknown id (a mounted Secret).
    pub fn set_dir(&self, dir: PathBuf) {
        self.dir.store(Some(Arc::new(dir)));
    }

    /// Before judging `body`: when it carries a mark of a key id `marks` does not know,
    /// read the key directory once into `marks`. Returns whether the keys were read.
    pub fn before_review(&self, body: &[u8], marks: &ArcSwapOption<MarkKeys>) -> bool {
        let Some(dir) = self.dir.load_full() else {
            return false;
        };
        let Some(id) = mark_key_id(body) else {
            return false;
        };
        if marks.load().as_deref().is_some_and(|k| k.knows(id)) {
            return false;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let last = self.last_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < 1_000
            || self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        match crate::mark_keys::load(&dir) {
            Ok(keys) => {
                let failures = marks.load().as_deref().map(MarkKeys::failure_counter);
                let keys = match failures {
                    Some(counter) => keys.counting_failures_in(counter),
                    None => keys,
                };
                tracing::info!(
                    id,
                    signing = keys.current_id(),
                    "admission-mark keys read again for an unknown key id"
                );
                marks.store(Some(Arc::new(keys)));
                true
            }
            Err(error) => {
                tracing::error!(%error, "admission-mark keys rejected; keeping the last good ones");
                false
            }
        }
    }
}

/// The key id of the first admission mark in a request body (`"trainplace.io/admitted":
/// "v2.ID.…"`), found by a byte search: no parse of the body.
fn mark_key_id(body: &[u8]) -> Option<&str> {
    let key = format!("\"{ADMITTED}\"");
    let at = body.windows(key.len()).position(|w| w == key.as_bytes())?;
    let rest = &body[at + key.len()..];
    let open = rest.iter().position(|b| *b == b'"')?;
    let value = &rest[open + 1..];
    let value = &value[..value.iter().position(|b| *b == b'"')?];
    let text = std::str::from_utf8(value).ok()?;
    text.split('.').nth(1).filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(id: &str) -> Vec<u8> {
        format!(r#"{{"request":{{"object":{{"metadata":{{"annotations":{{"{ADMITTED}": "v2.{id}.4.abc"}}}}}}}}}}"#)
            .into_bytes()
    }

    #[test]
    fn the_key_id_of_a_mark_is_found_without_parsing() {
        assert_eq!(mark_key_id(&body("2026-12-01")), Some("2026-12-01"));
        assert_eq!(mark_key_id(br#"{"request":{}}"#), None);
    }

    #[test]
    fn an_unknown_key_id_reads_the_keys_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old"), [1u8; 32]).unwrap();
        let marks = ArcSwapOption::from_pointee(crate::mark_keys::load(dir.path()).unwrap());
        let refresh = MarkRefresh::default();
        refresh.set_dir(dir.path().to_path_buf());
        // Another replica reloaded first and signs with `new`.
        std::fs::write(dir.path().join("new"), [2u8; 32]).unwrap();
        assert!(!marks.load().as_deref().unwrap().knows("new"));
        assert!(refresh.before_review(&body("new"), &marks));
        assert!(marks.load().as_deref().unwrap().knows("new"));
        // A known id reads nothing; an unknown one again within a second neither.
        assert!(!refresh.before_review(&body("new"), &marks));
        assert!(!refresh.before_review(&body("forged"), &marks));
    }
}
