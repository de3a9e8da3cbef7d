//! Shared test helpers: scenarios, the real schemas vendored in `schemas/`.
#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;
use trainplace_advisor::aws::offerings::parse_offerings;
use trainplace_advisor::{AdviceRequest, Facts, Recommendation, recommend};
use trainplace_engine::Policy;

pub fn schemas_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    assert!(
        dir.is_dir(),
        "schemas missing at {} (vendored in the repo: schemas/README.md)",
        dir.display()
    );
    dir
}

fn read(rel: &str) -> String {
    let path = schemas_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// eksctl's JSON schema (draft-07).
pub fn eksctl_validator() -> jsonschema::Validator {
    // The schema's `$ref`s contain `|` (`#/definitions/k8s.io|api|core|v1.TaintEffect`),
    // which the draft-07 meta-schema's uri-reference format rejects; percent-encoding it
    // in the refs (only) is the same reference, as URI fragments are percent-decoded.
    let text = read("schema.json");
    let mut schema: Value = serde_json::from_str(&text).unwrap();
    encode_refs(&mut schema);
    jsonschema::draft7::new(&schema).expect("eksctl schema compiles")
}

fn encode_refs(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                match child {
                    Value::String(s) if k == "$ref" => *s = s.replace('|', "%7C"),
                    _ => encode_refs(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(encode_refs),
        _ => {}
    }
}

/// `spec.versions[0].schema.openAPIV3Schema` of a CRD file.
pub fn crd_validator(rel: &str) -> jsonschema::Validator {
    let crd: Value = serde_yaml_ng::from_str(&read(rel)).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert!(schema.is_object(), "{rel}: no openAPIV3Schema");
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(schema)
        .unwrap_or_else(|e| panic!("{rel}: schema does not compile: {e}"))
}

pub fn assert_valid(v: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} fails its schema:\n{}\n{}",
        errors.join("\n"),
        serde_yaml_ng::to_string(doc).unwrap()
    );
}

pub fn offerings_fixture() -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/capacity-block-offerings.json"),
    )
    .unwrap()
}

pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name),
    )
    .unwrap()
}

/// The instant scenarios are planned at.
pub const NOW: &str = "2026-11-22T00:00:00Z";

/// [`NOW`] as a timestamp: what a test plans at instead of the wall clock, so the
/// fixtures' offerings (from 2026-12-01) and reservations stay ahead of it on any day
/// the tests run. (With the wall clock, two tests began to fail on 2026-12-07.)
pub fn now() -> jiff::Timestamp {
    NOW.parse().expect("NOW is a timestamp")
}

/// A named scenario: request + facts.
pub fn scenario(name: &str) -> (AdviceRequest, Facts) {
    let base = AdviceRequest {
        region: Some("us-east-1".into()),
        // The fixtures' offerings start 2026-12-01: plan as of a fixed day before.
        now: Some(NOW.into()),
        ..Default::default()
    };
    let offers = Facts {
        offerings: Some(parse_offerings(&offerings_fixture()).unwrap()),
        ..Default::default()
    };
    match name {
        "h100-blocks" => (
            AdviceRequest {
                gpus: Some(64),
                family: Some("h100".into()),
                duration_days: Some(7.0),
                ..base
            },
            offers,
        ),
        "h100-no-offerings" => (
            AdviceRequest {
                gpus: Some(64),
                family: Some("h100".into()),
                duration_days: Some(7.0),
                ..base
            },
            Facts::default(),
        ),
        "l40s-on-demand" => (
            AdviceRequest {
                gpus: Some(16),
                family: Some("l40s".into()),
                duration_hours: Some(30.0),
                availability_zones: vec!["us-east-1b".into()],
                ..base
            },
            Facts::default(),
        ),
        "a100-odcr" => (
            AdviceRequest {
                gpus: Some(16),
                family: Some("a100".into()),
                duration_days: Some(2.0),
                capacity: Some("odcr".into()),
                reservation_id: Some("cr-0123456789abcdef0".into()),
                ..base
            },
            Facts::default(),
        ),
        "single-node" => (
            AdviceRequest {
                gpus: Some(8),
                family: Some("h200".into()),
                duration_hours: Some(10.0),
                capacity: Some("on-demand".into()),
                ..base
            },
            Facts::default(),
        ),
        "trainium" => (
            AdviceRequest {
                gpus: Some(32),
                family: Some("trainium".into()),
                duration_days: Some(2.0),
                capacity: Some("on-demand".into()),
                ..base
            },
            Facts::default(),
        ),
        other => panic!("unknown scenario {other}"),
    }
}

