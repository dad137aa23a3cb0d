//! The suite's measurements in the results page: `mpt-lab results --log` writes each test's
//! `RESULT` lines into the block of its section.
//!
//! A section holds a block `<!-- mpt-lab suite PREFIX PREFIX… -->`: the tests whose names
//! start with one of the prefixes (`sites::`, `concentrators::`) are listed there; every other
//! test goes to the block `suite`. A test's `HEADLINE` lines (`crate::summary`) go with it,
//! as comments. A test the new logs do not name keeps what the page said of it, so that a log
//! of one test, or of a benchmark, updates only that.

use crate::blocks::splice;
use crate::summary::Headline;

/// One test as a log or a block gives it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Test {
    name: String,
    results: Vec<String>,
    headlines: Vec<Headline>,
}

/// The tests of a suite's log: `test NAME ... ` starts one; a `RESULT` or `HEADLINE` line
/// belongs to the last one started (or, before any, to one named by the log's first
/// `HEADLINE` key: a benchmark's log).
fn from_log(log: &str) -> Vec<Test> {
    let mut tests: Vec<Test> = Vec::new();
    for line in log.lines() {
        if let Some((name, _)) = line
            .strip_prefix("test ")
            .and_then(|r| r.split_once(" ... "))
        {
            tests.retain(|t| t.name != name);
            tests.push(Test {
                name: name.to_owned(),
                ..Test::default()
            });
        }
        let head = line
            .split_once("HEADLINE ")
            .and_then(|(_, h)| Headline::parse(h));
        let result = line.split_once("RESULT ").map(|(_, r)| clean(r));
        if head.is_none() && result.is_none() {
            continue;
        }
        if tests.is_empty() {
            let name = head.as_ref().map_or("(log)".to_owned(), |h| h.key.clone());
            tests.push(Test {
                name,
                ..Test::default()
            });
        }
        let t = tests.last_mut().expect("one test at least");
        match head {
            Some(h) => {
                t.headlines.retain(|o| o.key != h.key);
                t.headlines.push(h);
            }
            None => t.results.extend(result),
        }
    }
    tests.retain(|t| !t.results.is_empty() || !t.headlines.is_empty());
    tests
}

/// The keys of `doc`'s suite blocks, with their prefixes (`suite` has none).
fn blocks(doc: &str) -> Vec<(String, Vec<String>)> {
    doc.lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("<!-- mpt-lab suite")?
                .strip_suffix("-->")
        })
        .map(|rest| {
            let prefixes: Vec<String> = rest.split_whitespace().map(String::from).collect();
            let key = ["suite".to_owned()]
                .into_iter()
                .chain(prefixes.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            (key, prefixes)
        })
        .collect()
}

/// The tests a block of `doc` lists now (as [`block_text`] wrote them).
fn from_block(doc: &str, key: &str) -> Vec<Test> {
    let open = format!("<!-- mpt-lab {key} -->");
    let close = format!("<!-- /mpt-lab {key} -->");
    let (Some(a), Some(b)) = (doc.find(&open), doc.find(&close)) else {
        return Vec::new();
    };
    let mut tests: Vec<Test> = Vec::new();
    for line in doc.get(a + open.len()..b).unwrap_or_default().lines() {
        if let Some(h) = line
            .trim()
            .strip_prefix("<!-- headline ")
            .and_then(|h| h.strip_suffix("-->"))
            .and_then(Headline::parse)
        {
            // a headline names its test in the line before it, `<!-- test NAME -->`
            if let Some(t) = tests.last_mut() {
                t.headlines.push(h);
            }
        } else if let Some(name) = line
            .strip_prefix("<!-- test ")
            .and_then(|n| n.strip_suffix(" -->"))
        {
            if tests.last().is_none_or(|t| t.name != name) {
                tests.push(Test {
                    name: name.to_owned(),
                    ..Test::default()
                });
            }
        } else if let Some(r) = line.strip_prefix("    ") {
            if let Some(t) = tests.last_mut() {
                t.results.push(r.to_owned());
            }
        } else if !line.is_empty() && !line.starts_with(['`', '<', ' ']) {
            tests.push(Test {
                name: line.to_owned(),
                ..Test::default()
            });
        }
    }
    tests
}

/// A block's text: each test's `RESULT` lines under its name, then its headlines, each named
/// by a `<!-- test NAME -->` line before it.
fn block_text(tests: &[&Test]) -> String {
    let mut md = String::from("```text\n");
    for t in tests.iter().filter(|t| !t.results.is_empty()) {
        md += &format!("{}\n", t.name);
        for r in &t.results {
            md += &format!("    {r}\n");
        }
    }
    md += "```\n";
    for t in tests {
        for h in &t.headlines {
            md += &format!("<!-- test {} -->\n{}\n", t.name, h.comment());
        }
    }
    md
}

