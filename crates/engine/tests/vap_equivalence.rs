//! The exported ValidatingAdmissionPolicies decide like the engine: for every fixture
//! of the corpus (`tests/fixtures/pods`, `workloads`, `bypass` and `precise` under the restricted and
//! the default policy) and each exported rule, the CEL verdict (evaluated with the
//! `cel` crate, bound like the apiserver binds it) equals the engine's verdict for that
//! rule, on the raw object (the mutating webhook down) and on the mutated object (what
//! `/validate` sees). Where CEL cannot say what the engine says, the fixture is in
//! [`WEBHOOK_ONLY`] with why; the list must match exactly, so it cannot grow (or
//! shrink) unnoticed, and docs/guardrails.md lists the same fixtures.

mod vap_support;

use std::collections::BTreeMap;

use serde_json::Value;
use trainplace_engine::vap::{Check, bindings_of, export, policy_of};
use trainplace_engine::{Claims, Mode, Requester, evaluate};
use vap_support::corpus::{Case, corpus, policy_for, with_stack};
use vap_support::fixture_env::{cluster, repo_root};
use vap_support::{Apiserver, Outcome, Request, selects};

/// Fixture (`dir/file@policy`), rule, stage (`raw` / `mutated`): what CEL cannot
/// decide like the engine, and why. Kept in step with docs/guardrails.md's list.
const WEBHOOK_ONLY: &[(&str, &str, &str, &str)] = &[
    (
        "pods/dra-efa-too-many.yaml",
        "impossible-request",
        "raw",
        DRA,
    ),
    (
        "pods/dra-efa-too-many.yaml",
        "impossible-request",
        "mutated",
        DRA,
    ),
    ("pods/dra-gpu-one-per-pod.yaml", "partial-node", "raw", DRA),
    (
        "pods/dra-gpu-one-per-pod.yaml",
        "partial-node",
        "mutated",
        DRA,
    ),
    (
        "pods/dra-gpu-sixteen-impossible.yaml",
        "impossible-request",
        "raw",
        DRA,
    ),
    (
        "pods/dra-gpu-sixteen-impossible.yaml",
        "impossible-request",
        "mutated",
        DRA,
    ),
    (
        "pods/dra-gpu-template-from-cluster.yaml",
        "partial-node",
        "raw",
        DRA,
    ),
    (
        "pods/dra-gpu-template-from-cluster.yaml",
        "partial-node",
        "mutated",
        DRA,
    ),
    (
        "pods/inventory-siblings-other-zone.yaml",
        "multi-az",
        "raw",
        SIBLINGS,
    ),
    (
        "pods/inventory-siblings-other-zone.yaml",
        "multi-az",
        "mutated",
        SIBLINGS,
    ),
    (
        "pods/requests-limits-mismatch.yaml",
        "partial-node",
        "raw",
        REQUESTS,
    ),
    (
        "pods/requests-limits-mismatch.yaml",
        "multi-az",
        "raw",
        REQUESTS,
    ),
    (
        "pods/requests-limits-mismatch.yaml",
        "impossible-request",
        "raw",
        REQUESTS,
    ),
    (
        "pods/requests-limits-mismatch.yaml",
        "too-large",
        "raw",
        REQUESTS,
    ),
    ("pods/shm-size-bad.yaml", "partial-node", "raw", SHM),
    ("pods/shm-size-bad.yaml", "multi-az", "raw", SHM),
    ("pods/shm-size-bad.yaml", "impossible-request", "raw", SHM),
    ("pods/shm-size-bad.yaml", "too-large", "raw", SHM),
    ("pods/world-size-env.yaml", "multi-az", "raw", HOLD),
    ("pods/world-size-env.yaml", "multi-az", "mutated", HOLD),
    ("workloads/job-reshape.yaml", "partial-node", "raw", RESHAPE),
    (
        "workloads/jobset-reshape.yaml",
        "partial-node",
        "raw",
        RESHAPE,
    ),
    (
        "workloads/mpijob-gb200-larger-than-domain.yaml",
        "impossible-request",
        "raw",
        GB200,
    ),
    (
        "workloads/mpijob-gb200-larger-than-domain.yaml",
        "impossible-request",
        "mutated",
        GB200,
    ),
    (
        "workloads/mpijob-gb200-one-gpu-per-pod.yaml",
        "partial-node",
        "raw",
        GB200,
    ),
    (
        "workloads/mpijob-gb200-policy-default-p5.yaml",
        "partial-node",
        "raw",
        GB200,
    ),
    (
        "workloads/mpijob-reshape.yaml",
        "partial-node",
        "raw",
        RESHAPE,
    ),
    (
        "workloads/pytorchjob-reshape.yaml",
        "partial-node",
        "raw",
        RESHAPE,
    ),
    (
        "workloads/rayservice-launcher-evidence.yaml",
        "partial-node",
        "raw",
        LAUNCHER,
    ),
    (
        "workloads/rayservice-launcher-evidence.yaml",
        "partial-node",
        "mutated",
        LAUNCHER,
    ),
    (
        "workloads/trainjob-reshape.yaml",
        "partial-node",
        "raw",
        RESHAPE,
    ),
    (
        "workloads/trainjob-runtime-limits-only.yaml",
        "partial-node",
        "raw",
        RUNTIME,
    ),
    (
        "workloads/trainjob-runtime-limits-only.yaml",
        "partial-node",
        "mutated",
        RUNTIME,
    ),
    (
        "workloads/trainjob-runtime-partial-node.yaml",
        "partial-node",
        "raw",
        RUNTIME,
    ),
    (
        "workloads/trainjob-runtime-partial-node.yaml",
        "partial-node",
        "mutated",
        RUNTIME,
    ),
    (
        "bypass/accelerate-launch-num-machines.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/accelerate-launch-num-machines.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/accelerate-launch-num-machines.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/accelerate-launch-num-machines.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/accelerate-machine-rank.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/accelerate-machine-rank.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/argv-element-deepspeed-launcher-args.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/argv-element-deepspeed-launcher-args.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/argv-element-deepspeed-launcher-args.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/argv-element-deepspeed-launcher-args.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/bare-pods-no-identity.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/bare-pods-no-identity.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/bare-pods-no-identity.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/bare-pods-no-identity.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/deepspeed-ds-alias.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/deepspeed-ds-alias.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/deepspeed-ds-alias.yaml@restricted",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/deepspeed-ds-alias.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/deepspeed-ds-alias.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/deepspeed-ds-alias.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/deepspeed-ds-alias.yaml@default",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/deepspeed-ds-alias.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/deepspeed-num-nodes.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/deepspeed-num-nodes.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/deepspeed-num-nodes.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/deepspeed-num-nodes.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/deepspeed-short-include.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/deepspeed-short-include.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/deepspeed-short-include.yaml@restricted",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/deepspeed-short-include.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/deepspeed-short-include.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/deepspeed-short-include.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/deepspeed-short-include.yaml@default",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/deepspeed-short-include.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/dlrover-run-nnodes.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/dlrover-run-nnodes.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/dra-claims-counted.yaml@restricted",
        "partial-node",
        "raw",
        DRA,
    ),
    (
        "bypass/dra-claims-counted.yaml@restricted",
        "partial-node",
        "mutated",
        DRA,
    ),
    (
        "bypass/dra-claims-counted.yaml@default",
        "partial-node",
        "raw",
        DRA,
    ),
    (
        "bypass/dra-claims-counted.yaml@default",
        "partial-node",
        "mutated",
        DRA,
    ),
    (
        "bypass/generate-name-one-gpu-pytorchjob.yaml@restricted",
        "partial-node",
        "raw",
        UNNAMED,
    ),
    (
        "bypass/generate-name-one-gpu-pytorchjob.yaml@default",
        "partial-node",
        "raw",
        UNNAMED,
    ),
    (
        "bypass/jobset-exclusive-topology-zone.yaml@restricted",
        "multi-az",
        "raw",
        PLACEMENT,
    ),
    (
        "bypass/jobset-exclusive-topology-zone.yaml@restricted",
        "multi-az",
        "mutated",
        PLACEMENT,
    ),
    (
        "bypass/jobset-exclusive-topology-zone.yaml@default",
        "multi-az",
        "raw",
        PLACEMENT,
    ),
    (
        "bypass/jobset-exclusive-topology-zone.yaml@default",
        "multi-az",
        "mutated",
        PLACEMENT,
    ),
    (
        "bypass/karpenter-families-without-a-type.yaml@restricted",
        "partial-node",
        "raw",
        KARPENTER,
    ),
    (
        "bypass/karpenter-families-without-a-type.yaml@restricted",
        "partial-node",
        "mutated",
        KARPENTER,
    ),
    (
        "bypass/karpenter-families-without-a-type.yaml@default",
        "partial-node",
        "raw",
        KARPENTER,
    ),
    (
        "bypass/karpenter-families-without-a-type.yaml@default",
        "partial-node",
        "mutated",
        KARPENTER,
    ),
    (
        "bypass/launcher-runs-a-launcher.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/launcher-runs-a-launcher.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/launcher-runs-a-launcher.yaml@restricted",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/launcher-runs-a-launcher.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/launcher-runs-a-launcher.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/launcher-runs-a-launcher.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/launcher-runs-a-launcher.yaml@default",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/launcher-runs-a-launcher.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/llamafactory-nnodes.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/llamafactory-nnodes.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/lws-subgroup-exclusive-zone.yaml@restricted",
        "multi-az",
        "raw",
        PLACEMENT,
    ),
    (
        "bypass/lws-subgroup-exclusive-zone.yaml@restricted",
        "multi-az",
        "mutated",
        PLACEMENT,
    ),
    (
        "bypass/lws-subgroup-exclusive-zone.yaml@default",
        "multi-az",
        "raw",
        PLACEMENT,
    ),
    (
        "bypass/lws-subgroup-exclusive-zone.yaml@default",
        "multi-az",
        "mutated",
        PLACEMENT,
    ),
    (
        "bypass/mpiexec-genv-before-n.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/mpiexec-genv-before-n.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/mpiexec-genv-before-n.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/mpiexec-genv-before-n.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/mpirun-distribution-name.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/mpirun-distribution-name.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/mpirun-distribution-name.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/mpirun-distribution-name.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/mpirun-mca-before-np.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/mpirun-mca-before-np.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/mpirun-mca-before-np.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/mpirun-mca-before-np.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/mpirun-mpmd-colon.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/mpirun-mpmd-colon.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/mpirun-mpmd-colon.yaml@restricted",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/mpirun-mpmd-colon.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/mpirun-mpmd-colon.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/mpirun-mpmd-colon.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/mpirun-mpmd-colon.yaml@default",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/mpirun-mpmd-colon.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    ("bypass/mpirun-np.yaml@restricted", "multi-az", "raw", HOLD),
    (
        "bypass/mpirun-np.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    ("bypass/mpirun-np.yaml@default", "multi-az", "raw", HOLD),
    ("bypass/mpirun-np.yaml@default", "multi-az", "mutated", HOLD),
    (
        "bypass/node-name-in-another-zone.yaml@restricted",
        "multi-az",
        "raw",
        SIBLINGS,
    ),
    (
        "bypass/node-name-in-another-zone.yaml@restricted",
        "multi-az",
        "mutated",
        SIBLINGS,
    ),
    (
        "bypass/node-name-in-another-zone.yaml@default",
        "multi-az",
        "raw",
        SIBLINGS,
    ),
    (
        "bypass/node-name-in-another-zone.yaml@default",
        "multi-az",
        "mutated",
        SIBLINGS,
    ),
    (
        "bypass/one-job-per-rank.yaml@restricted",
        "partial-node",
        "raw",
        ONE_JOB_PER_RANK,
    ),
    (
        "bypass/one-job-per-rank.yaml@restricted",
        "partial-node",
        "mutated",
        ONE_JOB_PER_RANK,
    ),
    (
        "bypass/one-job-per-rank.yaml@default",
        "partial-node",
        "raw",
        ONE_JOB_PER_RANK,
    ),
    (
        "bypass/one-job-per-rank.yaml@default",
        "partial-node",
        "mutated",
        ONE_JOB_PER_RANK,
    ),
    (
        "bypass/paddle-launch-nnodes.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/paddle-launch-nnodes.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/paddle-launch-nnodes.yaml@restricted",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/paddle-launch-nnodes.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/paddle-launch-nnodes.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/paddle-launch-nnodes.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/paddle-launch-nnodes.yaml@default",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/paddle-launch-nnodes.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/pet-nnodes-under-a-command-from-a-configmap.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-command-from-a-configmap.yaml@restricted",
        "multi-az",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-command-from-a-configmap.yaml@restricted",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-command-from-a-configmap.yaml@restricted",
        "multi-az",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-command-from-a-configmap.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-command-from-a-configmap.yaml@default",
        "multi-az",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-command-from-a-configmap.yaml@default",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-command-from-a-configmap.yaml@default",
        "multi-az",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script-in-a-shell-string.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script-in-a-shell-string.yaml@restricted",
        "multi-az",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script-in-a-shell-string.yaml@restricted",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script-in-a-shell-string.yaml@restricted",
        "multi-az",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script-in-a-shell-string.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script-in-a-shell-string.yaml@default",
        "multi-az",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script-in-a-shell-string.yaml@default",
        "partial-node",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script-in-a-shell-string.yaml@default",
        "multi-az",
        "mutated",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-a-script.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/pet-nnodes-under-the-image-entrypoint.yaml@restricted",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/pet-nnodes-under-the-image-entrypoint.yaml@restricted",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/pet-nnodes-under-the-image-entrypoint.yaml@restricted",
        "partial-node",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/pet-nnodes-under-the-image-entrypoint.yaml@restricted",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/pet-nnodes-under-the-image-entrypoint.yaml@default",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/pet-nnodes-under-the-image-entrypoint.yaml@default",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/pet-nnodes-under-the-image-entrypoint.yaml@default",
        "partial-node",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/pet-nnodes-under-the-image-entrypoint.yaml@default",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/pytorchjob-master-worker-in-two-zones.yaml@restricted",
        "multi-az",
        "raw",
        SPLIT_ZONES,
    ),
    (
        "bypass/pytorchjob-master-worker-in-two-zones.yaml@restricted",
        "multi-az",
        "mutated",
        SPLIT_ZONES,
    ),
    (
        "bypass/pytorchjob-master-worker-in-two-zones.yaml@default",
        "multi-az",
        "raw",
        SPLIT_ZONES,
    ),
    (
        "bypass/pytorchjob-master-worker-in-two-zones.yaml@default",
        "multi-az",
        "mutated",
        SPLIT_ZONES,
    ),
    (
        "bypass/pytorchjob-templates-bound-to-nodes-in-two-zones.yaml@restricted",
        "multi-az",
        "raw",
        SIBLINGS,
    ),
    (
        "bypass/pytorchjob-templates-bound-to-nodes-in-two-zones.yaml@restricted",
        "multi-az",
        "mutated",
        SIBLINGS,
    ),
    (
        "bypass/pytorchjob-templates-bound-to-nodes-in-two-zones.yaml@default",
        "multi-az",
        "raw",
        SIBLINGS,
    ),
    (
        "bypass/pytorchjob-templates-bound-to-nodes-in-two-zones.yaml@default",
        "multi-az",
        "mutated",
        SIBLINGS,
    ),
    (
        "bypass/raycluster-worker-groups-in-two-zones.yaml@restricted",
        "multi-az",
        "raw",
        SPLIT_ZONES,
    ),
    (
        "bypass/raycluster-worker-groups-in-two-zones.yaml@restricted",
        "multi-az",
        "mutated",
        SPLIT_ZONES,
    ),
    (
        "bypass/raycluster-worker-groups-in-two-zones.yaml@default",
        "multi-az",
        "raw",
        SPLIT_ZONES,
    ),
    (
        "bypass/raycluster-worker-groups-in-two-zones.yaml@default",
        "multi-az",
        "mutated",
        SPLIT_ZONES,
    ),
    (
        "bypass/shell-assignment-before-torchrun.yaml@restricted",
        "partial-node",
        "raw",
        SHELL,
    ),
    (
        "bypass/shell-assignment-before-torchrun.yaml@restricted",
        "multi-az",
        "raw",
        SHELL,
    ),
    (
        "bypass/shell-assignment-before-torchrun.yaml@restricted",
        "partial-node",
        "mutated",
        SHELL,
    ),
    (
        "bypass/shell-assignment-before-torchrun.yaml@restricted",
        "multi-az",
        "mutated",
        SHELL,
    ),
    (
        "bypass/shell-assignment-before-torchrun.yaml@default",
        "partial-node",
        "raw",
        SHELL,
    ),
    (
        "bypass/shell-assignment-before-torchrun.yaml@default",
        "multi-az",
        "raw",
        SHELL,
    ),
    (
        "bypass/shell-assignment-before-torchrun.yaml@default",
        "partial-node",
        "mutated",
        SHELL,
    ),
    (
        "bypass/shell-assignment-before-torchrun.yaml@default",
        "multi-az",
        "mutated",
        SHELL,
    ),
    (
        "bypass/shell-exported-world-size.yaml@restricted",
        "partial-node",
        "raw",
        SHELL,
    ),
    (
        "bypass/shell-exported-world-size.yaml@restricted",
        "multi-az",
        "raw",
        SHELL,
    ),
    (
        "bypass/shell-exported-world-size.yaml@restricted",
        "partial-node",
        "mutated",
        SHELL,
    ),
    (
        "bypass/shell-exported-world-size.yaml@restricted",
        "multi-az",
        "mutated",
        SHELL,
    ),
    (
        "bypass/shell-exported-world-size.yaml@default",
        "partial-node",
        "raw",
        SHELL,
    ),
    (
        "bypass/shell-exported-world-size.yaml@default",
        "multi-az",
        "raw",
        SHELL,
    ),
    (
        "bypass/shell-exported-world-size.yaml@default",
        "partial-node",
        "mutated",
        SHELL,
    ),
    (
        "bypass/shell-exported-world-size.yaml@default",
        "multi-az",
        "mutated",
        SHELL,
    ),
    (
        "bypass/shell-parameter-default-holds-options.yaml@restricted",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-parameter-default-holds-options.yaml@restricted",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-parameter-default-holds-options.yaml@restricted",
        "partial-node",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-parameter-default-holds-options.yaml@restricted",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-parameter-default-holds-options.yaml@default",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-parameter-default-holds-options.yaml@default",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-parameter-default-holds-options.yaml@default",
        "partial-node",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-parameter-default-holds-options.yaml@default",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-positional-parameters-hold-options.yaml@restricted",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-positional-parameters-hold-options.yaml@restricted",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-positional-parameters-hold-options.yaml@default",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-positional-parameters-hold-options.yaml@default",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-valuefrom-in-an-option-value.yaml@restricted",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-valuefrom-in-an-option-value.yaml@restricted",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-valuefrom-in-an-option-value.yaml@restricted",
        "partial-node",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-valuefrom-in-an-option-value.yaml@restricted",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-valuefrom-in-an-option-value.yaml@default",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-valuefrom-in-an-option-value.yaml@default",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-valuefrom-in-an-option-value.yaml@default",
        "partial-node",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-valuefrom-in-an-option-value.yaml@default",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-launcher-options.yaml@restricted",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-launcher-options.yaml@default",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-options-from-elsewhere.yaml@restricted",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-options-from-elsewhere.yaml@restricted",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-options-from-elsewhere.yaml@restricted",
        "partial-node",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-options-from-elsewhere.yaml@restricted",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-options-from-elsewhere.yaml@default",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-options-from-elsewhere.yaml@default",
        "multi-az",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-options-from-elsewhere.yaml@default",
        "partial-node",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-options-from-elsewhere.yaml@default",
        "multi-az",
        "mutated",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-whole-command.yaml@restricted",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/shell-variable-whole-command.yaml@default",
        "partial-node",
        "raw",
        SHELL_WORDS,
    ),
    (
        "bypass/swift-nnodes.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/swift-nnodes.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/torch-distributed-launch-module.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/torch-distributed-launch-module.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/torch-distributed-launch-module.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/torch-distributed-launch-module.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/torchrun-abbreviated-flag.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/torchrun-abbreviated-flag.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/torchrun-abbreviated-flag.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/torchrun-abbreviated-flag.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/torchrun-nnodes-flag.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/torchrun-nnodes-flag.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/torchrun-nnodes-flag.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/torchrun-nnodes-flag.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/torchrun-nnodes-in-shell.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/torchrun-nnodes-in-shell.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/torchrun-nnodes-in-shell.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/torchrun-nnodes-in-shell.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/torchtune-run-nnodes.yaml@restricted",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/torchtune-run-nnodes.yaml@default",
        "partial-node",
        "raw",
        UNSEEN_LAUNCHER,
    ),
    (
        "bypass/trainer-in-native-sidecar.yaml@restricted",
        "partial-node",
        "raw",
        SIDECAR_TRAINER,
    ),
    (
        "bypass/trainer-in-native-sidecar.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/trainer-in-native-sidecar.yaml@restricted",
        "partial-node",
        "mutated",
        SIDECAR_TRAINER,
    ),
    (
        "bypass/trainer-in-native-sidecar.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/trainer-in-native-sidecar.yaml@default",
        "partial-node",
        "raw",
        SIDECAR_TRAINER,
    ),
    (
        "bypass/trainer-in-native-sidecar.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/trainer-in-native-sidecar.yaml@default",
        "partial-node",
        "mutated",
        SIDECAR_TRAINER,
    ),
    (
        "bypass/trainer-in-native-sidecar.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/unknown-annotation-karpenter-p5.yaml@restricted",
        "partial-node",
        "raw",
        KARPENTER,
    ),
    (
        "bypass/unknown-annotation-karpenter-p5.yaml@default",
        "partial-node",
        "raw",
        KARPENTER,
    ),
    (
        "bypass/volcano-tasks-in-two-zone-ids.yaml@restricted",
        "multi-az",
        "raw",
        SPLIT_ZONES,
    ),
    (
        "bypass/volcano-tasks-in-two-zone-ids.yaml@restricted",
        "multi-az",
        "mutated",
        SPLIT_ZONES,
    ),
    (
        "bypass/volcano-tasks-in-two-zone-ids.yaml@default",
        "multi-az",
        "raw",
        SPLIT_ZONES,
    ),
    (
        "bypass/volcano-tasks-in-two-zone-ids.yaml@default",
        "multi-az",
        "mutated",
        SPLIT_ZONES,
    ),
    (
        "bypass/world-size-value-from.yaml@restricted",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/world-size-value-from.yaml@restricted",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "bypass/world-size-value-from.yaml@default",
        "multi-az",
        "raw",
        HOLD,
    ),
    (
        "bypass/world-size-value-from.yaml@default",
        "multi-az",
        "mutated",
        HOLD,
    ),
    (
        "precise/cronjob-four-pods-one-gpu.yaml@restricted",
        "partial-node",
        "raw",
        CARRIER,
    ),
    (
        "precise/cronjob-four-pods-one-gpu.yaml@restricted",
        "partial-node",
        "mutated",
        CARRIER,
    ),
    (
        "precise/cronjob-four-pods-one-gpu.yaml@default",
        "partial-node",
        "raw",
        CARRIER,
    ),
    (
        "precise/cronjob-four-pods-one-gpu.yaml@default",
        "partial-node",
        "mutated",
        CARRIER,
    ),
    (
        "precise/deployment-one-gpu-ranks.yaml@restricted",
        "partial-node",
        "raw",
        CARRIER,
    ),
    (
        "precise/deployment-one-gpu-ranks.yaml@restricted",
        "partial-node",
        "mutated",
        CARRIER,
    ),
    (
        "precise/deployment-one-gpu-ranks.yaml@default",
        "partial-node",
        "raw",
        CARRIER,
    ),
    (
        "precise/deployment-one-gpu-ranks.yaml@default",
        "partial-node",
        "mutated",
        CARRIER,
    ),
    (
        "precise/pytorchjob-dra-only-gpus-counted.yaml@restricted",
        "partial-node",
        "raw",
        DRA,
    ),
    (
        "precise/pytorchjob-dra-only-gpus-counted.yaml@restricted",
        "partial-node",
        "mutated",
        DRA,
    ),
    (
        "precise/pytorchjob-dra-only-gpus-counted.yaml@default",
        "partial-node",
        "raw",
        DRA,
    ),
    (
        "precise/pytorchjob-dra-only-gpus-counted.yaml@default",
        "partial-node",
        "mutated",
        DRA,
    ),
    (
        "precise/training-marker-alone-is-one-pod.yaml@restricted",
        "partial-node",
        "raw",
        MARKED_ALONE,
    ),
    (
        "precise/training-marker-alone-is-one-pod.yaml@restricted",
        "partial-node",
        "mutated",
        MARKED_ALONE,
    ),
    (
        "precise/trainjob-one-node-nnodes-from-torch-plugin.yaml@restricted",
        "partial-node",
        "raw",
        TORCH_PLUGIN,
    ),
    (
        "precise/trainjob-one-node-nnodes-from-torch-plugin.yaml@restricted",
        "partial-node",
        "mutated",
        TORCH_PLUGIN,
    ),
    (
        "precise/trainjob-one-node-nnodes-from-torch-plugin.yaml@default",
        "partial-node",
        "raw",
        TORCH_PLUGIN,
    ),
    (
        "precise/trainjob-one-node-nnodes-from-torch-plugin.yaml@default",
        "partial-node",
        "mutated",
        TORCH_PLUGIN,
    ),
];

const ONE_JOB_PER_RANK: &str = "a workload whose pods' env says the job has more pods than the workload makes (one Job per rank): the engine takes the env; the VAP reads launcher env on bare Pods only, so it judges those pods when the Job creates them (VAP looser on the workload)";
const SIDECAR_TRAINER: &str = "the engine reads the launcher of every container that can run the trainer, native sidecars included; the VAP reads the first app container that holds devices (VAP looser)";
const HOLD: &str = "a multi-pod pod with no job label or rendezvous cannot be held in one zone; the engine refuses it, while a policy does not read the launcher's size and rendezvous in env and command line (VAP looser)";
const UNNAMED: &str = "a workload created with generateName has no name at admission; the engine keys its job on a label it writes, a policy sees no job label and judges its pods when the operator creates them, labelled (VAP looser on the workload)";
const KARPENTER: &str = "the instance types a pod's Karpenter labels (family, size, GPU count) reach are computed from the catalog; a policy judges such a pod against no type rather than a wrong one (VAP looser)";
const PLACEMENT: &str = "a controller's placement directive (JobSet exclusive-topology, LeaderWorkerSet subgroup-exclusive-topology) on a zone key splits the job; the engine reads it, the policies do not (VAP looser)";
const SHELL: &str = "a launcher's env set on its own shell command line (`export WORLD_SIZE=4; ...`, `PET_NNODES=4 torchrun ...`) is read by the engine; a policy reads the pod's env and flags only (VAP looser)";
const SHELL_WORDS: &str = "a launcher's options in a variable the shell splits into words (`torchrun $DISTRIBUTED_ARGS`, `sh -c \"$CMD\"`), or set from a ConfigMap, are read (or known unreadable) by the engine; a policy reads the options written on the command line only (VAP looser)";
const UNSEEN_LAUNCHER: &str = "the engine reads launchers and spellings a policy does not: torchtune's `tune run` (torchrun's options), `dlrover-run`, DeepSpeed's `ds` and `-i`, Paddle's launcher, ms-swift's `NNODES`, mpirun's colon-separated app contexts, a launcher another runs, LLaMA-Factory's `llamafactory-cli train` (`NNODES`), `accelerate launch --machine_rank` past the first machine, torchrun's own PET_NNODES under a script or a ConfigMap command it cannot see into; a policy reads the flags and env it knows on the command line only (VAP looser)";
const SIBLINGS: &str = "the zones where the job's other pods already run come from the cluster inventory; a VAP sees only the object (VAP looser)";
const REQUESTS: &str = "the engine refuses requests != limits for a device; the VAP reads limits, and the API server's own Pod validation refuses such a Pod anyway";
const SHM: &str =
    "an unreadable trainplace.io/shm-size is an input error of the layout rewrite, not a deny rule";
const SPLIT_ZONES: &str = "templates of one job pinned to different zones: the engine compares the zones across a job's templates; the exported policies judge each template alone (VAP looser)";
const LAUNCHER: &str = "a RayService serves unless it says it trains; the engine also takes a worker template's launcher (PET_NNODES, WORLD_SIZE, torchrun --nnodes) as training evidence, which CEL would have to read from env and command line inside the loop over templates, past the cost bound (VAP looser)";
const RUNTIME: &str = "the TrainJob's node template (instance type, layout) and default node count come from its TrainingRuntime in the cluster inventory; a VAP sees only the TrainJob (VAP looser; the runtime itself is guarded when it is created)";
const CARRIER: &str = "a Deployment, ReplicaSet, StatefulSet, DaemonSet or CronJob is judged by the engine as the pods or Jobs its controller makes from its template; the exported policies do not match these kinds, and judge those pods and Jobs when the controller creates them (VAP looser on the carrier)";
const TORCH_PLUGIN: &str = "the Trainer's torch plugin sets PET_NNODES to numNodes for a runtime with `mlPolicy.torch`, which lives in the cluster, not in the TrainJob: the engine reads `--nnodes=$PET_NNODES` at numNodes, a policy as a count it cannot know (VAP stricter: a one-node TrainJob on part of a node is refused while the webhook is down)";
const MARKED_ALONE: &str = "a pod marked as training (the policy's training selector) with no launcher count, job label or rendezvous on another host is one pod for the engine, which reads the rendezvous; a policy, which does not, takes a training pod of unknown size as several (VAP stricter: refused while the webhook is down)";
const DRA: &str = "the devices a DRA claim asks for are in its ResourceClaimTemplate, a separate object a VAP cannot read (VAP looser)";
const GB200: &str = "the GB200 type is inferred from the pod's ComputeDomain channel or NVLink-clique affinity and its NVLink domain size is catalog data; the VAP judges the pod against its nodeSelector or the namespace's default type";
const RESHAPE: &str = "reshape is a rewrite: the engine rewrites the job to whole nodes and passes it; with the webhook down nothing rewrites it, so the VAP denies the job as submitted (VAP stricter)";

/// What the engine and the policies say of an opt-in that is set but not granted.
const REFUSED: &str = "is set, but the policy";

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Enforce => "enforce",
        Mode::Warn => "warn",
        Mode::Audit => "audit",
        Mode::Off => "off",
    }
}

