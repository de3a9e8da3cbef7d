//! Read the documents of a manifest file: multi-document YAML, a stream of JSON values
//! (objects or arrays, one after another, as `kubectl apply -f` reads them), or a
//! `kind: List` (what `kubectl get -o json|yaml` prints). YAML is read as kubectl reads
//! it (YAML 1.1: `0755` is 493, `on` is true), see `super::yaml`. A duplicate key is
//! an error in both, as kubectl's strict field validation makes it.

use std::io::Read;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum InputError {
    #[error("{source_name}: cannot read: {message}")]
    Read {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: document {doc} (line {line}): {message}")]
    Parse {
        source_name: String,
        doc: usize,
        line: usize,
        message: String,
    },
    #[error("{source_name}: no objects found; expected Kubernetes YAML or JSON")]
    Empty { source_name: String },
}

/// One input object and where it came from.
#[derive(Debug, Clone)]
pub struct Document {
    /// 1-based document number in the file.
    pub doc: usize,
    pub object: Value,
}

/// What `-f PATH...` read: the documents, in order, and the subdirectories left out
/// (a directory's subdirectories are read only with `-R`, as kubectl does); the files of
/// a directory that could not be read (the others are read, as `kubectl apply -f DIR`
/// goes on past a bad file); and trainplace's own configuration objects, left out.
#[derive(Debug, Default)]
pub struct ReadFiles {
    pub docs: Vec<Document>,
    pub not_read: Vec<String>,
    pub unreadable: Vec<InputError>,
    pub not_workloads: Vec<String>,
}

/// trainplace's own configuration kinds (a policy directory's files, the sandbox fleet):
/// never judged as workloads.
const OWN_KINDS: [&str; 3] = ["Policy", "InstanceCatalog", "SandboxFleet"];

fn own_configuration(object: &Value) -> Option<&str> {
    let api = object.get("apiVersion").and_then(Value::as_str)?;
    let kind = object.get("kind").and_then(Value::as_str)?;
    (api.starts_with("trainplace.io/") && OWN_KINDS.contains(&kind)).then_some(kind)
}

/// Read every path of `-f` (repeatable), in order; `recursive` walks directories into
/// their subdirectories (`-R`).
pub fn read_all(paths: &[String], recursive: bool) -> Result<ReadFiles, InputError> {
    let mut read = ReadFiles::default();
    for path in paths {
        read_into(path, recursive, &mut read)?;
    }
    if read.docs.is_empty()
        && read.not_workloads.is_empty()
        && let Some(first) = read.unreadable.drain(..).next()
    {
        return Err(first);
    }
    Ok(read)
}

/// Read `path` (`-` = stdin) into its documents. A directory is read as kubectl reads
/// `-f DIR`: its `.yaml`, `.yml` and `.json` files (not subdirectories), by name.
pub fn read(path: &str) -> Result<Vec<Document>, InputError> {
    let mut read = ReadFiles::default();
    read_into(path, false, &mut read)?;
    Ok(read.docs)
}

fn read_into(path: &str, recursive: bool, read: &mut ReadFiles) -> Result<(), InputError> {
    if path != "-" && std::path::Path::new(path).is_dir() {
        return read_dir(path, recursive, read);
    }
    let source_name = if path == "-" {
        "<stdin>".to_string()
    } else {
        path.to_string()
    };
    let mut text = String::new();
    let res = if path == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(path).map(|t| text = t)
    };
    res.map_err(|e| InputError::Read {
        source_name: source_name.clone(),
        message: e.to_string(),
    })?;
    for d in parse(&text, &source_name)? {
        match own_configuration(&d.object) {
            Some(kind) => read.not_workloads.push(format!(
                "{source_name}: document {}: a trainplace {kind}, configuration rather than a workload: not judged (a Policy is given with --policy-dir)",
                d.doc
            )),
            None => read.docs.push(d),
        }
    }
    Ok(())
}

