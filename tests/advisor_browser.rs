//! The web page in headless Chromium (Debian `chromium`): the query string fills the
//! form and submits it; the DOM must show the recommendation, the layout SVG and the
//! artifacts. A screenshot is kept under target/test-output/advisor/. Fails when
//! chromium is missing: CI installs it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::process::Command;
use trainplace::advisor_server::{AppState, router};

/// `$TRAINPLACE_CHROMIUM`, else `chromium` on PATH: where scripts/test-deps.sh looks.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("TRAINPLACE_CHROMIUM") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "TRAINPLACE_CHROMIUM={} is no file",
            path.display()
        );
        return path;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file())
        .expect("chromium is not on PATH (scripts/test-deps.sh installs it; TRAINPLACE_CHROMIUM names another)")
}

fn out_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../test-output/advisor");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router(AppState::new()))
            .await
            .unwrap()
    });
    format!("http://{addr}")
}

/// Run chromium headless with `extra` flags against `url`; stdout on success.
async fn run_chromium(profile: &Path, extra: &[String], url: &str) -> String {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--disable-dev-shm-usage",
        // Lets the page's fetch and rendering finish before the dump / screenshot.
        "--virtual-time-budget=15000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(url)
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("chromium finished within 120 s")
        .expect("chromium started");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_submits_and_shows_the_recommendation() {
    let base = serve().await;
    let offerings = include_str!("../crates/advisor/fixtures/capacity-block-offerings.json");
    let url = format!(
        "{base}/?gpus=64&family=h100&durationDays=7&framework=jobset&route=karpenter&now=2026-11-22T00:00:00Z&offerings={}&auto=1",
        encode(offerings)
    );
    let profile = tempfile::tempdir().unwrap();
    let dom = run_chromium(profile.path(), &["--dump-dom".into()], &url).await;
    std::fs::write(out_dir().join("page.html"), &dom).unwrap();
    assert!(
        dom.contains("8 x p5.48xlarge in us-east-1a"),
        "no headline in DOM:\n{dom}"
    );
    assert!(
        dom.contains("<section id=\"result\" class=\"\""),
        "result still hidden"
    );
    assert!(dom.contains("cb-0f1a2b3c4d5e60001 + cb-0f1a2b3c4d5e60002"));
    assert!(dom.contains("<svg") && dom.contains("class=\"gpu\"") && dom.contains("class=\"efa\""));
    // The route chosen in the form (Karpenter): its files, not the eksctl route's job.
    for file in [
        "eksctl-cluster.yaml",
        "karpenter.yaml",
        "aws-cli.sh",
        "job-jobset-karpenter.yaml",
        "nccl-tests-mpijob-karpenter.yaml",
    ] {
        assert!(
            dom.contains(&format!("data-file=\"{file}\"")),
            "no copy button for {file}"
        );
    }
    assert!(!dom.contains("data-file=\"job-jobset.yaml\""));
    assert!(
        dom.contains("<dd>Karpenter NodePools"),
        "no route in the summary"
    );
    assert!(dom.contains("capacity-block-end"));
    // The offerings not bought say, as the CLI does, whether each fits the job alone
    // and why.
    let offers = dom
        .split("id=\"offers\"")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .unwrap_or_else(|| panic!("no offers table:\n{dom}"));
    assert!(
        offers.contains("<th>Fits the job alone?</th>") && offers.contains("<th>Why</th>"),
        "{offers}"
    );
    assert!(
        offers.contains("<td>yes</td>") || offers.contains("<td>no</td>"),
        "{offers}"
    );

    let shot = out_dir().join("advisor-page.png");
    let _ = std::fs::remove_file(&shot);
    let flags = [
        format!("--screenshot={}", shot.display()),
        "--window-size=1400,2200".into(),
        "--hide-scrollbars".into(),
    ];
    run_chromium(profile.path(), &flags, &url).await;
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "screenshot {} missing or empty",
        shot.display()
    );
    println!("screenshot: {}", shot.canonicalize().unwrap().display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_shows_the_field() {
    let base = serve().await;
    let profile = tempfile::tempdir().unwrap();
    let dom = run_chromium(
        profile.path(),
        &["--dump-dom".into()],
        &format!("{base}/?gpus=0&auto=1"),
    )
    .await;
    assert!(
        dom.contains("gpus: must be at least 1, got 0"),
        "no error in DOM:\n{dom}"
    );
    assert!(dom.contains("<section id=\"result\" class=\"hidden\""));
}

/// The smallest label the page renders at `width` px for `query`, and a screenshot.
async fn min_label_px(base: &str, query: &str, width: u32, shot_name: &str) -> (f64, String) {
    let url = format!("{base}/?{query}&measure=1&auto=1");
    let profile = tempfile::tempdir().unwrap();
    let size = format!("--window-size={width},2600");
    let dom = run_chromium(profile.path(), &["--dump-dom".into(), size.clone()], &url).await;
    let px = dom
        .split("data-min-label-px=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no measurement in DOM:\n{dom}"));
    let shot = out_dir().join(shot_name);
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        profile.path(),
        &[
            format!("--screenshot={}", shot.display()),
            size,
            "--hide-scrollbars".into(),
        ],
        &url,
    )
    .await;
    assert!(std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0) > 10_000);
    println!("screenshot: {}", shot.canonicalize().unwrap().display());
    (px, dom)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_labels_are_readable_at_1280_px() {
    let base = serve().await;
    let offerings = encode(include_str!(
        "../crates/advisor/fixtures/capacity-block-offerings.json"
    ));
    for (name, query) in [
        (
            "layout-h100-blocks.png",
            format!(
                "gpus=64&family=h100&durationDays=7&now=2026-11-22T00:00:00Z&offerings={offerings}"
            ),
        ),
        (
            "layout-l40s-pcie.png",
            "gpus=16&family=l40s&durationDays=2&capacity=on-demand".to_string(),
        ),
        (
            "layout-h100-100-nodes.png",
            "gpus=800&family=h100&durationDays=7".to_string(),
        ),
    ] {
        let (px, dom) = min_label_px(&base, &query, 1280, name).await;
        assert!(px >= 11.0, "{name}: smallest label {px} px");
        assert!(
            dom.contains("class=\"fabric\"") || dom.contains("one node"),
            "{name}"
        );
        if name == "layout-h100-blocks.png" {
            // Alternatives and the other offerings with price and start.
            assert!(
                dom.contains("longer Capacity Block(s)") && dom.contains("$48328.70"),
                "{name}"
            );
            assert!(
                dom.contains("cb-0f1a2b3c4d5e60006") && dom.contains("$84575.23"),
                "{name}"
            );
            assert!(
                dom.contains("class=\"nvswitch\"") && dom.contains("EFA x32 per node = 4 per GPU")
            );
        }
        if name == "layout-l40s-pcie.png" {
            assert!(dom.contains("class=\"pcie\"") && !dom.contains("class=\"nvswitch\""));
        }
        if name == "layout-h100-100-nodes.png" {
            assert_eq!(
                dom.matches("class=\"node-cell\"").count(),
                100,
                "every node drawn"
            );
        }
    }
}

/// The form's "Capacity Blocks the account holds" box: a held block is used, nothing
/// is bought.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_block_pasted_into_the_form_is_used_before_buying() {
    let base = serve().await;
    let held = include_str!("../crates/advisor/fixtures/existing-reservations.json");
    let url = format!(
        "{base}/?gpus=64&family=h100&durationDays=7&now=2026-11-22T00:00:00Z&existingReservations={}&auto=1",
        encode(held)
    );
    let profile = tempfile::tempdir().unwrap();
    let dom = run_chromium(profile.path(), &["--dump-dom".into()], &url).await;
    assert!(
        dom.contains("8 x p5.48xlarge in us-east-1b"),
        "no headline in DOM:\n{dom}"
    );
    assert!(dom.contains("cr-0b7c6d5e4f3a21098"), "{dom}");
    assert!(
        dom.contains("nothing to buy: the account already holds"),
        "{dom}"
    );
}
