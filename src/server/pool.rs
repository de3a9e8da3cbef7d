//! Reviews run on a small fixed set of threads, so the async workers stay free for
//! TLS, connections and the probes, and memory stays bounded: a fixed set of threads
//! keeps a fixed set of allocator heaps (tokio's growing blocking pool left one heap
//! per short-lived thread, and RSS with it). A bounded number of reviews may wait for a
//! thread; beyond that the server answers at once that it is busy.
//!
//! Large reviews (a body over `--large-review-bytes`) run in a lane of their own, so
//! a burst of them (hundreds of containers each) fills that lane's queue, not the one
//! ordinary training pods wait in.

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

/// Default `--large-review-bytes`: 16 KiB, above a JobSet training pod's ~10 KB review.
pub const DEFAULT_LARGE_REVIEW_BYTES: usize = 16 * 1024;

/// The review lanes: ordinary reviews, and large ones on their own thread.
#[derive(Debug)]
pub struct Lanes {
    normal: ReviewPool,
    large: Option<ReviewPool>,
    large_bytes: usize,
}

impl Lanes {
    /// `large_bytes` 0 puts every review in one lane. The large lane has one thread
    /// and a quarter of the normal queue.
    pub fn new(concurrency: usize, max_waiting: usize, large_bytes: usize) -> Self {
        Lanes {
            normal: ReviewPool::new(concurrency, max_waiting),
            large: (large_bytes > 0).then(|| ReviewPool::new(1, (max_waiting / 4).max(1))),
            large_bytes,
        }
    }

    /// The lane a review whose body is `len` bytes runs in.
    pub fn for_body(&self, len: usize) -> &ReviewPool {
        match &self.large {
            Some(large) if len > self.large_bytes => large,
            _ => &self.normal,
        }
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

    /// A lane full of large reviews refuses the next large one at once, while an
    /// ordinary review still runs.
    #[tokio::test]
    async fn large_reviews_do_not_block_ordinary_ones() {
        let lanes = Arc::new(Lanes::new(1, 4, 100));
        let (release, gate) = mpsc::channel::<()>();
        let (taken, started) = mpsc::channel::<()>();
        let l = lanes.clone();
        let busy = tokio::spawn(async move {
            l.for_body(1000)
                .run(move || {
                    taken.send(()).unwrap();
                    gate.recv().ok()
                })
                .await
        });
        tokio::task::spawn_blocking(move || started.recv().unwrap())
            .await
            .unwrap();
        // The large lane's queue (4 / 4 = 1) takes one more, then refuses.
        let l = lanes.clone();
        let queued = tokio::spawn(async move { l.for_body(1000).run(|| 1).await });
        while lanes.for_body(1000).pending.load(Ordering::Acquire) < 2 {
            tokio::task::yield_now().await;
        }
        let refused = lanes.for_body(1000).run(|| ()).await;
        assert!(
            matches!(refused, Err(PoolError::Saturated { .. })),
            "{refused:?}"
        );
        assert_eq!(lanes.for_body(100).run(|| 5).await, Ok(5));
        release.send(()).unwrap();
        assert_eq!(busy.await.unwrap(), Ok(Some(())));
        assert_eq!(queued.await.unwrap(), Ok(1));
    }

    #[test]
    fn zero_large_bytes_is_one_lane() {
        let lanes = Lanes::new(1, 4, 0);
        assert!(std::ptr::eq(lanes.for_body(10), lanes.for_body(10_000_000)));
    }
}
