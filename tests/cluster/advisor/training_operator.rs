//! The real Training Operator controller, run out of the cluster against the sandbox.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::Value;

use super::repo;
use crate::sandbox::{Sandbox, wait_until};

/// The real Training Operator, run out of the cluster as its Deployment would run it. Its
/// certificate rotator writes the webhook certificate into its Secret and waits for the
/// kubelet to mount it; with kwok as the kubelet, this copies it there. The operator's
/// own validating webhook is not registered: the sandbox's API server has no Service
/// network to call it through.
pub struct TrainingOperator(Child);

impl Drop for TrainingOperator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        // The certificate the test wrote where the kubelet would have mounted it.
        let _ = std::fs::remove_dir_all(CERT_DIR);
    }
}

const CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

pub fn start_training_operator(sb: &Sandbox) -> TrainingOperator {
    let out = Command::new(repo().join("scripts/go-tool.sh"))
        .args(["training-operator", "path"])
        .output()
        .unwrap();
    let bin = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(
        bin.is_file(),
        "the Training Operator is not built ({bin:?}): run scripts/test-deps.sh"
    );
    let _ = std::fs::remove_dir_all(CERT_DIR);
    let log = std::fs::File::create(sb.dir.join("logs/training-operator.log")).unwrap();
    let child = Command::new(bin)
        .args(["--enable-scheme=pytorchjob", "--metrics-bind-address=0"])
        .args([
            "--health-probe-bind-address=127.0.0.1:0",
            "--webhook-server-port=0",
        ])
        .env("KUBECONFIG", &sb.kubeconfig)
        .env("MY_POD_NAMESPACE", "kubeflow")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let operator = TrainingOperator(child);
    let mut secret = Value::Null;
    wait_until(
        Duration::from_secs(60),
        "the operator's webhook certificate",
        || {
            secret = sb.json(&[
                "-n",
                "kubeflow",
                "get",
                "secret",
                "training-operator-webhook-cert",
            ]);
            secret["data"]["tls.key"].is_string()
        },
    );
    std::fs::create_dir_all(CERT_DIR).unwrap();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        let b64 = secret["data"][key].as_str().unwrap();
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        std::fs::write(Path::new(CERT_DIR).join(key), bytes).unwrap();
    }
    operator
}
