//! DRA device claims: what a pod's `spec.resourceClaims` ask for, resolved through the
//! ResourceClaimTemplates, ResourceClaims and NVIDIA ComputeDomains the caller hands in
//! (the CLI's input files and `--cluster DIR`, the webhook's inventory). Pure reading.
//!
//! A request counts by its device class (the catalog's `deviceClasses`): accelerators,
//! EFA interfaces, or a ComputeDomain's IMEX channel; `allocationMode: All` is every
//! device of the class on the node, known once the instance type is.
//! <https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/>

use std::sync::Arc;

use serde_json::Value;

use crate::read::devices::{Accelerators, Channel, Count, Domain, PodDevices};
use crate::read::json::Lookup as _;
use crate::read::json::{items, str_at};
use trainplace_catalog::{Catalog, Counts};

/// One device request of a claim: its class and count, or why it cannot be counted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    class: String,
    count: Result<Count, String>,
}

/// ResourceClaimTemplates, ResourceClaims and ComputeDomains by (namespace, name), in
/// persistent maps: the live watch adds or removes one in O(log n), and snapshots share
/// the rest.
#[derive(Debug, Clone, Default)]
pub struct Claims {
    templates: imbl::HashMap<(String, String), Arc<Vec<Request>>>,
    claims: imbl::HashMap<(String, String), Arc<Vec<Request>>>,
    /// Keyed by the channel template's name: what a pod's claim refers to.
    domains: imbl::HashMap<(String, String), Arc<Domain>>,
    /// A ComputeDomain's (namespace, name) -> its channel template's name.
    channels: imbl::HashMap<(String, String), String>,
}

fn read_count(r: &Value) -> Result<Count, String> {
    match r.get("allocationMode").and_then(Value::as_str) {
        Some("All")
            if r.get("selectors")
                .is_some_and(|s| !items(s, &[]).is_empty()) =>
        {
            Err("allocationMode All with selectors (all matching devices)".into())
        }
        Some("All") => Ok(Count::All),
        None | Some("ExactCount") => match r.get("count") {
            None => Ok(Count::Exact(1)),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Count::Exact)
                .ok_or_else(|| format!("count {v} is not a device count")),
        },
        Some(other) => Err(format!("allocationMode {other:?}")),
    }
}

/// The requests of a claim spec (`spec.devices.requests`): resource.k8s.io/v1 and
/// v1beta2 nest them under `exactly` or `firstAvailable`, v1beta1 has them inline.
fn read_requests(spec: &Value) -> Vec<Request> {
    items(spec, &["devices", "requests"])
        .iter()
        .map(|r| {
            if let Some(first) = r.get("firstAvailable").and_then(Value::as_array) {
                // Alternatives of one class count as the fewest devices any of them asks
                // for: the scheduler may allocate that one (`[8, 1]` can give a pod one
                // GPU). Alternatives of different classes, or one that cannot be
                // counted, leave the request uncounted.
                let mut alts = first.iter().map(|a| {
                    (
                        str_at(a, &["deviceClassName"]).unwrap_or("").to_string(),
                        read_count(a),
                    )
                });
                let Some((class, count)) = alts.next() else {
                    return Request {
                        class: String::new(),
                        count: Err("empty firstAvailable".into()),
                    };
                };
                let fewest = alts.try_fold(count, |fewest, (c, n)| match (fewest, n) {
                    _ if c != class => Err(()),
                    (Ok(Count::All), Ok(n)) | (Ok(n), Ok(Count::All)) => Ok(Ok(n)),
                    (Ok(Count::Exact(a)), Ok(Count::Exact(b))) => Ok(Ok(Count::Exact(a.min(b)))),
                    _ => Err(()),
                });
                return Request {
                    class,
                    count: fewest.unwrap_or_else(|()| {
                        Err("firstAvailable alternatives of different classes, or one that cannot be counted".into())
                    }),
                };
            }
            let exact = r.get("exactly").unwrap_or(r);
            Request {
                class: str_at(exact, &["deviceClassName"])
                    .unwrap_or("")
                    .to_string(),
                count: read_count(exact),
            }
        })
        .collect()
}

