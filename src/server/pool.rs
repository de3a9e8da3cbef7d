//! Reviews run on a small bounded set of threads, so the async workers stay free for
//! TLS, connections and the probes, and memory stays bounded: at most `concurrency`
//! threads keep allocator heaps (tokio's growing blocking pool left one heap per
//! short-lived thread, and RSS with it). A thread that has had nothing to do for
//! [`IDLE_RETIRE`] ends, and its heap with it, so a server that goes quiet after a
//! burst gives that memory back; the next review starts a thread again. A bounded
//! number of reviews may wait for a thread; beyond that the server answers at once
//! that it is busy.
//!
//! Large reviews (a body over `--large-review-bytes`) run in a lane of their own, so
//! a burst of them (hundreds of containers each) fills that lane's queue, not the one
//! ordinary training pods wait in.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

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

/// How long a review thread waits for work before it ends.
pub const IDLE_RETIRE: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct ReviewPool {
    workers: Arc<Workers>,
    /// Reviews running or waiting.
    pending: Arc<AtomicUsize>,
    concurrency: usize,
    max_waiting: usize,
}

/// The threads' side: the queue they take reviews from and how many are alive. Idle
/// threads wait on one condition variable and a review wakes one of them
/// (`notify_one`). They sleep at once: a channel that spins and yields before it
/// sleeps (crossbeam's) cost about 9 µs of CPU more per review at 2,000 reviews/s,
/// where every review finds the threads idle. (`std::sync::mpsc`'s receiver behind a
/// mutex woke the other idle thread too, waiting on the lock, for every review.)
#[derive(Debug)]
struct Workers {
    queue: Mutex<Queue>,
    ready: Condvar,
    live: AtomicUsize,
    idle: Duration,
    name: &'static str,
    /// Zero in the server; tests widen the moment between a thread's timeout and its
    /// retirement to prove no review is lost there.
    retire_pause: Duration,
    /// How much above the process's nice value the threads run: 0, or [`LARGE_NICE`]
    /// for the large lane.
    nice: i32,
}

/// The large lane's threads run at a nice value 10 above the process's own: on a busy
/// node the scheduler gives them a small share of a contended core, so a burst of huge
/// objects takes CPU from ordinary reviews only where cores are idle.
pub const LARGE_NICE: i32 = 10;

/// Lower this thread's priority by `nice` from the process's own (Linux keeps a nice
/// value per thread: https://man7.org/linux/man-pages/man2/setpriority.2.html), up to
/// the lowest, 19. Raising one's own nice value needs no privilege; a server started
/// under `nice` keeps its large lane below its ordinary one.
fn lower_priority(nice: i32) {
    if nice == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let me = Some(rustix::thread::gettid());
        let own = rustix::process::getpriority_process(me).unwrap_or(0);
        if let Err(error) = rustix::process::setpriority_process(me, (own + nice).min(19)) {
            tracing::warn!(%error, nice, "cannot lower the large-review thread's priority");
        }
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// The pool is gone: threads end once the queue is empty.
    closed: bool,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("jobs", &self.jobs.len())
            .field("closed", &self.closed)
            .finish()
    }
}

/// What a thread finds when it looks for work.
enum Next {
    Job(Job),
    /// Nothing came within the idle time.
    Idle,
    Closed,
}

