//! Read the documents of a manifest file: multi-document YAML, a JSON object, a JSON
//! array, or a `kind: List` (what `kubectl get -o json|yaml` prints). YAML is read as
//! kubectl reads it (YAML 1.1: `0755` is 493, `on` is true), see [`super::yaml`].

use std::io::Read;

use serde_json::Value;
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

/// Read `path` (`-` = stdin) into its documents. A directory is read as kubectl reads
/// `-f DIR`: its `.yaml`, `.yml` and `.json` files (not subdirectories), by name.
pub fn read(path: &str) -> Result<Vec<Document>, InputError> {
    if path != "-" && std::path::Path::new(path).is_dir() {
        return read_dir(path);
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
    parse(&text, &source_name)
}

fn read_dir(dir: &str) -> Result<Vec<Document>, InputError> {
    let failed = |e: std::io::Error| InputError::Read {
        source_name: dir.to_string(),
        message: e.to_string(),
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(failed)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(InputError::Read {
            source_name: dir.to_string(),
            message: "a directory with no .yaml, .yml or .json files".into(),
        });
    }
    let mut docs = Vec::new();
    for file in files {
        docs.extend(read(&file.to_string_lossy())?);
    }
    Ok(docs)
}

pub fn parse(text: &str, source_name: &str) -> Result<Vec<Document>, InputError> {
    let trimmed = text.trim_start();
    let values = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let v: Value = serde_json::from_str(text).map_err(|e| InputError::Parse {
            source_name: source_name.to_string(),
            doc: 1,
            line: e.line(),
            message: format!("not valid JSON: {e}"),
        })?;
        vec![(1, v)]
    } else {
        yaml_documents(text, source_name)?
    };
    let mut out = Vec::new();
    for (doc, value) in values {
        expand(doc, value, source_name, &mut out)?;
    }
    if out.is_empty() {
        return Err(InputError::Empty {
            source_name: source_name.to_string(),
        });
    }
    Ok(out)
}

fn yaml_documents(text: &str, source_name: &str) -> Result<Vec<(usize, Value)>, InputError> {
    let docs = super::yaml::load::documents(text).map_err(|e| InputError::Parse {
        source_name: source_name.to_string(),
        doc: e.doc,
        line: e.line,
        message: e.message,
    })?;
    Ok(docs.into_iter().filter(|(_, v)| !v.is_null()).collect())
}

fn expand(
    doc: usize,
    value: Value,
    source_name: &str,
    out: &mut Vec<Document>,
) -> Result<(), InputError> {
    let bad = |message: String| InputError::Parse {
        source_name: source_name.to_string(),
        doc,
        line: 0,
        message,
    };
    match value {
        Value::Array(items) => {
            for item in items {
                expand(doc, item, source_name, out)?;
            }
        }
        Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
            let items = map
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for item in items {
                expand(doc, item, source_name, out)?;
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
    fn empty_input_is_an_error() {
        assert!(matches!(
            parse("\n---\n", "x"),
            Err(InputError::Empty { .. })
        ));
    }
}
