//! A command's output on stdout and its messages on stderr.
//!
//! A reader that closes early (`trainplace policy export --format vap | head -1`) ends
//! the command quietly: Rust ignores SIGPIPE, so the write fails with `BrokenPipe`,
//! [`print()`] returns [`StdoutClosed`], and `main` exits 0 with no message, as ripgrep
//! does. The reader took what it wanted; a `set -o pipefail` script piping into `head`
//! or `grep -q` does not fail because of it. Any other write error (a full disk) is an
//! error.
//!
//! Messages on stderr go through [`stderr`], which drops a failed write: with
//! `2>&1 | head -1` stderr is the closed pipe too, and there is nowhere left to report
//! it (`eprintln!` would panic and exit 101).

use std::fmt;
use std::io::{self, Write};

/// Stdout's reader closed before the command finished writing.
#[derive(Debug)]
pub struct StdoutClosed;

impl fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for StdoutClosed {}

/// Write `text` to stdout and flush it; [`StdoutClosed`] when the reader has gone.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(error) => Err(anyhow::Error::new(error).context("writing to stdout")),
    }
}

/// Whether a command ended because stdout's reader closed (see the module comment).
pub fn stdout_closed(error: &anyhow::Error) -> bool {
    error.downcast_ref::<StdoutClosed>().is_some()
}

/// Write to stderr, dropping a failed write; `stderr!` adds the newline.
pub fn stderr(text: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(text);
}
