//! Per-connection deadlines after the TLS handshake. hyper times out HTTP/1 headers
//! but nothing else: an idle HTTP/2 connection, an HTTP/2 header block that never
//! ends, or a client that ignores GOAWAY would stay open for ever. `Guarded` wraps the
//! decrypted stream and ends the connection when
//! - no request is in flight and none has started for `idle` (or `drain_idle` once
//!   the server is draining), or
//! - a request has begun arriving (HTTP/1: any byte while idle; HTTP/2: a frame or a
//!   header block not yet complete) and is not complete after `header_read`, or
//! - no request has begun `header_read` after the handshake: a client that completes
//!   TLS and then sends nothing does not hold the connection for the idle deadline.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Deadlines for one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub idle: Duration,
    pub drain_idle: Duration,
    pub header_read: Duration,
}

/// What the connection's requests and the server's drain share with its stream.
#[derive(Debug)]
pub(crate) struct ConnState {
    inflight: AtomicUsize,
    /// Requests begun so far: a half-received HTTP/1 request is complete once this moves.
    started: AtomicU64,
    /// When the last request started or finished.
    last_active: Mutex<Instant>,
    draining: AtomicBool,
    waker: Mutex<Option<Waker>>,
    /// Which deadline ended the connection, if one did.
    expired: Mutex<Option<Expired>>,
}

impl ConnState {
    pub fn new() -> Arc<Self> {
        Arc::new(ConnState {
            inflight: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            last_active: Mutex::new(Instant::now()),
            draining: AtomicBool::new(false),
            waker: Mutex::new(None),
            expired: Mutex::new(None),
        })
    }

    fn touch(&self) {
        if let Ok(mut t) = self.last_active.lock() {
            *t = Instant::now();
        }
    }

    /// A request reached the service; the returned guard ends it when dropped.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.inflight.fetch_add(1, Ordering::AcqRel);
        self.started.fetch_add(1, Ordering::AcqRel);
        self.touch();
        InFlight(self.clone())
    }

    pub fn expired(&self) -> Option<Expired> {
        self.expired.lock().ok().and_then(|e| *e)
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Switch to the short drain deadline, counted from now (a connection that was
    /// already quiet still gets the whole window for a last request), and wake the
    /// stream so it re-arms its timer.
    pub fn drain(&self) {
        self.touch();
        self.draining.store(true, Ordering::Release);
        if let Some(w) = self.waker.lock().ok().and_then(|mut w| w.take()) {
            w.wake();
        }
    }
}

pub(crate) struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.inflight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Which deadline ended a connection (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    Idle,
    Drain,
    HeaderRead,
}

/// HTTP/2 frame boundaries, to know when a frame or header block is half received.
#[derive(Debug, Default)]
struct H2Frames {
    preface_left: usize,
    head: [u8; 9],
    head_len: usize,
    payload_left: usize,
    header_block_open: bool,
}

impl H2Frames {
    fn new() -> Self {
        H2Frames {
            preface_left: 24,
            ..Default::default()
        }
    }

    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(data.len());
                self.preface_left -= n;
                data = &data[n..];
            } else if self.payload_left > 0 {
                let n = self.payload_left.min(data.len());
                self.payload_left -= n;
                data = &data[n..];
            } else {
                let n = (9 - self.head_len).min(data.len());
                self.head[self.head_len..self.head_len + n].copy_from_slice(&data[..n]);
                self.head_len += n;
                data = &data[n..];
                if self.head_len == 9 {
                    self.head_len = 0;
                    let h = self.head;
                    self.payload_left =
                        usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    // HEADERS (0x1) and CONTINUATION (0x9); END_HEADERS is flag 0x4.
                    if h[3] == 0x1 || h[3] == 0x9 {
                        self.header_block_open = h[4] & 0x4 == 0;
                    }
                }
            }
        }
    }

    fn incomplete(&self) -> bool {
        self.preface_left > 0 && self.preface_left < 24
            || self.head_len > 0
            || self.payload_left > 0
            || self.header_block_open
    }
}

