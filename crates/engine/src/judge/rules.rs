//! Validation rules for one training pod template, evaluated on the mutated template
//! (what the validating webhook sees after the mutating one ran).

use crate::facts::catalog::InstanceProfile;
use crate::facts::policy::{Effective, Mode, OptIn};
use crate::judge::classify::{Shape, Target};
use crate::judge::finding::{Finding, Rule};
use crate::read::annotations::{
    ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, DRA_CLASS_EFA, LABEL_JOB, LABEL_ZONE, RES_EFA,
    RES_NVIDIA_GPU, RESHAPE,
};
use crate::read::podspec::PodView;
use crate::read::quantity::parse_bytes;

/// The measured cost of the wrong layout (docs/measurements.md: 4 x H200, NCCL all-reduce busbw).
/// What ranks on one node lose when they are separate pods, for the path they take:
/// with EFA, NET/Libfabric with GPUDirect RDMA over the pod's share of the node's
/// interfaces (the field notes' measurement of that path); without, TCP (the all-reduce
/// measurement of that path).
fn path_cost(inst: &InstanceProfile, efa: u32) -> String {
    let per_interface = inst
        .network_gbps
        .filter(|_| inst.max_efa > 0)
        .map(|n| f64::from(n) / f64::from(inst.max_efa));
    match per_interface {
        Some(gbps) if efa > 0 => {
            let share = gbps * f64::from(efa);
            format!(
                "ranks on one node talk over EFA (NET/Libfabric with GPUDirect RDMA, {efa} of the node's {} interfaces: {share:.0} Gbps, {:.0} GB/s, per pod) instead of {} (one pod with all its GPUs reached 338.7 GB/s all-reduce over NVLink on 4 x H200). Measured on this path: four 1-GPU pods with one EFA each on a p4d.24xlarge trained in 28:15, against 30:00 for one pod with the four GPUs whose NVLink ran P2P/CUMEM/read; that job was not bandwidth-bound (docs/measurements.md)",
                inst.max_efa,
                share / 8.0,
                inst.intra_node
            )
        }
        _ => format!(
            "ranks on one node talk over TCP instead of {} ({MEASURED})",
            inst.intra_node
        ),
    }
}

pub const MEASURED: &str = "measured on 4 x H200: one pod with all GPUs reaches 338.7 GB/s all-reduce over NVLink, 1-GPU pods ~3.3 GB/s over TCP, ~100x slower, with or without hostIPC; docs/measurements.md";

/// Whether an opt-in annotation is set, and whether the requester may use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptInState {
    Absent,
    Granted,
    Refused,
}

pub struct RuleInput<'a> {
    pub view: &'a PodView<'a>,
    pub shape: &'a Shape<'a>,
    pub eff: &'a Effective<'a>,
    pub partial_opt_in: OptInState,
    pub multi_az_opt_in: OptInState,
    /// Namespace and zones where pods of the same job are already bound (inventory).
    pub siblings: Option<&'a std::collections::BTreeSet<String>>,
    /// Why the job is held in no zone although trainplace would hold it.
    pub unheld: Option<Unheld>,
}

/// A multi-pod job that nothing holds in one zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unheld {
    /// No label ties its pods together, so no pod affinity can name them.
    NoIdentity,
    /// The object reached validation without the hold the mutating webhook writes.
    NotMutated,
}

