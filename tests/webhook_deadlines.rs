//! Every connection state has a deadline, and open connections are capped; tested
//! with hand-driven TCP, TLS, HTTP/1 and HTTP/2 clients against short deadlines.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use trainplace::server::Running;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: [u8; 9] = [0, 0, 0, 0x4, 0, 0, 0, 0, 0];

async fn short_deadlines(
    tune: impl FnOnce(&mut trainplace::server::Config),
) -> (Running, Pki, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("ca");
    let mut cfg = config(Some(pki.write_leaf(dir.path())), None);
    cfg.deadlines.first_byte = Duration::from_millis(300);
    cfg.deadlines.tls_handshake = Duration::from_millis(500);
    cfg.deadlines.header_read = Duration::from_millis(500);
    cfg.deadlines.idle = Duration::from_secs(30);
    cfg.deadlines.h2_keepalive_interval = Duration::from_secs(30);
    cfg.deadlines.h2_keepalive_timeout = Duration::from_secs(30);
    tune(&mut cfg);
    let srv = serve(cfg).await;
    (srv, pki, dir)
}

/// Read until the server closes. `limit` only bounds a test whose
/// server never closes: the deadlines under test are 0.3-2 s, the limits 10 s, so a
/// busy machine's scheduling delays do not reach them. Which deadline closed a
/// connection is read from the server's per-stage counter, not from the clock.
async fn closed_within(stream: &mut (impl AsyncReadExt + Unpin), limit: Duration) {
    let mut buf = vec![0u8; 4096];
    let r = tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(r.is_ok(), "connection still open after {limit:?}");
}

async fn stage_count(srv: &Running, stage: &str) -> u64 {
    let m = metrics_text(srv.probe_addr).await;
    let key = format!("trainplace_connection_deadlines_total{{stage=\"{stage}\"}} ");
    m.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn h2_tls(
    srv: &Running,
    pki: &Pki,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut cfg = client_config(&pki.ca_pem);
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    tls
}

#[tokio::test]
async fn silent_tcp_and_stalled_tls_handshakes_are_closed() {
    let (srv, _pki, _dir) = short_deadlines(|_| {}).await;
    // Connects and never sends a byte.
    let mut silent = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    closed_within(&mut silent, Duration::from_secs(10)).await;
    assert_eq!(stage_count(&srv, "first_byte").await, 1);
    // Starts a TLS record (handshake, TLS 1.0 header, 512 bytes promised) and stalls.
    let mut stalled = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    stalled
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00])
        .await
        .unwrap();
    closed_within(&mut stalled, Duration::from_secs(10)).await;
    assert_eq!(stage_count(&srv, "tls_handshake").await, 1);
    srv.handle.shutdown();
}

