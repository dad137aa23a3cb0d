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
const REFERENCE: &str = include_str!("../../../docs/configuration.md");

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
const CONFIG_EXTRA: &str = "\
## Files

: /etc/mptd/NAME.toml
The configuration of tunnel NAME, read by `mptd@NAME` (`mptd -c /etc/mptd/NAME.toml`).
/etc/mptd is root's alone (mode 0700).

: /etc/mptd/NAME.key
This host's private key, named by `private_key_file = \"NAME.key\"` (mode 0600).

: /usr/share/doc/mptd/examples/
Example configurations (`/usr/share/mptd/examples/` in the OpenWrt and Alpine packages).

## See also

`mptd`(8), `mptctl`(8); /usr/share/doc/mptd/docs/deploy.md
";

/// mptd(8) after the clap definitions.
const MPTD_EXTRA: &str = "\
## Signals

: SIGHUP
Read the configuration file again and apply it without taking the tunnel down, as
`mptctl reload` does (`systemctl reload mptd@NAME` runs that): paths and peers added, removed
or changed, connection settings, hooks. A file that is invalid, or changes what only a
restart applies (mpt.toml(5), RELOADING), is refused and logged, and the running
configuration kept.

: SIGTERM, SIGINT
Stop cleanly: the peers are told goodbye (they take the paths down at once), the data
budgets' counts written, `hooks.down` run, the routes and a full tunnel's rules removed (the
rules stay with `fail_closed = true`), the TUN interface and the control socket removed; exit 0.

Before the daemon runs (while it reads its configuration) these signals have their default
effect: they end it. Under the shipped unit systemd's watchdog (10 s) aborts and restarts a daemon whose
datapath has stalled.

## Exit status

: 0
Stopped by SIGTERM or SIGINT. With `--check`: the configuration is good (warnings are
printed). `genkey`, `pubkey`, `genpsk`: the key was printed.

: 1
The daemon could not start (the TUN device, a socket, the control socket in use, a failing
`hooks.up`) or stopped on an error; the log says why. `genkey`, `pubkey`, `genpsk` failed
(`pubkey` read no valid key).

: 2
A bad configuration: the file, or a key file it names, cannot be read or is invalid (at start
and with `--check`); the message names the file, the key and what was expected. Also a
command line clap cannot parse.

: 3
With `--check`: this host cannot run the configuration as it is (capability, local addresses,
interface MTUs, control socket).

## Environment

: RUST_LOG
What is logged, overriding `-v` (e.g. `RUST_LOG=mptd=debug`).

: RUNTIME_DIRECTORY
Set by systemd (`RuntimeDirectory=`): the default control socket is `$RUNTIME_DIRECTORY/control.sock`.

: STATE_DIRECTORY
Set by systemd (`StateDirectory=`): the default `tunnel.state_dir`.

: CREDENTIALS_DIRECTORY
Set by systemd (`LoadCredential=`): a key file named `$CREDENTIALS_DIRECTORY/NAME` is a credential.

## Files

: /etc/mptd/NAME.toml
The configuration of tunnel NAME (mpt.toml(5)), read by `mptd@NAME`. /etc/mptd is root's
alone (mode 0700).

: /etc/mptd/NAME.key
This host's private key (`private_key_file = \"NAME.key\"`), refused unless only its owner
may read it (mode 0600).

: /run/mptd/NAME/control.sock
The control socket under the unit (its runtime directory, root's, mode 0750); without the
unit, `/run/mptd/NAME.sock` (NAME the `tunnel.name`), unless `control.socket` names another.
`mptctl -s NAME` finds either.

: /var/lib/mptd/NAME
Under the unit, the state directory: `budget.json`, the paths' data budget counts, kept
across restarts.

: /lib/systemd/system/mptd@.service
The unit of tunnel NAME, `mptd@NAME`: it runs `mptd -c /etc/mptd/NAME.toml --check`, then the
daemon (`Type=notify`, `Restart=on-failure`, `WatchdogSec=10`); `systemctl reload` runs
`mptctl -s NAME reload`.

: /usr/share/doc/mptd/examples/
Example configurations: `server.toml` and `site.toml` (a server and its sites),
`site-two-servers.toml`, `host-a.toml` and `host-b.toml` (two hosts on two paths).

## Examples

A key pair: the private key in root's /etc/mptd, the public key for the peer's `public_key`:

    sudo install -d -m 700 /etc/mptd
    sudo sh -c 'umask 077; mptd genkey > /etc/mptd/mpt0.key'
    sudo sh -c 'mptd pubkey < /etc/mptd/mpt0.key'

A configuration from an example, checked, then run by systemd and looked at:

    sudo cp /usr/share/doc/mptd/examples/server.toml /etc/mptd/mpt0.toml
    sudo mptd -c /etc/mptd/mpt0.toml --check
    sudo systemctl enable --now mptd@mpt0
    sudo mptctl -s mpt0 show
    journalctl -u mptd@mpt0

A changed configuration applied without a restart, or the daemon in the foreground, logging
at debug level:

    sudo systemctl reload mptd@mpt0
    sudo mptd -c /etc/mptd/mpt0.toml -v

## See also

`mptctl`(8), `mpt.toml`(5), `systemctl`(1), `journalctl`(1);
/usr/share/doc/mptd/README.md, /usr/share/doc/mptd/docs/deploy.md
";

/// mptctl(8) after the clap definitions.
const MPTCTL_EXTRA: &str = "\
## Exit status

: 0
`status`, `show`, `watch --count N`: every peer has a session and every path is up. The
other commands: done.

: 1
`status`, `show`, `watch`: degraded, some path is down or some peer has no session, but some
path is up. `reload`, `path`, `showconf`: the daemon refused (its reason is printed); a
refused reload keeps the running configuration.

: 2
`status`, `show`, `watch`: down, no path of any peer is up. Also a command line clap cannot
parse.

: 3
No daemon answers at the socket: it is not running, or this user may not reach its socket
(the unit's `/run/mptd/NAME` is root's: run mptctl with sudo).

: 64
`show PEER`: there is no such peer.

`show PEER` exits with the health of the whole daemon, not of that peer alone.

## Files

: /run/mptd/NAME/control.sock
The control socket of `mptd@NAME` under the shipped unit; `-s NAME` looks here first.

: /run/mptd/NAME.sock
The control socket of tunnel NAME without the unit; `-s NAME` looks here when the unit's
is not there. Another socket (`control.socket` in mpt.toml(5)) is named by its path.

## Examples

    sudo mptctl -s mpt0 show
    sudo mptctl -s mpt0 status --json
    sudo mptctl -s mpt0 watch --interval 2
    sudo mptctl -s mpt0 path lte down
    sudo mptctl -s mpt0 path lte up
    sudo mptctl -s mpt0 path lte backup
    sudo mptctl -s mpt0 path dsl weight 3
    sudo mptctl -s mpt0 path lte rate 20mbit
    sudo mptctl -s mpt0 path lte budget reset
    sudo mptctl -s mpt0 reload
    sudo mptctl -s /run/mptd/mpt0.sock showconf

A health check (0 up, 1 degraded, 2 down, 3 no daemon):

    sudo mptctl -s mpt0 status > /dev/null; echo $?

## See also

`mptd`(8), `mpt.toml`(5)
";

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
