//! Multi-document YAML to JSON values the way `kubectl apply -f` reads it: saphyr's
//! event stream, each plain scalar resolved as go-yaml v2 does ([`super::resolve`]),
//! keys turned into strings as sigs.k8s.io/yaml does, anchors, aliases and `<<`
//! merges expanded. Unlike kubectl, a duplicate key is an error (kubectl keeps the
//! last one silently).

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};
use serde_json::{Map, Number, Value};

use super::resolve::{self, Plain};

/// Nodes (scalars and collections) that aliases may copy into a stream, at least; a
/// larger input may copy [`ALIAS_NODES_PER_BYTE`] per byte. kubectl's own reader
/// refuses documents whose aliases expand past a like bound (go-yaml's
/// `allowedAliasRatio`); a 700-byte "billion laughs" would otherwise build 10^9 nodes.
pub(crate) const ALIAS_NODES: u64 = 100_000;
pub(crate) const ALIAS_NODES_PER_BYTE: u64 = 10;

/// A document that could not be read: where, and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoadError {
    /// 1-based document number.
    pub doc: usize,
    /// 1-based line.
    pub line: usize,
    pub message: String,
    /// For a duplicate key: its name and the line of its first occurrence.
    pub duplicate: Option<(String, usize)>,
}

/// Every document of `text`, numbered from 1, as JSON values (`null` for an empty one).
pub(crate) fn documents(text: &str) -> Result<Vec<(usize, Value)>, LoadError> {
    Ok(located(text)?
        .into_iter()
        .map(|(doc, _, value)| (doc, value))
        .collect())
}

