//! The user's documents agree with each other (`cargo test -p mpt-tests --test docs`, part of
//! `./test.sh`): the Summary of `docs/results.md` and the README's table ("How it does") are
//! what the lab makes of the headlines in the results' blocks, and every figure of the
//! README's table is in the Summary, where its row and method are; no bold figure of the
//! results stands outside a block the lab wrote; every file the README names exists; and the
//! README stays a first visit's length.

#![allow(clippy::unwrap_used)] // a test: a file it cannot read is a failure

use std::path::{Path, PathBuf};

/// Lines the README may have.
const README_MAX_LINES: usize = 150;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap()
}

/// The numbers in `text` as written ("0.97", "5999", "13.5"), without the markdown around them.
fn numbers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let decimal_point =
            c == '.' && !cur.is_empty() && chars.peek().is_some_and(|n| n.is_ascii_digit());
        if c.is_ascii_digit() || decimal_point {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The rows of the table under the README's heading `heading`: (what, figure).
fn table_rows(doc: &str, heading: &str) -> Vec<(String, String)> {
    let section = doc
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("{heading}"));
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---") && !l.starts_with("| what |"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            assert_eq!(cells.len(), 2, "a row of two cells: {l}");
            (cells[0].trim().to_owned(), cells[1].trim().to_owned())
        })
        .collect()
}

/// The `code` spans of `text`: the tests and commands a row names.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The README rows' figures missing from the rows of `results`' summary that name the same
/// test or command: "figure (what)" each.
fn disagreements(readme: &str, results: &str) -> Vec<String> {
    let summary = table_rows(results, "## Summary");
    let mut missing = Vec::new();
    for (what, figure) in table_rows(readme, "## How it does") {
        let names = code_spans(&what);
        let same: Vec<&(String, String)> = summary
            .iter()
            .filter(|(w, _)| code_spans(w).iter().any(|c| names.contains(c)))
            .collect();
        if same.is_empty() {
            missing.push(format!(
                "no row of docs/results.md's summary names {names:?} ({what})"
            ));
            continue;
        }
        let known: Vec<String> = same.iter().flat_map(|(_, f)| numbers(f)).collect();
        for n in numbers(&figure) {
            if !known.contains(&n) {
                missing.push(format!("{n} ({what})"));
            }
        }
    }
    missing
}

#[test]
fn the_readme_s_figures_are_the_results_figures() {
    let readme = read("README.md");
    let results = read("docs/results.md");
    let rows = table_rows(&readme, "## How it does");
    assert!(
        rows.len() >= 5,
        "the README's table has {} rows",
        rows.len()
    );
    let missing = disagreements(&readme, &results);
    assert!(
        missing.is_empty(),
        "figures of the README that docs/results.md's summary does not have in the same \
         test's row: {missing:?}"
    );
}

#[test]
fn a_deliberately_changed_figure_is_caught() {
    let results = "## Summary\n\n| what | figure |\n|---|---|\n| TCP (`a.rs`) | **97.1 %** of the paths |\n| UDP (`b.rs`) | 97.3 % |\n";
    let readme = |f: &str| {
        format!("## How it does\n\n| what | figure |\n|---|---|\n| TCP (`a.rs`) | {f} |\n")
    };
    assert!(disagreements(&readme("**97.1 %**"), results).is_empty());
    // in the document, but in another test's row
    assert_eq!(disagreements(&readme("97.3 %"), results).len(), 1);
    assert_eq!(numbers("**0.97** / 13.5-14.0 MB"), ["0.97", "13.5", "14.0"]);
}

#[test]
fn the_summary_and_the_readme_s_table_are_made_from_the_headlines() {
    let results = read("docs/results.md");
    let readme = read("README.md");
    let how = "sudo target/release/mpt-lab results --log SUITE.LOG, or an experiment's \
               --write-results, writes them";
    assert!(
        mpt_lab::summary::refreshed_results(&results) == results,
        "docs/results.md's Summary is not what its headlines make ({how})"
    );
    assert!(
        mpt_lab::summary::refreshed_readme(&readme, &results) == readme,
        "the README's table is not what docs/results.md's headlines make ({how})"
    );
    let missing = mpt_lab::summary::missing(&results);
    assert!(
        missing.is_empty(),
        "no headline in docs/results.md for {missing:?} ({how})"
    );
}

/// The bold figures of `doc` ("**0.99**", "**97.1 %**") outside the lab's blocks: each
/// "line: figure".
fn figures_outside_blocks(doc: &str) -> Vec<String> {
    let mut inside = 0usize;
    let mut found = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("<!-- /mpt-lab ") {
            inside = inside.saturating_sub(1);
            continue;
        }
        if t.starts_with("<!-- mpt-lab ") {
            inside += 1;
            continue;
        }
        if inside > 0 {
            continue;
        }
        for bold in line.split("**").skip(1).step_by(2) {
            let first = bold.split_whitespace().next().unwrap_or_default();
            let numeric = first.starts_with(|c: char| c.is_ascii_digit())
                && first
                    .chars()
                    .all(|c| c.is_ascii_digit() || ".,–-/".contains(c));
            if numeric {
                found.push(format!("{}: {bold}", n + 1));
            }
        }
    }
    found
}

#[test]
fn no_bold_figure_of_the_results_stands_outside_a_generated_block() {
    let results = read("docs/results.md");
    let found = figures_outside_blocks(&results);
    assert!(
        found.is_empty(),
        "figures typed into docs/results.md rather than written by the lab: {found:?}"
    );
    let doc = "a **0.99** b\n<!-- mpt-lab x -->\n**97.1 %**\n<!-- /mpt-lab x -->\n**160-byte datagrams**: c\n";
    assert_eq!(figures_outside_blocks(doc), ["1: 0.99"]);
}

#[test]
fn every_file_the_readme_names_exists_and_it_is_short() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "the README has {lines} lines, at most {README_MAX_LINES}"
    );
    let mut named = Vec::new();
    for part in readme.split(['`', '(', ')', ' ', ',', '\n']) {
        let part = part.trim_end_matches(['.', ':', ';']);
        let is_file = (part.starts_with("docs/")
            || part.starts_with("config/")
            || part.starts_with("scripts/")
            || part.starts_with("tests/")
            || part.ends_with(".md"))
            && !part.contains('*')
            && !part.contains('{');
        if is_file {
            named.push(part.to_owned());
        }
    }
    assert!(named.iter().any(|n| n == "docs/deploy.md"), "{named:?}");
    let absent: Vec<&String> = named.iter().filter(|n| !root().join(n).exists()).collect();
    assert!(
        absent.is_empty(),
        "the README names files that are not there: {absent:?}"
    );
}
