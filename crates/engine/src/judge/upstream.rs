//! What a trusted controller makes from a template trainplace admitted. A pod of a Job,
//! PyTorchJob or JobSet carries the template's `trainplace.io/admitted` mark; when the
//! mark verifies against the pod itself (`mark.rs`) the pod's content was judged and
//! admitted at submit time with the submitter's identity and grants, and is left as
//! admitted. Anything else, a forged or copied mark included, is judged; so is a pod
//! whose own launcher says its job has more pods than the mark vouches for, one whose
//! owner runs more pods than the mark states (its index among the owner's pods, or the
//! owner's size in the inventory), and one whose job the inventory already shows in
//! another zone.
//!
//! A workload is never left alone on a mark: its own CREATE is judged on its content
//! whoever asks (a CronJob's Job, a JobSet's child Job, an operator's child workload).
//! What a verifying mark on a child workload's template still vouches for, when a
//! trusted controller asks, is the opt-ins written on that template: they were granted
//! to the submitter when the template was admitted ([`vouched`]).

use serde_json::Value;

use crate::facts::mark::{ADMITTED, Claim, MarkKeys};
use crate::facts::policy::Policy;
use crate::facts::requester::Requester;
use crate::read::annotations::JOB_IDENTITY_LABELS;
use crate::read::json::str_at;
use crate::read::podspec::PodView;
use crate::read::recognize::JobSize;
use crate::read::workload::{Kind, Site};

/// Whether a Pod is made by its controller from a template trainplace admitted (the
/// caller checks that a trusted controller is asking). Only a Pod: a workload is judged.
pub(crate) fn made_from_admitted(
    object: &Value,
    kind: Kind,
    who: &Requester<'_>,
    policy: &Policy,
) -> bool {
    let Some(keys) = who.marks else {
        return false;
    };
    if kind != Kind::Pod {
        return false;
    }
    let namespace = str_at(object, &["metadata", "namespace"]).unwrap_or(who.namespace);
    let Some(owner_kind) =
        crate::judge::owner::controller(object).and_then(|o| str_at(o, &["kind"]))
    else {
        return false;
    };
    verified(object, owner_kind, namespace, keys, (who, policy), &[]).is_some_and(
        |(key, value, signed)| {
            !placed_apart(object, namespace, (key, value), who)
                && !owner_larger(object, signed, who)
        },
    )
}

/// Pod labels that number a pod among its owner's pods, from 0: an index at or past the
/// mark's count shows the owner runs more pods than the mark vouches for. (A Job's
/// completion index is not one: an Indexed Job with `completions: 8, parallelism: 1`
/// runs index 7 as its only pod.)
const POD_INDEX_LABELS: [&str; 2] = [
    "apps.kubernetes.io/pod-index",
    "training.kubeflow.org/replica-index",
];

/// Whether the pod's owner runs more pods than the mark states (`signed`; 0: several,
/// count unknown, which no owner exceeds). The mark binds a kind name and labels a user
/// writes, so a mark admitted for a 1-pod Job verifies just as well on the pods of a
/// Job of parallelism 8 that carries the same template and job label. The pod alone
/// tells when it carries its index among its owner's pods; otherwise the owner is
/// looked up in the inventory by the controller reference (namespace, group, kind,
/// name, uid) and its size, as its controller computes it, compared with the mark's.
/// An owner the inventory does not hold (yet: the watch trails the API by a moment, or
/// a kind it does not watch) leaves the mark's word standing.
fn owner_larger(object: &Value, signed: u32, who: &Requester<'_>) -> bool {
    if signed == 0 {
        return false;
    }
    let indexed = POD_INDEX_LABELS.iter().any(|l| {
        str_at(object, &["metadata", "labels", l])
            .and_then(|i| i.parse::<u64>().ok())
            .is_some_and(|i| i >= u64::from(signed))
    });
    if indexed {
        return true;
    }
    who.inventory
        .and_then(|inv| crate::judge::owner::owner_pods(object, inv))
        .is_some_and(|pods| pods.is_none_or(|n| n > signed))
}

