//! The emitted job is pinned to the capacity the plan bought, so trainplace's own
//! `capacity-block-ends` check ties it to the block: `trainplace check` on the emitted
//! files, with the account's Capacity Blocks, warns when the job outlives its block.

use std::path::Path;
use std::process::Command;

fn trainplace(args: &[&str], dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// `describe-capacity-reservations` output: the two blocks the plan buys, as bought,
/// the first ending `first_end`.
fn reservations(first_end: &str) -> String {
    let block = |id: &str, end: &str| {
        format!(
            r#"{{"CapacityReservationId": "{id}", "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a",
             "TotalInstanceCount": 4, "AvailableInstanceCount": 0, "State": "active", "Tags": [],
             "StartDate": "2026-12-01T11:30:00+00:00", "EndDate": "{end}", "ReservationType": "capacity-block"}}"#
        )
    };
    format!(
        r#"{{"CapacityReservations": [{}, {}]}}"#,
        block("cr-0123456789abcde1", first_end),
        block("cr-0123456789abcde2", "2026-12-09T11:30:00+00:00")
    )
}

#[test]
fn check_on_the_emitted_job_warns_when_it_outlives_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let offerings = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/advisor/fixtures/capacity-block-offerings.json");
    // 64 H100 for 7 days: two blocks, the first 168 h, from 2026-12-01T11:30Z; a plan on
    // each route, into one directory (their jobs' files differ).
    for route in ["eksctl", "karpenter"] {
        let (code, text) = trainplace(
            &[
                "advise",
                "--gpus",
                "64",
                "--family",
                "h100",
                "--days",
                "7",
                "--offerings",
                offerings.to_str().unwrap(),
                "--now",
                "2026-11-22T00:00:00Z",
                "--route",
                route,
                "--emit",
                "out",
            ],
            dir.path(),
        );
        assert_eq!(code, 0, "{text}");
    }
    let out = dir.path().join("out");
    for job in ["job-pytorchjob.yaml", "job-pytorchjob-karpenter.yaml"] {
        let text = std::fs::read_to_string(out.join(job)).unwrap();
        let selector = if job.contains("karpenter") {
            "karpenter.sh/capacity-type: reserved"
        } else {
            "eks.amazonaws.com/capacityType: CAPACITY_BLOCK"
        };
        assert!(text.contains(selector), "{job}: {text}");
        // The 168 h job on the 168 h block: EKS scales the group to 0 (Karpenter drains)
        // 40 minutes before its end, so the job outlives it.
        for (first_end, warns) in [
            ("2026-12-08T11:30:00+00:00", true),
            ("2026-12-09T11:30:00+00:00", false),
        ] {
            std::fs::write(
                dir.path().join("reservations.json"),
                reservations(first_end),
            )
            .unwrap();
            let (code, text) = trainplace(
                &[
                    "check",
                    "-f",
                    out.join(job).to_str().unwrap(),
                    "--reservations",
                    "reservations.json",
                    "--now",
                    "2026-12-01T11:31:00Z",
                ],
                dir.path(),
            );
            assert_eq!(code, 0, "{job}: {text}");
            assert_eq!(
                text.contains("warn [capacity-block-ends]")
                    && text.contains("Capacity Block cr-0123456789abcde1")
                    && text.contains("expects to run 168.0h"),
                warns,
                "{job}, block ending {first_end}: {text}"
            );
        }
    }
}
