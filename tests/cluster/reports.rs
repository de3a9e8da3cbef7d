//! What trainplace leaves in a real API server for people and tools to read:
//! `trainplace audit --write-reports` PolicyReports (one per namespace, updated in place,
//! nobody else's touched), and the webhook's Events on the objects it denies or warns
//! about, at a bounded rate.

use crate::sandbox;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sandbox::{Sandbox, stderr, wait_until};
use serde_json::{Value, json};

/// The webhook's Event budget in this sandbox: a bucket of `BURST` refilled at
/// `PER_MINUTE` (TRAINPLACE_EVENT_BURST, TRAINPLACE_EVENT_RATE).
const BURST: u64 = 5;
const PER_MINUTE: u64 = 60;

/// A suspended two-pod Job on an instance type the catalog does not know: admitted with
/// an `unknown-instance-type` warning under the default policy.
fn odd_job(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"suspend": true, "parallelism": 2, "completions": 2, "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never",
                "nodeSelector": {"node.kubernetes.io/instance-type": "x9.48xlarge"},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}})
}

fn audit(sb: &Sandbox, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .arg("audit")
        .args(args)
        .arg("--write-reports")
        .env("KUBECONFIG", &sb.kubeconfig)
        .env_remove("TRAINPLACE_POLICY_DIR")
        .output()
        .unwrap()
}

