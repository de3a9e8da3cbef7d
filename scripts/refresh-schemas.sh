#!/usr/bin/env bash
# Re-download the vendored schemas in schemas/ from their upstream repositories at pinned
# commits (see schemas/README.md). Needs network access to raw.githubusercontent.com.
set -euo pipefail
cd "$(dirname "$0")/../schemas"
raw=https://raw.githubusercontent.com
fetch() { # repo commit path dest
  echo "$1@${2:0:12} $3 -> $4"
  curl -fsSL "$raw/$1/$2/$3" -o "$4.tmp" && mv "$4.tmp" "$4"
}
fetch eksctl-io/eksctl 99984adb6164ece593c0728523b7f497ea61d60e pkg/apis/eksctl.io/v1alpha5/assets/schema.json schema.json
fetch aws/karpenter-provider-aws 1d927085dd81a9df9301e613f371dac5b4d16bfe pkg/apis/crds/karpenter.sh_nodepools.yaml karpenter.sh_nodepools.yaml
fetch aws/karpenter-provider-aws 1d927085dd81a9df9301e613f371dac5b4d16bfe pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml karpenter.k8s.aws_ec2nodeclasses.yaml
fetch kubernetes-sigs/jobset 08dfbdfd682714a9ab929633eca8dc95315187e7 config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml jobset.x-k8s.io_jobsets.yaml
fetch kubeflow/trainer 3a3a1da8d5287f9f96e1b2d3be6a4b6ad756566d manifests/base/crds/kubeflow.org_pytorchjobs.yaml kubeflow.org_pytorchjobs.yaml
fetch kubeflow/trainer 3a3a1da8d5287f9f96e1b2d3be6a4b6ad756566d manifests/base/crds/kubeflow.org_mpijobs.yaml kubeflow.org_mpijobs.yaml
fetch kubeflow/mpi-operator caa3c47fc42eb762635f78045ec0fcd1a89eb038 manifests/base/kubeflow.org_mpijobs.yaml mpi-operator-v2beta1/kubeflow.org_mpijobs.yaml
fetch kubeflow/trainer 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3 manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml trainer.kubeflow.org_trainjobs.yaml
fetch kubeflow/trainer 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3 manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml trainer.kubeflow.org_clustertrainingruntimes.yaml
fetch kubernetes-sigs/lws 060ab4da17eea1f0865fcbd3236bb1075e2cea32 config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml leaderworkerset.x-k8s.io_leaderworkersets.yaml
fetch ray-project/kuberay feeaf72facab4881ba2b179248bb67315634e229 ray-operator/config/crd/bases/ray.io_rayclusters.yaml ray.io_rayclusters.yaml
fetch ray-project/kuberay feeaf72facab4881ba2b179248bb67315634e229 ray-operator/config/crd/bases/ray.io_rayjobs.yaml ray.io_rayjobs.yaml
fetch ray-project/kuberay feeaf72facab4881ba2b179248bb67315634e229 ray-operator/config/crd/bases/ray.io_rayservices.yaml ray.io_rayservices.yaml
fetch volcano-sh/volcano ed72c7c815a9fd547a787134676f73d42e9d049c config/crd/volcano/bases/batch.volcano.sh_jobs.yaml batch.volcano.sh_jobs.yaml
fetch kubeflow/trainer 3a3a1da8d5287f9f96e1b2d3be6a4b6ad756566d manifests/base/crds/kubeflow.org_paddlejobs.yaml kubeflow.org_paddlejobs.yaml
fetch kubeflow/trainer 3a3a1da8d5287f9f96e1b2d3be6a4b6ad756566d manifests/base/crds/kubeflow.org_tfjobs.yaml kubeflow.org_tfjobs.yaml
fetch kubeflow/trainer 3a3a1da8d5287f9f96e1b2d3be6a4b6ad756566d manifests/base/crds/kubeflow.org_xgboostjobs.yaml kubeflow.org_xgboostjobs.yaml
fetch kubeflow/trainer 3a3a1da8d5287f9f96e1b2d3be6a4b6ad756566d manifests/base/crds/kubeflow.org_jaxjobs.yaml kubeflow.org_jaxjobs.yaml
fetch kubeflow/trainer 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3 manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml trainer.kubeflow.org_trainingruntimes.yaml
fetch NVIDIA/k8s-dra-driver-gpu 22407113785e78c7763b4637689a201eb39c6199 deployments/helm/dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomains.yaml resource.nvidia.com_computedomains.yaml
fetch kubernetes-sigs/wg-policy-prototypes 25056e1f3eb5cab1e693b8c880eb693a84e099af policy-report/crd/v1alpha2/wgpolicyk8s.io_policyreports.yaml wgpolicyk8s.io_policyreports.yaml
fetch kubernetes-sigs/wg-policy-prototypes 25056e1f3eb5cab1e693b8c880eb693a84e099af policy-report/crd/v1alpha2/wgpolicyk8s.io_clusterpolicyreports.yaml wgpolicyk8s.io_clusterpolicyreports.yaml
echo "done: run the tests (cargo test --workspace) to see whether trainplace's output still validates"
