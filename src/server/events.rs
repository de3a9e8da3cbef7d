//! Kubernetes Events (events.k8s.io/v1) on the objects the validating webhook denies or
//! warns about, so `kubectl describe` and `kubectl events` show why. A review only offers
//! its Event to a bounded queue and never waits (a full queue drops it); one task
//! publishes through kube's `Recorder` (repeats of one Event become a series), at most
//! `burst` at once and `per_minute` after that (a token bucket). Every Event is counted
//! in `trainplace_events_total{outcome}`: published, failed, rate_limited, queue_full.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

use super::metrics::{EventLabels, Metrics};

/// Events waiting to be published; more are dropped (and counted).
pub const QUEUE: usize = 128;
/// The API server's limit on an Event's note (bytes).
const NOTE_MAX: usize = 1024;
/// One publish's deadline; a slow API server costs Events, never reviews.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Args)]
pub struct EventArgs {
    /// Do not write Kubernetes Events for denials and warnings.
    #[arg(long, env = "TRAINPLACE_NO_EVENTS")]
    pub no_events: bool,
    /// Events written at once before the rate applies (token bucket size).
    #[arg(long, env = "TRAINPLACE_EVENT_BURST", default_value_t = 25)]
    pub event_burst: u32,
    /// Events written per minute after the burst (token bucket refill); the rest are
    /// dropped and counted.
    #[arg(long, env = "TRAINPLACE_EVENT_RATE", default_value_t = 120)]
    pub event_rate: u32,
    /// The reporting instance named in Events (the chart sets the pod's name); default:
    /// the controller name, trainplace.
    #[arg(long, env = "POD_NAME")]
    pub event_instance: Option<String>,
}

/// Whether and how fast to write Events; off by default (tests, no cluster).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventSettings {
    pub enabled: bool,
    pub burst: u32,
    pub per_minute: u32,
    /// The reporting instance (the pod's name).
    pub instance: Option<String>,
}

impl EventArgs {
    pub fn into_settings(self) -> anyhow::Result<EventSettings> {
        if !self.no_events && self.event_burst == 0 {
            anyhow::bail!("--event-burst must be at least 1 (or --no-events)");
        }
        Ok(EventSettings {
            enabled: !self.no_events,
            burst: self.event_burst,
            per_minute: self.event_rate,
            instance: self.event_instance,
        })
    }
}

/// A token bucket: `capacity` tokens, refilled continuously at `per_minute`.
#[derive(Debug)]
pub struct TokenBucket {
    capacity: f64,
    tokens: f64,
    per_second: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(burst: u32, per_minute: u32, now: Instant) -> Self {
        TokenBucket {
            capacity: f64::from(burst),
            tokens: f64::from(burst),
            per_second: f64::from(per_minute) / 60.0,
            last: now,
        }
    }

    /// Take a token if there is one at `now`.
    pub fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One Event to write.
#[derive(Debug, Clone)]
pub struct Notice {
    pub regarding: ObjectReference,
    /// `Denied` or `Warned`.
    pub reason: &'static str,
    pub note: String,
}

/// Where reviews hand their Events; `off()` drops them.
#[derive(Clone)]
pub struct Events {
    tx: Option<mpsc::Sender<Notice>>,
    metrics: Arc<Metrics>,
}

impl Events {
    pub fn off(metrics: Arc<Metrics>) -> Self {
        Events { tx: None, metrics }
    }

    /// Start the publishing task on the current runtime.
    pub fn start(client: kube::Client, settings: EventSettings, metrics: Arc<Metrics>) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let reporter = Reporter {
            controller: "trainplace".into(),
            instance: settings.instance.clone(),
        };
        let recorder = Recorder::new(client, reporter);
        tokio::spawn(publish(recorder, rx, settings, metrics.clone()));
        Events {
            tx: Some(tx),
            metrics,
        }
    }

    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Offer an Event; never waits.
    pub fn send(&self, notice: Notice) {
        let Some(tx) = &self.tx else { return };
        if tx.try_send(notice).is_err() {
            self.count("queue_full");
        }
    }

    fn count(&self, outcome: &'static str) {
        count(&self.metrics, outcome);
    }
}

fn count(metrics: &Metrics, outcome: &'static str) {
    metrics.events.get_or_create(&EventLabels { outcome }).inc();
}

async fn publish(
    recorder: Recorder,
    mut rx: mpsc::Receiver<Notice>,
    settings: EventSettings,
    metrics: Arc<Metrics>,
) {
    let mut bucket = TokenBucket::new(settings.burst, settings.per_minute, Instant::now());
    while let Some(notice) = rx.recv().await {
        if !bucket.take(Instant::now()) {
            count(&metrics, "rate_limited");
            continue;
        }
        let event = Event {
            type_: EventType::Warning,
            reason: notice.reason.into(),
            note: Some(truncate(notice.note, NOTE_MAX)),
            action: "Admission".into(),
            secondary: None,
        };
        let done =
            tokio::time::timeout(PUBLISH_TIMEOUT, recorder.publish(&event, &notice.regarding))
                .await;
        match done {
            Ok(Ok(())) => count(&metrics, "published"),
            Ok(Err(error)) => {
                tracing::warn!(%error, reason = notice.reason, "cannot write an Event");
                count(&metrics, "failed");
            }
            Err(_) => {
                tracing::warn!(reason = notice.reason, "writing an Event timed out");
                count(&metrics, "failed");
            }
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary, ending in `...` when cut.
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str("...");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_gives_its_burst_then_its_rate_and_never_more() {
        let start = Instant::now();
        let mut b = TokenBucket::new(5, 60, start);
        let taken = (0..100).filter(|_| b.take(start)).count();
        assert_eq!(taken, 5, "the burst at once");
        // One per second after that: 10 seconds of 1000 offers each give 10.
        let mut later = 0;
        for ms in (0..10_000).step_by(10) {
            let now = start + Duration::from_millis(ms + 10);
            later += (0..10).filter(|_| b.take(now)).count();
        }
        assert!((9..=10).contains(&later), "{later}");
        // Idle for an hour: the bucket holds its burst, no more.
        let idle = start + Duration::from_secs(3600);
        assert_eq!((0..100).filter(|_| b.take(idle)).count(), 5);
    }

    #[test]
    fn a_zero_rate_gives_the_burst_once() {
        let start = Instant::now();
        let mut b = TokenBucket::new(2, 0, start);
        let hour = start + Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| b.take(start)).count(), 2);
        assert_eq!((0..10).filter(|_| b.take(hour)).count(), 0);
    }

    #[test]
    fn notes_are_cut_on_a_character_boundary() {
        let text = "é".repeat(600);
        let cut = truncate(text, NOTE_MAX);
        assert!(
            cut.len() <= NOTE_MAX && cut.ends_with("..."),
            "{}",
            cut.len()
        );
        assert_eq!(truncate("short".into(), NOTE_MAX), "short");
    }

    #[tokio::test]
    async fn a_full_queue_drops_without_waiting() {
        let metrics = Arc::new(Metrics::new());
        let (tx, _rx) = mpsc::channel(QUEUE);
        let events = Events {
            tx: Some(tx),
            metrics: metrics.clone(),
        };
        let notice = Notice {
            regarding: ObjectReference::default(),
            reason: "Denied",
            note: String::new(),
        };
        let start = Instant::now();
        for _ in 0..QUEUE + 10 {
            events.send(notice.clone());
        }
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(
            metrics
                .encode()
                .contains("trainplace_events_total{outcome=\"queue_full\"} 10"),
            "{}",
            metrics.encode()
        );
    }
}