/// The PolicyReports in `ns`, by name.
fn reports(sb: &Sandbox, ns: &str) -> Vec<Value> {
    sb.json(&["-n", ns, "get", "policyreports.v1alpha2.wgpolicyk8s.io"])["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn ours(sb: &Sandbox, ns: &str) -> Value {
    let all = reports(sb, ns);
    let mine: Vec<&Value> = all
        .iter()
        .filter(|r| r["metadata"]["name"] == "trainplace")
        .collect();
    assert_eq!(mine.len(), 1, "one trainplace report in {ns}: {all:#?}");
    mine[0].clone()
}

#[test]
fn audit_writes_one_policy_report_per_namespace_and_updates_it_in_place() {
    // Its own namespaces only.
    let turn = sandbox::shared();
    let sb = turn.sb();
    for crd in [
        "policyreports.wgpolicyk8s.io",
        "clusterpolicyreports.wgpolicyk8s.io",
    ] {
        sb.ok(&["get", "crd", crd]);
    }
    let a = sb.namespace("reports-a");
    let b = sb.namespace("reports-b");
    for (ns, name) in [(&a, "odd-1"), (&a, "odd-2"), (&b, "odd-3")] {
        let out = sb.apply(ns, &odd_job(name).to_string());
        assert!(out.status.success(), "{}", stderr(&out));
    }
    // Another tool's report in the same namespace: never read, changed or deleted.
    let foreign = json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
        "metadata": {"name": "kyverno-scan", "namespace": a},
        "summary": {"pass": 3}, "results": [{"policy": "require-labels", "result": "pass", "source": "kyverno"}]});
    let out = sb.apply(&a, &foreign.to_string());
    assert!(out.status.success(), "{}", stderr(&out));

    // Default policy: the jobs warn.
    for ns in [&a, &b] {
        let out = audit(sb, &["-n", ns]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("policyreport {ns}/trainplace: written")),
            "{}",
            stderr(&out)
        );
    }
    let first = ours(sb, &a);
    assert_eq!(first["apiVersion"], "wgpolicyk8s.io/v1alpha2");
    assert_eq!(
        first["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "trainplace"
    );
    let results = first["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        2,
        "one result per object and rule: {first:#}"
    );
    let mut names: Vec<&str> = results
        .iter()
        .map(|r| r["resources"][0]["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["odd-1", "odd-2"]);
    for r in results {
        assert_eq!(r["policy"], "trainplace");
        assert_eq!(r["rule"], "unknown-instance-type");
        assert_eq!(r["result"], "warn");
        assert_eq!(r["severity"], "medium");
        assert_eq!(r["source"], "trainplace");
        assert_eq!(r["properties"]["mode"], "warn");
        assert!(r["timestamp"]["seconds"].as_i64().unwrap() > 1_700_000_000);
        assert_eq!(r["resources"][0]["kind"], "Job");
        assert_eq!(r["resources"][0]["namespace"], a.as_str());
        assert!(
            r["resources"][0]["uid"]
                .as_str()
                .is_some_and(|u| !u.is_empty())
        );
        assert!(
            r["message"]
                .as_str()
                .unwrap()
                .contains("\"x9.48xlarge\" (from nodeSelector) is not in the instance catalog")
        );
    }
    assert_eq!(
        first["summary"],
        json!({"pass": 0, "fail": 0, "warn": 2, "error": 0, "skip": 0})
    );
    assert_eq!(ours(sb, &b)["results"].as_array().unwrap().len(), 1);

    // A stricter policy: the same report, updated in place, now failing.
    let strict = tempfile::tempdir().unwrap();
    let policy = std::fs::read_to_string(format!(
        "{}/policies/default.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    .replace(
        "unknownInstanceType: warn",
        "unknownInstanceType: enforce #",
    );
    assert!(policy.contains("unknownInstanceType: enforce"));
    std::fs::write(strict.path().join("policy.yaml"), policy).unwrap();
    let dir = strict.path().to_str().unwrap();
    sb.ok(&["-n", &b, "delete", "job", "odd-3", "--wait"]);
    for ns in [&a, &b] {
        let out = audit(sb, &["-n", ns, "--policy-dir", dir]);
        let expected = if *ns == a { Some(1) } else { Some(0) };
        assert_eq!(out.status.code(), expected, "{}", stderr(&out));
    }
    let second = ours(sb, &a);
    assert_eq!(
        second["metadata"]["uid"], first["metadata"]["uid"],
        "updated, not replaced"
    );
    assert_ne!(
        second["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    let results = second["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{second:#}");
    for r in results {
        assert_eq!(
            (&r["result"], &r["severity"]),
            (&json!("fail"), &json!("high"))
        );
        assert_eq!(r["properties"]["mode"], "enforce");
    }
    assert_eq!(second["summary"]["fail"], 2);
    assert_eq!(second["summary"]["warn"], 0);
    // b has no audited object left: trainplace's report there is gone.
    assert!(reports(sb, &b).is_empty(), "{:#?}", reports(sb, &b));
    // The other tool's report is as it was.
    let kept: Vec<Value> = reports(sb, &a)
        .into_iter()
        .filter(|r| r["metadata"]["name"] == "kyverno-scan")
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0]["results"], foreign["results"]);
    assert_eq!(kept[0]["summary"]["pass"], 3);
}

/// A pod that says it is one of two ranks with 1 GPU of a p5.48xlarge: denied
/// (`partial-node`, `multi-az`).
fn partial_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never",
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "c", "image": "busybox",
                "command": ["torchrun", "--nnodes=2", "--nproc-per-node=1", "train.py"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
}

fn metrics(sb: &Sandbox) -> String {
    let out = Command::new("curl")
        .args([
            "-sf",
            &format!("http://127.0.0.1:{}/metrics", sb.env["SANDBOX_PROBE_PORT"]),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "GET /metrics");
    String::from_utf8(out.stdout).unwrap()
}

/// `trainplace_events_total{outcome}`.
fn events_total(sb: &Sandbox, outcome: &str) -> u64 {
    let prefix = format!("trainplace_events_total{{outcome=\"{outcome}\"}} ");
    let text = metrics(sb);
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{prefix} on /metrics:\n{text}"))
        .parse()
        .unwrap()
}

/// trainplace's Events (events.k8s.io/v1) in `ns`.
fn events(sb: &Sandbox, ns: &str) -> Vec<Value> {
    sb.json(&["-n", ns, "get", "events.v1.events.k8s.io"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reportingController"] == "trainplace")
        .cloned()
        .collect()
}

#[test]
fn a_denied_pod_gets_an_event_naming_the_rule_and_events_keep_to_their_rate() {
    // The Event budget counts what every namespace's objects spend: the control plane to
    // this test alone, with trainplace's budget set small.
    let turn = sandbox::shared_exclusive();
    turn.serve(
        None,
        &[
            ("TRAINPLACE_EVENT_BURST", &BURST.to_string()),
            ("TRAINPLACE_EVENT_RATE", &PER_MINUTE.to_string()),
        ],
    );
    let sb = turn.sb();
    let ns = sb.namespace("events");
    let out = sb.apply(&ns, &partial_pod("bad-0").to_string());
    assert!(!out.status.success(), "denied");
    assert!(stderr(&out).contains("[partial-node]"), "{}", stderr(&out));
    wait_until(Duration::from_secs(30), "the Event on bad-0", || {
        !events(sb, &ns).is_empty()
    });
    let all = events(sb, &ns);
    assert_eq!(all.len(), 1, "{all:#?}");
    let e = &all[0];
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["reason"], "Denied");
    assert_eq!(e["action"], "Admission");
    assert_eq!(e["regarding"]["kind"], "Pod");
    assert_eq!(e["regarding"]["name"], "bad-0");
    assert_eq!(e["regarding"]["namespace"], ns.as_str());
    let note = e["note"].as_str().unwrap();
    assert!(
        note.starts_with(
            "trainplace denied Pod bad-0 by sandbox-admin (partial-node,multi-az): [partial-node]"
        ),
        "{note}"
    );
    assert!(note.len() <= 1024);

    // The denial's one log line: rules, namespace, object and requester.
    let log = std::fs::read_to_string(sb.dir.join("logs/trainplace.log")).unwrap();
    let line = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| {
            // The log outlives a run; this run's namespace tells its line apart.
            l["fields"]["message"] == "denied"
                && l["fields"]["name"] == "bad-0"
                && l["fields"]["namespace"] == ns.as_str()
        })
        .unwrap_or_else(|| panic!("a denial line for bad-0 in the log"));
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["fields"]["rules"], "partial-node,multi-az");
    assert_eq!(line["fields"]["namespace"], ns.as_str());
    assert_eq!(line["fields"]["kind"], "Pod");
    assert_eq!(line["fields"]["user"], "sandbox-admin");

    // 40 denials at once: Events for at most the burst plus the rate over the time it
    // took; the rest dropped and counted, none failed.
    let before: Vec<u64> = ["published", "rate_limited", "failed", "queue_full"]
        .iter()
        .map(|o| events_total(sb, o))
        .collect();
    let pods: Vec<Value> = (1..=40).map(|i| partial_pod(&format!("bad-{i}"))).collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": pods});
    let start = Instant::now();
    let out = sb.kubectl_stdin(&["-n", &ns, "create", "-f", "-"], Some(&list.to_string()));
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).matches("[partial-node]").count(),
        40,
        "{}",
        stderr(&out)
    );
    let delta = |i: usize, o: &str| events_total(sb, o) - before[i];
    wait_until(
        Duration::from_secs(60),
        "all 40 Events accounted for",
        || {
            delta(0, "published")
                + delta(1, "rate_limited")
                + delta(2, "failed")
                + delta(3, "queue_full")
                == 40
        },
    );
    let elapsed = start.elapsed().as_secs_f64();
    let published = delta(0, "published");
    let bound = BURST + (elapsed * PER_MINUTE as f64 / 60.0).ceil() as u64;
    assert!(
        published >= 1 && published <= bound,
        "{published} Events published in {elapsed:.1}s, bound {bound}"
    );
    assert!(
        delta(1, "rate_limited") >= 40 - bound,
        "the rest rate limited"
    );
    assert_eq!(delta(2, "failed"), 0);
    let written = events(sb, &ns).len() as u64 - 1;
    assert_eq!(written, published, "one Event object per published Event");

    // The review metrics name the rule, kind and verdict.
    let text = metrics(sb);
    assert!(
        text.lines()
            .any(|l| l.starts_with("trainplace_admission_findings_total{")
                && l.contains("endpoint=\"validate\"")
                && l.contains("kind=\"Pod\"")
                && l.contains("rule=\"partial-node\"")
                && l.contains("mode=\"enforce\"")
                && l.contains("verdict=\"denied\"")),
        "{text}"
    );
}

/// `audit --ending-within` of the live cluster with `--reservations`: the Job running
/// on a Capacity Block node group's nodes is listed once, with the same row as an
/// offline audit of the same objects (the live audit reads the pods twice, page by
/// page, and keeps only those on block nodes).
#[test]
fn a_live_audit_lists_the_job_on_a_capacity_block_that_ends_soon() {
    // It adds nodes: the control plane to this test alone.
    let turn = sandbox::shared_exclusive();
    let sb = turn.sb();
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/capacity-blocks"
    );
    let read = |file: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/{file}")).unwrap()).unwrap()
    };
    let ns = sb.namespace("ending");
    let nodes = read("managed-node-group/nodes.json");
    for node in nodes["items"].as_array().unwrap() {
        sb.recreate(node.clone());
    }
    for pod in read("running-pods.json")["items"].as_array().unwrap() {
        let mut pod = pod.clone();
        let phase = pod["status"]["phase"].clone();
        pod["metadata"]["namespace"] = json!(ns);
        // The garbage collector deletes pods whose owner does not exist; the job is
        // known by its labels.
        for field in ["ownerReferences", "uid"] {
            pod["metadata"].as_object_mut().unwrap().remove(field);
        }
        pod.as_object_mut().unwrap().remove("status");
        let out = sb.kubectl_stdin(&["create", "-f", "-"], Some(&pod.to_string()));
        assert!(out.status.success(), "create pod: {}", stderr(&out));
        let name = pod["metadata"]["name"].as_str().unwrap();
        let status = json!({"status": {"phase": phase}}).to_string();
        sb.ok(&[
            "-n",
            &ns,
            "patch",
            "pod",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ]);
    }
    let reservations = format!("{dir}/describe-capacity-reservations.json");
    let ending = |args: &[&str]| -> Vec<String> {
        let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["audit", "--reservations", &reservations])
            .args(["--now", "2026-11-23T09:00:00Z", "--ending-within", "6h"])
            .args(args)
            .env("KUBECONFIG", &sb.kubeconfig)
            .env_remove("TRAINPLACE_POLICY_DIR")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{out}{}",
            stderr(&o)
        );
        let section = out
            .split_once("JOBS ON CAPACITY BLOCKS ENDING WITHIN 6.0h")
            .unwrap_or_else(|| panic!("no section:\n{out}{}", stderr(&o)))
            .1;
        section.lines().skip(2).map(String::from).collect()
    };
    let live = ending(&["-n", &ns]);
    let offline = ending(&[
        "--from",
        "tests/fixtures/capacity-blocks/running-pods.json",
        "--cluster",
        "tests/fixtures/capacity-blocks/managed-node-group",
    ]);
    for node in nodes["items"].as_array().unwrap() {
        sb.ok(&["delete", "node", node["metadata"]["name"].as_str().unwrap()]);
    }
    assert_eq!(live.len(), 1, "one job on the ending block: {live:?}");
    assert_eq!(
        live[0].split_whitespace().skip(1).collect::<Vec<_>>(),
        offline[0].split_whitespace().skip(1).collect::<Vec<_>>(),
        "the live row (namespace {ns}) is the offline one"
    );
    assert!(live[0].starts_with(&ns), "{live:?}");
}
