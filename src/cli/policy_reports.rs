//! The audit's results as wgpolicyk8s.io/v1alpha2 policy reports: one ClusterPolicyReport
//! for `-o json`, and with `--write-reports` one PolicyReport per namespace written into
//! the cluster (a ClusterPolicyReport for cluster-scoped objects), as Kyverno's background
//! scan keeps its reports. The format:
//! <https://github.com/kubernetes-sigs/wg-policy-prototypes/blob/master/policy-report/crd/v1alpha2/wgpolicyk8s.io_policyreports.yaml>

use std::collections::BTreeMap;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};
use trainplace_engine::{Mode, Verdict};

/// The name of trainplace's report in each namespace (and of its ClusterPolicyReport).
pub const REPORT_NAME: &str = "trainplace";
/// `source` of every result, and the label value that marks a report as trainplace's.
pub const SOURCE: &str = "trainplace";
/// The server-side apply field manager the reports are written with.
const MANAGER: &str = "trainplace-audit";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// `pass`, `warn` or `fail` for one object: fail when denied, warn when a finding warns
/// or audits or parts of the layout are missing.
pub fn result_of(v: &Verdict) -> &'static str {
    if !v.allowed {
        "fail"
    } else if v
        .findings
        .iter()
        .any(|f| f.mode == Mode::Warn || f.mode == Mode::Audit)
        || !v.changes.is_empty()
    {
        "warn"
    } else {
        "pass"
    }
}

/// The results for one object: one per finding (its rule, `fail`/`high` when the rule
/// enforces, else `warn`/`medium`), a `layout` result (`low`) when parts of the
/// recommended layout are missing, or one `layout` pass.
pub fn results(v: &Verdict) -> Vec<Value> {
    let mut resource = json!({"apiVersion": v.object["apiVersion"], "kind": v.kind, "name": v.name,
        "namespace": v.namespace, "uid": v.object["metadata"]["uid"]});
    // An object read from a file may have no uid: the field is left out, not null.
    if let Some(r) = resource.as_object_mut() {
        r.retain(|_, v| !v.is_null());
    }
    let mut out = Vec::new();
    for f in &v.findings {
        let result = match f.mode {
            Mode::Enforce => "fail",
            _ => "warn",
        };
        out.push(
            json!({"policy": "trainplace", "rule": f.rule.as_str(), "result": result,
            "severity": if result == "fail" { "high" } else { "medium" },
            "message": f.message(), "properties": {"mode": f.mode.as_str(), "site": f.site},
            "resources": [resource.clone()]}),
        );
    }
    if !v.changes.is_empty() {
        let missing: Vec<String> = v.changes.iter().map(|c| c.what.clone()).collect();
        out.push(json!({"policy": "trainplace", "rule": "layout", "result": "warn", "severity": "low",
            "message": format!("{} part(s) of the recommended layout missing: {}", missing.len(), missing.join("; ")),
            "resources": [resource]}));
    } else if v.findings.is_empty() {
        out.push(json!({"policy": "trainplace", "rule": "layout", "result": "pass", "resources": [resource]}));
    }
    out
}

/// A ClusterPolicyReport of every object (`audit -o json`); its summary counts objects
/// by their worst result.
pub fn report(verdicts: &[Verdict]) -> Value {
    let mut summary = json!({"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0});
    let mut all = Vec::new();
    for v in verdicts {
        let r = result_of(v);
        summary[r] = json!(summary[r].as_u64().unwrap_or(0) + 1);
        all.extend(results(v));
    }
    json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "ClusterPolicyReport",
        "metadata": {"name": "trainplace-audit"}, "summary": summary, "results": all})
}

/// The reports to write: results by namespace, and those of cluster-scoped objects.
#[derive(Debug, Default)]
pub struct Reports {
    pub namespaced: BTreeMap<String, Vec<Value>>,
    pub cluster: Vec<Value>,
}

