//! `tooLarge` (the engine's `judge::bounds`): the first list past the bounds, as
//! `FIELD: WHAT (at most N)`, or `''`. Every policy reads it before anything else, so no
//! expression walks a list whose size it has not read: the API server's evaluation of
//! a walk grows with the square of the list's length.
//!
//! Level by level, each a size read of lists the level before has bounded: the
//! object's lists of templates; each template's containers and their resource names;
//! (precise mode) the env, node-selector terms, expressions, values, spread constraints
//! and anti-affinity terms of the templates that ask for devices.

use crate::judge::bounds::{
    FIX, MAX_CONTAINERS, MAX_ENV, MAX_EXPRESSIONS, MAX_LIMITS, MAX_SPREAD, MAX_TEMPLATES,
    MAX_TERMS, MAX_VALUES, PATCH_JOBS, TEMPLATE_LISTS,
};
use crate::vap::text::{fill, lit};

/// `has()` of every step of the dotted `path` under `root`, ANDed.
fn present(root: &str, path: &str) -> String {
    let mut at = root.to_string();
    let mut out = Vec::new();
    for part in path.split('.') {
        at = format!("{at}.{part}");
        out.push(format!("has({at})"));
    }
    out.join(" && ")
}

/// `cond ? text : rest`, for a chain of checks.
fn chain(checks: Vec<(String, String)>) -> String {
    checks
        .into_iter()
        .rev()
        .fold("''".to_string(), |rest, (cond, text)| {
            format!("({cond} ? {text} : {rest})")
        })
}

/// Level 1: the object's lists of templates, then each TrainJob patch's jobs.
fn template_lists() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = TEMPLATE_LISTS
        .iter()
        .map(|(kind, group, path)| {
            let group = group
                .map(|g| format!(" && object.apiVersion.startsWith({})", lit(g)))
                .unwrap_or_default();
            let list = format!("object.{path}");
            (
                format!(
                    "object.kind == {}{group} && {} && size({list}) > {MAX_TEMPLATES}",
                    lit(kind),
                    present("object", path)
                ),
                format!(
                    "{} + string(size({list})) + ' entries (at most {MAX_TEMPLATES})'",
                    lit(&format!("{path}: "))
                ),
            )
        })
        .collect();
    let jobs = format!("p.{PATCH_JOBS}");
    let big = format!(
        "{} && size({jobs}) > {MAX_TEMPLATES}",
        present("p", PATCH_JOBS)
    );
    out.push((
        format!("object.kind == 'TrainJob' && has(object.spec.runtimePatches) && object.spec.runtimePatches.exists(p, {big})"),
        format!(
            "{} + string(object.spec.runtimePatches.filter(p, {big}).map(p, size({jobs}))[0]) + ' entries (at most {MAX_TEMPLATES})'",
            lit(&format!("spec.runtimePatches[].{PATCH_JOBS}: "))
        ),
    ));
    out
}

/// Level 2 for template record `s` of `{t, f}`: its containers, then each one's
/// resource names (`''`: within the bounds).
fn template_shape() -> String {
    let spec = "s.t.spec";
    let count = |f: &str| format!("(has({spec}) && has({spec}.{f}) ? size({spec}.{f}) : 0)");
    let n = format!("({} + {})", count("containers"), count("initContainers"));
    let all = format!(
        "((has({spec}) && has({spec}.containers) ? {spec}.containers : []) + (has({spec}) && has({spec}.initContainers) ? {spec}.initContainers : []))"
    );
    let names = |which: &str| {
        format!("(has(c.resources) && has(c.resources.{which}) ? size(c.resources.{which}) : 0)")
    };
    let (lim, req) = (names("limits"), names("requests"));
    let bad = format!("{lim} > {MAX_LIMITS} || {req} > {MAX_LIMITS}");
    fill(
        "(@N@ > @MC@ ? s.f + ': ' + string(@N@) + ' containers and init containers (at most @MC@)'
 : @ALL@.exists(c, @BAD@) ? s.f + ': ' + @ALL@.filter(c, @BAD@).map(c, @LIM@ > @ML@ ? string(@LIM@) + ' resource names in one container\\'s limits (at most @ML@)' : string(@REQ@) + ' resource names in one container\\'s requests (at most @ML@)')[0]
 : '')",
        &[
            ("N", &n),
            ("ALL", &all),
            ("BAD", &bad),
            ("LIM", &lim),
            ("REQ", &req),
            ("MC", &MAX_CONTAINERS.to_string()),
            ("ML", &MAX_LIMITS.to_string()),
        ],
    )
}

