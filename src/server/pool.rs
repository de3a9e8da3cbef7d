//! Reviews run on a small fixed set of threads, so the async workers stay free for
//! TLS, connections and the probes, and memory stays bounded: a fixed set of threads
//! keeps a fixed set of allocator heaps (tokio's growing blocking pool left one heap
//! per short-lived thread, and RSS with it). A bounded number of reviews may wait for a
//! thread; beyond that the server answers at once that it is busy.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use thiserror::Error;
use tokio::sync::oneshot;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PoolError {
    #[error(
        "trainplace is saturated: {running} reviews running and {waiting} waiting (--review-concurrency, --review-queue); retry"
    )]
    Saturated { running: usize, waiting: usize },
    #[error("the review thread failed: {0}")]
    Failed(String),
}

type Job = Box<dyn FnOnce() + Send>;

#[derive(Debug)]
pub struct ReviewPool {
    jobs: Sender<Job>,
    /// Reviews running or waiting.
    pending: Arc<AtomicUsize>,
    concurrency: usize,
    max_waiting: usize,
}

/// Counts a review as pending until it has run (or was dropped unrun).
struct Pending(Arc<AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn worker(jobs: Arc<Mutex<Receiver<Job>>>) {
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match job {
            // A panicking review must not cost a thread; its caller sees the dropped
            // answer as a failure.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return,
        }
    }
}

impl ReviewPool {
    /// `concurrency` 0 means one per available core. The threads end when the pool is
    /// dropped.
    pub fn new(concurrency: usize, max_waiting: usize) -> Self {
        let concurrency = if concurrency == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            concurrency
        };
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..concurrency {
            let rx = rx.clone();
            // Failing to start a thread leaves fewer workers; zero would hang reviews,
            // so the first one must start.
            let started = std::thread::Builder::new()
                .name(format!("trainplace-review-{i}"))
                .spawn(move || worker(rx));
            if let Err(error) = started {
                tracing::error!(%error, "cannot start a review thread");
            }
        }
        ReviewPool {
            jobs: tx,
            pending: Arc::new(AtomicUsize::new(0)),
            concurrency,
            max_waiting,
        }
    }

    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Run `work` on a review thread. Refuses at once when `max_waiting` reviews
    /// already wait for one.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PoolError> {
        let before = self.pending.fetch_add(1, Ordering::AcqRel);
        let pending = Pending(self.pending.clone());
        if before >= self.concurrency + self.max_waiting {
            return Err(PoolError::Saturated {
                running: self.concurrency,
                waiting: self.max_waiting,
            });
        }
        let (done, answer) = oneshot::channel();
        let job: Job = Box::new(move || {
            let answer = work();
            // Free the slot before the caller can see the answer, so a caller that
            // got its answer never finds its own review still counted.
            drop(pending);
            let _ = done.send(answer);
        });
        if self.jobs.send(job).is_err() {
            return Err(PoolError::Failed("no review thread is running".into()));
        }
        answer
            .await
            .map_err(|_| PoolError::Failed("the review panicked".into()))
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
        let (taken, started) = mpsc::channel::<()>();
        let p = pool.clone();
        let busy = tokio::spawn(async move {
            p.run(move || {
                taken.send(()).unwrap();
                gate.recv().ok()
            })
            .await
        });
        // Wait until the thread runs the first job.
        tokio::task::spawn_blocking(move || started.recv().unwrap())
            .await
            .unwrap();
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
