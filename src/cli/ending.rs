//! `trainplace audit --ending-within 6h`: running jobs on Capacity Blocks that end
//! within the window, as a table section and as PolicyReport results.

use jiff::Timestamp;
use serde_json::{Value, json};
use trainplace_engine::EndingJob;

/// The table section (printed after the audit's own table).
pub fn table(jobs: &[EndingJob], within: jiff::SignedDuration, now: Timestamp) -> String {
    let mut out = format!(
        "\nJOBS ON CAPACITY BLOCKS ENDING WITHIN {} (as of {now})\n",
        hours(within.as_secs_f64())
    );
    if jobs.is_empty() {
        out.push_str("none\n");
        return out;
    }
    out.push_str(&format!(
        "{:<16} {:<36} {:<5} {:<22} {:<21} {:<21} {}\n",
        "NAMESPACE", "JOB", "PODS", "BLOCK", "ENDS", "PODS STOP", "LEFT"
    ));
    for j in jobs {
        out.push_str(&format!(
            "{:<16} {:<36} {:<5} {:<22} {:<21} {:<21} {}\n",
            j.namespace,
            format!("{} {}", j.kind, j.job),
            j.pods.len(),
            j.reservation,
            j.ends.to_string(),
            j.stops.to_string(),
            hours(j.left(now).as_secs_f64()),
        ));
    }
    out
}

fn hours(seconds: f64) -> String {
    format!("{:.1}h", seconds / 3600.0)
}

/// One PolicyReport result per job: rule `capacity-block-ends`, result `warn`, the
/// job's pods as resources.
pub fn results(jobs: &[EndingJob], now: Timestamp) -> Vec<Value> {
    jobs.iter()
        .map(|j| {
            let resources: Vec<Value> = j
                .pods
                .iter()
                .zip(&j.pod_uids)
                .map(|(name, uid)| {
                    json!({"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": j.namespace, "uid": uid})
                })
                .collect();
            json!({"policy": "trainplace", "rule": "capacity-block-ends", "result": "warn", "severity": "high",
                "message": j.message(now),
                "properties": {"reservation": j.reservation, "ends": j.ends.to_string(), "podsStop": j.stops.to_string(),
                    "secondsLeft": j.left(now).as_secs().to_string()},
                "resources": resources})
        })
        .collect()
}
