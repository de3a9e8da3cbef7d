//! The size fields to set for the reshaped pod count, per kind.

use serde_json::{Value, json};

use super::refusal::refuse;
use super::sites::GpuSite;
use crate::judge::rules::count;
use crate::judge::verdict::Verdict;
use crate::read::json::Lookup as _;
use crate::read::workload::Kind;

/// The size fields to set for `new_pods`, per kind.
pub(super) fn distribute(
    object: &Value,
    kind: Kind,
    sites: &[GpuSite<'_>],
    new_pods: u32,
    big: u32,
    verdict: &mut Verdict,
) -> Option<Vec<(String, Value)>> {
    let field = &sites[0].site.field;
    match kind {
        Kind::Job => {
            let mut out = vec![("/spec/parallelism".to_string(), json!(new_pods))];
            if object.lookup("/spec/completions").is_some() {
                out.push(("/spec/completions".to_string(), json!(new_pods)));
            }
            Some(out)
        }
        Kind::JobSet => jobset(sites, new_pods, verdict),
        Kind::PyTorchJob => pytorch_job(sites, new_pods, big, verdict),
        Kind::MpiJob => mpi_job(sites, new_pods, big, verdict),
        Kind::LeaderWorkerSet => {
            refuse(
                verdict,
                field,
                "reshape is not supported for this kind: its groups are model replicas.".into(),
                "set size and GPUs per pod by hand.".into(),
            );
            None
        }
        _ => {
            refuse(
                verdict,
                field,
                format!(
                    "reshape is not supported for a {}: its sizes and launcher settings are not rewritten.",
                    kind.metric_label()
                ),
                "set the pod count and GPUs per pod by hand.".into(),
            );
            None
        }
    }
}

/// Whether the job has one GPU template, as kinds with one size field need.
fn one_site(sites: &[GpuSite<'_>], verdict: &mut Verdict) -> bool {
    if sites.len() == 1 {
        return true;
    }
    refuse(
        verdict,
        &sites[0].site.field,
        "reshape of several GPU templates is not supported for this kind.".into(),
        "reshape by hand.".into(),
    );
    false
}

/// A JobSet: its replicas, or its Job's parallelism and completions, whichever is not 1.
fn jobset(
    sites: &[GpuSite<'_>],
    new_pods: u32,
    verdict: &mut Verdict,
) -> Option<Vec<(String, Value)>> {
    if !one_site(sites, verdict) {
        return None;
    }
    let knobs = &sites[0].site.knobs;
    let (replicas, parallelism) = (&knobs[0], &knobs[1]);
    if parallelism.value == 1 {
        Some(vec![(replicas.pointer.clone(), json!(new_pods))])
    } else if replicas.value == 1 {
        let completions = parallelism.pointer.replace("/parallelism", "/completions");
        Some(vec![
            (parallelism.pointer.clone(), json!(new_pods)),
            (completions, json!(new_pods)),
        ])
    } else {
        refuse(
            verdict,
            &sites[0].site.field,
            "both replicas and parallelism are above 1.".into(),
            "set one of them to 1, then reshape.".into(),
        );
        None
    }
}

/// A PyTorchJob: nprocPerNode, and the Worker replicas (the Master is one pod).
fn pytorch_job(
    sites: &[GpuSite<'_>],
    new_pods: u32,
    big: u32,
    verdict: &mut Verdict,
) -> Option<Vec<(String, Value)>> {
    let master = sites.iter().find(|s| s.site.pointer.contains("/Master/"));
    let worker = sites.iter().find(|s| s.site.pointer.contains("/Worker/"));
    // nprocPerNode is a string in the v1 CRD.
    let mut out = vec![("/spec/nprocPerNode".to_string(), json!(big.to_string()))];
    match (master, worker) {
        (Some(_), Some(w)) if new_pods >= 2 => {
            out.push((w.site.knobs[0].pointer.clone(), json!(new_pods - 1)))
        }
        (None, Some(w)) => out.push((w.site.knobs[0].pointer.clone(), json!(new_pods))),
        (Some(m), None) => out.push((m.site.knobs[0].pointer.clone(), json!(new_pods))),
        _ => {
            refuse(
                verdict,
                &sites[0].site.field,
                format!(
                    "the reshaped job has {} but Master and Worker both ask for GPUs.",
                    count(new_pods, "pod")
                ),
                "keep only the Master replica spec, then resubmit.".into(),
            );
            return None;
        }
    }
    Some(out)
}

/// An MPIJob: the Worker replicas and slotsPerWorker.
fn mpi_job(
    sites: &[GpuSite<'_>],
    new_pods: u32,
    big: u32,
    verdict: &mut Verdict,
) -> Option<Vec<(String, Value)>> {
    if !one_site(sites, verdict) || !sites[0].site.pointer.contains("/Worker/") {
        refuse(
            verdict,
            &sites[0].site.field,
            "only the Worker replica spec of an MPIJob can be reshaped.".into(),
            "move GPUs off the Launcher.".into(),
        );
        return None;
    }
    Some(vec![
        (sites[0].site.knobs[0].pointer.clone(), json!(new_pods)),
        ("/spec/slotsPerWorker".to_string(), json!(big)),
    ])
}
