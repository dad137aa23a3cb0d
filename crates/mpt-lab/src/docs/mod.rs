//! `mpt-lab docs --out DIR`: the man pages mptd(8), mptctl(8) and mpt.toml(5), and the shell
//! completions of both binaries, made from what the code and docs hold now: the clap
//! definitions the binaries parse (`mptd::cli`) and the configuration reference
//! (`docs/configuration.md`), which is kept true with the config code. The pages stand alone
//! once installed: what the clap definitions do not say (signals, files, exit codes,
//! examples) is written here, and repository paths become the installed ones.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

/// The configuration reference this build was made with: it is mpt.toml(5).
const REFERENCE: &str = include_str!("../../../../docs/configuration.md");

/// Where the Debian package installs the examples (`config/`) and the docs (`docs/`):
/// `scripts/release.sh` stages them in `doc/`, which `contrib/nfpm.yaml` installs here.
const DOC_DIR: &str = "/usr/share/doc/mptd";

/// What clap_mangen's `roff` puts before every rendering: `\*(Aq`, an apostrophe that stays one.
const APOSTROPHE_PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

/// mptd's version (`0.1.0`) for the pages' footers: [`mptd::VERSION`] without the commit and
/// protocol versions, which crowd the footer's middle.
fn version() -> &'static str {
    mptd::VERSION.split_whitespace().next().unwrap_or("")
}

/// Write everything under `out` (`man/`, `completions/`); returns the files written.
pub fn generate(out: &Path) -> Result<Vec<PathBuf>> {
    let man = out.join("man");
    let comp = out.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let mut written = Vec::new();
    let commands = [
        ("mptd", mptd::cli::Args::command(), MPTD_EXTRA),
        ("mptctl", mptd::cli::CtlArgs::command(), MPTCTL_EXTRA),
    ];
    for (name, cmd, extra) in &commands {
        let path = man.join(format!("{name}.8"));
        std::fs::write(&path, command_man_page(cmd, extra)?)
            .with_context(|| format!("{}", path.display()))?;
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

/// A page of section 8 for `cmd`: clap_mangen's title, NAME, SYNOPSIS, DESCRIPTION and
/// OPTIONS, then COMMANDS from the same clap definitions (each subcommand with its arguments
/// and its own subcommands, on this page), then `extra` (markdown, see [`markdown`]).
pub fn command_man_page(cmd: &clap::Command, extra: &str) -> Result<String> {
    let man = clap_mangen::Man::new(cmd.clone())
        .section("8")
        .date(version())
        .source("mptd")
        .manual("System Manager's Manual");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    // keys and paths are not hyphenated, nor lines stretched around them
    out.extend_from_slice(b".nh\n.ad l\n");
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    let mut page = String::from_utf8(out)?;
    // each render_* starts with the apostrophe preamble: once is enough
    let rest = page.split_off(APOSTROPHE_PREAMBLE.len());
    page.push_str(&rest.replace(APOSTROPHE_PREAMBLE, ""));
    if cmd.get_subcommands().next().is_some() {
        page.push_str(".SH COMMANDS\n");
        commands(&mut page, cmd, &[])?;
    }
    page.push_str(&markdown(extra));
    Ok(page)
}

/// Each subcommand of `cmd` (but `help`), reached by the words `parents`: a tagged paragraph
/// with its usage and help, its arguments indented under it, then its own subcommands.
fn commands(m: &mut String, cmd: &clap::Command, parents: &[String]) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        let mut usage = String::new();
        for w in parents {
            write!(usage, "{w} ")?;
        }
        write!(usage, "\\fB{}\\fR ", roff(sub.get_name()))?;
        let args: Vec<&clap::Arg> = sub
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_id() != "help")
            .collect();
        for a in &args {
            usage.push_str(&arg_usage(a));
            usage.push(' ');
        }
        if sub.get_subcommands().any(|s| s.get_name() != "help") {
            let names: Vec<&str> = sub
                .get_subcommands()
                .map(|s| s.get_name())
                .filter(|n| *n != "help")
                .collect();
            usage.push_str(&roff(&names.join("|")));
        }
        writeln!(m, ".TP\n{}", usage.trim_end())?;
        let help = sub
            .get_long_about()
            .or_else(|| sub.get_about())
            .map(|s| s.to_string())
            .unwrap_or_default();
        writeln!(m, "{}", roff_lines(&help))?;
        let documented: Vec<&&clap::Arg> = args.iter().filter(|a| a.get_help().is_some()).collect();
        if !documented.is_empty() {
            m.push_str(".RS\n");
            for a in documented {
                writeln!(m, ".TP\n{}", arg_usage(a))?;
                let mut help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                if let Some(d) = a.get_default_values().first() {
                    write!(help, " (default: {})", d.to_string_lossy())?;
                }
                writeln!(m, "{}", roff_lines(&help))?;
            }
            m.push_str(".RE\n");
        }
        // one action only (`budget reset`): the usage names it, and the help says it
        if sub
            .get_subcommands()
            .filter(|s| s.get_name() != "help")
            .count()
            > 1
        {
            m.push_str(".RS\n");
            // `path NAME up`: the words before an action, its arguments among them
            let mut words = parents.to_vec();
            words.push(format!("\\fB{}\\fR", roff(sub.get_name())));
            words.extend(
                args.iter()
                    .filter(|a| a.is_positional())
                    .map(|a| arg_usage(a)),
            );
            commands(m, sub, &words)?;
            m.push_str(".RE\n");
        }
    }
    Ok(())
}

