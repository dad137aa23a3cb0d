//! The results page's Summary and the README's table of figures, generated from headlines.
//!
//! Each lab experiment and each end-to-end test the Summary names states its own headline:
//! what it measures and the figure, one row. The lab writes it into its block of
//! `docs/results.md` as `<!-- headline KEY | WHAT | FIGURE -->`; an end-to-end test prints
//! `HEADLINE KEY | WHAT | FIGURE`, which `mpt-lab results --log` takes from the suite's log
//! into its section's block, beside its `RESULT` lines (`crate::suite`). The Summary is every headline in
//! [`ORDER`], the README's table those in [`README`]: no figure in either is typed by hand.

use std::path::Path;

use anyhow::{Context, Result};

use crate::blocks::splice;

/// One row: its key, what it measures (with the command or test) and the figure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headline {
    pub key: String,
    pub what: String,
    pub figure: String,
}

/// The Summary's rows, in order; a headline whose key is not here comes after them.
pub const ORDER: &[&str] = &[
    "packet-cost",
    "release-size",
    "foreign",
    "foreign-deb",
    "footprint",
    "internet",
    "idle",
    "installed",
    "versions",
    "segments",
    "allocations",
    "voice-bbr",
    "voice-cubic",
    "lookups",
    "realworld",
    "realworld-rate",
    "four-paths",
    "streams",
    "recovery",
    "recovery-cubic",
    "concentrators",
    "table2-case16",
    "table2-small",
    "table1",
    "table2-case17",
    "compare",
    "latency",
    "peers",
    "flood",
    "hostile",
];

/// The README's rows (`<!-- mpt-lab readme -->`), in order.
pub const README: &[&str] = &[
    "realworld",
    "four-paths",
    "internet",
    "recovery",
    "recovery-cubic",
    "idle",
    "release-size",
    "footprint",
    "packet-cost",
];

impl Headline {
    /// How the lab writes it into a block.
    pub fn comment(&self) -> String {
        format!(
            "<!-- headline {} | {} | {} -->",
            self.key, self.what, self.figure
        )
    }

    /// `KEY | WHAT | FIGURE`, as a comment or a `HEADLINE` line carries it.
    pub(crate) fn parse(s: &str) -> Option<Headline> {
        let mut it = s.trim().splitn(3, " | ");
        let (key, what, figure) = (it.next()?, it.next()?, it.next()?);
        (!key.is_empty() && !key.contains(' ')).then(|| Headline {
            key: key.to_owned(),
            what: what.trim().to_owned(),
            figure: figure.trim().to_owned(),
        })
    }
}

/// The headlines written into `doc`'s blocks, the last of each key.
pub fn headlines(doc: &str) -> Vec<Headline> {
    let mut out: Vec<Headline> = Vec::new();
    for h in doc.lines().filter_map(|l| {
        Headline::parse(
            l.trim()
                .strip_prefix("<!-- headline ")?
                .strip_suffix("-->")?,
        )
    }) {
        out.retain(|o| o.key != h.key);
        out.push(h);
    }
    out
}

/// The rows of `keys` (all of `heads` in [`ORDER`] when `None`) as a table.
fn table(heads: &[Headline], keys: Option<&[&str]>) -> String {
    let rank = |h: &Headline| {
        ORDER
            .iter()
            .position(|k| *k == h.key)
            .unwrap_or(ORDER.len())
    };
    let mut rows: Vec<&Headline> = match keys {
        Some(keys) => keys
            .iter()
            .filter_map(|k| heads.iter().find(|h| h.key == *k))
            .collect(),
        None => heads.iter().collect(),
    };
    if keys.is_none() {
        rows.sort_by_key(|h| rank(h));
    }
    let mut md = String::from("| what | figure |\n|---|---|\n");
    for h in rows {
        md += &format!("| {} | {} |\n", h.what, h.figure);
    }
    md
}

/// `results` with its `summary` block made from its headlines.
pub fn refreshed_results(results: &str) -> String {
    splice(results, "summary", &table(&headlines(results), None))
}

/// `readme` with its `readme` block made from the headlines of `results`.
pub fn refreshed_readme(readme: &str, results: &str) -> String {
    splice(readme, "readme", &table(&headlines(results), Some(README)))
}

/// The keys of [`ORDER`] (which holds [`README`]'s) that no headline in `results` gives.
pub fn missing(results: &str) -> Vec<&'static str> {
    let heads = headlines(results);
    ORDER
        .iter()
        .filter(|k| !heads.iter().any(|h| h.key == **k))
        .copied()
        .collect()
}

/// Rewrite the Summary of `results` and the README's table (`README.md` in the directory
/// above `results`, when it has a `readme` block) from the headlines in `results`.
pub fn refresh(results: &Path) -> Result<()> {
    let doc = std::fs::read_to_string(results)
        .with_context(|| format!("reading {}", results.display()))?;
    let new = refreshed_results(&doc);
    if new != doc {
        std::fs::write(results, &new).with_context(|| format!("writing {}", results.display()))?;
    }
    let gone = missing(&new);
    if !gone.is_empty() {
        eprintln!("no headline yet for {}", gone.join(", "));
    }
    let readme = results
        .canonicalize()?
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("README.md"));
    if let Some(readme) = readme.filter(|r| r.exists()) {
        let text = std::fs::read_to_string(&readme)?;
        if text.contains("<!-- mpt-lab readme -->") {
            std::fs::write(&readme, refreshed_readme(&text, &new))
                .with_context(|| format!("writing {}", readme.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_and_the_readme_are_made_from_the_headlines() {
        let results = "# R\n\n<!-- mpt-lab summary -->\nold\n<!-- /mpt-lab summary -->\n\n\
            <!-- mpt-lab run x -->\n<!-- headline idle | an idle tunnel | **5 bit/s** -->\n\
            <!-- headline realworld | TCP | 0.99 -->\n<!-- /mpt-lab run x -->\n";
        let new = refreshed_results(results);
        assert!(new.contains(
            "<!-- mpt-lab summary -->\n| what | figure |\n|---|---|\n| an idle tunnel | **5 bit/s** |\n| TCP | 0.99 |\n<!-- /mpt-lab summary -->"
        ));
        assert_eq!(refreshed_results(&new), new);
        let readme = "x\n<!-- mpt-lab readme -->\n<!-- /mpt-lab readme -->\ny\n";
        assert_eq!(
            refreshed_readme(readme, &new),
            "x\n<!-- mpt-lab readme -->\n| what | figure |\n|---|---|\n| TCP | 0.99 |\n| an idle tunnel | **5 bit/s** |\n<!-- /mpt-lab readme -->\ny\n"
        );
        assert!(missing(&new).contains(&"internet"));
        assert!(!missing(&new).contains(&"idle"));
    }
}
