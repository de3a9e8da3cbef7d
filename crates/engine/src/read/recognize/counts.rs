//! Counts on a launcher's command line or in its env: literal numbers, shell variables,
//! elastic ranges, host lists, and processes per node bounded by the pod's accelerators.

use super::{Env, JobSize};

/// Processes spread over pods of `per_pod` accelerators, one process per accelerator.
/// A per-node process count above the pod's accelerators cannot fit: the pod's
/// real count bounds it.
pub(super) fn per_pods(procs: JobSize, per_pod: u32, per_node: Option<u32>) -> JobSize {
    match procs {
        JobSize::Pods(p) => JobSize::Pods(p.div_ceil(per_node_of(per_node, per_pod))),
        JobSize::Several => JobSize::Several,
    }
}

fn per_node_of(per_node: Option<u32>, per_pod: u32) -> u32 {
    match (per_node, per_pod) {
        (Some(n), 0) => n,
        (Some(n), g) => n.min(g),
        (None, g) => g,
    }
    .max(1)
}

/// `PET_NPROC_PER_NODE` or the like, bounded by the pod's accelerators.
pub(super) fn per_node(text: Option<&str>, per_pod: u32) -> u32 {
    per_node_of(text.and_then(|t| t.trim().parse().ok()), per_pod)
}

/// `host1:4,host2:4` or `host1,host2`: one pod per distinct host.
pub(super) fn host_list(hosts: &str) -> JobSize {
    let mut names: Vec<&str> = hosts
        .split(',')
        .map(|h| h.split(':').next().unwrap_or(h))
        .filter(|h| !h.is_empty())
        .collect();
    names.sort_unstable();
    names.dedup();
    JobSize::Pods(u32::try_from(names.len()).unwrap_or(u32::MAX))
}

/// A node count: `N` or an elastic range `MIN:MAX` (the maximum bounds the job).
pub(super) fn node_count(text: &str, env: &Env<'_>) -> JobSize {
    count(text.rsplit(':').next().unwrap_or(text), env)
}

/// srun's node count: `N`, a range `MIN-MAX`, or a list of the counts it accepts
/// (`1,4,8`): the largest bounds the job; any part not a literal number is several.
/// <https://slurm.schedmd.com/srun.html#OPT_nodes>
pub(super) fn slurm_nodes(text: &str, env: &Env<'_>) -> JobSize {
    text.split([',', '-'])
        .filter(|part| !part.trim().is_empty())
        .map(|part| count(part, env))
        .reduce(JobSize::max)
        .unwrap_or(JobSize::Several)
}

/// A literal count; a shell variable from the container's env (`$N`, `${N}`); else
/// several: an unexpanded `$(VAR)` reference or a `$(...)` substitution (read as the
/// word `$`) is a count trainplace cannot derive, never one pod. `-1` reads as the
/// largest count (callers that give it a meaning check).
pub(super) fn count(text: &str, env: &Env<'_>) -> JobSize {
    let text = text.trim();
    let resolved = match text.strip_prefix('$') {
        Some(var) => {
            let name = var
                .strip_prefix('{')
                .and_then(|v| v.strip_suffix('}'))
                .unwrap_or(var);
            env.literal(name).unwrap_or(text)
        }
        None => text,
    };
    if resolved.trim() == "-1" {
        return JobSize::Pods(u32::MAX);
    }
    resolved
        .trim()
        .parse::<u32>()
        .map_or(JobSize::Several, JobSize::Pods)
}
