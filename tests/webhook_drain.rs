//! Draining drops no request: HTTP/1 keep-alive connections are told to close on
//! their next response, quiet ones are closed, HTTP/2 gets GOAWAY, and a client that
//! ignores GOAWAY does not hold the shutdown for the whole grace period.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Read one HTTP/1 response (headers + Content-Length body) from `tls`.
async fn read_response(tls: &mut (impl AsyncReadExt + Unpin)) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), tls.read(&mut chunk))
            .await
            .expect("response in time")
            .unwrap();
        assert!(
            n > 0,
            "connection closed before a response: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return text;
            }
        }
    }
}

/// A grace period no drain here comes near: the tests wait at most 30 s for a drain,
/// so a server that waits out its grace fails them, and a busy machine's delays (well
/// under 30 s) do not.
const GRACE: Duration = Duration::from_secs(60);
const DRAIN_IDLE: Duration = Duration::from_millis(1500);

fn request(uid: &str) -> Vec<u8> {
    let body =
        serde_json::to_vec(&review_for(&fixture_object("full-node-p5-jobset"), uid)).unwrap();
    let mut req = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend(body);
    req
}

#[tokio::test]
async fn http1_keep_alive_connections_close_after_their_next_answer() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("ca");
    let mut cfg = config(Some(pki.write_leaf(dir.path())), None);
    cfg.deadlines.drain_idle = DRAIN_IDLE;
    let srv = serve(cfg).await;
    let mut busy = raw_tls(&srv, &pki).await;
    let mut quiet = raw_tls(&srv, &pki).await;
    busy.write_all(&request("b1")).await.unwrap();
    let r = read_response(&mut busy).await;
    assert!(
        r.starts_with("HTTP/1.1 200") && !r.to_ascii_lowercase().contains("connection: close"),
        "{r}"
    );
    // The quiet connection's last activity is after this instant, so the drain's idle
    // timer cannot close it before `quiet_sent + drain_idle`, however slow the machine.
    let quiet_sent = Instant::now();
    quiet.write_all(&request("q1")).await.unwrap();
    let r = read_response(&mut quiet).await;
    assert!(
        r.starts_with("HTTP/1.1 200") && !r.to_ascii_lowercase().contains("connection: close"),
        "{r}"
    );

    // The grace is far beyond any drain here: a server waiting for it would be seen.
    srv.handle.graceful_shutdown(Some(GRACE));
    // Requests written to a kept-alive connection after the drain began are answered;
    // once its connection has seen the drain (a moment after, on its own task), the
    // answer says the connection closes, and it does.
    let began = Instant::now();
    for i in 2.. {
        let uid = format!("b{i}");
        busy.write_all(&request(&uid)).await.unwrap();
        let r = read_response(&mut busy).await;
        assert!(
            r.starts_with("HTTP/1.1 200") && r.contains(&format!("\"uid\":\"{uid}\"")),
            "{r}"
        );
        if r.to_ascii_lowercase().contains("connection: close") {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "no answer during the drain said `Connection: close`"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut rest = Vec::new();
    let _ = busy.read_to_end(&mut rest).await;
    // The quiet connection is closed after the drain's idle time, and the server is done
    // long before the grace.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), quiet.read_to_end(&mut rest))
        .await
        .expect("quiet connection closed");
    let quiet_lived = quiet_sent.elapsed();
    assert!(
        quiet_lived >= DRAIN_IDLE,
        "the quiet connection was closed {quiet_lived:?} after its request, before the drain's idle time"
    );
    tokio::time::timeout(Duration::from_secs(30), srv.done)
        .await
        .expect("drained before the grace")
        .unwrap()
        .unwrap();
    // New connections are refused once draining.
    assert!(tokio::net::TcpStream::connect(srv.addr).await.is_err());
}

#[tokio::test]
async fn http2_client_ignoring_goaway_does_not_hold_the_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("ca");
    let mut cfg = config(Some(pki.write_leaf(dir.path())), None);
    cfg.deadlines.drain_idle = Duration::from_millis(500);
    let srv = serve(cfg).await;
    let mut tls_cfg = client_config(&pki.ca_pem);
    tls_cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(tls_cfg))
        .connect(name, tcp)
        .await
        .unwrap();
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    tls.write_all(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]).await.unwrap();
    srv.handle.graceful_shutdown(Some(GRACE));
    // The raw client reads GOAWAY and PING but answers nothing.
    let mut buf = vec![0u8; 4096];
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "GOAWAY-ignoring client kept its connection");
    tokio::time::timeout(Duration::from_secs(30), srv.done)
        .await
        .expect("drained before the grace")
        .unwrap()
        .unwrap();
}
