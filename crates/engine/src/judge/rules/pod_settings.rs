//! The pod's own settings: DRA claims that could not be counted, host networking
//! without cluster DNS, a /dev/shm larger than the memory limit.

use super::input::RuleInput;
use crate::facts::policy::Mode;
use crate::judge::finding::{Finding, Rule};
use crate::read::podspec::PodView;
use crate::read::quantity::parse_bytes;

/// DRA claims trainplace could not count (a template not in the input or the cluster,
/// a device class the catalog does not know): say so instead of passing the devices
/// unseen.
pub(super) fn device_claims(input: &RuleInput<'_>, out: &mut Vec<Finding>) {
    let v = input.view;
    let unresolved = &v.devices.unresolved;
    if unresolved.is_empty() {
        return;
    }
    let checked = if input.shape.per_pod > 0 {
        "the layout was checked on what was counted"
    } else {
        "one-pod-per-node and partial-node were not checked"
    };
    out.push(Finding {
        rule: Rule::DeviceClaims,
        mode: input.eff.mode_device_claims(),
        site: v.base.clone(),
        found: format!(
            "the training pod's DRA resourceClaim(s) could not be counted ({}); {checked}.",
            unresolved.join("; ")
        ),
        fix: "submit the ResourceClaimTemplates (and ComputeDomains) with the workload (the same input, or resourceclaimtemplates.json / computedomains.json in --cluster DIR; the webhook reads them from the cluster), with device classes of the catalog's deviceClasses; a platform team can set rules.deviceClaims: enforce to refuse such jobs.".into(),
        opt_in: None,
        why: None,
    });
}

pub(super) fn host_network(input: &RuleInput<'_>, out: &mut Vec<Finding>) {
    let v = input.view;
    if v.spec_bool("hostNetwork") != Some(true) {
        return;
    }
    let dns = v.spec_str("dnsPolicy");
    if dns == Some("ClusterFirstWithHostNet") {
        return;
    }
    // The pod runs; it resolves names through the node's resolv.conf, so a rendezvous
    // address that is a Service name does not resolve. A warning, not a denial.
    out.push(Finding {
        rule: Rule::HostNetworkDns,
        mode: Mode::Warn,
        site: v.base.clone(),
        found: format!(
            "hostNetwork: true with dnsPolicy {}: the pod resolves names through the node, not cluster DNS, so a Service name as rendezvous address (MASTER_ADDR) does not resolve.",
            dns.unwrap_or("unset (ClusterFirst)")
        ),
        fix: "set dnsPolicy: ClusterFirstWithHostNet, or drop hostNetwork (EFA does not need it).".into(),
        opt_in: None,
        why: None,
    });
}

/// A memory-backed /dev/shm larger than a GPU container's memory limit: tmpfs pages
/// count against the limit, so filling /dev/shm gets the container OOM-killed.
/// `planned` is the size trainplace writes when the pod has no /dev/shm of its own.
pub(crate) fn shm_memory(view: &PodView<'_>, planned: Option<&str>, out: &mut Vec<Finding>) {
    for c in view.device_containers() {
        // Its own /dev/shm (a memory emptyDir with a size), or the one trainplace adds
        // when it mounts none; a hostPath or disk-backed /dev/shm is not counted.
        let shm = if view.mounts_shm(c.index) {
            view.shm_size_limit(c.index)
        } else {
            planned
        };
        let (Some(shm), Some(limit)) = (shm, view.memory_limit(c.index)) else {
            continue;
        };
        let (Ok(shm_bytes), Ok(limit_bytes)) = (parse_bytes(shm), parse_bytes(limit)) else {
            continue;
        };
        if shm_bytes <= limit_bytes {
            continue;
        }
        out.push(Finding {
            rule: Rule::ShmMemory,
            mode: Mode::Warn,
            site: format!("{}.containers[{}]", view.base, c.index),
            found: format!(
                "container {}: /dev/shm is memory-backed with sizeLimit {shm} but the memory limit is {limit}; what NCCL and data loaders write to /dev/shm counts against that limit, so filling it gets the container OOM-killed.",
                c.name
            ),
            fix: format!(
                "raise resources.limits.memory above {shm} plus what the processes need, or lower {} / the volume's sizeLimit.",
                crate::read::annotations::SHM_SIZE
            ),
            opt_in: None,
            why: None,
        });
    }
}