/// Whether a trusted controller's child workload (`object`) template carries a mark
/// that verifies for this content, in this namespace, under this job label and owner
/// kind, for a job at least as large as the one judged now (`pods`, `None`: several,
/// count unknown). The opt-ins on such a template were granted when it was admitted.
/// Only a child whose controller owner is a kind trainplace judges and signs (a JobSet's
/// Job): such a parent's templates were judged with its submitter's grants. A
/// controller that renders workloads from a spec trainplace never judged (a Katib
/// Trial from an Experiment's trial template) passes on whatever mark a tenant copied
/// into that spec, so its children are judged with the controller's own grants.
pub(crate) fn vouched(
    object: &Value,
    template: &Value,
    (kind, identity): (Kind, Option<(&str, &str)>),
    pods: Option<u32>,
    who: &Requester<'_>,
    policy: &Policy,
) -> bool {
    let Some(keys) = who.marks else {
        return false;
    };
    if !kind.is_workload() || !policy.trusted_controller(who) {
        return false;
    }
    // The parent's templates were signed for the pods the parent's controller owns: an
    // MPIJob's launcher Job carries the mark the MPIJob's launcher template got.
    let Some(parent) = crate::judge::owner::controller(object)
        .and_then(|o| crate::read::workload::kind_of(o).ok())
    else {
        return false;
    };
    let Some(owner_kind) = parent.pod_owner_kind() else {
        return false;
    };
    // Signed under the labels the template carries (a JobSet's name), the label every
    // Ray pod carries (a RayJob's or RayService's cluster has a generated name), or the
    // child's own job label (`/mutate` signed the child's template again just before
    // this `/validate`: a RayCluster's name).
    let parent_label = matches!(parent, Kind::RayJob | Kind::RayService)
        .then_some(crate::read::annotations::RAY_NODE);
    // The child's own label only on its CREATE: on an UPDATE `/mutate` signs whatever
    // it is sent, so that mark would vouch for itself.
    let own = identity.filter(|_| who.updating.is_none());
    let extra: Vec<(&str, &str)> = parent_label.into_iter().chain(own).collect();
    // KubeRay runs a SidecarMode RayJob's submitter as a container it adds to the head
    // template of the RayCluster it makes.
    let unsubmitted = (parent == Kind::RayJob)
        .then(|| crate::read::controller_edits::before_ray_job_submitter(template))
        .flatten();
    // Signed for the parent's pods when the parent was admitted, or for the child's own
    // when `/mutate` signed the child again (its pods are the child's: an MPIJob's
    // launcher Job's pods verify as a Job's) just before this `/validate`.
    let signed = [Some(owner_kind), kind.pod_owner_kind()]
        .into_iter()
        .flatten()
        .find_map(|k| {
            std::iter::once(template)
                .chain(unsubmitted.as_ref())
                .find_map(|t| verified(t, k, who.namespace, keys, (who, policy), &extra))
        });
    let Some((_, _, signed)) = signed else {
        return false;
    };
    // 0: the mark vouches for a job of several pods, count unknown.
    match pods {
        _ if signed == 0 => true,
        Some(n) => n <= signed,
        None => false,
    }
}

/// The label a LeaderWorkerSet's controller writes on every template it makes.
const LWS_NAME: &str = "leaderworkerset.sigs.k8s.io/name";

/// Whether a template carrier is a StatefulSet a trusted controller made from a
/// LeaderWorkerSet trainplace admitted: its controller owner is the LeaderWorkerSet
/// (the leaders) or a group's leader Pod (the workers), and its template's mark
/// verifies for the pods a StatefulSet owns (the kind a LeaderWorkerSet's marks name).
/// A tenant's copy is not a controller's request, and a controller rendering another
/// owner's StatefulSet is judged as usual.
pub(crate) fn carried_from_admitted(object: &Value, who: &Requester<'_>, policy: &Policy) -> bool {
    let Some(keys) = who.marks else {
        return false;
    };
    let Some(template) = crate::read::json::Lookup::lookup(object, "/spec/template") else {
        return false;
    };
    // The leader StatefulSet is owned by the LeaderWorkerSet; each group's worker
    // StatefulSet by the group's leader Pod (the LeaderWorkerSet's pod controller).
    let from_lws = match crate::judge::owner::controller(object)
        .and_then(|o| crate::read::workload::kind_of(o).ok())
    {
        Some(Kind::LeaderWorkerSet) => true,
        Some(Kind::Pod) => str_at(template, &["metadata", "labels", LWS_NAME]).is_some(),
        _ => false,
    };
    if !from_lws || !policy.trusted_controller(who) {
        return false;
    }
    let namespace = str_at(object, &["metadata", "namespace"]).unwrap_or(who.namespace);
    Kind::LeaderWorkerSet
        .pod_owner_kind()
        .and_then(|owner_kind| verified(template, owner_kind, namespace, keys, (who, policy), &[]))
        .is_some()
}

/// The pod count the mark on a stored workload's template states, when it verifies for
/// that template as stored (0: several, count unknown): the largest job the template
/// was admitted for, with its submitter's grants, since it was created. Kueue lowers a
/// Job's parallelism when it admits part of it and restores it when it preempts the
/// job; the restore is no larger than what was admitted. Only a batch Job's: Kueue
/// admits part of no other kind, and a Job's template, whose launcher the count may
/// come from, cannot change (a PyTorchJob's launcher edited to say 64 nodes signs a
/// mark of 64, which must not let its replicas grow to 63; a LeaderWorkerSet's mark
/// states its group count too).
pub(crate) fn signed_before(
    stored: &Value,
    site: &Site,
    kind: Kind,
    who: &Requester<'_>,
    policy: &Policy,
) -> Option<u32> {
    if kind != Kind::Job {
        return None;
    }
    stored_mark(stored, site, kind, who, policy)
}

