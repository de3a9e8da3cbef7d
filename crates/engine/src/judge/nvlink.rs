//! Rules for instances whose NVLink domain spans several of them (GB200 NVL72, up to
//! 18 x p6e-gb200.36xlarge): one pod per instance is still right, and the job's ranks
//! reach the other instances' GPUs over NVLink only with a ComputeDomain's IMEX channel
//! and all pods in one domain (clique). What NVIDIA's DRA driver and the upstream
//! GB200 nccl-tests sample wire: a ComputeDomain, its channel ResourceClaimTemplate in
//! the pod's `resourceClaims`, the claim in the container's `resources.claims`, pod
//! affinity on `nvidia.com/gpu.clique`.
//! <https://github.com/NVIDIA/k8s-dra-driver-gpu> (ComputeDomain CRD, demo/specs/imex)

use crate::facts::policy::Mode;
use crate::judge::classify::Shape;
use crate::judge::finding::{Finding, Rule};
use crate::judge::rules::{RuleInput, count, count64};
use crate::read::annotations::LABEL_CLIQUE;
use trainplace_catalog::InstanceProfile;

pub(crate) fn check(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    let Some(domain) = inst.nvlink_domain() else {
        return;
    };
    if !s.multi_pod || s.per_pod == 0 {
        return;
    }
    let site = &input.view.base;
    let warn = |found: String, fix: String| Finding {
        rule: Rule::NvlinkDomain,
        mode: Mode::Warn,
        site: site.clone(),
        found,
        fix,
        opt_in: None,
        why: None,
    };
    out.extend(clique_too_big(s, inst, domain, site));
    let Some(channel) = &s.channel else {
        // A claim that could not be read may be the channel: device-claims names it.
        if !input.view.devices.unresolved.is_empty() {
            return;
        }
        out.push(warn(
            format!(
                "the pod claims no IMEX channel on {}: NCCL cannot reach the other instances' GPUs over the NVLink domain (multi-node NVLink needs IMEX) and talks over EFA.",
                inst.name
            ),
            "create a ComputeDomain (resource.nvidia.com/v1beta1, NVIDIA DRA driver), name its spec.channel.resourceClaimTemplate in the pod's resourceClaims and list that claim in the container's resources.claims (the upstream GB200 nccl-tests sample does so).".into(),
        ));
        return;
    };
    if !channel.used {
        out.push(warn(
            format!(
                "the pod claims the IMEX channel {:?} but no container lists it in resources.claims, so no container gets the channel and NCCL cannot use the NVLink domain across instances.",
                channel.claim
            ),
            format!(
                "add `claims: [{{name: {}}}]` to the resources of the container that runs NCCL.",
                channel.claim
            ),
        ));
    }
    if let (Some(d), Some(pods)) = (&channel.domain, s.pods)
        && d.num_nodes > 0
        && d.num_nodes != pods
    {
        out.push(warn(
            format!(
                "ComputeDomain {} has numNodes {} but the job runs {} (one per instance): with the driver's IMEXDaemonsWithDNSNames gate off, pods wait for numNodes IMEX daemons, or more nodes than numNodes join it.",
                d.name,
                d.num_nodes,
                count(pods, "pod")
            ),
            format!(
                "set numNodes: {pods}, or 0 (the default and upstream recommendation with IMEXDaemonsWithDNSNames; the field is deprecated)."
            ),
        ));
    }
}

/// More GPUs than one NVLink domain holds, all required in one clique: the pods beyond
/// it are never scheduled.
fn clique_too_big(
    s: &Shape<'_>,
    inst: &InstanceProfile,
    domain: u32,
    site: &str,
) -> Option<Finding> {
    let domain_gpus = u64::from(domain) * u64::from(inst.accelerators);
    let pods = s.pods?;
    let total = u64::from(pods) * u64::from(s.per_pod);
    (s.clique_held && total > domain_gpus).then(|| Finding {
        rule: Rule::ImpossibleRequest,
        mode: Mode::Enforce,
        site: site.to_string(),
        found: format!(
            "a required pod affinity on {LABEL_CLIQUE} holds {} ({}) in one NVLink domain, which has at most {} ({} x {}); the pods beyond it stay Pending.",
            count(pods, "pod"),
            count64(total, "GPU"),
            count64(domain_gpus, "GPU"),
            count(domain, "instance"),
            inst.name
        ),
        fix: format!(
            "remove the {LABEL_CLIQUE} affinity (ranks in different domains then talk over EFA), or use at most {} per job.",
            count(domain, "instance")
        ),
        opt_in: None,
        why: None,
    })
}
