//! The sizes an UPDATE compares a finding by: how many pods the job and each template
//! make, and what each pod of a template asks for. A finding the old object was
//! admitted with is the same finding after the update only if neither grew: a shrink
//! (Kueue's partial admission, an autoscaler scaling down) keeps it, a growth is judged,
//! unless back to a size the stored template's admission mark vouches for (Kueue
//! restoring what it lowered).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::facts::policy::Policy;
use crate::facts::requester::Requester;
use crate::judge::upstream::signed_before;
use crate::read::json::Lookup as _;
use crate::read::podspec::PodView;
use crate::read::workload::{Kind, Site, locate};
use trainplace_catalog::Catalog;

/// One template: the pods it makes (`None`: unknown, many) and what each asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Template {
    pods: Option<u32>,
    devices: Value,
    /// The job size the template's admission mark vouches for, when it verifies (a
    /// stored object's): the largest the job was admitted at since it was created.
    signed: Option<u32>,
}

/// The sizes of one object, by template field (`Finding::site`).
#[derive(Debug, Default)]
pub(crate) struct Sizes {
    /// Pods of the whole job, over the templates that ask for devices; `None` when a
    /// template's count is unknown.
    job: Option<u32>,
    templates: BTreeMap<String, Template>,
}

impl Sizes {
    /// Read the object's sizes; empty when it cannot be read or is a Pod (whose size
    /// an UPDATE cannot change: its spec and env are immutable).
    pub(crate) fn of(object: &Value, catalog: &Catalog) -> Sizes {
        let Ok((kind, sites)) = locate(object) else {
            return Sizes::default();
        };
        Sizes::of_sites(object, kind, &sites, catalog)
    }

    /// [`Sizes::of`] an object already located.
    fn of_sites(object: &Value, kind: Kind, sites: &[Site], catalog: &Catalog) -> Sizes {
        if !kind.is_workload() || kind == Kind::TrainJob || sites.is_empty() {
            return Sizes::default();
        }
        let mut out = Sizes {
            job: Some(0),
            templates: BTreeMap::new(),
        };
        for site in sites {
            let Some(view) = object
                .lookup(&site.pointer)
                .and_then(|t| PodView::read(t, &site.field, catalog).ok())
            else {
                return Sizes::default();
            };
            let devices = serde_json::json!([
                view.containers
                    .iter()
                    .map(|c| serde_json::json!([c.name, c.accelerators, c.efa]))
                    .collect::<Vec<_>>(),
                view.pod.lookup("/spec/resourceClaims"),
            ]);
            let asks = view.accelerators().is_some() || view.efa() > 0 || view.claims > 0;
            if asks {
                out.job = match (out.job, site.pods) {
                    (Some(total), Some(n)) => Some(total.saturating_add(n)),
                    _ => None,
                };
            }
            out.templates.insert(
                site.field.clone(),
                Template {
                    pods: site.pods,
                    devices,
                    signed: None,
                },
            );
        }
        out
    }

    /// The sizes of a stored object, with the job size each template's mark vouches for
    /// (`upstream::signed_before`): a job restored to a size it was admitted at (Kueue
    /// preempting a job it admitted in part) did not grow past what was judged.
    pub(crate) fn of_stored(stored: &Value, policy: &Policy, who: &Requester<'_>) -> Sizes {
        let Ok((kind, sites)) = locate(stored) else {
            return Sizes::default();
        };
        let mut sizes = Sizes::of_sites(stored, kind, &sites, &policy.catalog);
        for site in &sites {
            if let Some(t) = sizes.templates.get_mut(&site.field) {
                t.signed = signed_before(stored, site, kind, who, policy).filter(|&n| n > 0);
            }
        }
        sizes
    }

    /// Whether a finding at `site` is the same after the update: `Some(true)` when the
    /// job and the template are no larger than before and the template's pods ask for
    /// the same devices, `Some(false)` when anything grew or changed, `None` when the
    /// sizes are not known on both sides (the caller compares the finding's words).
    pub(crate) fn kept(&self, new: &Sizes, site: &str) -> Option<bool> {
        if self.templates.is_empty() || new.templates.is_empty() {
            return None;
        }
        // `None` is a count not known, judged as many pods.
        let not_larger = |old: Option<u32>, new: Option<u32>| match (old, new) {
            (_, None) => old.is_none(),
            (None, Some(_)) => true,
            (Some(o), Some(n)) => n <= o,
        };
        // The most the job was admitted at: its size now, or what a mark vouches for.
        let signed = self.templates.values().filter_map(|t| t.signed).max();
        let admitted = |now: Option<u32>| match (now, signed) {
            (Some(n), Some(s)) => Some(n.max(s)),
            _ => now,
        };
        if !not_larger(admitted(self.job), new.job) {
            return Some(false);
        }
        // Every template a finding names (several, when they failed the same way).
        let kept = crate::judge::finding::sites(site).all(|site| {
            match (self.templates.get(site), new.templates.get(site)) {
                (Some(o), Some(n)) => {
                    o.devices == n.devices && not_larger(admitted(o.pods), n.pods)
                }
                // A finding about the object as a whole, or a template only one side has.
                (None, None) => true,
                _ => false,
            }
        });
        Some(kept)
    }
}