/// A directory's manifest files by name; its subdirectories in that order too with
/// `recursive` (files and subdirectories interleaved by name, as kubectl walks them),
/// else listed in `read.not_read`.
fn read_dir(dir: &str, recursive: bool, read: &mut ReadFiles) -> Result<(), InputError> {
    let mut files = Vec::new();
    manifest_files(
        std::path::Path::new(dir),
        recursive,
        &mut files,
        &mut read.not_read,
    )?;
    if files.is_empty() {
        let hint = if read.not_read.is_empty() {
            ""
        } else {
            " (its subdirectories are read with -R)"
        };
        return Err(InputError::Read {
            source_name: dir.to_string(),
            message: format!("a directory with no .yaml, .yml or .json files{hint}"),
        });
    }
    // A file that cannot be read is reported and the others are judged.
    for file in files {
        if let Err(e) = read_into(&file.to_string_lossy(), false, read) {
            read.unreadable.push(e);
        }
    }
    Ok(())
}

fn manifest_files(
    dir: &std::path::Path,
    recursive: bool,
    files: &mut Vec<std::path::PathBuf>,
    not_read: &mut Vec<String>,
) -> Result<(), InputError> {
    let failed = |e: std::io::Error| InputError::Read {
        source_name: dir.display().to_string(),
        message: e.to_string(),
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(failed)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if recursive {
                manifest_files(&p, true, files, not_read)?;
            } else {
                not_read.push(p.display().to_string());
            }
        } else if p.is_file()
            && p.extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        {
            files.push(p);
        }
    }
    Ok(())
}

pub fn parse(text: &str, source_name: &str) -> Result<Vec<Document>, InputError> {
    let trimmed = text.trim_start();
    let values = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        json_documents(text, source_name)?
    } else {
        yaml_documents(text, source_name)?
    };
    let mut out = Vec::new();
    for (doc, line, value) in values {
        let bad = |message: String| InputError::Parse {
            source_name: source_name.to_string(),
            doc,
            line,
            message,
        };
        expand(doc, value, &bad, &mut out)?;
    }
    if out.is_empty() {
        return Err(InputError::Empty {
            source_name: source_name.to_string(),
        });
    }
    Ok(out)
}

/// Each JSON value of a stream (`{...}{...}` or one per line), numbered from 1, with
/// the line it starts on.
fn json_documents(text: &str, source_name: &str) -> Result<Vec<(usize, usize, Value)>, InputError> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Strict>();
    let mut docs = Vec::new();
    loop {
        let rest = &text[stream.byte_offset()..];
        let start = text.len() - rest.trim_start().len();
        let line = text[..start].matches('\n').count() + 1;
        let doc = docs.len() + 1;
        match stream.next() {
            None => return Ok(docs),
            Some(Ok(Strict(value))) => docs.push((doc, line, value)),
            Some(Err(e)) => {
                let message = match e.classify() {
                    // A duplicate key ([`Strict`]); serde_json adds the position.
                    serde_json::error::Category::Data => e.to_string(),
                    _ => format!("not valid JSON: {e}"),
                };
                return Err(InputError::Parse {
                    source_name: source_name.to_string(),
                    doc,
                    line: e.line(),
                    message,
                });
            }
        }
    }
}

/// A JSON value read with duplicate keys refused: `serde_json::Value` keeps the last
/// one silently, which would judge another object than the API server is sent.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if entries.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "duplicate key {key:?}; kubectl would refuse it (strict field validation): remove one"
                )));
            }
            let Strict(value) = map.next_value()?;
            entries.insert(key, value);
        }
        Ok(Value::Object(entries))
    }
}

fn yaml_documents(text: &str, source_name: &str) -> Result<Vec<(usize, usize, Value)>, InputError> {
    let docs = super::yaml::load::located(text).map_err(|e| InputError::Parse {
        source_name: source_name.to_string(),
        doc: e.doc,
        line: e.line,
        message: e.message,
    })?;
    Ok(docs.into_iter().filter(|(_, _, v)| !v.is_null()).collect())
}