impl Reports {
    /// Each object's results (and `extra`, e.g. the Capacity Block ends, each placed by
    /// its first resource's namespace), stamped with `source` and `timestamp`.
    pub fn build(
        verdicts: &[Verdict],
        cluster_scoped: &[&str],
        extra: Vec<Value>,
        now: jiff::Timestamp,
    ) -> Reports {
        let stamp = json!({"seconds": now.as_second(), "nanos": now.subsec_nanosecond()});
        let mut reports = Reports::default();
        let mut place = |mut r: Value, namespace: Option<&str>| {
            r["source"] = json!(SOURCE);
            r["timestamp"] = stamp.clone();
            match namespace {
                Some(ns) if !ns.is_empty() => reports
                    .namespaced
                    .entry(ns.to_string())
                    .or_default()
                    .push(r),
                _ => reports.cluster.push(r),
            }
        };
        for v in verdicts {
            let ns = (!cluster_scoped.contains(&v.kind.as_str())).then_some(v.namespace.as_str());
            for r in results(v) {
                place(r, ns);
            }
        }
        for r in extra {
            let ns = r["resources"][0]["namespace"].as_str().map(str::to_string);
            place(r, ns.as_deref());
        }
        reports
    }
}

/// A report object: the results and a summary counting them by result.
pub fn report_object(kind: &str, namespace: Option<&str>, results: &[Value]) -> Value {
    let mut summary = json!({"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0});
    for r in results {
        if let Some(k) = r["result"].as_str() {
            summary[k] = json!(summary[k].as_u64().unwrap_or(0) + 1);
        }
    }
    let mut metadata = json!({"name": REPORT_NAME, "labels": {MANAGED_BY: SOURCE}});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": kind, "metadata": metadata,
        "summary": summary, "results": results})
}

/// What `write` did: the reports written (`namespace/name`, or the name for the
/// cluster's) and trainplace's own reports removed because their namespace has no
/// audited object left.
#[derive(Debug, Default)]
pub struct Written {
    pub written: Vec<String>,
    pub removed: Vec<String>,
}

fn api_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("wgpolicyk8s.io", "v1alpha2", kind),
        plural,
    )
}

fn not_installed(e: kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(s) if s.code == 404 => anyhow::anyhow!(
            "the PolicyReport CRDs (wgpolicyk8s.io) are not installed: apply https://github.com/kubernetes-sigs/wg-policy-prototypes/tree/master/policy-report/crd/v1alpha2 (or install Kyverno or Policy Reporter)"
        ),
        e => anyhow::anyhow!("{e}"),
    }
}

/// Write the reports with server-side apply (an existing report of trainplace's is
/// updated in place; nobody else's is read or changed), then delete trainplace's own
/// reports in the audited namespaces that have no audited object left. `scope` is the
/// one namespace audited, or every namespace.
pub async fn write(
    client: kube::Client,
    reports: &Reports,
    scope: Option<&str>,
) -> anyhow::Result<Written> {
    let mut done = Written::default();
    let apply = PatchParams::apply(MANAGER).force();
    let ar = api_resource("PolicyReport", "policyreports");
    for (ns, results) in &reports.namespaced {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let object = report_object("PolicyReport", Some(ns), results);
        api.patch(REPORT_NAME, &apply, &Patch::Apply(&object))
            .await
            .map_err(not_installed)?;
        done.written.push(format!("{ns}/{REPORT_NAME}"));
    }
    let mine = ListParams::default().labels(&format!("{MANAGED_BY}={SOURCE}"));
    let all: Api<DynamicObject> = match scope {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    for old in all.list(&mine).await.map_err(not_installed)?.items {
        let ns = old.metadata.namespace.clone().unwrap_or_default();
        if old.metadata.name.as_deref() != Some(REPORT_NAME) || reports.namespaced.contains_key(&ns)
        {
            continue;
        }
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        api.delete(REPORT_NAME, &DeleteParams::default()).await?;
        done.removed.push(format!("{ns}/{REPORT_NAME}"));
    }
    // Cluster-scoped objects are audited whatever the namespace scope.
    let cluster: Api<DynamicObject> = Api::all_with(
        client,
        &api_resource("ClusterPolicyReport", "clusterpolicyreports"),
    );
    if reports.cluster.is_empty() {
        match cluster.delete(REPORT_NAME, &DeleteParams::default()).await {
            Ok(_) => done.removed.push(REPORT_NAME.to_string()),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    } else {
        let object = report_object("ClusterPolicyReport", None, &reports.cluster);
        cluster
            .patch(REPORT_NAME, &apply, &Patch::Apply(&object))
            .await
            .map_err(not_installed)?;
        done.written.push(REPORT_NAME.to_string());
    }
    Ok(done)
}
