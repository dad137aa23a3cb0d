//! `mpt-lab docs --out DIR`: the man pages mptd(8), mptctl(8) and mpt.toml(5), and the shell
//! completions of both binaries, made from what the code and docs hold now: the clap
//! definitions the binaries parse (`mptd::cli`) and the configuration reference
//! (`docs/configuration.md`), which is kept true with the config code.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

/// The configuration reference this build was made with: it is mpt.toml(5).
const REFERENCE: &str = include_str!("../../../docs/configuration.md");

/// Write everything under `out` (`man/`, `completions/`); returns the files written.
pub fn generate(out: &Path) -> Result<Vec<PathBuf>> {
    let man = out.join("man");
    let comp = out.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let mut written = Vec::new();
    let commands = [
        ("mptd", mptd::cli::Args::command()),
        ("mptctl", mptd::cli::CtlArgs::command()),
    ];
    for (name, cmd) in &commands {
        let path = man.join(format!("{name}.8"));
        let mut f = File::create(&path).with_context(|| format!("{}", path.display()))?;
        clap_mangen::Man::new(cmd.clone())
            .section("8")
            .date(env!("CARGO_PKG_VERSION"))
            .source(format!("mptd {}", mptd::VERSION))
            .manual("System Manager's Manual")
            .render(&mut f)?;
        written.push(path);
        for (shell, file) in [
            (Shell::Bash, name.to_string()),
            (Shell::Zsh, format!("_{name}")),
            (Shell::Fish, format!("{name}.fish")),
        ] {
            let path = comp.join(file);
            let mut f = File::create(&path).with_context(|| format!("{}", path.display()))?;
            clap_complete::generate(shell, &mut cmd.clone(), *name, &mut f);
            written.push(path);
        }
    }
    let path = man.join("mpt.toml.5");
    std::fs::write(&path, config_man_page(REFERENCE)?)?;
    written.push(path);
    Ok(written)
}

/// Text for roff: backslashes and hyphens escaped, a line never starting with a control
/// character, `code` in bold.
fn roff(text: &str) -> String {
    let mut out = String::new();
    let mut bold = false;
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            '`' => {
                out.push_str(if bold { "\\fR" } else { "\\fB" });
                bold = !bold;
            }
            c => out.push(c),
        }
    }
    if bold {
        out.push_str("\\fR");
    }
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// mpt.toml(5) from the configuration reference (`docs/configuration.md`): its prose, then a
/// tagged paragraph per row of its table.
pub fn config_man_page(reference: &str) -> Result<String> {
    let start = reference
        .find("# Configuration reference")
        .context("docs/configuration.md has no \"# Configuration reference\" heading")?;
    let body = &reference[start + "# Configuration reference".len()..];
    let mut m = String::new();
    writeln!(
        m,
        ".TH MPT.TOML 5 \"{}\" \"mptd {}\" \"File Formats\"",
        env!("CARGO_PKG_VERSION"),
        mptd::VERSION
    )?;
    m.push_str(".SH NAME\nmpt.toml \\- configuration of the mptd multipath tunnel daemon\n");
    m.push_str(".SH SYNOPSIS\n/etc/mptd/NAME.toml\n.SH DESCRIPTION\n");
    let mut keys = 0;
    let mut in_table = false;
    for line in body.lines() {
        let line = line.trim_end();
        if let Some(row) = line.strip_prefix('|') {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            if cells.len() < 3 || cells[0] == "key" || cells[0].starts_with("---") {
                continue;
            }
            if !in_table {
                m.push_str(".SH KEYS\n");
                in_table = true;
            }
            writeln!(m, ".TP\n{}", roff(cells[0]))?;
            writeln!(m, "Default: {}.", roff(cells[1]))?;
            writeln!(m, ".br\n{}", roff(cells[2]))?;
            keys += 1;
        } else if line.is_empty() {
            if !in_table {
                m.push_str(".PP\n");
            }
        } else if !in_table {
            writeln!(m, "{}", roff(line))?;
        }
    }
    anyhow::ensure!(
        keys > 10,
        "docs/configuration.md's table has only {keys} rows"
    );
    m.push_str(".SH FILES\n/etc/mptd/NAME.toml, /etc/mptd/NAME.key\n");
    m.push_str(".SH SEE ALSO\n\\fBmptd\\fR(8), \\fBmptctl\\fR(8)\n");
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_page_has_every_key_of_the_reference_table() {
        let page = config_man_page(REFERENCE).expect("page");
        let mut keys = 0;
        for line in REFERENCE.lines() {
            let Some(row) = line.strip_prefix("| `") else {
                continue;
            };
            let cell = row.split(" | ").next().expect("a cell");
            for key in cell.split('`').filter(|k| k.contains('.')) {
                let key = roff(&format!("`{key}`"));
                assert!(page.contains(&key), "{key} missing");
                keys += 1;
            }
        }
        assert!(keys > 60, "only {keys} keys in docs/configuration.md");
        assert!(page.lines().all(|l| !l.starts_with('\'')));
    }

    #[test]
    fn roff_escapes() {
        assert_eq!(roff("`a-b` \\ x"), "\\fBa\\-b\\fR \\e x");
        assert_eq!(roff(".x"), "\\&.x");
    }
}
