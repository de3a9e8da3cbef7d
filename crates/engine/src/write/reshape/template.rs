//! Rewriting one pod template for a reshape: device counts, literal torchrun env and
//! command-line tokens; refusing command lines that hide the shape in a longer string.

use serde_json::{Value, json};

use super::refusal::refuse;
use crate::error::ObjectError;
use crate::judge::verdict::Verdict;
use crate::read::annotations::{RES_EFA, RES_NVIDIA_GPU};
use crate::read::json::Lookup as _;
use crate::read::json::items;
use crate::read::workload::Site;
use crate::write::edit::{Cursor, Ops};

/// The torchrun flags reshape rewrites when they stand as literal tokens.
const NPROC_FLAGS: [&str; 2] = ["--nproc_per_node", "--nproc-per-node"];
const NNODES_FLAG: &str = "--nnodes";

/// Check that command lines hold the torchrun sizes only as literal tokens.
pub(super) fn commands_are_literal(object: &Value, site: &Site, verdict: &mut Verdict) -> bool {
    let Some(t) = object.lookup(&site.pointer) else {
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
    let shape = NewShape {
        new_pods,
        big,
        max_efa,
    };
    let n = items(t, &["spec", "containers"]).len();
    for ci in 0..n {
        let base = format!("{}/spec/containers/{ci}", site.pointer);
        let Some(c) = t.pointer_mut(&format!("/spec/containers/{ci}")) else {
            continue;
        };
        let has_gpu = ["limits", "requests"].iter().any(|w| {
            c.lookup(&format!("/resources/{w}/nvidia.com~1gpu"))
                .is_some()
        });
        if !has_gpu {
            continue;
        }
        let at = Container {
            base: &base,
            field: &format!("{}.containers[{ci}]", site.field),
        };
        devices(c, &at, &shape, ops, lines);
        env(c, &at, &shape, ops, lines);
        command_tokens(c, &at, &shape, ops, lines);
    }
    Ok(())
}

/// The reshaped pod count and the node's GPUs and EFA interfaces, which each pod now
/// takes.
struct NewShape {
    new_pods: u32,
    big: u32,
    max_efa: u32,
}

/// A container's JSON Pointer and its field path for the explanation.
struct Container<'a> {
    base: &'a str,
    field: &'a str,
}

/// The container's GPU and EFA requests and limits: the whole node's.
fn devices(
    c: &mut Value,
    at: &Container<'_>,
    shape: &NewShape,
    ops: &mut Ops,
    lines: &mut Vec<String>,
) {
    let base = at.base;
    for w in ["limits", "requests"] {
        if let Some(m) = c
            .pointer_mut(&format!("/resources/{w}"))
            .filter(|m| m.is_object())
        {
            let ptr = format!("{base}/resources/{w}");
            let mut cur = Cursor::root(m, &ptr);
            if cur.value.get(RES_NVIDIA_GPU).is_some() {
                cur.set(RES_NVIDIA_GPU, json!(shape.big), ops);
            }
            if cur.value.get(RES_EFA).is_some() {
                cur.set(RES_EFA, json!(shape.max_efa), ops);
            }
        }
    }
    lines.push(format!("{} {RES_NVIDIA_GPU} = {}", at.field, shape.big));
}

/// torchrun's env sizes, where they are literal numbers.
fn env(
    c: &mut Value,
    at: &Container<'_>,
    shape: &NewShape,
    ops: &mut Ops,
    lines: &mut Vec<String>,
) {
    let base = at.base;
    let envs = items(c, &["env"]).len();
    for ei in 0..envs {
        let name = c
            .lookup(&format!("/env/{ei}/name"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let new = match name.as_str() {
            "PET_NNODES" => shape.new_pods,
            "PET_NPROC_PER_NODE" => shape.big,
            _ => continue,
        };
        if c.lookup(&format!("/env/{ei}/value"))
            .and_then(Value::as_str)
            .is_some_and(|v| v.parse::<u32>().is_ok())
            && let Some(e) = c.pointer_mut(&format!("/env/{ei}"))
        {
            Cursor::root(e, &format!("{base}/env/{ei}")).set("value", json!(new.to_string()), ops);
            lines.push(format!("{} env {name} = {new}", at.field));
        }
    }
}

/// torchrun's size flags in the command and args, where they are literal tokens.
fn command_tokens(
    c: &mut Value,
    at: &Container<'_>,
    shape: &NewShape,
    ops: &mut Ops,
    lines: &mut Vec<String>,
) {
    let base = at.base;
    for key in ["command", "args"] {
        let toks: Vec<String> = items(c, &[key])
            .iter()
            .map(|t| t.as_str().unwrap_or("").to_string())
            .collect();
        let mut prev_flag: Option<String> = None;
        for (ti, tok) in toks.iter().enumerate() {
            let target = |flag: &str| {
                if flag == NNODES_FLAG {
                    shape.new_pods
                } else {
                    shape.big
                }
            };
            let replacement = match (literal_flag(tok), &prev_flag) {
                (Some((flag, Some(_))), _) => Some(format!("{flag}={}", target(flag))),
                (None, Some(flag)) if tok.parse::<u32>().is_ok() => Some(target(flag).to_string()),
                _ => None,
            };
            prev_flag = literal_flag(tok)
                .filter(|(_, v)| v.is_none())
                .map(|(f, _)| f.to_string());
            if let Some(r) = replacement
                && let Some(slot) = c.get_mut(key).and_then(|a| a.get_mut(ti))
            {
                *slot = json!(r);
                ops.replace(&format!("{base}/{key}/{ti}"));
                lines.push(format!("{}.{key}[{ti}] = {r}", at.field));
            }
        }
    }
}
