//! A mark of a key id this replica does not know: the key was added to the Secret and
//! another replica, which reloaded first, signed with it. The engine says so when it
//! meets one (`take_unknown_key_id`); the replica then reads its key directory once (at
//! most once a second, whatever the request rate) and answers that review again, so a
//! rotation never refuses a pod because of which replica it reached. Reviews that meet
//! no such mark pay nothing.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
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

    /// A review met a mark of key id `id` that `marks` does not know: read the key
    /// directory once into `marks` (at most once a second). Returns whether the keys
    /// read know `id`, so the review is worth answering again.
    pub fn reload_for(&self, id: &str, marks: &ArcSwapOption<MarkKeys>) -> bool {
        let Some(dir) = self.dir.load_full() else {
            return false;
        };
        if marks.load().as_deref().is_some_and(|k| k.knows(id)) {
            // Another review read them meanwhile.
            return true;
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
                let known = keys.knows(id);
                marks.store(Some(Arc::new(keys)));
                known
            }
            Err(error) => {
                tracing::error!(%error, "admission-mark keys rejected; keeping the last good ones");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(refresh.reload_for("new", &marks));
        assert!(marks.load().as_deref().unwrap().knows("new"));
        // A known id reads nothing; an unknown one again within a second neither.
        assert!(refresh.reload_for("new", &marks));
        assert!(!refresh.reload_for("forged", &marks));
    }
}
