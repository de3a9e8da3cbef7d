//! Helpers for tests/manifests.rs: render kustomize overlays with the real kubectl,
//! run certs/make-certs.sh, a plausibility check for CEL matchConditions, and the real
//! server binary as a child process.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde::Deserialize;
use serde_json::Value;

/// The Service's DNS names: the serving certificate's SANs.
pub const SERVICE_NAMES: [&str; 4] = [
    "trainplace",
    "trainplace.trainplace",
    "trainplace.trainplace.svc",
    "trainplace.trainplace.svc.cluster.local",
];

pub use super::common::root;

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn check(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `kubectl kustomize DIR`, offline: KUBECONFIG names a file that does not exist.
pub fn kustomize(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .env("KUBECONFIG", dir.join("no-such-kubeconfig"))
        .output()
        .expect("kubectl is installed (scripts/test-deps.sh checks it)");
    check(&format!("kubectl kustomize {}", dir.display()), &out);
    let yaml = text(&out.stdout);
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| Value::deserialize(d).expect("kustomize output is YAML"))
        .filter(|v| !v.is_null())
        .collect();
    assert!(!docs.is_empty(), "{} rendered nothing", dir.display());
    docs
}

/// The one object of `kind` (and `name`, when given) in a rendering.
pub fn object<'a>(docs: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == kind && name.is_none_or(|n| d["metadata"]["name"] == n))
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind} {name:?}");
    found[0]
}

/// Copy a directory tree, leaving out what make-certs.sh generates.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "secret.yaml" || name == "ca-bundle-patch.yaml" {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `certs/make-certs.sh --out OUT --overlay OVERLAY [extra...]`; the raw output.
pub fn make_certs(out: &Path, overlay: &Path, extra: &[&str]) -> Output {
    Command::new("bash")
        .arg(root().join("certs/make-certs.sh"))
        .arg("--out")
        .arg(out)
        .arg("--overlay")
        .arg(overlay)
        .args(extra)
        .output()
        .unwrap()
}

pub fn make_certs_ok(out: &Path, overlay: &Path, extra: &[&str]) {
    check("certs/make-certs.sh", &make_certs(out, overlay, extra));
}

/// A copy of manifests/ in a temp dir with certificates made for its self-signed
/// overlay: (temp dir, copied manifests/, certificate dir).
pub fn manifests_with_certs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("manifests");
    copy_tree(&root().join("manifests"), &manifests);
    let certs = tmp.path().join("certs");
    make_certs_ok(&certs, &manifests.join("overlays/self-signed"), &[]);
    (tmp, manifests, certs)
}

pub fn openssl(args: &[&str]) -> String {
    let out = Command::new("openssl").args(args).output().unwrap();
    check(&format!("openssl {}", args.join(" ")), &out);
    text(&out.stdout)
}

/// Identifiers a webhook matchCondition may start from (CEL variables of admission).
pub const CEL_VARIABLES: [&str; 5] = ["object", "oldObject", "request", "params", "authorizer"];
const CEL_MACROS: [&str; 5] = ["all", "exists", "exists_one", "map", "filter"];

/// A plausibility check of a CEL expression, not a parser: string literals terminated,
/// brackets balanced outside them, and every free identifier is an admission variable,
/// a literal keyword, a function being called or a macro's bound variable.
pub fn cel_problems(expr: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if expr.trim().is_empty() {
        problems.push("empty expression".to_string());
    }
    let chars: Vec<char> = expr.chars().collect();
    let mut code = String::new(); // the expression with each string literal as ""
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != c {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            if j >= chars.len() {
                problems.push(format!("unterminated string literal at {i}"));
            }
            code.push_str("\"\"");
            i = j + 1;
        } else {
            code.push(c);
            i += 1;
        }
    }
    let mut stack = Vec::new();
    for c in code.chars() {
        match c {
            '(' | '[' | '{' => stack.push(c),
            ')' | ']' | '}' => {
                let open = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                if stack.pop() != Some(open) {
                    problems.push(format!("unbalanced {c:?}"));
                }
            }
            _ => {}
        }
    }
    if !stack.is_empty() {
        problems.push(format!("unclosed {stack:?}"));
    }
    let tokens = cel_tokens(&code);
    let mut bound: Vec<&str> = Vec::new();
    for w in tokens.windows(4) {
        if w[1] == "(" && w[3] == "," && CEL_MACROS.contains(&w[0].as_str()) {
            bound.push(&w[2]);
        }
    }
    for (k, tok) in tokens.iter().enumerate() {
        let ident = tok.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let after_dot = k > 0 && tokens[k - 1] == ".";
        let called = tokens.get(k + 1).is_some_and(|t| t == "(");
        if !ident || after_dot || called {
            continue;
        }
        let known = ["true", "false", "null", "in"].contains(&tok.as_str())
            || CEL_VARIABLES.contains(&tok.as_str())
            || bound.contains(&tok.as_str());
        if !known {
            problems.push(format!("unknown identifier {tok:?}"));
        }
    }
    problems
}

/// Identifiers, numbers and single punctuation characters (whitespace dropped).
fn cel_tokens(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in code.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

/// The real `trainplace` binary; killed when dropped.
pub struct Server {
    pub child: super::common::ServeProcess,
    pub addr: SocketAddr,
    pub probe_addr: SocketAddr,
    pub log: PathBuf,
}

impl Server {
    pub fn spawn(args: &[&str], log: PathBuf) -> Server {
        let [addr, probe_addr] = super::common::free_addrs();
        let child = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .arg("serve")
            .args(["--addr", &addr.to_string()])
            .args(["--probe-addr", &probe_addr.to_string()])
            .args(args)
            .env("TRAINPLACE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Server {
            child: super::common::ServeProcess(child),
            addr,
            probe_addr,
            log,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