pub fn check(input: &RuleInput<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let site = input.view.base.clone();
    match &input.shape.target {
        Target::Known(instance, _) => {
            impossible(input, instance, &mut out);
            partial_node(input, instance, &mut out);
        }
        Target::Unknown(name, src) => out.push(Finding {
            rule: Rule::UnknownInstanceType,
            mode: input.eff.mode_unknown_instance_type(),
            site: site.clone(),
            found: format!(
                "instance type {name:?} (from {}) is not in the instance catalog; no layout was applied.",
                src.describe()
            ),
            fix: "use a type from `trainplace policy instances`, or add it to an InstanceCatalog file in the policy directory.".into(),
            opt_in: None,
        }),
        Target::Several(types) => {
            out.push(Finding {
                rule: Rule::UnknownInstanceType,
                mode: Mode::Warn,
                site: site.clone(),
                found: format!(
                    "required node affinity allows several instance types ({}); no layout was applied.",
                    types.join(", ")
                ),
                fix: "pin one instance type so every pod gets the same GPU and EFA count.".into(),
                opt_in: None,
            });
            // The pods may land on any of them: the layout must hold on every one, so
            // each listed type is judged and what fails on any is reported.
            // Advice that depends on the one type (EFA counts) waits until it is pinned.
            let mut on_any = Vec::new();
            for name in types {
                if let Some(instance) = input.eff.policy.catalog.get(name) {
                    impossible(input, instance, &mut on_any);
                    partial_node(input, instance, &mut on_any);
                }
            }
            out.extend(on_any.into_iter().filter(|f| f.rule != Rule::EfaCount));
        }
        Target::None => out.push(Finding {
            rule: Rule::UnknownInstanceType,
            mode: input.eff.mode_unknown_instance_type(),
            site: site.clone(),
            found: "training pod selects no instance type; no layout was applied.".into(),
            fix: format!(
                "set nodeSelector {}, or annotation {}, or a policy defaults.instanceType.",
                crate::read::annotations::LABEL_INSTANCE_TYPE,
                crate::read::annotations::INSTANCE_TYPE
            ),
            opt_in: None,
        }),
    }
    device_claims(input, &mut out);
    multi_az(input, &mut out);
    host_network(input, &mut out);
    // `off` means the rule is not evaluated at all: no finding, no metric, no audit row.
    out.retain(|f| f.mode != Mode::Off);
    out
}

fn impossible_finding(site: &str, found: String, fix: String) -> Finding {
    Finding {
        rule: Rule::ImpossibleRequest,
        mode: Mode::Enforce,
        site: site.to_string(),
        found,
        fix,
        opt_in: None,
    }
}

fn impossible(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    let site = &input.view.base;
    let catalog = &input.eff.policy.catalog;
    let family = |r: &str| {
        catalog
            .family_of(r)
            .map(String::from)
            .unwrap_or_else(|| r.to_string())
    };
    if !s.accel_resource.is_empty()
        && family(&s.accel_resource) != family(&inst.accelerator_resource)
    {
        out.push(impossible_finding(
            site,
            format!(
                "the pod asks for {} but {} offers {}.",
                s.accel_resource, inst.name, inst.accelerator_resource
            ),
            format!(
                "request {} or pick an instance type with {}.",
                inst.accelerator_resource, s.accel_resource
            ),
        ));
        return;
    }
    if s.per_pod > inst.accelerators && !s.shared {
        out.push(impossible_finding(
            site,
            format!(
                "the pod asks for {} {}{} but {} has {}.",
                s.per_pod,
                inst.accelerator_resource,
                if s.accel_claimed { " (with its DRA claims)" } else { "" },
                inst.name,
                inst.accelerators
            ),
            format!(
                "ask for at most {} per pod and add pods (recommended: {} per pod, one pod per node).",
                inst.accelerators, inst.accelerators
            ),
        ));
    }
    if s.efa == 0 {
        no_efa(input, inst, out);
        return;
    }
    let asked = if s.efa_claimed {
        format!("{} EFA interfaces (with its DRA claims)", s.efa)
    } else {
        format!("{} {RES_EFA}", s.efa)
    };
    if !inst.has_efa() {
        out.push(impossible_finding(
            site,
            format!("the pod asks for {asked} but {} has no EFA.", inst.name),
            format!("remove {RES_EFA} or pick an EFA instance type."),
        ));
        return;
    }
    if s.efa > inst.max_efa {
        out.push(impossible_finding(
            site,
            format!(
                "the pod asks for {asked} but {} has {}.",
                inst.name, inst.max_efa
            ),
            format!(
                "ask for {} (all of them) with all {} GPUs.",
                inst.max_efa, inst.accelerators
            ),
        ));
        return;
    }
    efa_count(input, inst, out);
}