/// [`documents`] with the 1-based line each document starts on.
pub(crate) fn located(text: &str) -> Result<Vec<(usize, usize, Value)>, LoadError> {
    // saphyr counts a last line of only spaces with no line break after it as one more
    // line of a block scalar before it; kubectl does not. With the break, both agree.
    let last_line = text.rsplit('\n').next().unwrap_or("");
    let text = if !last_line.is_empty() && last_line.trim_matches(' ').is_empty() {
        std::borrow::Cow::Owned(format!("{text}\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let mut loader = Loader {
        alias_limit: ALIAS_NODES.max(ALIAS_NODES_PER_BYTE.saturating_mul(text.len() as u64)),
        ..Loader::default()
    };
    for event in Parser::new_from_str(&text) {
        let (event, span) = event.map_err(|e| LoadError {
            doc: loader.doc.max(1),
            line: e.marker().line(),
            message: e.info().to_string(),
            duplicate: None,
        })?;
        loader.line = span.start.line();
        loader.on(event).map_err(|message| LoadError {
            doc: loader.doc,
            line: loader.line,
            message,
            duplicate: loader.duplicate.take(),
        })?;
    }
    Ok(loader.done)
}

/// A collection being read: its entries, its anchor, and the nodes it holds so far.
enum Frame {
    Seq(Vec<Value>, usize, u64),
    Map(Mapping, usize, u64),
}

#[derive(Default)]
struct Mapping {
    entries: Map<String, Value>,
    /// Line of each key written out in this mapping (merged keys are not).
    explicit: HashMap<String, usize>,
    key: Option<Key>,
}

enum Key {
    Name(String, usize),
    Merge,
}

#[derive(Default)]
struct Loader {
    doc: usize,
    line: usize,
    stack: Vec<Frame>,
    /// Each anchor's value and the nodes it holds.
    anchors: HashMap<usize, (Value, u64)>,
    /// Nodes aliases have copied so far, and how many they may.
    aliased: u64,
    alias_limit: u64,
    /// Each document: number, first line, value.
    done: Vec<(usize, usize, Value)>,
    /// Where the current document starts (its `---`, else its first node).
    start: Option<usize>,
    root: Option<Value>,
    /// The duplicate key that ended loading, for [`LoadError::duplicate`].
    duplicate: Option<(String, usize)>,
}

impl Loader {
    fn on(&mut self, event: Event<'_>) -> Result<(), String> {
        if !matches!(event, Event::DocumentStart(_) | Event::DocumentEnd) {
            self.start.get_or_insert(self.line);
        }
        match event {
            Event::DocumentStart(explicit) => {
                self.doc += 1;
                self.start = explicit.then_some(self.line);
                self.anchors.clear();
            }
            Event::DocumentEnd => {
                let root = self.root.take().unwrap_or(Value::Null);
                let start = self.start.take().unwrap_or(self.line);
                self.done.push((self.doc, start, root));
            }
            Event::Alias(id) => {
                let &(_, nodes) = self.anchors.get(&id).ok_or("alias to an unknown anchor")?;
                // Counted before the copy is made, so refusing costs nothing.
                self.aliased = self.aliased.saturating_add(nodes);
                if self.aliased > self.alias_limit {
                    return Err(format!(
                        "aliases expand to more than {} nodes (the limit for an input of this size: {ALIAS_NODES} nodes, or {ALIAS_NODES_PER_BYTE} per byte); trainplace refuses to expand them further",
                        self.alias_limit
                    ));
                }
                let value = self.anchors[&id].0.clone();
                self.node(value, 0, nodes)?;
            }
            Event::Scalar(text, style, anchor, tag) => {
                let key_expected =
                    matches!(self.stack.last(), Some(Frame::Map(m, _, _)) if m.key.is_none());
                let plain = scalar_type(&text, style, tag.as_deref())?;
                if key_expected && anchor == 0 {
                    return self.key(&text, plain);
                }
                self.node(value_of(&text, plain)?, anchor, 1)?;
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Frame::Seq(Vec::new(), anchor, 1));
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Map(Mapping::default(), anchor, 1));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor, nodes) = match self.stack.pop() {
                    Some(Frame::Seq(items, a, n)) => (Value::Array(items), a, n),
                    Some(Frame::Map(m, a, n)) => (Value::Object(m.entries), a, n),
                    None => return Err("unbalanced collection end".into()),
                };
                self.node(value, anchor, nodes)?;
            }
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
        Ok(())
    }

    /// A complete node of `nodes` nodes: an item, a key, a value, or the document root.
    fn node(&mut self, value: Value, anchor: usize, nodes: u64) -> Result<(), String> {
        if anchor != 0 {
            self.anchors.insert(anchor, (value.clone(), nodes));
        }
        let line = self.line;
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq(items, _, n)) => {
                *n = n.saturating_add(nodes);
                items.push(value);
            }
            Some(Frame::Map(m, _, n)) => match m.key.take() {
                None => {
                    *n = n.saturating_add(nodes);
                    m.key = Some(Key::Name(key_of_value(&value)?, line));
                }
                Some(Key::Merge) => {
                    *n = n.saturating_add(nodes);
                    merge(&mut m.entries, value)?;
                }
                Some(Key::Name(name, key_line)) => {
                    if let Some(first) = m.explicit.insert(name.clone(), key_line) {
                        // Reported at the second key, not where its value ends.
                        self.line = key_line;
                        let message = format!(
                            "duplicate key {name:?} (first at line {first}); kubectl would silently keep only the last one: remove one"
                        );
                        self.duplicate = Some((name, first));
                        return Err(message);
                    }
                    *n = n.saturating_add(nodes);
                    m.entries.insert(name, value);
                }
            },
        }
        Ok(())
    }

    fn key(&mut self, text: &str, plain: Plain) -> Result<(), String> {
        let key = match plain {
            Plain::Merge => Key::Merge,
            Plain::Str => Key::Name(text.to_string(), self.line),
            Plain::Bool(b) => Key::Name(b.to_string(), self.line),
            Plain::Int(i) => Key::Name(i.to_string(), self.line),
            Plain::Float(f) => Key::Name(go_float_key(f), self.line),
            Plain::Null | Plain::Uint(_) => {
                return Err(format!(
                    "key {text:?} is not a string, number or boolean: kubectl cannot convert it to JSON; quote it"
                ));
            }
        };
        if let Some(Frame::Map(m, _, n)) = self.stack.last_mut() {
            *n = n.saturating_add(1);
            m.key = Some(key);
        }
        Ok(())
    }
}