/// The objects of one document (a List's and an array's items in order); `bad` makes
/// the error for this document.
fn expand(
    doc: usize,
    value: Value,
    bad: &impl Fn(String) -> InputError,
    out: &mut Vec<Document>,
) -> Result<(), InputError> {
    match value {
        Value::Array(items) => {
            for item in items {
                expand(doc, item, bad, out)?;
            }
        }
        Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
            let items = map
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for item in items {
                expand(doc, item, bad, out)?;
            }
        }
        Value::Object(ref map) => {
            if map.get("kind").and_then(Value::as_str).is_none() {
                return Err(bad("not a Kubernetes object: no kind".into()));
            }
            out.push(Document { doc, object: value });
        }
        other => {
            return Err(bad(format!(
                "expected a Kubernetes object, found {}",
                type_name(&other)
            )));
        }
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_doc_yaml_with_list_and_blank_docs() {
        let text = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n";
        let docs = parse(text, "x.yaml").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].object["metadata"]["name"], "b");
        assert_eq!(docs[1].doc, 3);
    }

    #[test]
    fn yaml_error_names_document_and_line() {
        let text = "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: [unclosed\n";
        let err = parse(text, "x.yaml").unwrap_err().to_string();
        assert!(err.starts_with("x.yaml: document 2 (line "), "{err}");
    }

    #[test]
    fn json_error_names_line() {
        let err = parse("{\n\"kind\": \"Pod\",\n}", "x.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 3") && err.contains("not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn scalar_document_is_an_error() {
        let err = parse("just text\n", "x.yaml").unwrap_err().to_string();
        assert!(err.contains("found a string"), "{err}");
    }

    #[test]
    fn a_document_error_names_its_first_line() {
        let err = parse("foo: bar\n", "x.yaml").unwrap_err().to_string();
        assert_eq!(
            err,
            "x.yaml: document 1 (line 1): not a Kubernetes object: no kind"
        );
        let err = parse("kind: Pod\n---\n# note\nfoo: bar\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("x.yaml: document 2 (line 2): "), "{err}");
        let err = parse("{\"kind\": \"Pod\"}\n\n[1]\n", "x.json")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "x.json: document 2 (line 3): expected a Kubernetes object, found a number"
        );
    }

    #[test]
    fn json_duplicate_key_is_an_error_at_its_line() {
        let text = "{\n  \"kind\": \"Pod\",\n  \"spec\": {\n    \"hostIPC\": false,\n    \"hostIPC\": true\n  }\n}\n";
        let err = parse(text, "x.json").unwrap_err();
        let InputError::Parse {
            doc, line, message, ..
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!((*doc, *line), (1, 5), "{err}");
        assert!(
            message.contains("duplicate key \"hostIPC\"") && !message.contains("not valid JSON"),
            "{err}"
        );
        // The same duplicate in YAML, for comparison: both refuse it.
        let yaml = "kind: Pod\nspec:\n  hostIPC: false\n  hostIPC: true\n";
        assert!(
            parse(yaml, "x.yaml")
                .unwrap_err()
                .to_string()
                .contains("duplicate key")
        );
    }

    #[test]
    fn concatenated_json_objects_are_a_stream() {
        let text = "{\"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}}{\"kind\": \"Pod\", \"metadata\": {\"name\": \"b\"}}\n[{\"kind\": \"Pod\", \"metadata\": {\"name\": \"c\"}}]\n";
        let docs = parse(text, "x.json").unwrap();
        let names: Vec<(usize, &str)> = docs
            .iter()
            .map(|d| (d.doc, d.object["metadata"]["name"].as_str().unwrap()))
            .collect();
        assert_eq!(names, [(1, "a"), (2, "b"), (3, "c")]);
        // Something that is no JSON value after the objects is still an error.
        let err = parse("{\"kind\": \"Pod\"}\n}", "x.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("document 2") && err.contains("not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn empty_input_is_an_error() {
        assert!(matches!(
            parse("\n---\n", "x"),
            Err(InputError::Empty { .. })
        ));
    }
}
