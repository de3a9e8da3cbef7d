//! The README's advisor example is what the binary prints: its command is run as written
//! (into a temporary directory instead of `plan/`), every line the README quotes must be
//! in the output (a line ending in `...` up to there), and the job it writes is admitted
//! unchanged, as the README says.

mod common;

use std::process::Command;

use common::root;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");

/// The first fenced block of `lang` after `heading` in the README.
fn block<'a>(readme: &'a str, heading: &str, lang: &str) -> &'a str {
    let section = &readme[readme.find(heading).expect("the section")..];
    let open = format!("```{lang}\n");
    let start = section.find(&open).expect("the block") + open.len();
    let len = section[start..].find("```").expect("its end");
    &section[start..start + len]
}

#[test]
fn the_readme_advisor_example_prints_what_it_quotes() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let command = block(&readme, "## Plan the capacity", "sh").replace("\\\n", " ");
    let quoted = block(&readme, "## Plan the capacity", "text");
    let dir = tempfile::tempdir().unwrap();
    let plan = format!("{}/", dir.path().display());
    let args: Vec<String> = command
        .split_whitespace()
        .skip_while(|w| *w != "trainplace")
        .skip(1)
        .map(|w| {
            if w == "plan/" {
                plan.clone()
            } else {
                w.to_string()
            }
        })
        .collect();
    assert!(args.iter().any(|a| a == "--offerings"), "{args:?}");
    let out = Command::new(BIN)
        .args(&args)
        .current_dir(root())
        .output()
        .unwrap();
    // The plan on stdout, what was written on stderr: the README shows both.
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .replace(&plan, "plan/");
    assert!(out.status.success(), "{printed}");
    for line in quoted.lines() {
        let line = line.strip_suffix(" ...").unwrap_or(line);
        assert!(
            printed.contains(line),
            "the README quotes {line:?}; the binary printed:\n{printed}"
        );
    }

    let job = dir.path().join("job-pytorchjob.yaml");
    let out = Command::new(BIN)
        .arg("check")
        .arg("-f")
        .arg(&job)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("allowed (no changes)"), "{report}");
}