/// The type of a scalar: quoted, block and `!!str` scalars are strings; a core-schema
/// tag must fit the text; other tags leave the text a string (as go-yaml v2 does).
fn scalar_type(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Plain, String> {
    let Some(tag) = tag else {
        return Ok(match style {
            ScalarStyle::Plain => resolve::kubectl(text),
            _ => Plain::Str,
        });
    };
    if !tag.is_yaml_core_schema() {
        return Ok(Plain::Str);
    }
    let plain = resolve::kubectl(text);
    let fits = match (tag.suffix.as_str(), plain) {
        ("str" | "timestamp", _) => return Ok(Plain::Str),
        ("null", Plain::Null) | ("bool", Plain::Bool(_)) => true,
        ("int", Plain::Int(_) | Plain::Uint(_)) | ("float", Plain::Float(_)) => true,
        ("float", Plain::Int(i)) => return Ok(Plain::Float(i as f64)),
        _ => false,
    };
    if fits {
        Ok(plain)
    } else {
        Err(format!("{text:?} cannot be read as !!{}", tag.suffix))
    }
}

/// JSON for a resolved scalar. JSON has one number type and kubectl writes a float
/// with no fraction as an integer (Go's encoding/json prints 1e3 as `1000`), so
/// integral floats become integers; NaN and infinities have no JSON form at all.
fn value_of(text: &str, plain: Plain) -> Result<Value, String> {
    Ok(match plain {
        Plain::Null => Value::Null,
        Plain::Bool(b) => Value::Bool(b),
        Plain::Int(i) => Value::from(i),
        Plain::Uint(u) => Value::from(u),
        Plain::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Value::from(f as i64),
        Plain::Float(f) => Number::from_f64(f).map(Value::Number).ok_or_else(|| {
            format!("{text:?} is not a number JSON can hold (kubectl fails on it too); quote it if it is text")
        })?,
        Plain::Merge | Plain::Str => Value::String(text.to_string()),
    })
}

/// A key that is itself an alias or a collection.
fn key_of_value(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(
            "a key must be a string, number or boolean (kubectl cannot convert others to JSON)"
                .into(),
        ),
    }
}

/// go-yaml v2 `<<`: a mapping, or a list of mappings where earlier ones win; merged
/// entries overwrite what came before them, later keys overwrite merged ones.
fn merge(entries: &mut Map<String, Value>, value: Value) -> Result<(), String> {
    let wrong = || "a merge key `<<` takes a mapping or a list of mappings".to_string();
    match value {
        Value::Object(m) => entries.extend(m),
        Value::Array(items) => {
            for item in items.into_iter().rev() {
                let Value::Object(m) = item else {
                    return Err(wrong());
                };
                entries.extend(m);
            }
        }
        _ => return Err(wrong()),
    }
    Ok(())
}