/// The engine's verdict for one rule: the deny-rule findings only (partial-node's
/// single-pod note is a warning of its own, not the rule the policy exports).
fn engine_outcome(
    verdict: &Result<trainplace_engine::Verdict, impl std::fmt::Debug>,
    check: Check,
) -> Outcome {
    let Ok(v) = verdict else {
        return Outcome::Refused;
    };
    // A layout finding that offers no opt-in is no deny: the single-pod partial-node
    // note, and the warning of what a granted opt-in costs (the policies admit both
    // without a word). One whose opt-in is set but refused offers none either (it names
    // who may grant it instead), and is a deny.
    let found = v.findings.iter().find(|f| {
        f.rule.as_str() == check.rule()
            && (matches!(check, Check::ImpossibleRequest | Check::TooLarge)
                || f.opt_in.is_some()
                || f.found.contains(REFUSED))
    });
    match found {
        None => Outcome::Pass,
        Some(f) => Outcome::Flag(mode_name(f.mode)),
    }
}

fn vap_outcome(
    api: &Apiserver,
    exported: &[Value],
    check: Check,
    object: &Value,
    req: &Request<'_>,
) -> (Outcome, Option<String>) {
    let Some(policy) = policy_of(exported, check) else {
        return (Outcome::Pass, None);
    };
    match api.violates(&policy, object, req) {
        Err(_) => (Outcome::Refused, None),
        Ok(None) => (Outcome::Pass, None),
        Ok(Some(message)) => {
            let bound: Vec<&Value> = bindings_of(exported, check)
                .into_iter()
                .filter(|b| selects(b, &req.namespace_labels))
                .collect();
            assert!(bound.len() <= 1, "bindings overlap for {}", req.namespace);
            let outcome = match bound
                .first()
                .map(|b| b["spec"]["validationActions"][0].as_str())
            {
                None => Outcome::Pass,
                Some(Some("Deny")) => Outcome::Flag("enforce"),
                Some(Some("Warn")) => Outcome::Flag("warn"),
                Some(Some("Audit")) => Outcome::Flag("audit"),
                other => panic!("action {other:?}"),
            };
            (outcome, Some(message))
        }
    }
}