/// `doc` with the blocks `log` gives whole: its lines between `BEGIN-BLOCK KEY` and
/// `END-BLOCK` (a benchmark's tables, `benches/packet_cost.sh`) become block `KEY`.
pub fn write_whole_blocks(doc: &str, log: &str) -> String {
    let mut out = doc.to_owned();
    let mut open: Option<(String, String)> = None;
    for line in log.lines() {
        if let Some(key) = line.strip_prefix("BEGIN-BLOCK ") {
            open = Some((key.trim().to_owned(), String::new()));
        } else if line.starts_with("END-BLOCK") {
            if let Some((key, text)) = open.take() {
                out = splice(&out, &key, &text);
            }
        } else if let Some((_, text)) = open.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// `doc` with every suite block written again from what it lists and what `logs` measured.
pub fn write_suite(doc: &str, logs: &[String]) -> String {
    let mut keys = blocks(doc);
    if !keys.iter().any(|(k, _)| k == "suite") {
        keys.push(("suite".to_owned(), Vec::new()));
    }
    let mut all: Vec<Test> = keys.iter().flat_map(|(k, _)| from_block(doc, k)).collect();
    for t in logs.iter().flat_map(|l| from_log(l)) {
        all.retain(|o| o.name != t.name);
        all.push(t);
    }
    all.sort_by(|a, b| a.name.cmp(&b.name));
    let home = |t: &Test| {
        keys.iter()
            .find(|(_, prefixes)| prefixes.iter().any(|p| t.name.starts_with(p.as_str())))
            .map_or("suite", |(k, _)| k.as_str())
            .to_owned()
    };
    let mut out = doc.to_owned();
    for (key, _) in &keys {
        let mine: Vec<&Test> = all.iter().filter(|t| home(t) == *key).collect();
        out = splice(&out, key, &block_text(&mine));
    }
    out
}

/// A `RESULT` line without what names one build or one checkout: a build's commit in
/// parentheses, a clone's directory before `target/`.
fn clean(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find(" (") {
        out += &rest[..i];
        let after = &rest[i + 2..];
        match after.find(')') {
            // `mptd --version` names its commit in 12 hex digits, git in 40
            Some(j @ (12 | 40)) if after[..j].chars().all(|c| c.is_ascii_hexdigit()) => {
                rest = &after[j + 1..];
            }
            _ => {
                out += " (";
                rest = after;
            }
        }
    }
    out += rest;
    match (out.find(" /"), out.find("/target/")) {
        (Some(a), Some(b)) if a < b => format!("{} {}", &out[..a], &out[b + 1..]),
        _ => out.trim_end().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_s_commit_and_a_clone_s_directory_are_left_out() {
        assert_eq!(
            clean(
                "package: /tmp/ci/tests/../target/p.deb, mptd 0.1.0 (dab6a872f72a), (1234567) (ok)"
            ),
            "package: target/p.deb, mptd 0.1.0, (1234567) (ok)"
        );
    }

    const LOG: &str = "test idle::a ... RESULT idle: 57 bit/s\nRESULT idle wake: 0 lost\n\
        HEADLINE idle | an idle tunnel | **57 bit/s**\nok\n\
        test idle::b ... ok\n\
        test package::p ... RESULT package: /tmp/ci/tests/../target/packages/m.deb, mptd 0.1.0 (dab6a872f72a), ok (in 3 s)\n";

    #[test]
    fn each_test_goes_to_its_section_s_block_with_its_headline() {
        let doc =
            "# R\n\n## Idle\n\n<!-- mpt-lab suite idle:: -->\n<!-- /mpt-lab suite idle:: -->\n\n\
                   ## All\n\n<!-- mpt-lab suite -->\n<!-- /mpt-lab suite -->\n";
        let out = write_suite(doc, &[LOG.to_owned()]);
        assert!(out.contains(
            "<!-- mpt-lab suite idle:: -->\n```text\nidle::a\n    idle: 57 bit/s\n    idle wake: 0 lost\n```\n\
             <!-- test idle::a -->\n<!-- headline idle | an idle tunnel | **57 bit/s** -->\n<!-- /mpt-lab suite idle:: -->"
        ), "{out}");
        assert!(out.contains(
            "<!-- mpt-lab suite -->\n```text\npackage::p\n    package: target/packages/m.deb, mptd 0.1.0, ok (in 3 s)\n```\n<!-- /mpt-lab suite -->"
        ), "{out}");
        assert!(!out.contains("idle::b"));
        // written again with nothing new: the same; with a log of another test: that one only
        assert_eq!(write_suite(&out, &[]), out);
        let bench = "HEADLINE packet-cost | a packet | **11 000**\n";
        let again = write_suite(&out, &[bench.to_owned()]);
        assert!(again.contains("idle::a\n    idle: 57 bit/s"));
        assert!(again.contains("<!-- test packet-cost -->\n<!-- headline packet-cost | a packet | **11 000** -->\n<!-- /mpt-lab suite -->"), "{again}");
        let newer = LOG.replace("57 bit/s", "60 bit/s");
        let third = write_suite(&again, &[newer]);
        assert!(third.contains("idle::a\n    idle: 60 bit/s") && !third.contains("57 bit/s"));
        assert!(third.contains("**11 000**"));
    }

    #[test]
    fn a_benchmark_s_tables_become_its_block_whole() {
        let doc = "a\n<!-- mpt-lab packet cost -->\nold\n<!-- /mpt-lab packet cost -->\nb\n";
        let log =
            "noise\nBEGIN-BLOCK packet cost\n| x |\n<!-- headline k | w | f -->\nEND-BLOCK\ntail\n";
        assert_eq!(
            write_whole_blocks(doc, log),
            "a\n<!-- mpt-lab packet cost -->\n| x |\n<!-- headline k | w | f -->\n<!-- /mpt-lab packet cost -->\nb\n"
        );
    }

    #[test]
    fn a_doc_without_a_suite_block_gets_one_at_the_end() {
        let out = write_suite("# R\n", &[LOG.to_owned()]);
        assert!(out.contains("## suite\n\n<!-- mpt-lab suite -->\n```text\nidle::a\n"));
    }
}
