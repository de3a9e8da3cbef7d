//! Environment variables the log shows, and who set them.
//!
//! NCCL prints `NCCL_X set by environment to V` for every variable it reads, whoever set
//! it. aws-ofi-nccl prints `NET/OFI Adding X=V to environment` for what it sets itself and
//! never overrides the user, so a variable the plugin added was not set by the user.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::line::strip_log_prefix;

static NCCL_SET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<name>(?:NCCL|FI|RDMAV)_[A-Z0-9_]+) set by environment to (?P<value>.*?)\.?$")
        .expect("static regex")
});

static PLUGIN_SET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^NET/OFI (?:Adding (?P<n1>[A-Z0-9_]+)=(?P<v1>\S*) to environment|Setting (?P<n2>(?:NCCL|FI)_[A-Z0-9_]+) to "?(?P<v2>[^"\s]*)"?)"#,
    )
    .expect("static regex")
});

/// `env` dumps and `set -x` traces that training scripts print before starting.
static SHELL_SET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:\+\s*)?(?:export\s+)?(?P<name>(?:NCCL|FI|RDMAV)_[A-Z0-9_]+)=(?P<value>\S*)\s*$",
    )
    .expect("static regex")
});

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvSource {
    User,
    Plugin,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvSetting {
    pub name: String,
    pub value: String,
    pub source: EnvSource,
    pub line: usize,
    /// The input line, kept for evidence.
    #[serde(skip)]
    pub raw: String,
}

/// A single `name=value` observation before we know who set it.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub name: String,
    pub value: String,
    pub by_plugin: bool,
    pub line: usize,
    pub raw: String,
}

/// Reads an NCCL record's message (after the `NCCL INFO` prefix).
pub(crate) fn from_nccl_msg(line: usize, raw: &str, msg: &str) -> Option<Observed> {
    if let Some(caps) = PLUGIN_SET.captures(msg) {
        let name = caps.name("n1").or(caps.name("n2"))?.as_str().to_string();
        let value = caps.name("v1").or(caps.name("v2"))?.as_str().to_string();
        return Some(Observed {
            name,
            value,
            by_plugin: true,
            line,
            raw: raw.to_string(),
        });
    }
    let caps = NCCL_SET.captures(msg)?;
    Some(Observed {
        name: caps["name"].to_string(),
        value: caps["value"].trim().to_string(),
        by_plugin: false,
        line,
        raw: raw.to_string(),
    })
}

/// Reads a line that is not an NCCL record, e.g. `export FI_PROVIDER=efa`.
pub(crate) fn from_plain_line(line: usize, raw: &str) -> Option<Observed> {
    let caps = SHELL_SET.captures(strip_log_prefix(raw).trim())?;
    Some(Observed {
        name: caps["name"].to_string(),
        value: caps["value"].trim_matches(['"', '\'']).to_string(),
        by_plugin: false,
        line,
        raw: raw.to_string(),
    })
}

/// One entry per variable: the plugin wins when it added the variable, since it only adds
/// what the user left unset; otherwise the first sighting is kept for its line number.
pub(crate) fn settle(observed: Vec<Observed>) -> Vec<EnvSetting> {
    let mut settled: Vec<EnvSetting> = Vec::new();
    for item in observed {
        let source = if item.by_plugin {
            EnvSource::Plugin
        } else {
            EnvSource::User
        };
        match settled.iter_mut().find(|known| known.name == item.name) {
            Some(known) if source == EnvSource::Plugin && known.source == EnvSource::User => {
                known.source = EnvSource::Plugin;
                known.line = item.line;
                known.raw = item.raw;
            }
            Some(_) => {}
            None => settled.push(EnvSetting {
                name: item.name,
                value: item.value,
                source,
                line: item.line,
                raw: item.raw,
            }),
        }
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_added_variable_is_not_the_users() {
        let observed = vec![
            from_nccl_msg(1, "", "NET/OFI Adding NCCL_PROTO=simple to environment").unwrap(),
            from_nccl_msg(2, "", "NCCL_PROTO set by environment to simple").unwrap(),
            from_nccl_msg(3, "", "NCCL_BUFFSIZE set by environment to 8388608.").unwrap(),
        ];
        let settled = settle(observed);
        assert_eq!(settled[0].source, EnvSource::Plugin);
        assert_eq!(settled[1].value, "8388608");
        assert_eq!(settled[1].source, EnvSource::User);
    }

    #[test]
    fn shell_exports_are_user_settings() {
        let seen = from_plain_line(4, "+ export FI_EFA_USE_DEVICE_RDMA=1").unwrap();
        assert_eq!(
            (seen.name.as_str(), seen.value.as_str()),
            ("FI_EFA_USE_DEVICE_RDMA", "1")
        );
        assert!(from_plain_line(5, "NET/OFI Adding FI_EFA_FORK_SAFE=1 to environment").is_none());
    }
}
