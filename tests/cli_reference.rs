//! docs/cli.md is the CLI reference, generated from the clap definitions: every command
//! and subcommand's `--help`. The test fails when the page is stale; regenerate it with
//! `UPDATE_GOLDEN=1 cargo test --test cli_reference` and review the diff.

mod common;

#[path = "common/golden.rs"]
mod golden;
use clap::CommandFactory;
use trainplace::cli::Cli;

/// The page: an introduction, then one section per command, depth first, each with
/// its long help as the binary prints it. Environment values are hidden, so the page
/// does not depend on the shell that generated it.
fn render() -> String {
    let mut cmd = Cli::command().term_width(100);
    cmd.build();
    let mut out = String::from(
        "# CLI reference\n\n\
         Generated from the binary's own help (`trainplace <command> --help`) by\n\
         `tests/cli_reference.rs`, which fails when this page is stale; regenerate it with\n\
         `UPDATE_GOLDEN=1 cargo test --test cli_reference`. Exit codes, the same for every\n\
         command: 0 all allowed (warnings are fine), 1 something denied or an error-level\n\
         finding, 2 input unreadable; a reader that closes stdout early ends the command with 0.\n\n\
         Commands:\n\n",
    );
    let mut sections = String::new();
    walk(&mut cmd, "trainplace", 0, &mut out, &mut sections);
    out.push('\n');
    out.push_str(&sections);
    out
}

fn walk(cmd: &mut clap::Command, path: &str, depth: usize, toc: &mut String, out: &mut String) {
    let help = cmd
        .clone()
        .mut_args(|a| a.hide_env_values(true))
        .render_long_help()
        .to_string();
    let anchor = path.replace(' ', "-");
    toc.push_str(&format!("{}- [`{path}`](#{anchor})\n", "  ".repeat(depth)));
    out.push_str(&format!(
        "## {path}\n\n```text\n{}\n```\n\n",
        help.trim_end()
    ));
    for sub in cmd.get_subcommands_mut() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let name = format!("{path} {}", sub.get_name());
        walk(sub, &name, depth + 1, toc, out);
    }
}

#[test]
fn docs_cli_md_is_the_generated_reference() {
    let path = common::root().join("docs/cli.md");
    let want = render();
    if golden::update() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "docs/cli.md is stale from line {}: regenerate it with \
             `UPDATE_GOLDEN=1 cargo test --test cli_reference` and review the diff",
            line + 1
        );
    }
}

/// Every command the binary has is on the page.
#[test]
fn every_command_has_a_section() {
    let page = render();
    for sub in Cli::command().get_subcommands() {
        if sub.is_hide_set() {
            continue;
        }
        assert!(
            page.contains(&format!("## trainplace {}\n", sub.get_name())),
            "{} has no section",
            sub.get_name()
        );
    }
}