#[tokio::test]
async fn http1_headers_and_idle_keep_alive_have_deadlines() {
    let (srv, pki, _dir) = short_deadlines(|c| c.deadlines.idle = Duration::from_millis(800)).await;
    // Half a request head, then silence.
    let mut tls = raw_tls(&srv, &pki).await;
    tls.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    closed_within(&mut tls, Duration::from_secs(10)).await;
    assert_eq!(stage_count(&srv, "header_read").await, 1);

    // One complete request on a keep-alive connection, then nothing: not closed by
    // the header deadline (idle is not a slow header), closed at the idle deadline.
    let mut tls = raw_tls(&srv, &pki).await;
    tls.write_all(b"GET /nothing HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    closed_within(&mut tls, Duration::from_secs(10)).await;
    assert_eq!(stage_count(&srv, "header_read").await, 1, "a slow header?");
    assert_eq!(stage_count(&srv, "idle").await, 1);
    srv.handle.shutdown();
}

#[tokio::test]
async fn http2_idle_and_unfinished_header_blocks_are_closed() {
    // The idle deadline 1.5 s after the header one: which closed the first connection
    // is decided by the server, and a stall of the test's thread cannot change it.
    let (srv, pki, _dir) = short_deadlines(|c| c.deadlines.idle = Duration::from_secs(2)).await;
    // A HEADERS frame without END_HEADERS and no CONTINUATION.
    let mut tls = h2_tls(&srv, &pki).await;
    tls.write_all(PREFACE).await.unwrap();
    tls.write_all(&SETTINGS).await.unwrap();
    tls.write_all(&[0, 0, 1, 0x1, 0x0, 0, 0, 0, 1, 0x83])
        .await
        .unwrap();
    closed_within(&mut tls, Duration::from_secs(10)).await;
    assert_eq!(stage_count(&srv, "header_read").await, 1);
    assert_eq!(
        stage_count(&srv, "idle").await,
        0,
        "the idle deadline, not the header one"
    );

    // An HTTP/2 connection that only says hello and never starts a request: the
    // first request's header deadline closes it, not the idle one.
    let mut tls = h2_tls(&srv, &pki).await;
    tls.write_all(PREFACE).await.unwrap();
    tls.write_all(&SETTINGS).await.unwrap();
    closed_within(&mut tls, Duration::from_secs(10)).await;
    assert_eq!(stage_count(&srv, "header_read").await, 2);
    assert_eq!(stage_count(&srv, "idle").await, 0);
    srv.handle.shutdown();
}

#[tokio::test]
async fn a_handshake_followed_by_silence_meets_the_header_deadline() {
    // Attack: complete TLS, then send nothing. The idle deadline (30 s here, 60 s by
    // default) would hold the connection; no request has begun, so the header
    // deadline (0.5 s) applies.
    let (srv, pki, _dir) = short_deadlines(|_| {}).await;
    let mut tls = raw_tls(&srv, &pki).await;
    closed_within(&mut tls, Duration::from_secs(10)).await;
    assert_eq!(stage_count(&srv, "header_read").await, 1);
    assert_eq!(stage_count(&srv, "idle").await, 0);
    srv.handle.shutdown();
}

#[tokio::test]
async fn http2_unanswered_keepalive_pings_close_the_connection() {
    let (srv, pki, _dir) = short_deadlines(|c| {
        c.deadlines.h2_keepalive_interval = Duration::from_millis(300);
        c.deadlines.h2_keepalive_timeout = Duration::from_millis(300);
        // Longer than the pings take, so they, not the first request's deadline, close it.
        c.deadlines.header_read = Duration::from_secs(5);
    })
    .await;
    let mut tls = h2_tls(&srv, &pki).await;
    tls.write_all(PREFACE).await.unwrap();
    tls.write_all(&SETTINGS).await.unwrap();
    // Reads (so the server can write) but never acknowledges a PING.
    closed_within(&mut tls, Duration::from_secs(10)).await;
    assert_eq!(stage_count(&srv, "idle").await, 0);
    assert_eq!(
        stage_count(&srv, "header_read").await,
        0,
        "closed by the pings"
    );
    srv.handle.shutdown();
}

#[tokio::test]
async fn open_connections_are_capped() {
    let (srv, pki, _dir) = short_deadlines(|c| {
        c.deadlines.max_connections = 2;
        // The two open connections send no request: keep them past the test.
        c.deadlines.header_read = Duration::from_secs(30);
    })
    .await;
    let first = raw_tls(&srv, &pki).await;
    let _second = raw_tls(&srv, &pki).await;
    // The third waits in the backlog: its handshake cannot complete.
    let third = tokio::spawn({
        let addr = srv.addr;
        let cfg = Arc::new(client_config(&pki.ca_pem));
        async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            tokio_rustls::TlsConnector::from(cfg)
                .connect(name, tcp)
                .await
        }
    });
    // Not served while two are open: 700 ms is ample for a handshake that the cap
    // failed to hold back; a correct server passes however slow the machine.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !third.is_finished(),
        "a third connection was served over the cap of 2"
    );
    let m = metrics_text(srv.probe_addr).await;
    assert!(m.contains("trainplace_connections_open 2"), "{m}");
    drop(first);
    let done = tokio::time::timeout(Duration::from_secs(10), third).await;
    assert!(
        matches!(done, Ok(Ok(Ok(_)))),
        "the waiting connection was not served once a slot freed"
    );
    srv.handle.shutdown();
}
