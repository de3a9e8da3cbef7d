//! Container images the emitted jobs run when the request names none: images that carry
//! the accelerator's collective stack, pinned to a tag, never `latest`.

use trainplace_catalog::InstanceProfile;

/// AWS Deep Learning Container, PyTorch 2.13 / CUDA 13.3 on AL2023 for EC2 (GA
/// 2026-07-20, end of patches 2027-07-20): EFA installer (libfabric, aws-ofi-nccl),
/// OpenMPI, sshd and nccl-tests' `all_reduce_perf` in /usr/local/bin, so NCCL uses
/// NET/OFI over EFA instead of falling back to NET/Socket.
/// <https://github.com/aws/deep-learning-containers/blob/main/docs/src/data/pytorch/2.13-cuda-ec2.yml>,
/// docker/pytorch/Dockerfile.cuda
pub const GPU_IMAGE: &str = "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023";

/// Where the DLC image puts nccl-tests' all_reduce_perf (Dockerfile.cuda above).
pub const ALL_REDUCE_PERF: &str = "/usr/local/bin/all_reduce_perf";

/// AWS DLC PyTorch 2.9 training image for Trainium (Neuron SDK 2.30.0), in the DLC
/// account's regional registry.
/// <https://github.com/aws/deep-learning-containers/blob/main/docs/src/data/pytorch-training-neuronx/2.9-neuronx-sdk2.30.0.yml>
pub const NEURON_TAG: &str = "2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04";
/// The DLC registry account (<https://github.com/aws/deep-learning-containers>, available images).
pub const DLC_ACCOUNT: &str = "763104351884";

/// The default image for jobs on `p` in `region`.
pub fn default_image(p: &InstanceProfile, region: &str) -> String {
    if p.accelerator_resource == "aws.amazon.com/neuron" {
        format!(
            "{DLC_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/pytorch-training-neuronx:{NEURON_TAG}"
        )
    } else {
        GPU_IMAGE.to_string()
    }
}
