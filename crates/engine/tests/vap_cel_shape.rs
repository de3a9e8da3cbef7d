//! The exported CEL is well formed and cost-bounded by shape: every expression of
//! every policy compiles, comprehensions nest boundedly, env is never iterated per
//! container inside a loop over containers.

mod vap_support;

use trainplace_engine::vap::export;
use trainplace_engine::{Catalog, Policy};
use vap_support::Apiserver;
use vap_support::corpus::with_stack;
use vap_support::fixture_env::repo_root;

/// Macros that iterate (comprehensions).
const COMPREHENSIONS: [&str; 5] = ["exists_one", "exists", "all", "map", "filter"];

/// How deep comprehensions nest in `expr` (string literals skipped).
fn comprehension_depth(expr: &str) -> usize {
    let chars: Vec<char> = expr.chars().collect();
    let (mut stack, mut max, mut word, mut i) = (Vec::<bool>::new(), 0, String::new(), 0);
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            word.clear();
        } else if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            if c == '(' {
                stack.push(COMPREHENSIONS.contains(&word.as_str()));
                max = max.max(stack.iter().filter(|m| **m).count());
            } else if c == ')' {
                stack.pop();
            }
            word.clear();
        }
        i += 1;
    }
    max
}

/// Every exported expression parses as CEL (the `cel` crate parses and expands macros;
/// it does not type-check: tests/cluster_guardrails_alone.rs creates the policies in a
/// real API server, which type-checks them against the schemas), and its cost stays
/// bounded by shape: comprehensions nest at most three
/// deep (templates x containers x resource names), four only over node-affinity terms
/// and their values (lists of a few entries), and env is only ever iterated for one
/// container, never inside a comprehension over containers.
#[test]
fn every_expression_parses_and_nests_boundedly() {
    with_stack(|| {
        let api = Apiserver::new();
        let restricted =
            std::fs::read_to_string(repo_root().join("examples/policy-restricted.yaml")).unwrap();
        for policy in [
            Policy::embedded(),
            Policy::from_parts(&restricted, "restricted", Catalog::embedded()).unwrap(),
        ] {
            for object in export(&policy).unwrap() {
                if object["kind"] != "ValidatingAdmissionPolicy" {
                    continue;
                }
                let n = api.parse_all(&object).unwrap_or_else(|e| panic!("{e}"));
                assert!(n > 10, "{n} expressions");
                for v in object["spec"]["variables"].as_array().unwrap() {
                    let (name, expr) = (
                        v["name"].as_str().unwrap(),
                        v["expression"].as_str().unwrap(),
                    );
                    let depth = comprehension_depth(expr);
                    // Node-affinity facts: templates x terms x values x expressions.
                    // The old object's copies (`oldPods`) have their original's shape.
                    let bound = if ["pods", "templates", "oldPods", "oldTemplates"].contains(&name)
                    {
                        4
                    } else {
                        3
                    };
                    assert!(depth <= bound, "{name}: comprehensions nest {depth} deep");
                    if expr.contains("e.name ==") {
                        assert_eq!(
                            depth, 1,
                            "{name}: env iterated inside another comprehension"
                        );
                        assert!(
                            expr.contains("variables.podEnv.filter")
                                || expr.contains("variables.oldPodEnv.filter"),
                            "{name}: env of one container only"
                        );
                    }
                }
                for e in vap_support::expressions(&object) {
                    assert!(e.len() < 100_000, "an expression of {} characters", e.len());
                }
            }
        }
    });
}
