//! The advisor's CLI face: exit codes, output formats, --emit, -f request files.

use std::path::PathBuf;

use trainplace::cli::advise::{AdviseArgs, OutputFormat, inputs, run_advise};
use trainplace::exit::ExitCode;

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/advisor/fixtures")
        .join(name)
}

fn h100() -> AdviseArgs {
    AdviseArgs {
        gpus: Some(64),
        family: Some("h100".into()),
        days: Some(7.0),
        offerings: Some(fixture_path("capacity-block-offerings.json")),
        // The fixture's offerings start 2026-12-01.
        now: Some("2026-11-22T00:00:00Z".into()),
        ..Default::default()
    }
}

#[test]
fn emits_every_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let args = AdviseArgs {
        emit: Some(dir.path().join("out")),
        output: OutputFormat::Json,
        ..h100()
    };
    assert_eq!(run_advise(&args).unwrap(), ExitCode::Ok);
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "aws-cli.sh",
            "checkpoint-storage.yaml",
            "dcgm-exporter-values.yaml",
            "efa-device-plugin-values.yaml",
            "eksctl-cluster.yaml",
            "job-pytorchjob.yaml",
            "nccl-node-check.yaml",
            "nccl-tests-mpijob.yaml",
            "training-operator"
        ]
    );
    assert!(
        dir.path()
            .join("out/training-operator/kustomization.yaml")
            .is_file()
    );
    let script = std::fs::read_to_string(dir.path().join("out/aws-cli.sh")).unwrap();
    assert!(
        script.contains("--capacity-block-offering-id cb-0f1a2b3c4d5e60001"),
        "{script}"
    );
    assert!(script.contains("--capacity-duration-hours 168"));
    let eksctl = std::fs::read_to_string(dir.path().join("out/eksctl-cluster.yaml")).unwrap();
    assert!(eksctl.contains("marketType: capacity-block") && eksctl.contains("efaEnabled: true"));
    // The sed line in the script replaces exactly the placeholder the eksctl file holds.
    assert!(eksctl.contains("REPLACE-WITH-cr-ID-OF-cb-0f1a2b3c4d5e60001"));
    // Run the script's own substitution lines with made-up purchase results.
    let seds: Vec<&str> = script.lines().filter(|l| l.starts_with("sed ")).collect();
    assert_eq!(seds.len(), 2);
    let sh = format!(
        "CR_0=cr-0aaaaaaaaaaaaaaa1; CR_1=cr-0aaaaaaaaaaaaaaa2; {}",
        seds.join("; ")
    );
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(sh)
        .current_dir(dir.path().join("out"))
        .status()
        .unwrap();
    assert!(status.success());
    let eksctl = std::fs::read_to_string(dir.path().join("out/eksctl-cluster.yaml")).unwrap();
    assert!(
        !eksctl.contains("REPLACE-WITH") && eksctl.contains("cr-0aaaaaaaaaaaaaaa2"),
        "{eksctl}"
    );
}

/// `--route karpenter`: the Karpenter files instead of the eksctl route's job and checks,
/// and a cluster config without GPU nodegroups.
#[test]
fn emits_the_karpenter_route_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let args = AdviseArgs {
        emit: Some(dir.path().join("out")),
        output: OutputFormat::Json,
        route: Some("karpenter".into()),
        ..h100()
    };
    assert_eq!(run_advise(&args).unwrap(), ExitCode::Ok);
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "aws-cli.sh",
            "checkpoint-storage.yaml",
            "dcgm-exporter-values.yaml",
            "efa-device-plugin-values.yaml",
            "eksctl-cluster.yaml",
            "job-pytorchjob-karpenter.yaml",
            "karpenter-prerequisites.sh",
            "karpenter.yaml",
            "nccl-node-check-karpenter.yaml",
            "nccl-tests-mpijob-karpenter.yaml",
            "training-operator"
        ]
    );
    let eksctl = std::fs::read_to_string(dir.path().join("out/eksctl-cluster.yaml")).unwrap();
    assert!(!eksctl.contains("p5.48xlarge"), "{eksctl}");
}

