//! The `Channel NN/c : src[dev] -> dst[dev] [send] via TRANSPORT` connection lines.
//!
//! NCCL 2.18 prints the bus id in the brackets (`0[101c0]`), 2.19+ the device index
//! (`3[3]`), which with one process per GPU is the local rank. Both are accepted. Also the
//! `NET/Plugin` line that says no external net plugin loaded (why NET is Socket or IB).

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

static CHANNEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^Channel (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)\[(?P<stag>[0-9a-fA-Fx]+)\] -> (?P<dst>\d+)\[(?P<dtag>[0-9a-fA-Fx]+)\](?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$",
    )
    .expect("static regex")
});

static NET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^NET/(?P<plugin>[^/]+)(?:/(?P<dev>\d+)(?:\(\d+\))?)?(?P<rest>(?:/.*)?)$")
        .expect("static regex")
});

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportClass {
    /// GPU to GPU inside one process group on a host: NVLink or PCIe.
    P2p,
    /// Through host memory: P2P was not possible or not allowed.
    Shm,
    /// EFA through the aws-ofi-nccl plugin.
    NetEfa,
    NetIb,
    /// Plain TCP: the slowest path, EFA not in use.
    NetSocket,
    NetOther,
    Other,
}

impl TransportClass {
    pub(crate) fn is_net(self) -> bool {
        matches!(
            self,
            Self::NetEfa | Self::NetIb | Self::NetSocket | Self::NetOther
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Transport {
    pub class: TransportClass,
    /// As NCCL printed it, e.g. `P2P/CUMEM/read`, `NET/Libfabric/0/GDRDMA`.
    pub label: String,
    /// P2P in read mode (`/read`): normal for A100 NVLink, NCCL's default there.
    pub read: bool,
    /// GPUDirect RDMA: the NIC reads GPU memory without a bounce through host memory.
    pub gdr: bool,
}

impl Transport {
    pub(crate) fn classify(via: &str) -> Self {
        let label = via.trim().to_string();
        let read = label.split('/').any(|part| part == "read");
        if let Some(caps) = NET.captures(&label) {
            let plugin = caps["plugin"].trim();
            let gdr = caps["rest"].contains("GDRDMA");
            let class = match plugin {
                "Socket" => TransportClass::NetSocket,
                "IB" => TransportClass::NetIb,
                p if p.contains("Libfabric") || p.contains("OFI") || p.contains("EFA") => {
                    TransportClass::NetEfa
                }
                _ => TransportClass::NetOther,
            };
            return Self {
                class,
                label,
                read: false,
                gdr,
            };
        }
        let class = if label.starts_with("P2P/") || label == "P2P" {
            TransportClass::P2p
        } else if label.starts_with("SHM") {
            TransportClass::Shm
        } else {
            TransportClass::Other
        };
        Self {
            class,
            label,
            read,
            gdr: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Direction {
    Send,
    Receive,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Connection {
    pub channel: u32,
    pub src: u32,
    /// Device index of the source (2.19+), `None` when NCCL printed a bus id.
    pub src_local: Option<u32>,
    pub dst: u32,
    pub dst_local: Option<u32>,
    pub direction: Option<Direction>,
    pub transport: Transport,
}

impl Connection {
    pub(crate) fn parse(msg: &str) -> Option<Self> {
        let caps = CHANNEL.captures(msg)?;
        let direction = caps.name("dir").map(|dir| match dir.as_str() {
            "send" => Direction::Send,
            _ => Direction::Receive,
        });
        Some(Self {
            channel: caps["ch"].parse().ok()?,
            src: caps["src"].parse().ok()?,
            src_local: local_index(&caps["stag"]),
            dst: caps["dst"].parse().ok()?,
            dst_local: local_index(&caps["dtag"]),
            direction,
            transport: Transport::classify(&caps["via"]),
        })
    }

    /// The rank that printed the line: the receiver logs `[receive]`, everyone else sends.
    pub(crate) fn printing_rank(&self) -> u32 {
        match self.direction {
            Some(Direction::Receive) => self.dst,
            _ => self.src,
        }
    }
}

/// NCCL's "no external net plugin" line, as 2.18-2.27 print it:
/// `NET/Plugin : No plugin found (libnccl-net.so), using internal implementation` (2.18/2.19),
/// `NET/Plugin: No plugin found (libnccl-net.so)` (2.20-2.22),
/// `NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.` (2.23+).
pub(crate) fn net_plugin_missing(msg: &str) -> bool {
    msg.starts_with("NET/Plugin")
        && (msg.contains("Could not find: libnccl-net") || msg.contains("No plugin found"))
}

/// Bus ids are hex and large (`101c0`); device indices are small decimals.
fn local_index(tag: &str) -> Option<u32> {
    tag.parse::<u32>().ok().filter(|index| *index < 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_labels_keep_device_and_gdr() {
        let t = Transport::classify("NET/Libfabric/0/GDRDMA");
        assert_eq!((t.class, t.gdr), (TransportClass::NetEfa, true));
        let t = Transport::classify("NET/AWS Libfabric/1");
        assert_eq!((t.class, t.gdr), (TransportClass::NetEfa, false));
        let t = Transport::classify("NET/IB/0(1)/GDRDMA");
        assert_eq!((t.class, t.gdr), (TransportClass::NetIb, true));
        assert_eq!(
            Transport::classify("NET/Socket/0").class,
            TransportClass::NetSocket
        );
    }

    #[test]
    fn p2p_read_mode_is_seen() {
        let t = Transport::classify("P2P/CUMEM/read");
        assert_eq!((t.class, t.read), (TransportClass::P2p, true));
        let t = Transport::classify("P2P/direct pointer");
        assert_eq!((t.class, t.read), (TransportClass::P2p, false));
    }

    #[test]
    fn old_bus_id_brackets_parse() {
        let c = Connection::parse("Channel 00 : 0[101c0] -> 1[101d0] via P2P/IPC/read")
            .expect("connection");
        assert_eq!((c.src, c.dst, c.src_local), (0, 1, None));
    }

    #[test]
    fn missing_net_plugin_lines_of_every_nccl_version() {
        for msg in [
            "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file \
             or directory No plugin found (libnccl-net.so), using internal implementation",
            "NET/Plugin : No plugin found, using internal implementation",
            "NET/Plugin: No plugin found (libnccl-net.so)",
            "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.",
            "NET/Plugin: Could not find: libnccl-net-ofi.so. Using internal network plugin.",
        ] {
            assert!(net_plugin_missing(msg), "{msg}");
        }
        for msg in [
            "NET/Plugin: Loaded net plugin Libfabric (v9)",
            "PROFILER/Plugin: Could not find: libnccl-profiler.so.",
            "TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.",
        ] {
            assert!(!net_plugin_missing(msg), "{msg}");
        }
    }
}
