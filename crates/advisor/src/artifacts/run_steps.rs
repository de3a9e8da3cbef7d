//! The `run` stage of `aws-cli.sh`: the checkpoint storage, the EFA claim template, the
//! collective check judged by `trainplace diagnose` (nccom-test's log on Trainium), then
//! the job.

use trainplace_engine::annotations::RES_NVIDIA_GPU;

use crate::recommend::Recommendation;

/// The `run` stage: the EFA claim template, nccl-tests judged by `trainplace diagnose`
/// (NVIDIA only), then the job.
pub fn run_steps(rec: &Recommendation, out: &mut Vec<String>) {
    let req = &rec.request;
    let ns = &req.names.namespace;
    // Checkpoint storage bills from when it is made: made here, once the nodes are up,
    // not at set-up (a Capacity Block may start weeks later).
    let mut storage = Vec::new();
    super::storage::install_lines(rec, &mut storage);
    if !storage.is_empty() {
        out.extend(storage.into_iter().skip_while(String::is_empty));
        out.push(String::new());
    }
    super::gpu_discovery::check_lines(rec, out);
    if rec.instance.nvlink_domain_instances.is_some() {
        out.push("# {STEP} The ComputeDomain whose IMEX channel the pods claim (multi-node NVLink); it needs the NVIDIA DRA driver for GPUs.".into());
        out.push("if ! kubectl get crd computedomains.resource.nvidia.com >/dev/null 2>&1; then echo 'the ComputeDomain CRD is missing: install the NVIDIA DRA driver for GPUs (https://github.com/NVIDIA/k8s-dra-driver-gpu) first' >&2; exit 1; fi".into());
        out.push(format!("kubectl apply -f {}", super::COMPUTE_DOMAIN_FILE));
        out.push(String::new());
    }
    if rec.efa_dra {
        out.push("# {STEP} The EFA ResourceClaimTemplate the job's pods claim.".into());
        out.push("kubectl apply -f efa-claim-template.yaml".into());
        out.push(String::new());
    }
    super::topology::instance_lines(rec, out);
    if rec.instance.accelerator_resource == RES_NVIDIA_GPU {
        super::node_check::run_lines(rec, out);
        let tests = format!("{}-nccl-tests", req.names.job);
        out.push(
            "# {STEP} Check NCCL over EFA before training: run nccl-tests, wait, judge its log."
                .into(),
        );
        out.push(format!("kubectl apply -f {}", super::nccl_tests::file(rec)));
        out.push(format!(
            "kubectl -n {ns} wait --for=condition=Succeeded mpijob/{tests} --timeout=60m"
        ));
        out.push(format!(
            "kubectl -n {ns} logs job/{tests}-launcher > nccl-tests.log"
        ));
        out.push("# Exits 1 (and stops this script) on an error-level finding such as NET/Socket between nodes.".into());
        out.push("trainplace diagnose nccl-tests.log".into());
        out.push(String::new());
    } else {
        let tests = format!("{}-nccom-test", req.names.job);
        out.push(
            "# {STEP} Check Neuron collectives over EFA before training: run nccom-test, wait, judge its log."
                .into(),
        );
        out.push(format!("kubectl apply -f {}", super::NCCOM_FILE));
        out.push(format!(
            "kubectl -n {ns} wait --for=condition=Succeeded mpijob/{tests} --timeout=60m"
        ));
        out.push(format!(
            "kubectl -n {ns} logs job/{tests}-launcher > {}",
            super::nccl_tests::NCCOM_LOG
        ));
        out.push(format!(
            "if grep -q 'test failed' {log} || ! grep -q 'Avg bus bandwidth' {log}; then echo 'nccom-test failed: see {log}' >&2; exit 1; fi",
            log = super::nccl_tests::NCCOM_LOG
        ));
        out.push(String::new());
    }
    out.push("# {STEP} Start the training job.".into());
    out.push(format!("kubectl apply -f {}", super::job_file(rec)));
    out.push(String::new());
}
