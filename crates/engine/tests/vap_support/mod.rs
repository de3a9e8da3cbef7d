//! Evaluates exported ValidatingAdmissionPolicies the way the API server does, with
//! the `cel` crate (which parses and evaluates, but does not type-check; the real API
//! server's check is tests/cluster_guardrails_alone.rs): `object`, `oldObject`, `request`, `namespaceObject` and `params`
//! bound as in the apiserver's admission CEL environment, `variables` evaluated in
//! order, then matchConditions and validations; a binding applies when its
//! namespaceSelector matches the namespace's labels. The Kubernetes list library's
//! `sum()` and `max()`, its regex library's `find()` and the cel-go strings extension
//! are installed, as in the apiserver (https://kubernetes.io/docs/reference/using-api/cel/).

// Shared by vap_equivalence.rs and vap_cel_shape.rs; each uses a part of it.
#![allow(dead_code)]

pub mod corpus;
#[path = "../fixture_env/mod.rs"]
pub mod fixture_env;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Value as Cel};
use serde_json::Value;

/// What the API server does with one object under one exported rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Pass,
    /// A validation failed; the binding's action (`enforce`, `warn`, `audit`).
    Flag(&'static str),
    /// Evaluation error (failurePolicy Fail refuses), or the engine's bad-object error.
    Refused,
}

/// JSON as the apiserver hands it to CEL: integers are `int`, objects are maps.
pub fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let map: HashMap<Key, Cel> = o
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            Cel::Map(Map { map: Arc::new(map) })
        }
    }
}

fn ints(list: &Cel, name: &str) -> Result<Vec<i64>, ExecutionError> {
    let Cel::List(items) = list else {
        return Err(ExecutionError::function_error(name, "not a list"));
    };
    items
        .iter()
        .map(|v| match v {
            Cel::Int(i) => Ok(*i),
            other => Err(ExecutionError::function_error(
                name,
                format!("{other:?} is not an int"),
            )),
        })
        .collect()
}

/// The Kubernetes list library's `sum()` (ints).
fn sum(This(this): This<Cel>) -> Result<Cel, ExecutionError> {
    Ok(Cel::Int(ints(&this, "sum")?.iter().sum()))
}

/// The Kubernetes list library's `max()`: an error on an empty list, as there.
fn max(This(this): This<Cel>) -> Result<Cel, ExecutionError> {
    ints(&this, "max")?
        .into_iter()
        .max()
        .map(Cel::Int)
        .ok_or_else(|| ExecutionError::function_error("max", "empty list"))
}

/// The Kubernetes list library's `min()`: an error on an empty list, as there.
fn min(This(this): This<Cel>) -> Result<Cel, ExecutionError> {
    ints(&this, "min")?
        .into_iter()
        .min()
        .map(Cel::Int)
        .ok_or_else(|| ExecutionError::function_error("min", "empty list"))
}

/// The Kubernetes regex library's `find`: the first match, or `''`.
fn find(This(this): This<Arc<String>>, pattern: Arc<String>) -> Result<Cel, ExecutionError> {
    let re = regex::Regex::new(&pattern)
        .map_err(|e| ExecutionError::function_error("find", e.to_string()))?;
    Ok(Cel::String(Arc::new(
        re.find(&this)
            .map_or(String::new(), |m| m.as_str().to_string()),
    )))
}

pub struct Apiserver {
    env: Arc<Env>,
    /// Parsed programs by source: the apiserver compiles a policy once, too.
    programs: std::sync::Mutex<HashMap<String, Arc<cel::Program>>>,
}

/// Who asks, in which namespace.
pub struct Request<'a> {
    pub namespace: &'a str,
    pub namespace_labels: BTreeMap<String, String>,
    pub groups: &'a [String],
}