/// `--json`, `[--count COUNT]`, `NAME`: an argument as its usage shows it.
fn arg_usage(a: &clap::Arg) -> String {
    let value = a
        .get_value_names()
        .and_then(|v| v.first())
        .map_or_else(|| a.get_id().as_str().to_uppercase(), |v| v.to_string());
    let text = match a.get_long() {
        Some(long) if a.get_action().takes_values() => {
            format!("\\fB\\-\\-{}\\fR \\fI{}\\fR", roff(long), roff(&value))
        }
        Some(long) => format!("\\fB\\-\\-{}\\fR", roff(long)),
        None => format!("\\fI{}\\fR", roff(&value)),
    };
    if a.is_required_set() || (a.is_positional() && a.get_default_values().is_empty()) {
        if a.is_positional() && !a.is_required_set() {
            format!("[{text}]")
        } else {
            text
        }
    } else {
        format!("[{text}]")
    }
}

/// Text for roff: backslashes, hyphens and apostrophes escaped, anything not ASCII as a
/// groff Unicode escape, a line never starting with a control character, `code` and
/// `**strong**` in bold.
fn roff(text: &str) -> String {
    let mut out = String::new();
    let mut code = false;
    let mut strong = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            '\'' => out.push_str("\\*(Aq"),
            '~' => out.push_str("\\(ti"),
            '^' => out.push_str("\\(ha"),
            '`' => {
                out.push_str(if code { "\\fR" } else { "\\fB" });
                code = !code;
            }
            '*' if !code && chars.peek() == Some(&'*') => {
                chars.next();
                out.push_str(if strong { "\\fR" } else { "\\fB" });
                strong = !strong;
            }
            c if !c.is_ascii() => write!(out, "\\[u{:04X}]", c as u32).expect("a string"),
            c => out.push(c),
        }
    }
    if code || strong {
        out.push_str("\\fR");
    }
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// Several lines of text (clap's help): each through [`roff`], a blank line a new paragraph.
fn roff_lines(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.trim().is_empty() {
                ".IP".to_owned()
            } else {
                roff(l.trim())
            }
        })
        .collect();
    lines.join("\n")
}

/// Repository paths as installed: `config/X.toml` is an example in
/// `/usr/share/doc/mptd/examples/`, `docs/X.md` is in `/usr/share/doc/mptd/docs/`.
fn installed_paths(text: &str) -> String {
    text.replace("`config/", &format!("`{DOC_DIR}/examples/"))
        .replace("`docs/", &format!("`{DOC_DIR}/docs/"))
}