/// A pod of a multi-pod job on an EFA instance that gets no EFA interface (too few
/// GPUs for a share, or the EFA mutation is off): its inter-node traffic uses TCP.
fn no_efa(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    // A pod that takes part of a node without the opt-in already gets the partial-node
    // finding, whose fix (whole nodes) also brings EFA.
    let partial = s.per_pod < inst.accelerators || s.shared;
    let judged_otherwise = partial && input.partial_opt_in != OptInState::Granted;
    if !s.multi_pod
        || !inst.has_efa()
        || s.per_pod == 0
        || s.per_pod > inst.accelerators
        || judged_otherwise
    {
        return;
    }
    let (found, fix) = match &s.efa_resource_absent {
        // The webhook cannot add a claim (its template is a separate object): say how.
        Some(why) => (
            format!(
                "the pod gets no EFA on {}: {why}, so trainplace adds no {RES_EFA}; its traffic to the job's other nodes goes over TCP, not EFA.",
                inst.name
            ),
            format!(
                "claim EFA through DRA: a ResourceClaimTemplate with a request `exactly: {{deviceClassName: {DRA_CLASS_EFA}, allocationMode: All}}` (all {} interfaces for a pod with all {} GPUs; the driver pairs them with their GPUs), named in the pod's resourceClaims and the container's resources.claims (https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html).",
                inst.max_efa, inst.accelerators
            ),
        ),
        None => (
            format!(
                "the pod gets no {RES_EFA} on {}: its traffic to the job's other nodes goes over TCP, not EFA.",
                inst.name
            ),
            format!(
                "take whole nodes ({} GPUs and {} EFA per pod), or request at least {RES_EFA}: 1.",
                inst.accelerators, inst.max_efa
            ),
        ),
    };
    out.push(Finding {
        rule: Rule::EfaCount,
        mode: Mode::Warn,
        site: input.view.base.clone(),
        found,
        fix,
        opt_in: None,
    });
}

/// An EFA count the device plugin can grant (any count up to the node's) but that is
/// not the pod's share of the node: it runs, so it is a warning with the count to use.
fn efa_count(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    let warn = |found: String, fix: String| Finding {
        rule: Rule::EfaCount,
        mode: Mode::Warn,
        site: input.view.base.clone(),
        found,
        fix,
        opt_in: None,
    };
    if s.per_pod == 0 && s.accel_resource.is_empty() {
        out.push(warn(
            format!(
                "the pod asks for {} {RES_EFA} but no accelerators on {}, a GPU instance; EFA serves GPU traffic.",
                s.efa, inst.name
            ),
            format!(
                "request {} too, or drop {RES_EFA} if the pod does not use it.",
                inst.accelerator_resource
            ),
        ));
        return;
    }
    let share = efa_share(inst, s.per_pod);
    if s.efa == share || s.per_pod > inst.accelerators {
        return;
    }
    let effect = if s.efa > share {
        format!(
            "it holds interfaces that other pods on the node then cannot get (with {} of {} GPUs its share of {}'s {} EFA interfaces is {share})",
            s.per_pod, inst.accelerators, inst.name, inst.max_efa
        )
    } else {
        format!(
            "it leaves inter-node bandwidth unused (with {} of {} GPUs its share of {}'s {} EFA interfaces is {share})",
            s.per_pod, inst.accelerators, inst.name, inst.max_efa
        )
    };
    let (asked, fix) = if s.efa_claimed {
        (
            format!("{} EFA interfaces through its DRA claim", s.efa),
            format!(
                "claim {share} devices of class {DRA_CLASS_EFA} (allocationMode: All when the pod takes the whole node) unless this pod is alone on the node."
            ),
        )
    } else {
        (
            format!("{} {RES_EFA}", s.efa),
            format!(
                "request {RES_EFA}: {share} (requests = limits) unless this pod is alone on the node."
            ),
        )
    };
    out.push(warn(format!("the pod asks for {asked}: {effect}."), fix));
}

/// A pod's share of the node's EFA interfaces: proportional to its GPUs, rounded
/// down (0 when it holds too few GPUs for one interface).
pub(crate) fn efa_share_floor(inst: &InstanceProfile, per_pod: u32) -> u32 {
    let share = u64::from(inst.max_efa) * u64::from(per_pod) / u64::from(inst.accelerators.max(1));
    u32::try_from(share).unwrap_or(u32::MAX)
}

/// The count to recommend: the share, at least one.
fn efa_share(inst: &InstanceProfile, per_pod: u32) -> u32 {
    efa_share_floor(inst, per_pod).max(1)
}