impl Apiserver {
    pub fn new() -> Self {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("strings extension");
        Apiserver {
            env: Arc::new(env),
            programs: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Parse every expression of an exported policy; returns the first that does not
    /// parse. Only the syntax and the macros: `cel`'s `Env::compile` does not type-check
    /// as the API server does when the policy is created (that check runs against a real
    /// API server in tests/cluster_guardrails_alone.rs).
    pub fn parse_all(&self, policy: &Value) -> Result<usize, String> {
        let mut n = 0;
        for e in expressions(policy) {
            self.env
                .compile(&e)
                .map_err(|err| format!("{err:?} in {e}"))?;
            n += 1;
        }
        Ok(n)
    }

    fn eval(&self, ctx: &Context<'_, '_>, expr: &str) -> Result<Cel, String> {
        let cached = self.programs.lock().unwrap().get(expr).cloned();
        let program = match cached {
            Some(p) => p,
            None => {
                let p = Arc::new(self.env.compile(expr).map_err(|e| format!("{e:?}"))?);
                self.programs
                    .lock()
                    .unwrap()
                    .insert(expr.to_string(), p.clone());
                p
            }
        };
        program.execute(ctx).map_err(|e| format!("{e:?}"))
    }

    /// The message when the policy fails for `object` (None = passes or does not apply).
    pub fn violates(
        &self,
        policy: &Value,
        object: &Value,
        req: &Request<'_>,
    ) -> Result<Option<String>, String> {
        self.violates_update(policy, object, None, req)
    }

    /// The same for an UPDATE from `old` (a CREATE when `None`).
    pub fn violates_update(
        &self,
        policy: &Value,
        object: &Value,
        old: Option<&Value>,
        req: &Request<'_>,
    ) -> Result<Option<String>, String> {
        let kind = object["kind"].as_str().unwrap_or("");
        let mut ctx = Context::with_env(self.env.clone());
        ctx.add_function("sum", sum).map_err(|e| format!("{e:?}"))?;
        ctx.add_function("max", max).map_err(|e| format!("{e:?}"))?;
        ctx.add_function("min", min).map_err(|e| format!("{e:?}"))?;
        ctx.add_function("find", find)
            .map_err(|e| format!("{e:?}"))?;
        ctx.add_variable_from_value("object", to_cel(object));
        ctx.add_variable_from_value("oldObject", old.map_or(Cel::Null, to_cel));
        ctx.add_variable_from_value("params", Cel::Null);
        let api = object["apiVersion"].as_str().unwrap_or("");
        let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
        ctx.add_variable_from_value(
            "request",
            to_cel(&{
                let mut r = serde_json::json!({
                "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
                "namespace": req.namespace,
                "name": object["metadata"]["name"],
                "kind": {"group": group, "version": version, "kind": kind},
                "userInfo": {"username": "fixture-user", "groups": req.groups},
                });
                // A cluster-scoped object's request has no namespace at all.
                if kind == "ClusterTrainingRuntime" {
                    r.as_object_mut().map(|m| m.remove("namespace"));
                }
                r
            }),
        );
        // A cluster-scoped object has no namespace: `namespaceObject` is null and the
        // namespaceSelector does not apply.
        let cluster_scoped = kind == "ClusterTrainingRuntime";
        ctx.add_variable_from_value(
            "namespaceObject",
            if cluster_scoped {
                Cel::Null
            } else {
                to_cel(&serde_json::json!({
                    "metadata": {"name": req.namespace, "labels": req.namespace_labels},
                }))
            },
        );
        let spec = &policy["spec"];
        let ns_excluded =
            spec["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"]
                .as_array()
                .is_some_and(|v| v.iter().any(|n| n == req.namespace));
        if (ns_excluded && !cluster_scoped) || !matched(spec, group, kind) {
            return Ok(None);
        }
        for c in spec["matchConditions"].as_array().into_iter().flatten() {
            let expr = c["expression"].as_str().unwrap_or("");
            if self.eval(&ctx, expr)? != Cel::Bool(true) {
                return Ok(None);
            }
        }
        let mut variables: HashMap<Key, Cel> = HashMap::new();
        for v in spec["variables"].as_array().into_iter().flatten() {
            ctx.add_variable_from_value(
                "variables",
                Cel::Map(Map {
                    map: Arc::new(variables.clone()),
                }),
            );
            let name = v["name"].as_str().unwrap_or("");
            // The API server evaluates a variable only when read: the old object's
            // copies are read only on an UPDATE.
            if old.is_none() && name.starts_with("old") {
                continue;
            }
            let value = self
                .eval(&ctx, v["expression"].as_str().unwrap_or(""))
                .map_err(|e| format!("variable {name}: {e}"))?;
            variables.insert(Key::String(Arc::new(name.to_string())), value);
        }
        ctx.add_variable_from_value(
            "variables",
            Cel::Map(Map {
                map: Arc::new(variables),
            }),
        );
        for v in spec["validations"].as_array().into_iter().flatten() {
            match self.eval(&ctx, v["expression"].as_str().unwrap_or(""))? {
                Cel::Bool(true) => {}
                Cel::Bool(false) => {
                    // The message must evaluate to a string, as the apiserver requires.
                    let m = self.eval(&ctx, v["messageExpression"].as_str().unwrap_or(""))?;
                    let Cel::String(m) = m else {
                        return Err(format!("messageExpression gave {m:?}"));
                    };
                    return Ok(Some(m.to_string()));
                }
                other => return Err(format!("validation gave {other:?}")),
            }
        }
        Ok(None)
    }
}

/// Whether the policy's resourceRules match the object's group and kind.
fn matched(spec: &Value, group: &str, kind: &str) -> bool {
    let resource = match kind {
        "Pod" => "pods",
        "Job" => "jobs",
        "JobSet" => "jobsets",
        "PyTorchJob" => "pytorchjobs",
        "MPIJob" => "mpijobs",
        "LeaderWorkerSet" => "leaderworkersets",
        "TrainJob" => "trainjobs",
        "PaddleJob" => "paddlejobs",
        "TFJob" => "tfjobs",
        "XGBoostJob" => "xgboostjobs",
        "JAXJob" => "jaxjobs",
        "TrainingRuntime" => "trainingruntimes",
        "ClusterTrainingRuntime" => "clustertrainingruntimes",
        "RayCluster" => "rayclusters",
        "RayJob" => "rayjobs",
        "RayService" => "rayservices",
        "HyperPodPyTorchJob" => "hyperpodpytorchjobs",
        "Deployment" => "deployments",
        "ReplicaSet" => "replicasets",
        "StatefulSet" => "statefulsets",
        "DaemonSet" => "daemonsets",
        "ReplicationController" => "replicationcontrollers",
        "CronJob" => "cronjobs",
        "ResourceClaim" => "resourceclaims",
        "ResourceClaimTemplate" => "resourceclaimtemplates",
        _ => return false,
    };
    spec["matchConstraints"]["resourceRules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| {
            r["apiGroups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g == group))
                && r["resources"]
                    .as_array()
                    .is_some_and(|x| x.iter().any(|x| x == resource))
                && r["operations"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|o| o == "CREATE"))
        })
}

/// Every CEL expression of a policy.
pub fn expressions(policy: &Value) -> Vec<String> {
    let spec = &policy["spec"];
    let mut out = Vec::new();
    for (list, fields) in [
        ("matchConditions", &["expression"][..]),
        ("variables", &["expression"][..]),
        ("validations", &["expression", "messageExpression"][..]),
    ] {
        for item in spec[list].as_array().into_iter().flatten() {
            for f in fields {
                if let Some(e) = item[*f].as_str() {
                    out.push(e.to_string());
                }
            }
        }
    }
    out
}

/// A binding's namespaceSelector (matchExpressions only, as exported) over labels.
pub fn selects(binding: &Value, labels: &BTreeMap<String, String>) -> bool {
    let Some(exprs) =
        binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"].as_array()
    else {
        return true;
    };
    exprs.iter().all(|e| {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let have = labels.get(key).map(String::as_str);
        match e["operator"].as_str().unwrap_or("") {
            "In" => have.is_some_and(|h| values.contains(&h)),
            "NotIn" => !have.is_some_and(|h| values.contains(&h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            other => panic!("operator {other}"),
        }
    })
}