/// A float key as sigs.k8s.io/yaml writes it: Go's `FormatFloat(f, 'g', -1, 32)`.
fn go_float_key(f: f64) -> String {
    let x = f as f32;
    if x.is_nan() {
        return ".nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if x != 0.0 && !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(text: &str) -> Value {
        documents(text).unwrap().remove(0).1
    }

    #[test]
    fn scalars_as_kubectl_reads_them() {
        let v = one(
            "a: 0755\nb: on\nc: '0755'\nd: 1:30\ne: 1e3\nf: !!str 12\ng: \"yes\"\nh: 1.5\ni: ~\nj: |\n  0755\nk: 2025-01-01\nl: !!float 3\nm: !custom 7\n",
        );
        assert_eq!(
            v,
            json!({"a": 493, "b": true, "c": "0755", "d": "1:30", "e": 1000, "f": "12", "g": "yes",
                   "h": 1.5, "i": null, "j": "0755\n", "k": "2025-01-01", "l": 3, "m": "7"})
        );
    }

    #[test]
    fn keys_become_strings_like_sigs_k8s_yaml() {
        let v = one("yes: 1\nn: 2\n0755: 3\n1.5: 4\n1e3: 5\n1e6: 6\n2025-01-01: 7\n");
        assert_eq!(
            v,
            json!({"true": 1, "false": 2, "493": 3, "1.5": 4, "1000": 5, "1e+06": 6, "2025-01-01": 7})
        );
        let e = documents("a: 1\n~: 2\n").unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
    }

    #[test]
    fn duplicate_key_names_both_lines() {
        let e = documents("kind: Pod\n---\nmetadata:\n  name: a\n  labels: {}\n  name: b\n")
            .unwrap_err();
        assert_eq!((e.doc, e.line), (2, 6), "{e:?}");
        assert!(e.message.contains("\"name\" (first at line 4)"), "{e:?}");
        // A duplicate whose value is a mapping: the line of the key, not of the
        // mapping's end.
        let e = documents("spec:\n  a: {}\n  a:\n    b: 1\n    c: 2\nz: 1\n").unwrap_err();
        assert_eq!(e.line, 3, "{e:?}");
    }

    #[test]
    fn anchors_aliases_and_merges() {
        let v = one(
            "base: &b {x: 1, w: 2}\nother: &o {z: 3}\none:\n  <<: *b\n  w: 9\nmany:\n  <<: [*b, *o, {x: 7}]\nlist: &l [1, 2]\ncopy: *l\n",
        );
        assert_eq!(v["one"], json!({"x": 1, "w": 9}));
        assert_eq!(v["many"], json!({"x": 1, "w": 2, "z": 3}));
        assert_eq!(v["copy"], json!([1, 2]));
        assert!(documents("a:\n  <<: 3\n").is_err());
    }

    #[test]
    fn aliases_that_expand_past_the_bound_are_refused_at_their_line() {
        // "Billion laughs": ten levels of ten aliases each, 10^9 strings from 700 bytes.
        let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        assert!(text.len() < 800, "{}", text.len());
        let e = documents(&text).unwrap_err();
        assert!(e.message.contains("more than 100000 nodes"), "{e:?}");
        // a4 copies a3's 11,111 nodes ten times: the bound is met on its line.
        assert_eq!((e.doc, e.line), (1, 5), "{e:?}");
        // Aliases within the bound are expanded as before.
        assert_eq!(
            one("a: &x [1, 2]\nb: [*x, *x, *x]\n")["b"][2],
            json!([1, 2])
        );
    }

    #[test]
    fn block_scalar_before_a_last_line_of_spaces() {
        // What `kubectl label --local -o json` reads for each (jobset's resnet.yaml
        // ends this way).
        assert_eq!(one("a: |\n  x\n  "), json!({"a": "x\n"}));
        assert_eq!(one("a: |\n  x\n    "), json!({"a": "x\n  \n"}));
        assert_eq!(one("- |\n  x\n  "), json!(["x\n"]));
    }

    #[test]
    fn documents_are_numbered_and_errors_located() {
        let docs = documents("---\na: 1\n---\n---\nb: 2\n").unwrap();
        let numbers: Vec<usize> = docs.iter().map(|d| d.0).collect();
        assert_eq!(numbers, [1, 2, 3]);
        let starts: Vec<(usize, usize)> = located("\n# c\na: 1\n---\n\nb:\n  c: 2\n")
            .unwrap()
            .iter()
            .map(|d| (d.0, d.1))
            .collect();
        assert_eq!(starts, [(1, 3), (2, 4)]);
        assert!(docs[1].1.is_null());
        let e = documents("a: 1\n---\nb: [1\n").unwrap_err();
        assert_eq!(e.doc, 2, "{e:?}");
        assert!(documents("a: .inf\n").is_err());
        assert!(documents("a: !!int x\n").is_err());
    }
}
