//! Rewriting one pod template for a reshape: device counts, literal torchrun env and
//! command-line tokens; refusing command lines that hide the shape in a longer string.

use serde_json::{Value, json};

use super::refusal::refuse;
use crate::error::ObjectError;
use crate::judge::verdict::Verdict;
use crate::read::annotations::{RES_EFA, RES_NVIDIA_GPU};
use crate::read::edit::{Cursor, Ops};
use crate::read::json::items;
use crate::read::workload::Site;

/// The torchrun flags reshape rewrites when they stand as literal tokens.
const NPROC_FLAGS: [&str; 2] = ["--nproc_per_node", "--nproc-per-node"];
const NNODES_FLAG: &str = "--nnodes";

/// Check that command lines hold the torchrun sizes only as literal tokens.
pub(super) fn commands_are_literal(object: &Value, site: &Site, verdict: &mut Verdict) -> bool {
    let Some(t) = object.pointer(&site.pointer) else {
        return true;
    };
    for (ci, c) in items(t, &["spec", "containers"]).iter().enumerate() {
        for key in ["command", "args"] {
            for tok in items(c, &[key]).iter().filter_map(Value::as_str) {
                let exact = literal_flag(tok).is_some() || tok.parse::<u32>().is_ok();
                let mentions = NPROC_FLAGS
                    .iter()
                    .chain([&NNODES_FLAG])
                    .any(|f| tok.contains(f));
                if mentions && !exact {
                    refuse(
                        verdict,
                        &format!("{}.containers[{ci}].{key}", site.field),
                        format!("the command line sets the torchrun shape inside a longer string: {tok:?}"),
                        "write --nproc_per_node and --nnodes as separate list entries (or use PET_NPROC_PER_NODE / PET_NNODES env), or change this line to the new shape yourself.".into(),
                    );
                    return false;
                }
            }
        }
    }
    true
}

/// `--flag=N` or a bare `--flag` token that takes the next token.
pub(super) fn literal_flag(tok: &str) -> Option<(&str, Option<&str>)> {
    let (flag, value) = match tok.split_once('=') {
        Some((f, v)) => (f, Some(v)),
        None => (tok, None),
    };
    let known = NPROC_FLAGS.contains(&flag) || flag == NNODES_FLAG;
    let literal = value.is_none_or(|v| v.parse::<u32>().is_ok());
    (known && literal).then_some((flag, value))
}

pub(super) fn rewrite_template(
    object: &mut Value,
    site: &Site,
    new_pods: u32,
    big: u32,
    max_efa: u32,
    ops: &mut Ops,
    lines: &mut Vec<String>,
) -> Result<(), ObjectError> {
    let Some(t) = object.pointer_mut(&site.pointer) else {
        return Ok(());
    };
    let n = items(t, &["spec", "containers"]).len();
    for ci in 0..n {
        let base = format!("{}/spec/containers/{ci}", site.pointer);
        let Some(c) = t.pointer_mut(&format!("/spec/containers/{ci}")) else {
            continue;
        };
        let has_gpu = ["limits", "requests"].iter().any(|w| {
            c.pointer(&format!("/resources/{w}/nvidia.com~1gpu"))
                .is_some()
        });
        if !has_gpu {
            continue;
        }
        for w in ["limits", "requests"] {
            if let Some(m) = c
                .pointer_mut(&format!("/resources/{w}"))
                .filter(|m| m.is_object())
            {
                let ptr = format!("{base}/resources/{w}");
                let mut cur = Cursor::root(m, &ptr);
                if cur.value.get(RES_NVIDIA_GPU).is_some() {
                    cur.set(RES_NVIDIA_GPU, json!(big), ops);
                }
                if cur.value.get(RES_EFA).is_some() {
                    cur.set(RES_EFA, json!(max_efa), ops);
                }
            }
        }
        lines.push(format!(
            "{}.containers[{ci}] {RES_NVIDIA_GPU} = {big}",
            site.field
        ));
        let envs = items(c, &["env"]).len();
        for ei in 0..envs {
            let name = c
                .pointer(&format!("/env/{ei}/name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let new = match name.as_str() {
                "PET_NNODES" => new_pods,
                "PET_NPROC_PER_NODE" => big,
                _ => continue,
            };
            if c.pointer(&format!("/env/{ei}/value"))
                .and_then(Value::as_str)
                .is_some_and(|v| v.parse::<u32>().is_ok())
                && let Some(e) = c.pointer_mut(&format!("/env/{ei}"))
            {
                Cursor::root(e, &format!("{base}/env/{ei}")).set(
                    "value",
                    json!(new.to_string()),
                    ops,
                );
                lines.push(format!(
                    "{}.containers[{ci}] env {name} = {new}",
                    site.field
                ));
            }
        }
        for key in ["command", "args"] {
            let toks: Vec<String> = items(c, &[key])
                .iter()
                .map(|t| t.as_str().unwrap_or("").to_string())
                .collect();
            let mut prev_flag: Option<String> = None;
            for (ti, tok) in toks.iter().enumerate() {
                let target = |flag: &str| if flag == NNODES_FLAG { new_pods } else { big };
                let replacement = match (literal_flag(tok), &prev_flag) {
                    (Some((flag, Some(_))), _) => Some(format!("{flag}={}", target(flag))),
                    (None, Some(flag)) if tok.parse::<u32>().is_ok() => {
                        Some(target(flag).to_string())
                    }
                    _ => None,
                };
                prev_flag = literal_flag(tok)
                    .filter(|(_, v)| v.is_none())
                    .map(|(f, _)| f.to_string());
                if let Some(r) = replacement
                    && let Some(slot) = c.get_mut(key).and_then(|a| a.get_mut(ti))
                {
                    *slot = json!(r);
                    ops.replace(&format!("{base}/{key}/{ti}"), json!(r));
                    lines.push(format!("{}.containers[{ci}].{key}[{ti}] = {r}", site.field));
                }
            }
        }
    }
    Ok(())
}
