//! PIN=1: the webhook and the load generator on the machine's last CPU, every other
//! process (the control plane, kwok, whatever else runs) on the others, so what churn
//! costs the webhook is measured apart from what it costs the control plane. Uses
//! taskset(1) (util-linux); processes that appear later are moved as they are seen, and
//! every process gets every CPU back when the run ends.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The machine's CPUs (not this process's affinity, which a pinning may have narrowed).
fn cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|r| r.trim().rsplit(['-', ',']).next()?.parse::<usize>().ok())
        .map_or(2, |last| last + 1)
}

/// Every process back on every CPU (at the end of the run; a run that is killed leaves
/// them pinned: `taskset -a -p -c 0-N PID` for each).
pub fn release() {
    let all = format!("0-{}", cpus() - 1);
    for pid in pids() {
        let _ = Command::new("taskset")
            .args(["-a", "-p", "-c", &all, &pid.to_string()])
            .output();
    }
}

/// Start pinning, twice a second, for the rest of the run; `webhook` is trainplace's pid.
pub fn start(webhook: u32) {
    let cpus = cpus();
    if cpus < 2 {
        eprintln!("PIN=1 needs 2 CPUs or more: not pinned");
        return;
    }
    let (own, rest) = (format!("{}", cpus - 1), format!("0-{}", cpus - 2));
    let ours: HashSet<u32> = [webhook, std::process::id()].into();
    std::thread::spawn(move || {
        let mut seen = HashSet::new();
        loop {
            for pid in pids() {
                if seen.insert(pid) {
                    let cpu = if ours.contains(&pid) { &own } else { &rest };
                    // Kernel threads bound to a CPU refuse: they are left where they are.
                    let _ = Command::new("taskset")
                        .args(["-a", "-p", "-c", cpu, &pid.to_string()])
                        .output();
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// CPU time (user + system) a process has used so far.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat"))
        .unwrap_or_default();
    // After the command name's closing parenthesis: fields 3.. ; utime and stime are
    // fields 14 and 15 (clock ticks of 1/100 s on Linux).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(14) + ticks(15)) * 10)
}