/// Level 3 for a `devices` record `x` (precise mode): the lists a template that asks
/// for devices is read by (`''`: within the bounds, or it asks for none).
fn device_lists() -> String {
    let all = "(x.app + x.init)";
    let env = "(has(r.c.env) ? size(r.c.env) : 0)";
    let exprs = "(has(t.matchExpressions) ? size(t.matchExpressions) : 0)";
    let values = "(has(e.values) ? size(e.values) : 0)";
    let spread =
        "(has(x.spec.topologySpreadConstraints) ? size(x.spec.topologySpreadConstraints) : 0)";
    let anti = "(has(x.spec.affinity) && has(x.spec.affinity.podAntiAffinity) && has(x.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? size(x.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution) : 0)";
    let asks = format!(
        "({all}.exists(r, r.n > 0 || r.efa > 0) || (has(x.spec.resourceClaims) && size(x.spec.resourceClaims) > 0))"
    );
    let f = "x.site.f + ': ' + ";
    let checks = chain(vec![
        (
            format!("{all}.exists(r, {env} > {MAX_ENV})"),
            format!(
                "{f}string({all}.filter(r, {env} > {MAX_ENV}).map(r, {env})[0]) + ' env entries in one container (at most {MAX_ENV})'"
            ),
        ),
        (
            format!("size(x.terms) > {MAX_TERMS}"),
            format!(
                "{f}string(size(x.terms)) + ' required node-selector terms (at most {MAX_TERMS})'"
            ),
        ),
        (
            format!("x.terms.exists(t, {exprs} > {MAX_EXPRESSIONS})"),
            format!(
                "{f}string(x.terms.filter(t, {exprs} > {MAX_EXPRESSIONS}).map(t, {exprs})[0]) + ' match expressions in one node-selector term (at most {MAX_EXPRESSIONS})'"
            ),
        ),
        (
            format!(
                "x.terms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, {values} > {MAX_VALUES}))"
            ),
            format!(
                "{f}string(x.terms.filter(t, has(t.matchExpressions) && t.matchExpressions.exists(e, {values} > {MAX_VALUES})).map(t, t.matchExpressions.filter(e, {values} > {MAX_VALUES}).map(e, {values})[0])[0]) + ' values in one node-selector expression (at most {MAX_VALUES})'"
            ),
        ),
        (
            format!("{spread} > {MAX_SPREAD}"),
            format!("{f}string({spread}) + ' topology spread constraints (at most {MAX_SPREAD})'"),
        ),
        (
            format!("{anti} > {MAX_SPREAD}"),
            format!(
                "{f}string({anti}) + ' required pod anti-affinity terms (at most {MAX_SPREAD})'"
            ),
        ),
    ]);
    format!("({asks} ? {checks} : '')")
}

/// `tooLarge` over the template records of each variable of `templates` (`{t, f}`
/// each), in order, then the lists of the device templates of variable `devices`.
pub(crate) fn too_large(templates: &[&str], devices: Option<&str>) -> String {
    let mut checks = template_lists();
    for t in templates {
        let shapes = format!(
            "variables.{t}.map(s, {}).filter(m, m != '')",
            template_shape()
        );
        checks.push((format!("size({shapes}) > 0"), format!("{shapes}[0]")));
    }
    if let Some(d) = devices {
        let lists = format!(
            "variables.{d}.map(x, {}).filter(m, m != '')",
            device_lists()
        );
        checks.push((format!("size({lists}) > 0"), format!("{lists}[0]")));
    }
    chain(checks)
}

/// The too-large policy's message (the engine's finding: rule, field, what, fix).
pub(crate) fn message() -> String {
    format!(
        "'[too-large] ' + variables.tooLarge + {}",
        lit(&format!(
            "; trainplace judges only objects within its bounds (docs/security.md, Shapes and bounds). Fix: {FIX}"
        ))
    )
}