/// The pod count the mark on a stored workload's template (at `site`, of the stored
/// object) states, when it verifies for that template as stored (0: several).
pub(crate) fn stored_mark(
    stored: &Value,
    site: &Site,
    kind: Kind,
    who: &Requester<'_>,
    policy: &Policy,
) -> Option<u32> {
    let keys = who.marks?;
    let template = crate::read::json::Lookup::lookup(stored, &site.pointer)?;
    let namespace = str_at(stored, &["metadata", "namespace"]).unwrap_or(who.namespace);
    let (mark, view) = read_view(template, namespace, who, policy)?;
    // Signed under the label the controller will write on the pods (a Job's name), or
    // one written on the template (a rendezvous).
    let hinted = site
        .hints
        .identity
        .as_ref()
        .map(|(k, v)| (k.as_str(), v.as_str()));
    let identities = hinted.into_iter().chain(labelled(template));
    let owner_kind = kind.pod_owner_kind()?;
    signature(mark, &view, owner_kind, namespace, keys, identities).map(|(_, n)| n)
}

/// The template or pod's mark and its view, its claims counted as they count now (the
/// mark covers what they gave when it was signed).
fn read_view<'v>(
    object: &'v Value,
    namespace: &str,
    who: &Requester<'_>,
    policy: &Policy,
) -> Option<(&'v str, PodView<'v>)> {
    let mark = str_at(object, &["metadata", "annotations", ADMITTED])?;
    let view = PodView::read(object, "spec", &policy.catalog).ok()?;
    Some((mark, who.claims_resolved(view, namespace, &policy.catalog)))
}

/// The job labels a pod or template carries.
fn labelled(object: &Value) -> impl Iterator<Item = (&str, &str)> {
    JOB_IDENTITY_LABELS
        .iter()
        .filter_map(|(key, _)| Some((*key, str_at(object, &["metadata", "labels", key])?)))
}

/// The first of `identities` the mark verifies with for this owner kind and namespace,
/// and the pod count it states.
fn signature<'i>(
    mark: &str,
    view: &PodView<'_>,
    owner_kind: &str,
    namespace: &str,
    keys: &MarkKeys,
    identities: impl IntoIterator<Item = (&'i str, &'i str)>,
) -> Option<((&'i str, &'i str), u32)> {
    let digest = crate::facts::mark::digest(view);
    identities.into_iter().find_map(|identity| {
        let claim = Claim {
            namespace,
            identity,
            owner_kind,
            digest,
            pods: 0,
        };
        keys.verify(mark, &claim).map(|pods| (identity, pods))
    })
}

/// The job label a pod or template's mark verifies with, and the pod count the mark
/// states, when it verifies and the object's own launcher does not say its job is
/// larger than that.
fn verified<'v>(
    object: &'v Value,
    owner_kind: &str,
    namespace: &str,
    keys: &MarkKeys,
    (who, policy): (&Requester<'_>, &Policy),
    extra: &[(&'v str, &'v str)],
) -> Option<(&'v str, &'v str, u32)> {
    let (mark, view) = read_view(object, namespace, who, policy)?;
    let identities = || labelled(object).chain(extra.iter().copied());
    let found = signature(mark, &view, owner_kind, namespace, keys, identities()).or_else(|| {
        // A JobSet or LeaderWorkerSet pod its controller placed in an exclusive domain.
        let before = crate::read::controller_edits::before_exclusive_placement(object)?;
        let (_, view) = read_view(&before, namespace, who, policy)?;
        signature(mark, &view, owner_kind, namespace, keys, identities())
    });
    let Some(((key, value), pods)) = found else {
        keys.note_failure();
        return None;
    };
    let per_pod = view.accelerators().map_or(0, |(_, n)| n);
    let larger = match crate::read::recognize::job_size(&view, per_pod, policy.recognizers(), &[]) {
        _ if pods == 0 => false,
        Some(JobSize::Pods(n)) => n > pods,
        Some(JobSize::Several) => pods <= 1,
        None => false,
    };
    (!larger).then_some((key, value, pods))
}

/// Whether the inventory shows the pod's job in more than one zone, or in a zone other
/// than the one this pod runs in (its node) or is pinned to.
fn placed_apart(
    object: &Value,
    namespace: &str,
    (key, value): (&str, &str),
    who: &Requester<'_>,
) -> bool {
    let Some(inv) = who.inventory else {
        return false;
    };
    let Some(zones) = inv.sibling_zones(namespace, key, value) else {
        return false;
    };
    let node =
        crate::read::json::str_at(object, &["spec", "nodeName"]).and_then(|n| inv.node_zone(n));
    let pinned = crate::judge::classify::zones(object, Some((key, value))).pinned;
    let at = node
        .map(String::from)
        .or_else(|| pinned.map(|z| inv.zone_name(&z).to_string()));
    zones.len() > 1 || at.is_some_and(|z| !zones.contains(&z))
}