impl Claims {
    /// Index the DRA objects among `objects` (any kinds; others are skipped). Objects
    /// without a namespace are taken to be in `default_namespace`.
    pub fn add<'v>(
        &mut self,
        objects: impl IntoIterator<Item = &'v Value>,
        default_namespace: &str,
    ) {
        for o in objects {
            let group = str_at(o, &["apiVersion"])
                .and_then(|v| v.split('/').next())
                .unwrap_or("");
            let ns = str_at(o, &["metadata", "namespace"])
                .unwrap_or(default_namespace)
                .to_string();
            let Some(name) = str_at(o, &["metadata", "name"]) else {
                continue;
            };
            let key = (ns.clone(), name.to_string());
            match (group, str_at(o, &["kind"]).unwrap_or("")) {
                ("resource.k8s.io", "ResourceClaimTemplate") => {
                    let spec = o.lookup("/spec/spec").unwrap_or(&Value::Null);
                    self.templates.insert(key, Arc::new(read_requests(spec)));
                }
                ("resource.k8s.io", "ResourceClaim") => {
                    let spec = o.get("spec").unwrap_or(&Value::Null);
                    self.claims.insert(key, Arc::new(read_requests(spec)));
                }
                ("resource.nvidia.com", "ComputeDomain") => {
                    let Some(channel) =
                        str_at(o, &["spec", "channel", "resourceClaimTemplate", "name"])
                    else {
                        continue;
                    };
                    let num_nodes = o
                        .lookup("/spec/numNodes")
                        .and_then(Value::as_u64)
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0);
                    if let Some(old) = self.channels.insert(key, channel.to_string()) {
                        self.domains.remove(&(ns.clone(), old));
                    }
                    self.domains.insert(
                        (ns, channel.to_string()),
                        Arc::new(Domain {
                            name: name.to_string(),
                            num_nodes,
                        }),
                    );
                }
                _ => {}
            }
        }
    }

    /// Take back the object of API group `group`, `kind`, `namespace`/`name` that
    /// [`Claims::add`] indexed; other kinds change nothing.
    pub(crate) fn remove(&mut self, group: &str, kind: &str, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        match (group, kind) {
            ("resource.k8s.io", "ResourceClaimTemplate") => {
                self.templates.remove(&key);
            }
            ("resource.k8s.io", "ResourceClaim") => {
                self.claims.remove(&key);
            }
            ("resource.nvidia.com", "ComputeDomain") => {
                if let Some(channel) = self.channels.remove(&key) {
                    self.domains.remove(&(key.0, channel));
                }
            }
            _ => {}
        }
    }

    pub fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.claims.is_empty() && self.domains.is_empty()
    }

    /// The requests of a pod's claim entry, and the ComputeDomain behind a channel template.
    fn lookup(&self, ns: &str, entry: &Value) -> Lookup<'_> {
        let key = |name: &str| (ns.to_string(), name.to_string());
        let template = str_at(entry, &["resourceClaimTemplateName"])
            .or_else(|| str_at(entry, &["source", "resourceClaimTemplateName"]));
        if let Some(t) = template {
            if let Some(d) = self.domains.get(&key(t)) {
                return Lookup::Domain(d);
            }
            return match self.templates.get(&key(t)) {
                Some(r) => Lookup::Requests(r),
                None => Lookup::Missing(format!("ResourceClaimTemplate {t}")),
            };
        }
        let claim = str_at(entry, &["resourceClaimName"])
            .or_else(|| str_at(entry, &["source", "resourceClaimName"]));
        match claim {
            Some(c) => match self.claims.get(&key(c)) {
                Some(r) => Lookup::Requests(r),
                None => Lookup::Missing(format!("ResourceClaim {c}")),
            },
            None => Lookup::Missing(
                "a claim source (resourceClaimTemplateName or resourceClaimName)".into(),
            ),
        }
    }
}

enum Lookup<'a> {
    Requests(&'a [Request]),
    Domain(&'a Domain),
    Missing(String),
}

/// Containers (indices into `spec.containers`) that list one of `claims`.
pub(crate) fn containers_using(pod: &Value, claims: &[String]) -> Vec<usize> {
    items(pod, &["spec", "containers"])
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            items(c, &["resources", "claims"])
                .iter()
                .any(|r| str_at(r, &["name"]).is_some_and(|n| claims.iter().any(|c| c == n)))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Resolve the pod's `spec.resourceClaims` in `namespace` against `sources` (the first
/// that knows a claim wins).
pub(crate) fn resolve(
    pod: &Value,
    namespace: &str,
    sources: &[&Claims],
    catalog: &Catalog,
) -> PodDevices {
    let mut out = PodDevices::default();
    let claims = items(pod, &["spec", "resourceClaims"]);
    if !crate::budget::draw_len("spec.resourceClaims", claims.len()) {
        return out;
    }
    for entry in claims {
        let name = str_at(entry, &["name"]).unwrap_or("").to_string();
        let mut missing = None;
        let mut found = None;
        for s in sources {
            match s.lookup(namespace, entry) {
                Lookup::Missing(what) => missing = Some(what),
                hit => {
                    found = Some(hit);
                    break;
                }
            }
        }
        match found {
            Some(Lookup::Domain(d)) => {
                out.channel = Some(Channel {
                    claim: name.clone(),
                    domain: Some(d.clone()),
                    used: !containers_using(pod, std::slice::from_ref(&name)).is_empty(),
                });
            }
            Some(Lookup::Requests(requests)) => {
                count_requests(pod, &name, requests, catalog, &mut out)
            }
            _ => out.unresolved.push(format!(
                "claim {name}: {} not found in the input or the cluster",
                missing.unwrap_or_else(|| "its source".into())
            )),
        }
    }
    out
}

fn count_requests(
    pod: &Value,
    name: &str,
    requests: &[Request],
    catalog: &Catalog,
    out: &mut PodDevices,
) {
    for r in requests {
        let count = match &r.count {
            Ok(c) => *c,
            Err(why) => {
                out.unresolved
                    .push(format!("claim {name}: device class {}: {why}", r.class));
                continue;
            }
        };
        let Some(class) = catalog.device_class(&r.class) else {
            out.unresolved.push(format!(
                "claim {name}: device class {:?} is not in the catalog's deviceClasses",
                r.class
            ));
            continue;
        };
        match class.counts {
            Counts::Accelerator => {
                let resource = class.resource.clone().unwrap_or_default();
                out.accelerators = Some(match out.accelerators.take() {
                    Some(a) => Accelerators {
                        count: a.count.plus(count),
                        shared: a.shared || class.shared,
                        ..a
                    },
                    None => Accelerators {
                        resource,
                        count,
                        shared: class.shared,
                    },
                });
            }
            Counts::Efa => out.efa = Some(out.efa.map_or(count, |c| c.plus(count))),
            Counts::ImexChannel => {
                out.channel = Some(Channel {
                    claim: name.to_string(),
                    domain: None,
                    used: !containers_using(pod, &[name.to_string()]).is_empty(),
                });
                continue;
            }
        }
        if !out.device_claims.iter().any(|c| c == name) {
            out.device_claims.push(name.to_string());
        }
    }
}

#[cfg(test)]
mod tests;