#[test]
fn bad_input_exits_2() {
    for args in [
        AdviseArgs {
            gpus: Some(0),
            ..h100()
        },
        AdviseArgs {
            gpus: Some(-8),
            ..h100()
        },
        AdviseArgs {
            family: Some("v100".into()),
            ..h100()
        },
        AdviseArgs {
            region: Some("moon-1".into()),
            ..h100()
        },
        AdviseArgs {
            start: Some("2026-12-09".into()),
            end: Some("2026-12-01".into()),
            ..h100()
        },
        AdviseArgs {
            offerings: Some(fixture_path("nodes.json")),
            ..h100()
        },
        AdviseArgs {
            offerings: Some(fixture_path("missing.json")),
            ..h100()
        },
        AdviseArgs {
            route: Some("fargate".into()),
            ..h100()
        },
        // Karpenter does not support DRA, which EFA through the EFA DRA driver needs.
        AdviseArgs {
            route: Some("karpenter".into()),
            efa_dra: true,
            ..h100()
        },
    ] {
        assert_eq!(run_advise(&args).unwrap(), ExitCode::BadInput, "{args:?}");
    }
}

#[test]
fn request_file_with_flags_on_top() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("request.yaml");
    std::fs::write(
        &file,
        "gpus: 16\nfamily: l40s\ndurationHours: 30\nframework: mpijob\n",
    )
    .unwrap();
    let args = AdviseArgs {
        file: Some(file.clone()),
        gpus: Some(32),
        ..Default::default()
    };
    let (req, facts) = inputs(&args).unwrap();
    assert_eq!(
        (req.gpus, req.family.as_deref(), req.framework.as_deref()),
        (Some(32), Some("l40s"), Some("mpijob"))
    );
    assert!(facts.offerings.is_none());
    for output in [OutputFormat::Text, OutputFormat::Yaml] {
        assert_eq!(
            run_advise(&AdviseArgs {
                output,
                ..args_with(&file)
            })
            .unwrap(),
            ExitCode::Ok
        );
    }
    std::fs::write(&file, "gpus: 16\nflavour: l40s\n").unwrap();
    let err = inputs(&args_with(&file)).unwrap_err();
    assert!(err.message.contains("unknown field `flavour`"), "{err}");
}

fn args_with(file: &std::path::Path) -> AdviseArgs {
    AdviseArgs {
        file: Some(file.to_path_buf()),
        ..Default::default()
    }
}

#[test]
fn text_summary_reads_well() {
    let advice = {
        let (req, facts) = inputs(&h100()).unwrap();
        trainplace_advisor::advise(
            &req,
            &facts,
            &trainplace_engine::Policy::embedded(),
            jiff::Timestamp::now(),
        )
        .unwrap()
    };
    let text = trainplace_advisor::render::text(&advice);
    assert!(
        text.starts_with(
            "8 x p5.48xlarge in us-east-1a (64 GPUs: 8 pods x 8 processes, 32 EFA per node)"
        ),
        "{text}"
    );
    assert!(text.contains("[capacity-block-end]") && text.contains("[efa-single-az]"));
    assert!(text.contains("busbw 200..360 GB/s"), "{text}");
    assert!(
        text.contains("- longer Capacity Block(s) of 192 h + 192 h: the job plus the 40 min EKS scale-down [cb-0f1a2b3c4d5e60002 + cb-0f1a2b3c4d5e60003]: $48328.70"),
        "{text}"
    );
}

/// A negative budget (or duration) reaches the request's validation, not clap: exit 2
/// with the field, as for every other bad value.
#[test]
fn negative_budget_fails_with_a_field_message() {
    for (flag, value, field) in [
        ("--budget", "-5", "budgetUsd"),
        ("--hours", "-3", "durationHours"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["advise", "--gpus", "16", "--family", "h100"])
            .args(if flag == "--hours" {
                vec![flag, value]
            } else {
                vec!["--days", "3", flag, value]
            })
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("error: request {field}: must be a positive")),
            "{stderr}"
        );
    }
}