type Mismatch = (String, &'static str, &'static str, Outcome, Outcome);

/// What the comparison saw, to show it is not vacuous.
#[derive(Default)]
struct Tally {
    compared: usize,
    flagged: BTreeMap<(&'static str, &'static str), usize>,
    passed: BTreeMap<(&'static str, &'static str), usize>,
}

/// The VAP's message carries the webhook's wording: the rule, the fix, the refused
/// opt-in and the opt-in.
fn same_wording(name: &str, check: Check, verdict: &trainplace_engine::Verdict, message: &str) {
    let Some(f) = verdict
        .findings
        .iter()
        .find(|f| f.rule.as_str() == check.rule())
    else {
        return;
    };
    assert!(
        message.starts_with(&format!("[{}] ", check.rule())),
        "{name}: {message}"
    );
    // A bare pod's count comes from its launcher settings, which the message does not
    // repeat, and a job past 2^32 pods is not counted by the engine (impossible-request
    // says so); every other fix is the webhook's word for word.
    let uncounted = verdict.kind == "Pod"
        || verdict
            .findings
            .iter()
            .any(|f| f.found.contains("pods from this template"));
    if check != Check::PartialNode || !uncounted {
        assert!(
            message.contains(&f.fix),
            "{name}: {message:?} lacks the fix {:?}",
            f.fix
        );
    }
    if let Some(a) = f.opt_in {
        assert!(
            message.contains(&format!("Opt in: {a}: \"true\".")),
            "{name}: {message}"
        );
    }
    assert_eq!(
        f.found.contains(REFUSED),
        message.contains(REFUSED),
        "{name}: refused opt-in: {message}"
    );
}

