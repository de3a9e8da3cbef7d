//! The allocator must not ask for transparent huge pages. mimalloc by default
//! advises its 1 GiB arena with MADV_HUGEPAGE; on a node whose THP mode is `madvise`
//! (the common distribution default) every touched 2 MiB of the arena then becomes
//! resident as a whole, which doubled `trainplace serve`'s idle RSS (23 MiB against
//! 12 MiB without; docs/performance-history.md, "Memory"). The RSS numbers come from
//! scripts/bench-compare.sh; this test checks the cause: no mapping of a running
//! server, after it answered over its real sockets, carries the `hg` (MADV_HUGEPAGE)
//! flag in /proc/PID/smaps.
#![cfg(target_os = "linux")]

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{free_addrs, spawn_serve};

/// One plain HTTP/1.0 GET on the probe port; the status line, or None when the
/// port does not answer yet.
fn get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.lines().next().map(str::to_string)
}

#[test]
fn serve_does_not_advise_huge_pages() {
    let [addr, probe] = free_addrs::<2>();
    let server = spawn_serve(addr, probe, &[]);
    let started = std::time::Instant::now();
    while !get(probe, "/readyz").is_some_and(|s| s.contains(" 200 ")) {
        assert!(
            started.elapsed() < common::PATIENCE,
            "trainplace serve never became ready on {probe}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    // Allocate through the server: a metrics scrape renders every family.
    for _ in 0..20 {
        let status = get(probe, "/metrics").expect("metrics answer");
        assert!(status.contains(" 200 "), "{status}");
    }
    let smaps = std::fs::read_to_string(format!("/proc/{}/smaps", server.0.id()))
        .expect("smaps of the server");
    let mut mapping = "";
    let mut advised = Vec::new();
    for line in smaps.lines() {
        if line
            .split_whitespace()
            .next()
            .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
        {
            mapping = line;
        } else if let Some(flags) = line.strip_prefix("VmFlags:")
            && flags.split_whitespace().any(|f| f == "hg")
        {
            advised.push(mapping);
        }
    }
    assert!(
        advised.is_empty(),
        "mappings advised for transparent huge pages (MADV_HUGEPAGE): {advised:?}"
    );
}
