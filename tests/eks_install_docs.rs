//! The documented path from a clone to an install on EKS (docs/install.md, the block after
//! `<!-- eks-install`), run as written where it can run here: the real AWS CLI (.venv)
//! against moto's server answers the account, region and ECR steps, the pinned crane logs
//! in to the registry with the token it got, and the pinned helm renders the chart with
//! the image those steps name. Not run: `scripts/image.sh` and `crane push` (tests/image.rs
//! builds the image; ECR itself cannot run here) and the install against a cluster (the
//! sandbox suites install the chart).

mod aws_loopback;

use std::path::{Path, PathBuf};
use std::process::Command;

use aws_loopback::{Aws, venv_tool};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shell lines of the documented block.
fn documented_steps() -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/install.md")).unwrap();
    let start = doc
        .find("<!-- eks-install")
        .expect("docs/install.md has no <!-- eks-install block");
    let block = &doc[start..];
    let body = &block[block.find("```sh\n").expect("a sh block") + 6..];
    let body = &body[..body.find("```").expect("the block ends")];
    body.lines().map(str::to_string).collect()
}

fn tool(script: &str, name: &str) -> PathBuf {
    let out = Command::new(root().join(script))
        .arg(name)
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string());
    assert!(
        path.is_file(),
        "{name} is not built: run scripts/test-deps.sh ({script} {name} printed {})",
        path.display()
    );
    path
}

/// The steps as a script that runs here: helm renders (`template`) instead of installing,
/// and the steps that need a Docker registry or a cluster are left out, by name.
fn runnable(steps: &[String], helm: &Path) -> String {
    let mut script = String::from("set -eu\n");
    let mut kept = 0;
    for step in steps {
        let line = step.split(" # ").next().unwrap_or("").trim_end();
        if line.starts_with("scripts/image.sh")
            || line.contains("crane)\" push")
            || line.starts_with("kubectl ")
        {
            continue;
        }
        if let Some(rest) = line.strip_prefix("helm install ") {
            let args: Vec<&str> = rest
                .split(' ')
                .filter(|a| *a != "--take-ownership" && *a != "--wait")
                .collect();
            script.push_str(&format!(
                "'{}' template {}\n",
                helm.display(),
                args.join(" ")
            ));
        } else {
            script.push_str(line);
            script.push('\n');
        }
        kept += 1;
    }
    assert!(kept >= 5, "the documented block lost its steps:\n{script}");
    script
}

#[test]
fn the_documented_ecr_and_helm_steps_run_with_the_real_clients() {
    let steps = documented_steps();
    for needed in [
        "scripts/image.sh",
        "aws ecr create-repository",
        "aws ecr get-login-password",
        "crane)\" push target/image-out/oci",
        "helm install trainplace charts/trainplace",
    ] {
        assert!(
            steps.iter().any(|s| s.contains(needed)),
            "docs/install.md's EKS steps lack {needed:?}: {steps:#?}"
        );
    }
    let helm = tool("scripts/helm.sh", "path");
    let crane = tool("scripts/go-tool.sh", "crane");
    let aws = Aws::start();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("aws-config"),
        "[default]\nregion = us-east-1\n",
    )
    .unwrap();
    let script = runnable(&steps, &helm);
    let venv_bin = venv_tool("aws").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        venv_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(root())
        .envs(aws.env(home.path()))
        .env("PATH", path)
        .env("HELM_CACHE_HOME", home.path().join("helm/cache"))
        .env("HELM_CONFIG_HOME", home.path().join("helm/config"))
        .env("HELM_DATA_HOME", home.path().join("helm/data"))
        .env("KUBECONFIG", home.path().join("no-kubeconfig"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the documented steps failed:\n{script}\nstderr:\n{stderr}"
    );
    let requests = aws.requests();
    for action in [
        "GetCallerIdentity",
        "CreateRepository",
        "GetAuthorizationToken",
    ] {
        assert!(
            requests.lines().any(|l| l.ends_with(action)),
            "no {action} reached AWS: {requests}"
        );
    }
    // moto's account and the region from the CLI's config name the registry.
    let registry = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
    let docker = std::fs::read_to_string(home.path().join(".docker/config.json"))
        .unwrap_or_else(|e| panic!("crane ({}) wrote no login: {e}", crane.display()));
    assert!(
        docker.contains(registry),
        "crane logged in elsewhere: {docker}"
    );
    let image = format!("{registry}/trainplace:0.1.0");
    let deployment = stdout
        .split("\n---")
        .find(|doc| doc.contains("kind: Deployment"))
        .unwrap_or_else(|| panic!("helm rendered no Deployment:\n{stdout}"));
    assert!(
        deployment.contains(&format!("image: {image}"))
            || deployment.contains(&format!("image: \"{image}\"")),
        "the Deployment does not run {image}:\n{deployment}"
    );
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        steps.iter().any(|s| s.contains(&format!(":{version}"))),
        "the documented tag is not the crate version {version}"
    );
}
