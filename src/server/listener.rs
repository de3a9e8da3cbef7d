//! The HTTPS accept loop: a cap on open connections, a deadline for every stage of a
//! connection, and a drain that drops no request.
//!
//! Stages and their deadlines: first byte after TCP accept, TLS handshake, request
//! headers (HTTP/1 and HTTP/2, see `guard`), HTTP/2 keep-alive pings, and idle with no
//! request in flight. On drain the listener closes; HTTP/1 connections answer their
//! next request with `Connection: close` and are closed once quiet for `drain_idle`;
//! HTTP/2 connections get GOAWAY and in-flight streams finish. At the end of the grace
//! period whatever is left is closed.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Request, Version, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, timeout};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::guard::{self, ConnState, Expired, Guarded};
use super::metrics::StageLabels;
use super::state::AppState;

/// Open HTTPS connections at most, by default (`--max-connections`). Each open
/// connection with a review in flight holds about 30-45 KB (TLS and HTTP buffers, the
/// body): with 2,000 clients at once RSS peaked at 45 MiB with 512 and 59 MiB with
/// 1,024 (docs/performance.md). The API servers a webhook serves keep a few HTTP/2
/// connections each.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Connection limits and deadlines (the `serve` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    pub max_connections: usize,
    pub first_byte: Duration,
    pub tls_handshake: Duration,
    pub header_read: Duration,
    pub idle: Duration,
    pub drain_idle: Duration,
    pub h2_keepalive_interval: Duration,
    pub h2_keepalive_timeout: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            first_byte: Duration::from_secs(3),
            tls_handshake: Duration::from_secs(5),
            header_read: Duration::from_secs(5),
            idle: Duration::from_secs(60),
            drain_idle: Duration::from_secs(1),
            h2_keepalive_interval: Duration::from_secs(20),
            h2_keepalive_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Serving,
    /// Draining until the instant (or until every connection closes).
    Draining(Option<Instant>),
    Stopped,
}

/// Stops the server: `graceful_shutdown` drains, `shutdown` closes everything now.
#[derive(Debug, Clone)]
pub struct Handle {
    phase: Arc<watch::Sender<Phase>>,
}

impl Default for Handle {
    fn default() -> Self {
        Handle {
            phase: Arc::new(watch::Sender::new(Phase::Serving)),
        }
    }
}

impl Handle {
    pub fn graceful_shutdown(&self, grace: Option<Duration>) {
        self.phase.send_if_modified(|p| {
            let start = *p == Phase::Serving;
            if start {
                *p = Phase::Draining(grace.map(|g| Instant::now() + g));
            }
            start
        });
    }

    pub fn shutdown(&self) {
        self.phase.send_replace(Phase::Stopped);
    }
}

fn count(state: &AppState, stage: &'static str) {
    state
        .metrics
        .deadlines
        .get_or_create(&StageLabels { stage })
        .inc();
}

struct Shared {
    state: AppState,
    app: Router,
    tls: TlsAcceptor,
    d: Deadlines,
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
    handle: Handle,
}

/// The HTTP/1 and HTTP/2 connection builders. HTTP/1: the guard times headers out
/// (hyper's own timer would also close idle keep-alive connections, as it starts when
/// the connection waits for a request).
fn builders(d: &Deadlines) -> (auto::Builder<TokioExecutor>, auto::Builder<TokioExecutor>) {
    let mut h1 = auto::Builder::new(TokioExecutor::new()).http1_only();
    h1.http1().keep_alive(true).header_read_timeout(None);
    let mut h2 = auto::Builder::new(TokioExecutor::new()).http2_only();
    h2.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(d.h2_keepalive_interval)
        .keep_alive_timeout(d.h2_keepalive_timeout)
        .max_concurrent_streams(256);
    (h1, h2)
}

/// Accept until drained or stopped; returns when every connection has ended.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: TlsAcceptor,
    app: Router,
    state: AppState,
    d: Deadlines,
    handle: Handle,
) -> std::io::Result<()> {
    let (h1, h2) = builders(&d);
    let shared = Arc::new(Shared {
        state,
        app,
        tls,
        d,
        h1,
        h2,
        handle: handle.clone(),
    });
    let slots = Arc::new(Semaphore::new(d.max_connections));
    let mut phase = handle.phase.subscribe();
    accept(&listener, &shared, &slots, &mut phase).await?;
    drop(listener);
    drain(&handle, &slots, &mut phase, d.max_connections).await;
    Ok(())
}