/// The little markdown the pages' own sections are written in, as roff: `## Heading` a
/// section, a blank line between paragraphs, `- item` a bulleted item, `: term` a tagged
/// paragraph (the lines after it its text), and lines indented by four spaces an example,
/// printed as it is.
fn markdown(text: &str) -> String {
    let mut m = String::new();
    let mut example = false;
    // a blank line since the last text, and whether a request that starts a block of its own
    // (.SH, .TP) came last
    let (mut blank, mut request) = (false, true);
    for line in text.lines() {
        if let Some(code) = line.strip_prefix("    ") {
            if !example {
                m.push_str(".PP\n.RS 4\n.nf\n");
                example = true;
            }
            m.push_str(&roff(code));
            m.push('\n');
            continue;
        }
        if example {
            m.push_str(".fi\n.RE\n");
            example = false;
            (blank, request) = (true, false);
        }
        let line = line.trim();
        if line.is_empty() {
            blank = true;
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            m.push_str(&format!(".SH {}\n", roff(&h.to_uppercase())));
            request = true;
        } else if let Some(term) = line.strip_prefix(": ") {
            m.push_str(&format!(".TP\n{}\n", roff(term)));
            request = true;
        } else if let Some(item) = line.strip_prefix("- ") {
            m.push_str(&format!(".IP \\(bu 2\n{}\n", roff(item)));
            request = false;
        } else {
            if blank && !request {
                m.push_str(".PP\n");
            }
            m.push_str(&roff(line));
            m.push('\n');
            request = false;
        }
        blank = false;
    }
    if example {
        m.push_str(".fi\n.RE\n");
    }
    m
}

