//! Finds the NCCL record inside one log line, whatever was printed in front of it.
//!
//! `kubectl logs --prefix` adds `[pod/name/container] `, `--timestamps` adds an RFC 3339
//! stamp, torchrun adds `[default0]:` or `[rank0]:`. NCCL's own prefix
//! `host:pid:tid [dev] NCCL INFO` is therefore searched for, not anchored.

use std::sync::LazyLock;

use regex::Regex;

static NCCL_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<host>[A-Za-z0-9][A-Za-z0-9._-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL (?P<level>INFO|WARN|TRACE) ?(?P<msg>.*)$",
    )
    .expect("static regex")
});

static ANSI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]").expect("static regex"));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Info,
    Warn,
    Trace,
}

/// One `NCCL INFO|WARN` record; borrowed from the input so parsing allocates little.
#[derive(Debug, Clone)]
pub(crate) struct NcclLine<'a> {
    /// 1-based line number in the input.
    pub line_no: usize,
    pub raw: &'a str,
    pub host: &'a str,
    pub pid: u32,
    pub dev: u32,
    pub level: Level,
    pub msg: &'a str,
}

impl<'a> NcclLine<'a> {
    pub(crate) fn parse(line_no: usize, raw: &'a str) -> Option<Self> {
        if !raw.contains(" NCCL ") {
            return None;
        }
        let caps = NCCL_PREFIX.captures(raw)?;
        let level = match &caps["level"] {
            "WARN" => Level::Warn,
            "TRACE" => Level::Trace,
            _ => Level::Info,
        };
        Some(Self {
            line_no,
            raw,
            host: caps.name("host")?.as_str(),
            pid: caps["pid"].parse().ok()?,
            dev: caps["dev"].parse().ok()?,
            level,
            msg: caps.name("msg")?.as_str().trim_end(),
        })
    }
}

/// Drops terminal colour and underline escapes some tools print even into pipes.
pub(crate) fn strip_ansi(text: &str) -> std::borrow::Cow<'_, str> {
    ANSI.replace_all(text, "")
}

/// The text after a `kubectl logs --prefix` / timestamp prefix, for lines that are not NCCL
/// records (environment dumps, nccl-tests tables).
pub(crate) fn strip_log_prefix(raw: &str) -> &str {
    let mut rest = raw.trim_start();
    if let Some(end) = rest.find("] ").filter(|_| rest.starts_with("[pod/")) {
        rest = &rest[end + 2..];
    }
    if let Some(space) = rest.find(' ').filter(|_| looks_like_timestamp(rest)) {
        rest = &rest[space + 1..];
    }
    rest
}

/// `pod/NAME/container` from a `kubectl logs --prefix` line.
pub(crate) fn pod_prefix(raw: &str) -> Option<&str> {
    let rest = raw.trim_start().strip_prefix('[')?;
    let end = rest.find("] ")?;
    rest.starts_with("pod/").then(|| &rest[..end])
}

fn looks_like_timestamp(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() > 19
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_record_behind_kubectl_and_torchrun_prefixes() {
        let raw = "[pod/job-0-0-abc/trainer] 2026-01-07T09:10:00.123456789Z [default0]:host-a.ec2.internal:188:585 [3] NCCL INFO Using network Libfabric";
        let line = NcclLine::parse(7, raw).expect("nccl line");
        assert_eq!(line.host, "host-a.ec2.internal");
        assert_eq!(line.pid, 188);
        assert_eq!(line.dev, 3);
        assert_eq!(line.msg, "Using network Libfabric");
    }

    #[test]
    fn ignores_other_lines() {
        assert!(NcclLine::parse(1, "MA 0.0 GB Max_MA 0.0 GB").is_none());
        assert!(NcclLine::parse(1, "NCCL INFO without prefix").is_none());
    }

    #[test]
    fn strips_prefixes_for_plain_lines() {
        assert_eq!(
            strip_log_prefix("[pod/p/c] 2026-01-07T09:10:00Z export FI_PROVIDER=efa"),
            "export FI_PROVIDER=efa"
        );
        assert_eq!(strip_ansi("\u{1b}[4mGPU0\u{1b}[0m"), "GPU0");
        assert_eq!(pod_prefix("[pod/p/c] GPU 0: x"), Some("pod/p/c"));
        assert_eq!(pod_prefix("[default0]:host:1:2 [0] NCCL INFO x"), None);
    }
}