/// Accept connections while serving, each holding one of `slots`.
async fn accept(
    listener: &TcpListener,
    shared: &Arc<Shared>,
    slots: &Arc<Semaphore>,
    phase: &mut watch::Receiver<Phase>,
) -> std::io::Result<()> {
    loop {
        if *phase.borrow_and_update() != Phase::Serving {
            return Ok(());
        }
        // At the cap, stop accepting: new connections wait in the kernel's backlog.
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.map_err(std::io::Error::other)?,
            _ = phase.changed() => continue,
        };
        let tcp = tokio::select! {
            r = listener.accept() => r,
            _ = phase.changed() => continue,
        };
        match tcp {
            Ok((tcp, _peer)) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    connection(shared, tcp).await;
                    drop(permit);
                });
            }
            Err(error) => {
                // EMFILE and the like: back off instead of spinning.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Wait for every connection to close, until a stop or the end of the grace period;
/// then stop what is left.
async fn drain(
    handle: &Handle,
    slots: &Semaphore,
    phase: &mut watch::Receiver<Phase>,
    max_connections: usize,
) {
    let until = match *phase.borrow() {
        Phase::Draining(until) => until,
        _ => Some(Instant::now()),
    };
    let all_closed = async {
        while slots.available_permits() < max_connections {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let stopped = async {
        loop {
            if *phase.borrow_and_update() == Phase::Stopped || phase.changed().await.is_err() {
                break;
            }
        }
    };
    let grace_over = async {
        match until {
            Some(t) => tokio::time::sleep_until(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = all_closed => return,
        _ = stopped => {},
        _ = grace_over => {},
    }
    handle.shutdown();
    // Connections drop their streams as soon as they see the stop.
    let _ = timeout(Duration::from_secs(1), async {
        while slots.available_permits() < max_connections {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// Counts the connection open while it lives.
struct Open<'a>(&'a AppState);

impl<'a> Open<'a> {
    fn new(state: &'a AppState) -> Self {
        state.metrics.connections.inc();
        Open(state)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.metrics.connections.dec();
    }
}

/// The first byte and the TLS handshake, each within its deadline.
async fn handshake(
    shared: &Shared,
    tcp: TcpStream,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let (state, d) = (&shared.state, shared.d);
    // A review answer is small and latency-bound: Nagle plus the client's delayed ACK
    // adds tens of milliseconds to some responses.
    let _ = tcp.set_nodelay(true);
    match timeout(d.first_byte, tcp.peek(&mut [0u8; 1])).await {
        Ok(Ok(n)) if n > 0 => {}
        Ok(_) => return None,
        Err(_) => {
            count(state, "first_byte");
            return None;
        }
    }
    match timeout(d.tls_handshake, shared.tls.accept(tcp)).await {
        Ok(Ok(s)) => Some(s),
        Ok(Err(error)) => {
            tracing::debug!(%error, "TLS handshake failed");
            None
        }
        Err(_) => {
            count(state, "tls_handshake");
            None
        }
    }
}

async fn connection(shared: Arc<Shared>, tcp: TcpStream) {
    let state = &shared.state;
    let _open = Open::new(state);
    let d = shared.d;
    let mut phase = shared.handle.phase.subscribe();
    let Some(tls) = handshake(&shared, tcp).await else {
        return;
    };
    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let conn_state = ConnState::new();
    let limits = guard::Limits {
        idle: d.idle,
        drain_idle: d.drain_idle,
        header_read: d.header_read,
    };
    let io = Guarded::new(tls, conn_state.clone(), limits, http2);
    let service = service(shared.app.clone(), conn_state.clone());
    let builder = if http2 { &shared.h2 } else { &shared.h1 };
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        let now = *phase.borrow_and_update();
        match now {
            Phase::Stopped => break,
            Phase::Draining(_) if !draining => {
                draining = true;
                conn_state.drain();
                if http2 {
                    conn.as_mut().graceful_shutdown();
                }
            }
            _ => {}
        }
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(error) = r {
                    tracing::debug!(%error, "connection ended with an error");
                }
                break;
            }
            changed = phase.changed() => if changed.is_err() { break },
        }
    }
    match conn_state.expired() {
        Some(Expired::Idle) => count(state, "idle"),
        Some(Expired::Drain) => count(state, "drain"),
        Some(Expired::HeaderRead) => count(state, "header_read"),
        None => {}
    }
}

/// The app as a connection's service: each request counts as in flight while it is
/// answered, and while draining an HTTP/1 answer says `Connection: close`, so no request
/// is ever written to a connection the server is about to close.
fn service(
    app: Router,
    cs: Arc<ConnState>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = axum::response::Response,
    Error = Infallible,
    Future = impl Future<Output = Result<axum::response::Response, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let in_flight = cs.begin();
        let cs = cs.clone();
        let version = req.version();
        let answer = app.clone().oneshot(req);
        async move {
            let mut resp = answer.await?;
            if cs.draining() && version != Version::HTTP_2 {
                resp.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            drop(in_flight);
            Ok::<_, Infallible>(resp)
        }
    })
}