fn judge(api: &Apiserver, name: &str, case: &Case, out: &mut Vec<Mismatch>, tally: &mut Tally) {
    let policy = policy_for(case);
    let exported = export(&policy).unwrap_or_else(|e| panic!("{name}: export: {e}"));
    let ns = case.object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let snapshot = case.cluster.as_deref().map(cluster);
    let labels = case
        .namespace_labels
        .clone()
        .or_else(|| snapshot.as_ref()?.namespace_labels(&ns).cloned());
    let mut claims = Claims::default();
    claims.add(&case.objects, &ns);
    let who = Requester {
        namespace: &ns,
        namespace_labels: labels.as_ref(),
        groups: &case.groups,
        inventory: snapshot.as_ref(),
        marks: None,
        now: None,
        claims: Some(&claims),
        updating: false,
    };
    let mut ns_labels = labels.clone().unwrap_or_default();
    ns_labels.insert("kubernetes.io/metadata.name".into(), ns.clone());
    let req = Request {
        namespace: &ns,
        namespace_labels: ns_labels,
        groups: &case.groups,
    };
    let raw = evaluate(&case.object, &policy, &who);
    let mutated_object = raw.as_ref().ok().map(|v| v.object.clone());
    let mut stages = vec![("raw", case.object.clone(), raw)];
    if let Some(m) = mutated_object {
        let again = evaluate(&m, &policy, &who);
        stages.push(("mutated", m, again));
    }
    for (stage, object, verdict) in &stages {
        for check in Check::ALL {
            let want = engine_outcome(verdict, check);
            let (got, message) = vap_outcome(api, &exported, check, object, &req);
            tally.compared += 1;
            if want != got {
                out.push((name.to_string(), check.rule(), stage, want, got));
                continue;
            }
            let count = if matches!(got, Outcome::Flag(_)) {
                &mut tally.flagged
            } else {
                &mut tally.passed
            };
            *count.entry((check.rule(), *stage)).or_default() += 1;
            if let (Ok(v), Some(m)) = (verdict, message) {
                same_wording(name, check, v, &m);
            }
        }
    }
}

