//! The Debian package (`scripts/package.sh`): built from this tree, its files where a user
//! looks for them, its mptd running `--check` on the shipped examples, its man pages rendering.
//! Under CI it is also installed with dpkg (and removed again): the installed unit then passes
//! `systemd-analyze verify`, man pages included.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::need;

/// `cmd`'s standard output; a panic with its output when it fails.
pub(crate) fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_deb_holds_the_binaries_unit_examples_man_pages_and_completions() {
    need!("package", "dpkg-deb", "man");
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let deb = run(Command::new("bash").arg(tree.join("scripts/package.sh")));
    let deb = tree.join(deb.trim());
    assert!(deb.exists(), "{}", deb.display());
    let root = std::env::temp_dir().join(format!("mpt-deb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    for f in [
        "usr/bin/mptd",
        "usr/bin/mptctl",
        "lib/systemd/system/mptd@.service",
        "usr/share/doc/mptd/examples/server.toml",
        "usr/share/doc/mptd/copyright",
        // the README's picture, where its link points once installed
        "usr/share/doc/mptd/README.md",
        "usr/share/doc/mptd/docs/figures/deployment.svg",
        "usr/share/doc/mptd/docs/configuration.md",
        "usr/share/man/man8/mptd.8.gz",
        "usr/share/man/man8/mptctl.8.gz",
        "usr/share/man/man5/mpt.toml.5.gz",
        "usr/share/bash-completion/completions/mptctl",
        "usr/share/zsh/vendor-completions/_mptd",
        "usr/share/fish/vendor_completions.d/mptctl.fish",
    ] {
        assert!(root.join(f).exists(), "{f} is not in the package");
    }
    let mptd = root.join("usr/bin/mptd");
    let size = std::fs::metadata(&mptd).expect("mptd").len();
    let version = run(Command::new(&mptd).arg("--version"));
    eprintln!(
        "RESULT package: {} ({} bytes), mptd {} bytes, {}",
        deb.display(),
        std::fs::metadata(&deb).map(|m| m.len()).unwrap_or(0),
        size,
        version.trim()
    );
    assert!(
        size < 10_000_000,
        "mptd is {size} bytes: built with debug info?"
    );
    assert!(
        version.contains('(') && !version.contains("unknown"),
        "{version}"
    );
    // every shipped example passes --check, given a key of its own
    let key = root.join("host.key");
    let genkey = run(Command::new(&mptd).arg("genkey"));
    std::fs::write(&key, genkey).expect("key");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("usr/share/doc/mptd/examples"))
        .expect("examples")
        .map(|e| e.expect("entry").path())
        .collect();
    examples.sort();
    let names: Vec<&str> = examples
        .iter()
        .filter_map(|p| p.file_name()?.to_str())
        .collect();
    assert_eq!(
        names,
        [
            "bird-concentrator.conf",
            "host-a.toml",
            "host-b.toml",
            "server.toml",
            "site-two-servers.toml",
            "site.toml"
        ],
        "{examples:?}"
    );
    for ex in examples
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
    {
        let text = std::fs::read_to_string(ex).expect("example");
        let text: String = text
            .lines()
            .map(|l| {
                if l.starts_with("private_key_file") {
                    format!("private_key_file = {:?}", key.display().to_string())
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let cfg = root.join(ex.file_name().expect("name"));
        std::fs::write(&cfg, text).expect("config");
        // valid (0), or valid but for another host: its paths' local addresses are not here (3)
        let out = Command::new(&mptd)
            .arg("-c")
            .arg(&cfg)
            .arg("--check")
            .output()
            .expect("mptd --check");
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => assert!(said.contains(": ok ("), "{said}"),
            Some(3) => assert!(
                said.lines()
                    .filter(|l| l.contains("this host cannot run it"))
                    .all(|l| l.contains("cannot be bound here")),
                "{said}"
            ),
            other => panic!("{}: --check exited {other:?}: {said}", ex.display()),
        }
    }
    for page in ["man8/mptd.8.gz", "man8/mptctl.8.gz", "man5/mpt.toml.5.gz"] {
        let text = run(Command::new("man")
            .arg("-l")
            .arg(root.join("usr/share/man").join(page))
            .env("MANWIDTH", "80")
            .env("MAN_KEEP_STDERR", "1"));
        assert!(
            text.contains("NAME") && text.lines().count() > 15,
            "{page}:\n{text}"
        );
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        run(Command::new("dpkg").arg("-i").arg(&deb));
        let installed = run(Command::new("/usr/bin/mptd").arg("--version"));
        let man = run(Command::new("man").args(["-w", "mpt.toml"]));
        let verify = Command::new("systemd-analyze")
            .args(["verify", "mptd@tun0.service"])
            .output();
        run(Command::new("dpkg").args(["-r", "mptd"]));
        let verify = verify.expect("systemd-analyze");
        assert!(
            verify.status.success() && verify.stderr.is_empty(),
            "the installed unit: {}",
            String::from_utf8_lossy(&verify.stderr)
        );
        eprintln!(
            "RESULT package: installed {}, man page {}",
            installed.trim(),
            man.trim()
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
