//! Reload certificate files and the policy directory when their content changes.
//! Polling content hashes works the same for plain files and for the symlink swaps
//! Kubernetes does on mounted Secrets and ConfigMaps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::metrics::OutcomeLabels;
use super::state::AppState;
use super::tls::{CertStore, load_pem};

/// Hash of the named files' names and contents; `None` if any cannot be read right now.
pub fn files_hash(paths: &[&Path]) -> Option<[u8; 32]> {
    let mut h = Sha256::new();
    for p in paths {
        // The name too: a key promoted by renaming (`ID.pending` to `ID`, the same
        // bytes) changes which key signs.
        h.update(p.as_os_str().as_encoded_bytes());
        h.update([0u8]);
        h.update(std::fs::read(p).ok()?);
        h.update([0u8]);
    }
    Some(h.finalize().into())
}

fn outcome(ok: bool) -> OutcomeLabels {
    OutcomeLabels {
        outcome: if ok { "success" } else { "failure" },
    }
}

/// Poll `fingerprint` every `every`; when it changes (and can be read), run `reload`.
fn on_change(
    every: Duration,
    fingerprint: impl Fn() -> Option<[u8; 32]> + Send + 'static,
    reload: impl Fn() + Send + 'static,
) {
    let mut last = fingerprint();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let now = fingerprint();
            if now.is_some() && now != last {
                last = now;
                reload();
            }
        }
    });
}

pub fn watch_certs(
    state: AppState,
    store: Arc<CertStore>,
    cert: PathBuf,
    key: PathBuf,
    every: Duration,
) {
    let (c, k) = (cert.clone(), key.clone());
    on_change(
        every,
        move || files_hash(&[&c, &k]),
        move || {
            let ok = match load_pem(&cert, &key) {
                Ok(ck) => {
                    store.replace(ck);
                    tracing::info!(cert = %cert.display(), "serving certificate reloaded");
                    true
                }
                Err(error) => {
                    tracing::error!(%error, "new certificate rejected; keeping the last good one");
                    false
                }
            };
            state.metrics.cert_reloads.get_or_create(&outcome(ok)).inc();
        },
    );
}

pub fn watch_policy(state: AppState, dir: PathBuf, every: Duration) {
    let d = dir.clone();
    on_change(
        every,
        // One scan: the fingerprint is taken over exactly the files the loader reads.
        move || {
            crate::policy_dir::read(&d)
                .ok()
                .map(|docs| crate::policy_dir::fingerprint(&docs))
        },
        move || {
            let result = crate::policy_dir::load(&dir);
            let ok = result.is_ok();
            let error = match result {
                Ok(p) => {
                    state.policy.store(Arc::new(p));
                    tracing::info!(dir = %dir.display(), "policy reloaded");
                    None
                }
                Err(error) => {
                    tracing::error!(%error, "policy edit rejected; keeping the last good policy");
                    Some(format!("{error} (serving the last good policy)"))
                }
            };
            state.detail.rcu(|d| {
                let mut d = (**d).clone();
                d.policy_error.clone_from(&error);
                d
            });
            state
                .metrics
                .policy_reloads
                .get_or_create(&outcome(ok))
                .inc();
        },
    );
}

/// Reload the admission-mark keys when the key directory changes (a rotated Secret).
pub fn watch_mark_keys(state: AppState, dir: PathBuf, every: Duration) {
    let d = dir.clone();
    on_change(
        every,
        move || {
            let files = crate::mark_keys::key_files(&d).ok()?;
            let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
            files_hash(&paths)
        },
        move || match crate::mark_keys::load(&dir) {
            Ok(keys) => {
                let keys = keys.counting_failures_in(state.metrics.mark_failures.0.clone());
                tracing::info!(signing = keys.current_id(), "admission-mark keys reloaded");
                state.marks.store(Some(Arc::new(keys)));
                state
                    .metrics
                    .mark_key_reloads
                    .get_or_create(&outcome(true))
                    .inc();
            }
            Err(error) => {
                tracing::error!(%error, "admission-mark keys rejected; keeping the last good ones");
                state
                    .metrics
                    .mark_key_reloads
                    .get_or_create(&outcome(false))
                    .inc();
            }
        },
    );
}

/// Load the describe-capacity-reservations file into the inventory now, and again when
/// its content changes. A file that cannot be read or parsed keeps the last good blocks
/// (none at start) and is reported: an error log, `reservationsError` on /readyz and
/// `trainplace_reservations_reloads_total{outcome="failure"}`.
pub fn watch_reservations(state: AppState, file: PathBuf, every: Duration) {
    let load = {
        let state = state.clone();
        let file = file.clone();
        move || {
            let error = match crate::inventory::reservations_file::load(&file) {
                Ok(r) => {
                    let blocks = r.len();
                    if state.inventory.set_described(Arc::new(r)) {
                        tracing::info!(file = %file.display(), blocks, "Capacity Blocks loaded");
                        None
                    } else {
                        tracing::warn!(file = %file.display(), "Capacity Blocks read, but there is no cluster inventory to judge them with (--inventory off or no cluster)");
                        Some("no cluster inventory: the blocks are not used".to_string())
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "Capacity Block file rejected; keeping the last good blocks");
                    Some(format!("{error} (keeping the last good blocks)"))
                }
            };
            state
                .metrics
                .reservations_reloads
                .get_or_create(&outcome(error.is_none()))
                .inc();
            state.detail.rcu(|d| {
                let mut d = (**d).clone();
                d.reservations = format!("{} (reloaded on change)", file.display());
                d.reservations_error.clone_from(&error);
                d
            });
        }
    };
    load();
    let f = file.clone();
    on_change(every, move || files_hash(&[&f]), load);
}