fn partial_node(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    if s.per_pod == 0 || (s.per_pod >= inst.accelerators && !s.shared) {
        return;
    }
    let site = &input.view.base;
    let g = inst.accelerators;
    let slices;
    let what = if s.shared {
        slices = format!("{} slice", s.accel_resource);
        slices.as_str()
    } else if s.accel_resource == RES_NVIDIA_GPU {
        "GPU"
    } else {
        "accelerator"
    };
    if !s.multi_pod {
        out.push(Finding {
            rule: Rule::PartialNode,
            mode: Mode::Warn,
            site: site.clone(),
            found: format!(
                "a single-pod job uses {} of {g} on {}.",
                count(s.per_pod, what),
                inst.name
            ),
            fix: format!(
                "fine for one pod; for more pods, use {} per pod.",
                count(g, what)
            ),
            opt_in: None,
        });
        return;
    }
    let pods_text = match s.pods {
        Some(n) => format!("{} x {}", count(n, "pod"), count(s.per_pod, what)),
        None => format!("pods of {}", count(s.per_pod, what)),
    };
    let recommended = match s.pods {
        _ if s.shared => format!(
            "one pod per node with all {g} whole devices ({} instead of slices)",
            inst.accelerator_resource
        ),
        Some(n) => {
            // u64: pods x GPUs per pod cannot overflow it.
            let total = u64::from(n) * u64::from(s.per_pod);
            let g64 = u64::from(g);
            if total <= g64 {
                format!(
                    "1 pod x {} on one node, so every rank talks over NVLink",
                    count64(total, what)
                )
            } else if total.is_multiple_of(g64) {
                format!(
                    "{} x {} (annotation {RESHAPE}: \"true\" rewrites it)",
                    count64(total / g64, "pod"),
                    count(g, what)
                )
            } else {
                format!(
                    "{} x {} ({} do not fill whole nodes; this rounds up)",
                    count64(total.div_ceil(g64), "pod"),
                    count(g, what),
                    count64(total, what)
                )
            }
        }
        None => format!("one pod per node with all {}", count(g, what)),
    };
    let mut found = format!(
        "{pods_text} on {} ({g} per node): {}.",
        inst.name,
        path_cost(inst, s.efa)
    );
    if input.partial_opt_in == OptInState::Refused {
        found.push_str(&format!(
            " The opt-in {ALLOW_PARTIAL_NODE} is not permitted for this namespace or your groups."
        ));
    }
    out.extend(opted_in(
        Finding {
            rule: Rule::PartialNode,
            mode: input.eff.mode_partial_node(),
            site: site.clone(),
            found,
            fix: format!("use {recommended}."),
            opt_in: Some(ALLOW_PARTIAL_NODE),
        },
        input.partial_opt_in,
    ));
}