/// mpt.toml(5) from the configuration reference (`docs/configuration.md`): its prose, a
/// tagged paragraph per row of its table, then its sections; repository paths as installed.
pub fn config_man_page(reference: &str) -> Result<String> {
    let start = reference
        .find("# Configuration reference")
        .context("docs/configuration.md has no \"# Configuration reference\" heading")?;
    let body = installed_paths(&reference[start + "# Configuration reference".len()..]);
    let mut m = String::from(APOSTROPHE_PREAMBLE);
    writeln!(m, ".TH MPT.TOML 5 \"{}\" mptd \"File Formats\"", version())?;
    // keys and paths are not hyphenated, nor lines stretched around them
    m.push_str(".nh\n.ad l\n");
    m.push_str(".SH NAME\nmpt.toml \\- configuration of the mptd multipath tunnel daemon\n");
    m.push_str(".SH SYNOPSIS\n/etc/mptd/NAME.toml\n.SH DESCRIPTION\n");
    let mut keys = 0;
    let mut table = false;
    let mut after = String::new();
    let mut prose = String::new();
    for line in body.lines() {
        let line = line.trim_end();
        if let Some(row) = line.strip_prefix('|') {
            let cells: Vec<&str> = row
                .split(" | ")
                .map(|c| c.trim().trim_end_matches('|').trim())
                .collect();
            if !table {
                m.push_str(&markdown(&prose));
                m.push_str(".SH KEYS\n");
                table = true;
            }
            if cells.len() < 3 || cells[0] == "key" || cells[0].starts_with("---") {
                continue;
            }
            writeln!(m, ".TP\n{}", roff(cells[0]))?;
            writeln!(m, "Default: {}.", roff(cells[1]))?;
            writeln!(m, ".br\n{}", roff(cells[2]))?;
            keys += 1;
        } else if table {
            after.push_str(line);
            after.push('\n');
        } else {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    anyhow::ensure!(
        keys > 10,
        "docs/configuration.md's table has only {keys} rows"
    );
    m.push_str(&markdown(&after));
    m.push_str(&markdown(CONFIG_EXTRA));
    Ok(m)
}

/// mpt.toml(5) after the reference's own sections.
const CONFIG_EXTRA: &str = include_str!("mpt.toml.5.md");

/// mptd(8) after the clap definitions.
const MPTD_EXTRA: &str = include_str!("mptd.8.md");

/// mptctl(8) after the clap definitions.
const MPTCTL_EXTRA: &str = include_str!("mptctl.8.md");

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
    fn the_config_page_names_installed_paths() {
        let page = config_man_page(REFERENCE).expect("page");
        for repo in ["\\fBconfig/", "\\fBdocs/"] {
            assert!(
                !page.contains(repo),
                "a repository path in mpt.toml(5): {repo}"
            );
        }
        // and each installed path it names is one the package installs
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let page = page.replace("\\-", "-");
        for (prefix, dir) in [("/examples/", "config"), ("/docs/", "docs")] {
            let mut rest = page.as_str();
            while let Some(i) = rest.find(&format!("{DOC_DIR}{prefix}")) {
                rest = &rest[i + DOC_DIR.len() + prefix.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "._-".contains(*c))
                    .collect();
                if name.is_empty() {
                    continue;
                }
                assert!(
                    root.join(dir).join(&name).exists(),
                    "{dir}/{name} is not there"
                );
            }
        }
    }

    #[test]
    fn every_mptctl_command_is_on_its_page() {
        let page = command_man_page(&mptd::cli::CtlArgs::command(), MPTCTL_EXTRA).unwrap();
        for word in [
            "status", "show", "watch", "showconf", "reload", "path", "up", "down", "backup",
            "primary", "weight", "rate", "budget", "reset",
        ] {
            assert!(page.contains(&format!("\\fB{word}\\fR")), "{word} missing");
        }
        // no page of its own is named for a subcommand: there is none
        assert!(!page.contains("mptctl\\-path(8)"));
        for section in ["EXIT STATUS", "FILES", "EXAMPLES", "SEE ALSO"] {
            assert!(
                page.contains(&format!(".SH {section}")),
                "{section} missing"
            );
        }
    }

    /// The linters: man-db's `man` as a reader's formats a page, with every groff warning,
    /// and groff itself with every warning. Each gives what it wrote on stderr.
    const LINTERS: [(&str, &[&str]); 2] = [
        (
            "man",
            &["--warnings=w", "-E", "UTF-8", "-l", "-Tutf8", "-Z"],
        ),
        ("groff", &["-man", "-ww", "-z"]),
    ];

    fn lint(linter: &str, args: &[&str], page: &Path) -> Option<String> {
        let out = std::process::Command::new(linter)
            .args(args)
            .arg(page)
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .stdin(std::process::Stdio::null())
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// The pages `mpt-lab docs` writes draw no warning from `man` or groff. A linter is used
    /// only if it finds the faults of a page made broken on purpose (a minimised system's
    /// `man` that prints nothing would pass anything); with none, the test says SKIPPED, and
    /// fails under CI=true.
    #[test]
    fn the_pages_draw_no_warning() {
        let dir = std::env::temp_dir().join(format!("mptd-man-lint-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = generate(&dir).expect("the pages");
        let pages: Vec<&PathBuf> = written
            .iter()
            .filter(|p| p.parent().is_some_and(|d| d.ends_with("man")))
            .collect();
        assert_eq!(pages.len(), 3, "{pages:?}");
        let broken = dir.join("broken.8");
        std::fs::write(
            &broken,
            ".TH BROKEN 8\n.SH NAME\nbroken \\- a page\n.BOGUS\n.in -5i\nan \\q escape\n",
        )
        .unwrap();
        let mut used = Vec::new();
        for (linter, args) in LINTERS {
            match lint(linter, args, &broken) {
                Some(w) if w.contains("warning") => used.push(linter),
                Some(_) => eprintln!("{linter} finds nothing wrong in a broken page: not used"),
                None => eprintln!("{linter} is not installed"),
            }
            if !used.contains(&linter) {
                continue;
            }
            for page in &pages {
                let warnings = lint(linter, args, page).expect("it ran before");
                assert!(
                    warnings.trim().is_empty(),
                    "{linter} {}: {warnings}",
                    page.display()
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        if used.is_empty() {
            eprintln!("SKIPPED: neither man nor groff lints here; the man pages were not linted");
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true: the man pages must be linted (install man-db and groff)"
            );
        }
    }

    #[test]
    fn roff_escapes() {
        assert_eq!(roff("`a-b` \\ x"), "\\fBa\\-b\\fR \\e x");
        assert_eq!(roff(".x"), "\\&.x");
        assert_eq!(roff("it's 1–2"), "it\\*(Aqs 1\\[u2013]2");
        assert_eq!(roff("a **full** b"), "a \\fBfull\\fR b");
    }
}
