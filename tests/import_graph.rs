//! Dependencies run one way: no module of any crate in this workspace reaches itself
//! through `crate::`/`super::` paths (`use` lines and inline paths alike). Modules are
//! files; the crate root (`lib.rs`/`main.rs`) only declares and re-exports, so it is
//! left out of the graph, and `#[cfg(test)]` files (`tests.rs`) are left out too.
//!
//! Run alone with `cargo test --test import_graph`; a failure lists every loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATES: [&str; 5] = [
    "src",
    "crates/catalog/src",
    "crates/engine/src",
    "crates/advisor/src",
    "crates/diagnose/src",
];

type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b/mod.rs` and `a/b.rs` are module `a::b`; the root files are module `[]`.
fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path written after `crate::` or `super::` in `text`, expanded through `{...}`
/// groups; `super` segments are resolved against `module` (a file's own module).
fn referenced_paths(text: &str, module: &Module) -> Vec<Module> {
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let rest: String = bytes[i..bytes.len().min(i + 8)].iter().collect();
        let preceded = i > 0 && (is_ident(bytes[i - 1]) || bytes[i - 1] == ':');
        let base: Option<(Module, usize)> = if !preceded && rest.starts_with("crate::") {
            Some((Vec::new(), 7))
        } else if !preceded && rest.starts_with("super::") {
            // A file's module is `a::b` whether it is `a/b.rs` or `a/b/mod.rs`: `super` is `a`.
            let mut m = module.clone();
            m.pop();
            let mut j = i + 7;
            // Chains of super::super::.
            loop {
                let r: String = bytes[j..bytes.len().min(j + 7)].iter().collect();
                if r == "super::" {
                    m.pop();
                    j += 7;
                } else {
                    break;
                }
            }
            Some((m, j - i))
        } else {
            None
        };
        match base {
            Some((prefix, skip)) => {
                let (paths, used) = parse_tree(&bytes[i + skip..]);
                for p in paths {
                    let mut full = prefix.clone();
                    full.extend(p);
                    out.push(full);
                }
                i += skip + used.max(1);
            }
            None => i += 1,
        }
    }
    out
}

/// Parse `a::b::{c, d::e}` (or a plain `a::b::Item`) into paths; returns chars used.
fn parse_tree(s: &[char]) -> (Vec<Module>, usize) {
    let mut i = 0;
    let mut prefix: Module = Vec::new();
    loop {
        while i < s.len() && s[i].is_whitespace() {
            i += 1;
        }
        if i < s.len() && s[i] == '{' {
            i += 1;
            let mut paths = Vec::new();
            loop {
                while i < s.len() && (s[i].is_whitespace() || s[i] == ',') {
                    i += 1;
                }
                if i >= s.len() || s[i] == '}' {
                    i += 1;
                    break;
                }
                let (sub, used) = parse_tree(&s[i..]);
                i += used.max(1);
                for p in sub {
                    let mut full = prefix.clone();
                    full.extend(p);
                    paths.push(full);
                }
            }
            return (paths, i);
        }
        let start = i;
        while i < s.len() && is_ident(s[i]) {
            i += 1;
        }
        if start == i {
            return (vec![prefix], i);
        }
        let seg: String = s[start..i].iter().collect();
        if seg != "self" {
            prefix.push(seg);
        }
        if i + 1 < s.len() && s[i] == ':' && s[i + 1] == ':' {
            i += 2;
        } else {
            return (vec![prefix], i);
        }
    }
}

/// The longest known module that is a prefix of `path`.
fn resolve(path: &Module, modules: &BTreeSet<Module>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| modules.contains(m))
}

fn graph(root: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let files: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .collect();
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(root, f)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for file in &files {
        let from = module_of(root, file);
        if from.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        // Inline unit tests may reach anywhere; they are not part of the module's code.
        let text = match text.find("#[cfg(test)]") {
            Some(i) => &text[..i],
            None => &text[..],
        };
        for path in referenced_paths(text, &from) {
            if let Some(to) = resolve(&path, &modules)
                && to != from
                && !to.is_empty()
            {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan).
fn loops(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit(s: &mut State<'_>, v: &Module) {
        s.index.insert(v.clone(), s.next);
        s.low.insert(v.clone(), s.next);
        s.next += 1;
        s.stack.push(v.clone());
        s.on_stack.insert(v.clone());
        let targets: Vec<Module> = s
            .edges
            .get(v)
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        for w in targets {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(&w);
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let nodes: Vec<Module> = edges.keys().cloned().collect();
    for v in nodes {
        if !s.index.contains_key(&v) {
            visit(&mut s, &v);
        }
    }
    s.out
}

#[test]
fn no_module_imports_itself_through_others() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut report = Vec::new();
    for krate in CRATES {
        let edges = graph(&root.join(krate));
        assert!(
            !edges.is_empty(),
            "{krate}: no imports found (parser broken?)"
        );
        for comp in loops(&edges) {
            let names: Vec<String> = comp.iter().map(|m| m.join("::")).collect();
            let detail: Vec<String> = comp
                .iter()
                .flat_map(|m| {
                    edges[m]
                        .iter()
                        .filter(|t| comp.contains(t))
                        .map(move |t| format!("{} -> {}", m.join("::"), t.join("::")))
                })
                .collect();
            report.push(format!(
                "{krate}: loop over {{{}}}\n    {}",
                names.join(", "),
                detail.join("\n    ")
            ));
        }
    }
    assert!(report.is_empty(), "import loops:\n{}", report.join("\n"));
}

#[test]
fn the_parser_sees_grouped_and_super_paths() {
    let m: Module = vec!["a".into(), "b".into()];
    let paths = referenced_paths(
        "use crate::x::{y, z::{Q, R}};\nfn f() { super::c::d(); }\n// crate::ignored\n",
        &m,
    );
    let as_text: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(as_text, ["x::y", "x::z::Q", "x::z::R", "a::c::d"]);
    let mut edges = BTreeMap::new();
    edges.insert(
        vec!["p".to_string()],
        BTreeSet::from([vec!["q".to_string()]]),
    );
    edges.insert(
        vec!["q".to_string()],
        BTreeSet::from([vec!["p".to_string()]]),
    );
    assert_eq!(loops(&edges).len(), 1);
}

/// The engine's stage folders, in the order one review flows through them: the object
/// is read, the facts it is judged against are gathered (policy, catalog, cluster),
/// judged (judging builds the layout plan), the plan is written as edits, `engine`
/// runs those stages for one object, `answer` turns a review into its response, and
/// `vap` exports the rules CEL can hold. `budget` and `error` are the ground every
/// stage stands on. An import may run to its own stage or an earlier one.
const ENGINE_STAGES: [&str; 9] = [
    "budget", "error", "read", "facts", "judge", "write", "engine", "answer", "vap",
];

/// Imports allowed to run back up the flow, each with its reason. Empty today: add an
/// entry only with a reason a reviewer accepts.
const BACK_EDGES_ALLOWED: [(&str, &str, &str); 0] = [];

fn stage_of(module: &Module) -> Option<usize> {
    let first = module.first()?;
    ENGINE_STAGES.iter().position(|s| s == first)
}

/// Every import of the engine that runs from a stage to a later one, as `from -> to`.
fn back_edges(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let mut back = Vec::new();
    for (from, targets) in edges {
        for to in targets {
            if let (Some(a), Some(b)) = (stage_of(from), stage_of(to))
                && b > a
                && !BACK_EDGES_ALLOWED
                    .iter()
                    .any(|(f, t, _)| *f == from.join("::") && *t == to.join("::"))
            {
                back.push(format!("{} -> {}", from.join("::"), to.join("::")));
            }
        }
    }
    back
}

#[test]
fn engine_imports_run_down_the_flow() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/engine/src");
    let edges = graph(&root);
    let top: BTreeSet<&str> = edges
        .keys()
        .filter_map(|m| m.first())
        .map(String::as_str)
        .collect();
    let unplaced: Vec<&&str> = top.iter().filter(|t| !ENGINE_STAGES.contains(t)).collect();
    assert!(
        unplaced.is_empty(),
        "engine modules in no stage (add them to ENGINE_STAGES): {unplaced:?}"
    );
    let back = back_edges(&edges);
    assert!(
        back.is_empty(),
        "imports running back up the flow (move the item to the stage that owns it, or list the import in BACK_EDGES_ALLOWED with a reason):\n    {}",
        back.join("\n    ")
    );
}

#[test]
fn a_back_edge_is_caught() {
    let mut edges = BTreeMap::new();
    edges.insert(
        vec!["judge".to_string(), "verdict".to_string()],
        BTreeSet::from([
            vec!["write".to_string(), "layout".to_string()],
            vec!["read".to_string(), "json".to_string()],
        ]),
    );
    assert_eq!(back_edges(&edges), ["judge::verdict -> write::layout"]);
}

/// The `trainplace-*` crates a workspace crate's manifest depends on.
fn workspace_deps(manifest: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest)).unwrap();
    let deps = text.split("[dependencies]").nth(1).unwrap_or("");
    let deps = deps.split("\n[").next().unwrap_or("");
    deps.lines()
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .filter(|name| name.starts_with("trainplace-"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_catalog_stands_alone_and_diagnose_reads_only_it() {
    assert_eq!(
        workspace_deps("crates/catalog/Cargo.toml"),
        Vec::<String>::new()
    );
    assert_eq!(
        workspace_deps("crates/engine/Cargo.toml"),
        ["trainplace-catalog"]
    );
    assert_eq!(
        workspace_deps("crates/diagnose/Cargo.toml"),
        ["trainplace-catalog"]
    );
    // The advisor reads the catalog from its crate, and the engine only for the policy
    // (the NCCL env it writes) and the public annotation names.
    assert_eq!(
        workspace_deps("crates/advisor/Cargo.toml"),
        ["trainplace-catalog", "trainplace-engine"]
    );
}