fn multi_az(input: &RuleInput<'_>, out: &mut Vec<Finding>) {
    let s = input.shape;
    let z = &s.zones;
    if !s.multi_pod {
        return;
    }
    let siblings = input.siblings.filter(|zs| !zs.is_empty());
    let elsewhere = match (siblings, &z.pinned) {
        (Some(zs), _) if zs.len() > 1 => Some(format!(
            "pods of this job already run in several zones ({})",
            zs.iter().cloned().collect::<Vec<_>>().join(", ")
        )),
        (Some(zs), Some(pinned)) if !zs.contains(pinned) => Some(format!(
            "this pod is pinned to {pinned} but its siblings already run in {}",
            zs.iter().cloned().collect::<Vec<_>>().join(", ")
        )),
        _ => None,
    };
    let why = if let Some(text) = elsewhere {
        text
    } else if let Some(text) = &z.allows_many {
        text.clone()
    } else if z.spread {
        "a topologySpreadConstraint spreads pods over zones".to_string()
    } else if z.anti {
        "a required pod anti-affinity on a zone key puts the job's pods in different zones"
            .to_string()
    } else if let Some(unheld) = input.unheld {
        return out.extend(unheld_finding(input, unheld));
    } else {
        return;
    };
    let why = match siblings {
        Some(zs) if !why.contains("siblings") && !why.contains("already run") => format!(
            "{why} (its siblings run in {})",
            zs.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
        _ => why,
    };
    let mut found =
        format!("the job may span availability zones: {why}; EFA traffic cannot cross zones.");
    if input.multi_az_opt_in == OptInState::Refused {
        found.push_str(&format!(
            " The opt-in {ALLOW_MULTI_AZ} is not permitted for this namespace or your groups."
        ));
    }
    out.extend(opted_in(
        Finding {
            rule: Rule::MultiAz,
            mode: input.eff.mode_multi_az(),
            site: input.view.base.clone(),
            found,
            fix: "pin one zone (nodeSelector topology.kubernetes.io/zone) or remove the multi-zone constraint; trainplace then holds the job in one zone.".into(),
            opt_in: Some(ALLOW_MULTI_AZ),
        },
        input.multi_az_opt_in,
    ));
}

/// A multi-pod job held in no zone: the scheduler may place its pods in any zone.
fn unheld_finding(input: &RuleInput<'_>, unheld: Unheld) -> Option<Finding> {
    let pods = match input.shape.pods {
        Some(n) => format!("one of {n} pods"),
        None => "one of several pods".to_string(),
    };
    let (why, fix) = match unheld {
        Unheld::NoIdentity => (
            format!(
                "this pod says it is {pods} of a training job, but no label ties the job's pods together (an operator's job label, {LABEL_JOB}, or a rendezvous endpoint such as torchrun's --rdzv-endpoint or MASTER_ADDR), so nothing can hold them in one zone"
            ),
            format!(
                "label every pod of the job with {LABEL_JOB}: NAME (trainplace then holds them in one zone), or pin one zone with nodeSelector {LABEL_ZONE}."
            ),
        ),
        Unheld::NotMutated => {
            let (key, value) = input
                .shape
                .identity
                .as_ref()
                .map_or(("", ""), |(k, v)| (k.as_str(), v.as_str()));
            (
                format!(
                    "this pod is {pods} but arrived without the zone hold trainplace's mutating webhook writes (a required podAffinity on {LABEL_ZONE} over {key}={value}): that call was skipped or failed, so the scheduler may place the job's pods in different zones"
                ),
                format!(
                    "create it again so the mutating webhook runs, or add that podAffinity yourself, or pin one zone with nodeSelector {LABEL_ZONE}."
                ),
            )
        }
    };
    let mut found =
        format!("the job may span availability zones: {why}; EFA traffic cannot cross zones.");
    if input.multi_az_opt_in == OptInState::Refused {
        found.push_str(&format!(
            " The opt-in {ALLOW_MULTI_AZ} is not permitted for this namespace or your groups."
        ));
    }
    opted_in(
        Finding {
            rule: Rule::MultiAz,
            mode: input.eff.mode_multi_az(),
            site: input.view.base.clone(),
            found,
            fix,
            opt_in: Some(ALLOW_MULTI_AZ),
        },
        input.multi_az_opt_in,
    )
}

/// A layout finding under a granted opt-in: admitted, but the user still hears what it
/// costs (a warning, or the audit log under `audit`); nothing when the rule is off.
fn opted_in(mut finding: Finding, opt_in: OptInState) -> Option<Finding> {
    if opt_in != OptInState::Granted {
        return Some(finding);
    }
    finding.mode = match finding.mode {
        Mode::Off => return None,
        Mode::Audit => Mode::Audit,
        Mode::Enforce | Mode::Warn => Mode::Warn,
    };
    if let Some(key) = finding.opt_in.take() {
        finding
            .found
            .push_str(&format!(" Admitted under the opt-in {key}."));
    }
    Some(finding)
}

/// DRA claims trainplace could not count (a template not in the input or the cluster,
/// a device class the catalog does not know): say so instead of passing the devices
/// unseen.
fn device_claims(input: &RuleInput<'_>, out: &mut Vec<Finding>) {
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
    });
}

fn host_network(input: &RuleInput<'_>, out: &mut Vec<Finding>) {
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
        });
    }
}

/// Resolve an opt-in annotation against the policy's grants.
pub fn opt_in_state(
    set: bool,
    opt: OptIn,
    eff: &Effective<'_>,
    who: &crate::facts::requester::Requester<'_>,
) -> OptInState {
    match (set, eff.policy.may_opt_in(opt, who)) {
        (false, _) => OptInState::Absent,
        (true, true) => OptInState::Granted,
        (true, false) => OptInState::Refused,
    }
}

/// [`count`] for counts that were multiplied in u64.
pub fn count64(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// "1 pod", "8 pods".
pub fn count(n: u32, word: &str) -> String {
    count64(n.into(), word)
}