/// Counts a review as pending until it has run (or was dropped unrun).
struct Pending(Arc<AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn worker(workers: Arc<Workers>) {
    lower_priority(workers.nice);
    loop {
        let job = match workers.next(workers.idle) {
            Next::Job(job) => Some(job),
            Next::Idle => {
                if !workers.retire_pause.is_zero() {
                    std::thread::sleep(workers.retire_pause);
                }
                // Retire. Another thread still alive takes whatever is queued. The last
                // one looks once more: a review sent just before `live` dropped may have
                // seen this thread as alive and started none (so for that moment a new
                // thread and this one may both run: `concurrency` + 1).
                if workers.live.fetch_sub(1, Ordering::SeqCst) > 1 {
                    return;
                }
                match workers.next(Duration::ZERO) {
                    Next::Job(job) => {
                        workers.live.fetch_add(1, Ordering::SeqCst);
                        Some(job)
                    }
                    Next::Idle | Next::Closed => return,
                }
            }
            Next::Closed => None,
        };
        let Some(job) = job else {
            workers.live.fetch_sub(1, Ordering::SeqCst);
            return;
        };
        // A panicking review must not cost a thread; its caller sees the dropped
        // answer as a failure.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

impl Workers {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // A job never runs under the lock, so nothing can poison it; if something
        // did, the queue itself is still whole.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queue a job and wake one idle thread. Refused once the pool is closed.
    fn send(&self, job: Job) -> Result<(), Job> {
        let mut queue = self.queue();
        if queue.closed {
            return Err(job);
        }
        queue.jobs.push_back(job);
        drop(queue);
        self.ready.notify_one();
        Ok(())
    }

    /// The next job, waiting up to `idle` for one.
    fn next(&self, idle: Duration) -> Next {
        let queue = self.queue();
        let (mut queue, _) = self
            .ready
            .wait_timeout_while(queue, idle, |q| q.jobs.is_empty() && !q.closed)
            .unwrap_or_else(PoisonError::into_inner);
        match queue.jobs.pop_front() {
            Some(job) => Next::Job(job),
            None if queue.closed => Next::Closed,
            None => Next::Idle,
        }
    }

    /// Start threads until `wanted` (at most the pool's concurrency) are alive.
    fn ensure(self: &Arc<Self>, wanted: usize) -> bool {
        loop {
            let live = self.live.load(Ordering::SeqCst);
            if live >= wanted {
                return true;
            }
            if self
                .live
                .compare_exchange(live, live + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                continue;
            }
            let me = self.clone();
            let started = std::thread::Builder::new()
                .name(format!("trainplace-{}-{live}", self.name))
                .spawn(move || worker(me));
            if let Err(error) = started {
                self.live.fetch_sub(1, Ordering::SeqCst);
                tracing::error!(%error, "cannot start a review thread");
                return self.live.load(Ordering::SeqCst) > 0;
            }
        }
    }
}

impl ReviewPool {
    /// `concurrency` 0 means one per available core. Threads start as reviews arrive
    /// and end after [`IDLE_RETIRE`] without work, or when the pool is dropped.
    pub fn new(concurrency: usize, max_waiting: usize) -> Self {
        Self::with_idle(concurrency, max_waiting, IDLE_RETIRE, "review", 0)
    }

    fn with_idle(
        concurrency: usize,
        max_waiting: usize,
        idle: Duration,
        name: &'static str,
        nice: i32,
    ) -> Self {
        let concurrency = if concurrency == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            concurrency
        };
        ReviewPool {
            workers: Arc::new(Workers {
                queue: Mutex::new(Queue::default()),
                ready: Condvar::new(),
                live: AtomicUsize::new(0),
                idle,
                name,
                retire_pause: Duration::ZERO,
                nice,
            }),
            pending: Arc::new(AtomicUsize::new(0)),
            concurrency,
            max_waiting,
        }
    }

    #[cfg(test)]
    fn with_retire_pause(mut self, pause: Duration) -> Self {
        if let Some(w) = Arc::get_mut(&mut self.workers) {
            w.retire_pause = pause;
        }
        self
    }

    /// Threads alive now.
    pub fn live_threads(&self) -> usize {
        self.workers.live.load(Ordering::SeqCst)
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
        if self.workers.send(job).is_err() {
            return Err(PoolError::Failed("no review thread is running".into()));
        }
        // Sent first, then counted: a thread retiring at this moment either is seen
        // alive here (and finds the review when it looks once more) or is not (and a
        // new one starts).
        if !self.workers.ensure((before + 1).min(self.concurrency)) {
            return Err(PoolError::Failed("no review thread could start".into()));
        }
        answer
            .await
            .map_err(|_| PoolError::Failed("the review panicked".into()))
    }
}

impl Drop for ReviewPool {
    /// The threads finish what is queued and end.
    fn drop(&mut self) {
        self.workers.queue().closed = true;
        self.workers.ready.notify_all();
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
            large: (large_bytes > 0).then(|| {
                ReviewPool::with_idle(
                    1,
                    (max_waiting / 4).max(1),
                    IDLE_RETIRE,
                    "large-review",
                    LARGE_NICE,
                )
            }),
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

    #[tokio::test]
    async fn idle_threads_end_and_start_again() {
        let pool = ReviewPool::with_idle(2, 8, Duration::from_millis(50), "test", 0);
        assert_eq!(pool.live_threads(), 0, "no thread before the first review");
        assert_eq!(pool.run(|| 1).await, Ok(1));
        assert_eq!(pool.live_threads(), 1);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pool.live_threads() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "idle thread never ended"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            pool.run(|| 2).await,
            Ok(2),
            "a new thread takes the next review"
        );
    }

    /// A review arriving just as the last thread retires must still run. The thread
    /// times out after 5 ms and pauses 20 ms before it retires; each review is sent
    /// 10 ms after the one before, inside that pause, when the thread still counts as
    /// alive, so no new thread starts for it.
    #[tokio::test]
    async fn no_review_is_lost_while_threads_retire() {
        let pool = ReviewPool::with_idle(1, 8, Duration::from_millis(5), "test", 0)
            .with_retire_pause(Duration::from_millis(20));
        for j in 0..10u64 {
            let got = tokio::time::timeout(Duration::from_secs(5), pool.run(move || j))
                .await
                .expect("a review sent while the thread retired was never run");
            assert_eq!(got, Ok(j));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// How many times the threads named `trainplace-{name}-N` have gone to sleep, from
    /// /proc (the kernel keeps 15 bytes of a thread's name).
    #[cfg(target_os = "linux")]
    fn sleeps_of(name: &str) -> (usize, u64) {
        let comm = format!("trainplace-{name}");
        let comm = &comm[..comm.len().min(15)];
        let mut threads = 0;
        let mut sleeps = 0;
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let read = |f: &str| std::fs::read_to_string(task.path().join(f)).unwrap_or_default();
            if read("comm").trim_end() != comm {
                continue;
            }
            threads += 1;
            sleeps += read("status")
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap();
        }
        (threads, sleeps)
    }

    /// With every thread idle, a review wakes one of them, not all: each review costs
    /// one sleep of the thread that ran it. Behind a mutex (the std channel) the other
    /// thread, waiting on the lock, was woken and slept again for every review too.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_review_wakes_one_idle_thread() {
        let pool = Arc::new(ReviewPool::with_idle(2, 8, IDLE_RETIRE, "wake", 0));
        let both = Arc::new(std::sync::Barrier::new(2));
        let started: Vec<_> = (0..2)
            .map(|_| {
                let (pool, both) = (pool.clone(), both.clone());
                tokio::spawn(async move {
                    pool.run(move || {
                        both.wait();
                    })
                    .await
                })
            })
            .collect();
        for s in started {
            assert_eq!(s.await.unwrap(), Ok(()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (threads, before) = sleeps_of("wake");
        assert_eq!(threads, 2, "both review threads are alive and idle");
        let reviews = 20;
        for j in 0..reviews {
            assert_eq!(pool.run(move || j).await, Ok(j));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (_, after) = sleeps_of("wake");
        let slept = after - before;
        assert!(
            slept <= reviews * 3 / 2,
            "{slept} sleeps of the review threads for {reviews} reviews"
        );
    }

    /// The nice value of the calling thread, from /proc (field 19 of its stat line).
    #[cfg(target_os = "linux")]
    fn own_nice() -> i32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name (field 2) may hold spaces; fields after it are plain.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn large_reviews_run_at_a_lower_priority() {
        // Relative to the process's own nice value: the tests may run under `nice`.
        let base = own_nice();
        let lanes = Lanes::new(1, 8, 100);
        assert_eq!(
            lanes.for_body(1000).run(own_nice).await,
            Ok((base + LARGE_NICE).min(19))
        );
        assert_eq!(lanes.for_body(10).run(own_nice).await, Ok(base));
    }

    #[test]
    fn zero_large_bytes_is_one_lane() {
        let lanes = Lanes::new(1, 4, 0);
        assert!(std::ptr::eq(lanes.for_body(10), lanes.for_body(10_000_000)));
    }
}
