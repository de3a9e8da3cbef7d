//! Reviews run on tokio's blocking threads, at most `concurrency` at once, so the async
//! workers stay free for TLS, connections and the probes. A bounded number of reviews
//! may wait for a slot; beyond that the server answers at once that it is busy.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use thiserror::Error;
use tokio::sync::Semaphore;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PoolError {
    #[error(
        "trainplace is saturated: {running} reviews running and {waiting} waiting (--review-concurrency, --review-queue); retry"
    )]
    Saturated { running: usize, waiting: usize },
    #[error("the review task failed: {0}")]
    Failed(String),
}

#[derive(Debug)]
pub struct ReviewPool {
    slots: Arc<Semaphore>,
    concurrency: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
}

/// Counts a waiter for as long as it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ReviewPool {
    /// `concurrency` 0 means one per available core.
    pub fn new(concurrency: usize, max_waiting: usize) -> Self {
        let concurrency = if concurrency == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            concurrency
        };
        ReviewPool {
            slots: Arc::new(Semaphore::new(concurrency)),
            concurrency,
            waiting: AtomicUsize::new(0),
            max_waiting,
        }
    }

    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Run `work` on a blocking thread once a slot is free. Refuses at once when
    /// `max_waiting` callers already wait.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PoolError> {
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let waiting = self.waiting.fetch_add(1, Ordering::AcqRel);
                let _counted = Waiting(&self.waiting);
                if waiting >= self.max_waiting {
                    return Err(PoolError::Saturated {
                        running: self.concurrency,
                        waiting,
                    });
                }
                self.slots
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|e| PoolError::Failed(e.to_string()))?
            }
        };
        tokio::task::spawn_blocking(move || {
            let out = work();
            drop(permit);
            out
        })
        .await
        .map_err(|e| PoolError::Failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[tokio::test]
    async fn refuses_at_once_when_full() {
        let pool = Arc::new(ReviewPool::new(1, 0));
        let (release, gate) = mpsc::channel::<()>();
        let p = pool.clone();
        let busy = tokio::spawn(async move { p.run(move || gate.recv().ok()).await });
        // Wait until the slot is taken.
        while pool.slots.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        let refused = pool.run(|| ()).await;
        assert!(
            matches!(refused, Err(PoolError::Saturated { .. })),
            "{refused:?}"
        );
        release.send(()).unwrap();
        assert_eq!(busy.await.unwrap(), Ok(Some(())));
        assert_eq!(pool.run(|| 7).await, Ok(7));
    }
}