/// The artifacts of a scenario, by file name.
pub fn artifacts(name: &str, framework: &str) -> std::collections::BTreeMap<String, String> {
    let rec = recommendation(name, framework);
    trainplace_advisor::artifacts::artifacts(&rec, &Policy::embedded())
        .into_iter()
        .map(|a| (a.name, a.content))
        .collect()
}

/// The artifacts of a scenario on the Karpenter route (`route: karpenter`), by file name.
pub fn karpenter_artifacts(
    name: &str,
    framework: &str,
) -> std::collections::BTreeMap<String, String> {
    let rec = karpenter_recommendation(name, framework);
    trainplace_advisor::artifacts::artifacts(&rec, &Policy::embedded())
        .into_iter()
        .map(|a| (a.name, a.content))
        .collect()
}

pub fn recommendation(name: &str, framework: &str) -> Recommendation {
    recommendation_on(name, framework, None)
}

/// The scenario's plan on the Karpenter route.
pub fn karpenter_recommendation(name: &str, framework: &str) -> Recommendation {
    recommendation_on(name, framework, Some("karpenter"))
}

/// The scenario's plan on `route` (`None`: the default).
pub fn recommendation_on(name: &str, framework: &str, route: Option<&str>) -> Recommendation {
    let (mut req, facts) = scenario(name);
    req.framework = Some(framework.into());
    req.route = route.map(str::to_string);
    let policy = Policy::embedded();
    let valid = req
        .validate(&policy.catalog, jiff::Timestamp::now())
        .unwrap();
    recommend(&valid, &policy.catalog, &facts).unwrap()
}

/// Stand-in `aws`, `eksctl`, `kubectl`, `helm`, `trainplace` and `date` in `dir/bin`.
/// Each appends its command line to `dir/calls.log`. `aws` and `eksctl` remember what
/// they bought or created in `dir/state`, so a second run of `aws-cli.sh` sees it:
/// `purchase-capacity-block` records the block with its tags and
/// `describe-capacity-reservations` finds it by every tag its query names; placement groups, the cluster
/// and nodegroups likewise, the Local Zone opt-in, and scheduled actions by group and
/// name; an Auto Scaling group is named after its EKS nodegroup (`describe-nodegroup`)
/// or its eksctl stack (`describe-stack-resource`); `kubectl` says a Job is Complete when asked for its conditions
/// and names Karpenter's image when asked for its Deployment. Any call whose
/// command line contains `$FAIL_ON` (when set) fails with exit 1; an offerings listing answers
/// the file `$LISTED_OFFERINGS` names, else none; so a test can stop a run at a chosen step. `trainplace` (the
/// diagnosis) exits `diagnose_exit`; `date` prints `epoch`.
pub fn stand_ins(dir: &std::path::Path, diagnose_exit: i32, epoch: i64) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let aws = r#"case "$2" in
purchase-capacity-block)
  slot=$(printf '%s\n' "$*" | sed -n 's/.*Key=trainplace.io\/block,Value=\([0-9]*\).*/\1/p')
  if [ "${PURCHASE_ANSWERS_NONE:-}" = "$slot" ]; then echo None; exit 0; fi
  id=cr-0123456789abcde$(( $(wc -l < "$STATE") + 1 ))
  tags=$(printf '%s\n' "$*" | sed -n 's/.*--tag-specifications \([^ ]*\).*/\1/p')
  echo "block $id $tags" >> "$STATE"
  echo "$id";;
describe-capacity-block-offerings)
  case "$*" in
  *"--query length"*)
    # The re-read of one offering: 1 while it is for sale, 0 once in SOLD_OUT.
    id=$(printf '%s\n' "$*" | sed -n "s/.*CapacityBlockOfferingId=='\([^']*\)'.*/\1/p")
    case " ${SOLD_OUT:-} " in *" $id "*) echo 0;; *) echo 1;; esac;;
  *) if [ -n "${LISTED_OFFERINGS:-}" ]; then cat "$LISTED_OFFERINGS"; else echo '{"CapacityBlockOfferings": []}'; fi;;
  esac;;