#[test]
fn exported_policies_decide_like_the_engine_on_every_fixture() {
    with_stack(every_fixture);
}

fn every_fixture() {
    let api = Apiserver::new();
    let mut mismatches = Vec::new();
    let mut tally = Tally::default();
    let cases = corpus();
    for (name, case) in &cases {
        judge(&api, name, case, &mut mismatches, &mut tally);
    }
    let got: Vec<String> = mismatches
        .iter()
        .map(|(n, r, s, want, got)| format!("{n} {r} {s}: engine {want:?}, VAP {got:?}"))
        .collect();
    let listed: Vec<String> = WEBHOOK_ONLY
        .iter()
        .map(|(n, r, s, _)| format!("{n} {r} {s}"))
        .collect();
    let got_keys: Vec<String> = mismatches
        .iter()
        .map(|(n, r, s, _, _)| format!("{n} {r} {s}"))
        .collect();
    eprintln!(
        "{} fixtures, {} verdicts compared, {} differ; agreeing flags {:?}, passes {:?}",
        cases.len(),
        tally.compared,
        got.len(),
        tally.flagged,
        tally.passed
    );
    // Not vacuous: each rule both fires and passes in agreement, on both objects.
    for check in Check::ALL {
        for stage in ["raw", "mutated"] {
            let key = (check.rule(), stage);
            assert!(
                tally.flagged.get(&key).copied().unwrap_or(0) >= 3,
                "{key:?}: too few flags"
            );
            assert!(
                tally.passed.get(&key).copied().unwrap_or(0) >= 3,
                "{key:?}: too few passes"
            );
        }
    }
    assert_eq!(
        got_keys,
        listed,
        "VAP verdicts that differ from the engine's:\n{}",
        got.join("\n")
    );
}

/// The guardrails page (docs/guardrails.md) lists every fixture the test lists.
#[test]
fn guardrails_page_lists_what_stays_webhook_only() {
    let section = std::fs::read_to_string(repo_root().join("docs/guardrails.md")).unwrap();
    assert!(
        section.starts_with("# Guardrails when the webhook is down"),
        "docs/guardrails.md is the guardrails page"
    );
    for (fixture, ..) in WEBHOOK_ONLY {
        // A bypass fixture runs under both policies (`file@policy`); the page names the file.
        let file = fixture.rsplit('/').next().unwrap();
        let file = file.split('@').next().unwrap();
        assert!(
            section.contains(file),
            "docs/guardrails.md does not list {file}"
        );
    }
}