/// The decrypted stream of one connection, with its deadlines.
pub(crate) struct Guarded<IO> {
    inner: IO,
    state: Arc<ConnState>,
    limits: Limits,
    timer: Pin<Box<Sleep>>,
    h2: Option<H2Frames>,
    /// Since when a request has been half received (and the request count then).
    partial_since: Option<(Instant, u64)>,
    /// When the connection was handed over, after its handshake.
    opened: Instant,
}

impl<IO> Guarded<IO> {
    pub fn new(inner: IO, state: Arc<ConnState>, limits: Limits, http2: bool) -> Self {
        Guarded {
            inner,
            state,
            limits,
            timer: Box::pin(tokio::time::sleep(limits.idle)),
            h2: http2.then(H2Frames::new),
            partial_since: None,
            opened: Instant::now(),
        }
    }

    /// The deadline that applies now, if any.
    fn deadline(&self) -> Option<(Instant, Expired)> {
        let partial = self
            .partial_since
            .map(|(t, _)| (t + self.limits.header_read, Expired::HeaderRead));
        let idle = (self.state.inflight.load(Ordering::Acquire) == 0 && partial.is_none())
            .then(|| {
                let last = self.state.last_active.lock().map(|t| *t).ok()?;
                Some(if self.state.draining() {
                    (last + self.limits.drain_idle, Expired::Drain)
                } else {
                    (last + self.limits.idle, Expired::Idle)
                })
            })
            .flatten();
        let first = (self.state.started.load(Ordering::Acquire) == 0)
            .then(|| (self.opened + self.limits.header_read, Expired::HeaderRead));
        partial
            .into_iter()
            .chain(idle)
            .chain(first)
            .min_by_key(|(t, _)| *t)
    }

    fn note_read(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let incomplete = match &mut self.h2 {
            Some(frames) => {
                frames.feed(data);
                frames.incomplete()
            }
            // HTTP/1: bytes while no request is in flight are the start of the next one.
            None => self.state.inflight.load(Ordering::Acquire) == 0,
        };
        match (incomplete, self.partial_since) {
            (true, None) => {
                self.partial_since =
                    Some((Instant::now(), self.state.started.load(Ordering::Acquire)))
            }
            (false, Some(_)) => self.partial_since = None,
            _ => {}
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        // HTTP/1: once hyper has the headers the request has begun; the body has its
        // own timeout.
        if this.h2.is_none()
            && let Some((_, seen)) = this.partial_since
            && this.state.started.load(Ordering::Acquire) != seen
        {
            this.partial_since = None;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.note_read(&buf.filled()[before..]);
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        if let Ok(mut w) = this.state.waker.lock() {
            *w = Some(cx.waker().clone());
        }
        let Some((at, why)) = this.deadline() else {
            return Poll::Pending;
        };
        if this.timer.deadline() != at {
            this.timer.as_mut().reset(at);
        }
        if this.timer.as_mut().poll(cx).is_ready() {
            if let Ok(mut e) = this.state.expired.lock() {
                *e = Some(why);
            }
            return Poll::Ready(match why {
                // A quiet connection ends like the client closed it: cleanly.
                Expired::Idle | Expired::Drain => Ok(()),
                Expired::HeaderRead => Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "request headers not received in time",
                )),
            });
        }
        Poll::Pending
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::H2Frames;

    #[test]
    fn h2_frames_track_open_header_blocks() {
        let mut f = H2Frames::new();
        f.feed(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        assert!(!f.incomplete());
        // SETTINGS, empty, split across two reads.
        f.feed(&[0, 0, 0, 0x4]);
        assert!(f.incomplete());
        f.feed(&[0, 0, 0, 0, 0]);
        assert!(!f.incomplete());
        // HEADERS without END_HEADERS: open until a CONTINUATION ends it.
        f.feed(&[0, 0, 1, 0x1, 0x0, 0, 0, 0, 1, 0xaa]);
        assert!(f.incomplete());
        f.feed(&[0, 0, 1, 0x9, 0x4, 0, 0, 0, 1, 0xbb]);
        assert!(!f.incomplete());
    }
}