list-service-quotas) echo "${FSX_QUOTA_GIB:-1000000.0}";;
get-parameter) echo ami-0123456789abcdef0;;
describe-file-systems) echo 0;;
describe-capacity-reservations)
  # The first bought block carrying every tag the query names (Key=='K' && Value=='V').
  pairs=$(printf '%s\n' "$*" | grep -o "Key=='[^']*' && Value=='[^']*'" | sed "s/Key=='\([^']*\)' && Value=='\([^']*\)'/Key=\1,Value=\2}/")
  id=
  while read -r kind cr tags; do
    [ "$kind" = block ] || continue
    ok=1
    for p in $pairs; do case "$tags" in *"$p"*) ;; *) ok=0;; esac; done
    if [ "$ok" = 1 ]; then id=$cr; break; fi
  done < "$STATE"
  echo "${id:-None}";;
describe-placement-groups)
  name=$(printf '%s\n' "$*" | sed -n 's/.*Name=group-name,Values=\([^ ]*\).*/\1/p')
  if grep -qx "pg $name" "$STATE"; then echo "$name"; else echo None; fi;;
create-placement-group)
  name=$(printf '%s\n' "$*" | sed -n 's/.*--group-name \([^ ]*\).*/\1/p')
  echo "pg $name" >> "$STATE";;
get-service-quota) echo 1000000.0;;
describe-availability-zones)
  case "$*" in
  *GroupName*) echo us-east-1-dfw-2;;
  *) if grep -qx "lz opted-in" "$STATE"; then echo opted-in; else echo not-opted-in; fi;;
  esac;;
modify-availability-zone-group) echo "lz opted-in" >> "$STATE";;
put-rule)
  echo "rule $*" >> "$STATE"
  name=$(printf '%s\n' "$*" | sed -n 's/.*--name \([^ ]*\).*/\1/p')
  echo "arn:aws:events:us-east-1:123456789012:rule/$name";;
create-topic)
  name=$(printf '%s\n' "$*" | sed -n 's/.*--name \([^ ]*\).*/\1/p')
  echo "arn:aws:sns:us-east-1:123456789012:$name";;
describe-subnets) echo subnet-0123456789abcdef0;;
describe-cluster) echo sg-0123456789abcdef0;;
describe-nodegroup)
  ng=$(printf '%s\n' "$*" | sed -n 's/.*--nodegroup-name \([^ ]*\).*/\1/p')
  echo "eks-$ng-asg";;
describe-stack-resource)
  stack=$(printf '%s\n' "$*" | sed -n 's/.*--stack-name \([^ ]*\).*/\1/p')
  echo "$stack-NodeGroup-asg";;
describe-scheduled-actions)
  key=$(printf '%s\n' "$*" | sed -n 's/.*--auto-scaling-group-name \([^ ]*\) --scheduled-action-names \([^ ]*\).*/\1 \2/p' | tr -d '"')
  if grep -qx "action $key" "$STATE"; then echo 1; else echo 0; fi;;
put-scheduled-update-group-action)
  key=$(printf '%s\n' "$*" | sed -n 's/.*--auto-scaling-group-name \([^ ]*\) --scheduled-action-name \([^ ]*\).*/\1 \2/p' | tr -d '"')
  echo "action $key" >> "$STATE";;
*) echo '{"CapacityBlockOfferings": []}';;
esac"#;
    let eksctl = r#"name=$(printf '%s\n' "$*" | sed -n 's/.*--name \([^ ]*\).*/\1/p')
case "$1 $2" in
"get cluster") grep -qx cluster "$STATE";;
"get nodegroup") grep -qx nodegroups "$STATE" || grep -qx "ng $name" "$STATE";;
"create cluster") printf 'cluster\nnodegroups\n' >> "$STATE";;
"create nodegroup")
  include=$(printf '%s\n' "$*" | sed -n 's/.*--include \([^ ]*\).*/\1/p')
  for ng in $(echo "$include" | tr ',' ' '); do echo "ng $ng" >> "$STATE"; done;;
esac"#;
    let log = dir.join("calls.log");
    let state = dir.join("state");
    for tool in ["aws", "eksctl", "kubectl", "helm", "trainplace", "date"] {
        let body = match tool {
            "date" => format!("echo {epoch}"),
            "aws" => aws.to_string(),
            "eksctl" => eksctl.to_string(),
            "trainplace" => format!("exit {diagnose_exit}"),
            // A Job's conditions (the per-node check's wait): Complete.
            // The GB200 clique check: CLIQUE_NODES nodes (default 64) labelled with
            // CLIQUES' cliques in turn (default one).
            // Karpenter's Deployment image (karpenter-prerequisites.sh): v1.14.1.
            "kubectl" => "case \"$*\" in *name=karpenter*) echo public.ecr.aws/karpenter/controller:1.14.1;; *conditions*) echo Complete;; *clique*) i=0; set -- ${CLIQUES:-c1.0}; while [ $i -lt ${CLIQUE_NODES:-64} ]; do eval echo \\${$(( i % $# + 1 ))}; i=$((i + 1)); done;; esac".to_string(),
            _ => String::new(),
        };
        let path = bin.join(tool);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nSTATE='{}'\ntouch \"$STATE\"\necho \"{tool} $*\" >> '{}'\nif [ -n \"${{FAIL_ON:-}}\" ]; then case \"{tool} $*\" in *\"$FAIL_ON\"*) echo \"stand-in {tool} fails: $FAIL_ON\" >&2; exit 1;; esac; fi\n{body}\n",
                state.display(),
                log.display()
            ),
        )
        .unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&path)
            .status()
            .unwrap();
    }
}

/// Run `sh aws-cli.sh ARGS` in `dir` (holding the artifacts and `stand_ins`), failing at
/// the call containing `fail_on`; the output and the calls of this run only.
pub fn run_in(
    dir: &std::path::Path,
    fail_on: Option<&str>,
    args: &[&str],
) -> (std::process::Output, String) {
    let script = std::fs::read_to_string(dir.join("aws-cli.sh")).unwrap_or_default();
    let confirm = confirmation(&script);
    let env: Vec<(&str, &str)> = confirm
        .as_deref()
        .map(|fee| vec![("CONFIRM_PURCHASE_USD", fee)])
        .unwrap_or_default();
    run_in_env(dir, fail_on, args, &env)
}

/// The upfront fee `aws-cli.sh` asks to see in `CONFIRM_PURCHASE_USD` before it buys,
/// read from the script's own message; `None` when it buys nothing.
pub fn confirmation(script: &str) -> Option<String> {
    let at = script.find("run again with CONFIRM_PURCHASE_USD=")?;
    let rest = &script[at + "run again with CONFIRM_PURCHASE_USD=".len()..];
    Some(
        rest.chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect(),
    )
}

/// `run_in` with `env` set (and no confirmation unless `env` gives one).
pub fn run_in_env(
    dir: &std::path::Path,
    fail_on: Option<&str>,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Output, String) {
    let log = dir.join("calls.log");
    let _ = std::fs::remove_file(&log);
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("aws-cli.sh")
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("FAIL_ON")
        .env_remove("CONFIRM_PURCHASE_USD")
        .envs(env.iter().copied());
    if let Some(f) = fail_on {
        cmd.env("FAIL_ON", f);
    }
    let out = cmd.output().unwrap();
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    (out, calls)
}

/// How many of a run's recorded calls (`run_in`) start with `what`.
pub fn count(calls: &str, what: &str) -> usize {
    calls.lines().filter(|l| l.starts_with(what)).count()
}

/// The plan for 10,000 H100 on-demand for 14 days: split over several nodegroups,
/// placement groups and subnets.
pub fn split_plan() -> trainplace_advisor::Advice {
    split_plan_on(None)
}

/// `split_plan` on `route` (`None`: the default).
pub fn split_plan_on(route: Option<&str>) -> trainplace_advisor::Advice {
    let req = AdviceRequest {
        route: route.map(str::to_string),
        gpus: Some(10_000),
        family: Some("h100".into()),
        duration_days: Some(14.0),
        capacity: Some("on-demand".into()),
        region: Some("us-east-1".into()),
        now: Some(NOW.into()),
        ..Default::default()
    };
    trainplace_advisor::advise(
        &req,
        &trainplace_advisor::RawFacts::default(),
        &Policy::embedded(),
        jiff::Timestamp::now(),
    )
    .unwrap()
}

/// The job's nodegroups of an eksctl ClusterConfig: every one but the system nodegroup.
pub fn gpu_nodegroups(cluster_config: &Value) -> Vec<Value> {
    cluster_config["managedNodeGroups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|ng| ng["name"] != trainplace_advisor::artifacts::eksctl::SYSTEM_NODEGROUP)
        .cloned()
        .collect()
}

/// The content of the artifact `name` the advice emits; panics naming it when it is not.
pub fn emitted<'a>(advice: &'a trainplace_advisor::Advice, name: &str) -> &'a str {
    &advice
        .artifacts
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("{name} not emitted"))
        .content
}
