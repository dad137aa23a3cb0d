//! The unit as installed, under a real systemd: Debian bookworm's systemd boots in a container
//! (`systemd-nspawn`, its root made once with `debootstrap` and kept in
//! `/var/cache/mptd-tests`, each run on a throw-away overlay of it), the package built from this
//! tree is installed with dpkg, and the README's install lines run as they are written. The
//! unit must then be active and answer `mptctl`, reload, come back after its daemon is killed,
//! and stop cleanly, its TUN device and its full tunnel's rules gone with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::need;

const CACHE: &str = "/var/cache/mptd-tests";

/// The container's operator: not root, in sudoers (without a password).
const USER: &str = "alice";

/// The container: stopped (by the pid of its `systemd-nspawn`) when dropped.
struct Container {
    nspawn: Child,
    /// The container's systemd, as the host sees it.
    init: u32,
}

impl Drop for Container {
    fn drop(&mut self) {
        // SIGRTMIN+4 asks systemd to power off; the nspawn process is ours, by pid
        let _ = self.exec("systemctl poweroff --no-block");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if matches!(self.nspawn.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.nspawn.kill();
        let _ = self.nspawn.wait();
    }
}

impl Container {
    /// Run `script` in the container (all its namespaces), as root.
    fn exec(&self, script: &str) -> std::process::Output {
        Command::new("nsenter")
            .args(["-t", &self.init.to_string(), "-a", "/bin/sh", "-c", script])
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .output()
            .expect("nsenter")
    }

    /// Run `script` as [`USER`], a user who may use sudo, in a login shell's directory: as an
    /// operator who is not root runs the README's lines.
    fn exec_as_user(&self, script: &str) -> std::process::Output {
        Command::new("nsenter")
            .args(["-t", &self.init.to_string(), "-a", "/bin/sh", "-c"])
            .arg(format!(
                "cd /home/{USER} && exec runuser -u {USER} -- /bin/sh -c \"$1\""
            ))
            .args(["sh", script])
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .output()
            .expect("nsenter")
    }

    /// `script`'s standard output; a panic with its output when it fails.
    fn ok(&self, script: &str) -> String {
        self.succeeded("root", script, self.exec(script))
    }

    /// The same for `script` run as [`USER`].
    fn ok_as_user(&self, script: &str) -> String {
        self.succeeded(USER, script, self.exec_as_user(script))
    }

    /// `out`'s standard output, or a panic with it and the journal when `script` failed.
    fn succeeded(&self, who: &str, script: &str, out: std::process::Output) -> String {
        assert!(
            out.status.success(),
            "in the container, as {who}: {script}: {}{}\njournal:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.journal()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn journal(&self) -> String {
        let out = self.exec("journalctl -u 'mptd@*' --no-pager -n 60 2>&1");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait until `script` succeeds, at most `limit`.
    fn until(&self, script: &str, limit: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if self.exec(script).status.success() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }
}

/// Debian bookworm with systemd and sudo, made once (about a minute) and kept.
fn bookworm_root() -> PathBuf {
    let root = Path::new(CACHE).join("bookworm-sudo");
    if root.join("usr/lib/systemd/systemd").exists() && root.join("usr/bin/sudo").exists() {
        return root;
    }
    let tmp = Path::new(CACHE).join("bookworm-sudo.tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(CACHE).expect("cache dir");
    eprintln!("installed: making a Debian root with debootstrap (once, about a minute)");
    let st = Command::new("debootstrap")
        .args([
            "--variant=minbase",
            "--include=systemd,systemd-sysv,dbus,iproute2,sudo",
            "bookworm",
        ])
        .arg(&tmp)
        .stdout(Stdio::null())
        .status()
        .expect("debootstrap");
    assert!(st.success(), "debootstrap failed");
    std::fs::rename(&tmp, &root).expect("rename");
    root
}

/// The parent's pid of `pid`.
fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Boot `root` (read-only, with a throw-away overlay; `pkg` mounted at /mnt/pkg) and wait
/// until its systemd has started.
fn boot(root: &Path, pkg: &Path) -> Container {
    let nspawn = Command::new("systemd-nspawn")
        .args([
            "--register=no",
            "--keep-unit",
            "--private-network",
            "--volatile=overlay",
            "--console=pipe",
        ])
        .arg(format!("--bind-ro={}:/mnt/pkg", pkg.display()))
        .arg("-D")
        .arg(root)
        .arg("-b")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-nspawn");
    let me = nspawn.id();
    let t0 = Instant::now();
    let init = loop {
        let found = std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|&p| {
                ppid(p) == Some(me)
                    && std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .is_ok_and(|c| c.trim() == "systemd")
            });
        if let Some(p) = found {
            break p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the container's systemd did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let c = Container { nspawn, init };
    assert!(
        c.until(
            "s=$(systemctl is-system-running); [ \"$s\" = running ] || [ \"$s\" = degraded ]",
            Duration::from_secs(60)
        ),
        "the container's systemd is not running: {}",
        String::from_utf8_lossy(
            &c.exec("systemctl is-system-running; systemctl --failed")
                .stdout
        )
    );
    c
}

/// The README's install lines (its `## Install` block), but the one that builds the package
/// (done already), with the package where the container sees it.
fn readme_install_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let block = readme
        .split("## Install")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("README's install block");
    block
        .lines()
        .filter(|l| !l.starts_with("scripts/package.sh"))
        .map(|l| l.replace("target/packages/", "/mnt/pkg/"))
        .collect()
}

#[test]
fn the_unit_starts_reloads_restarts_and_stops_as_installed() {
    need!(
        "installed",
        "debootstrap",
        "systemd-nspawn",
        "nsenter",
        "dpkg-deb"
    );
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg(tree.join("scripts/package.sh"))
        .output()
        .expect("package.sh");
    assert!(
        out.status.success(),
        "package.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb = tree.join(String::from_utf8_lossy(&out.stdout).trim());
    let pkg = std::env::temp_dir().join(format!("mpt-pkg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&pkg);
    std::fs::create_dir_all(&pkg).expect("pkg dir");
    std::fs::copy(&deb, pkg.join(deb.file_name().expect("name"))).expect("copy deb");

    let root = bookworm_root();
    let c = boot(&root, &pkg);
    c.ok(&format!(
        "useradd -m {USER} && echo '{USER} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{USER} && chmod 0440 /etc/sudoers.d/{USER}"
    ));
    let lines = readme_install_lines();
    let (last, install) = lines.split_last().expect("lines");
    // as the operator, from their home directory, with sudo where the README has it
    for l in install {
        c.ok_as_user(l);
    }
    assert!(
        c.until(
            "systemctl is-active --quiet mptd@mpt0",
            Duration::from_secs(10)
        ),
        "mptd@mpt0 is not active: {}",
        c.journal()
    );
    // the README's last line: mptctl answers (the example's server is not there: exit 2, down)
    let show = c.exec_as_user(last);
    let code = show.status.code();
    eprintln!(
        "RESULT installed: `{last}` exits {code:?}:\n{}",
        String::from_utf8_lossy(&show.stdout)
    );
    assert!(
        matches!(code, Some(0..=2)),
        "{last}: no daemon answers:\n{}",
        c.journal()
    );
    assert!(
        c.ok("ip rule").contains("lookup 4754"),
        "the full tunnel's rules"
    );
    // without sudo, mptctl says what to do, not that mptd is not running
    let denied = c.exec_as_user("mptctl -s mpt0 show");
    let said = String::from_utf8_lossy(&denied.stderr);
    assert!(
        denied.status.code() == Some(3)
            && said.contains("run mptctl with sudo")
            && !said.contains("is it running"),
        "mptctl without sudo: {:?}: {said}",
        denied.status.code()
    );
    // a control socket where the unit may not write (everything but /run and its state
    // directory is read-only to it) is refused before the daemon starts
    c.ok(r#"cp /etc/mptd/mpt0.toml /etc/mptd/other.toml && printf '\n[control]\nsocket = "/etc/mptd/control.sock"\n' >> /etc/mptd/other.toml"#);
    let refused = c.exec("systemctl start mptd@other");
    let journal = c.exec("journalctl -u mptd@other --no-pager 2>&1");
    let journal = String::from_utf8_lossy(&journal.stdout);
    assert!(
        !refused.status.success()
            && journal.contains("control socket /etc/mptd/control.sock: cannot be made here"),
        "mptd@other with its socket in /etc: {:?}\n{journal}",
        refused.status.code()
    );
    eprintln!("RESULT installed: as {USER} with sudo, the README's lines run; without sudo mptctl says so; a control socket in /etc (read-only to the unit) is refused by --check");

    c.ok("systemctl reload mptd@mpt0");
    let pid = c.ok("systemctl show -p MainPID --value mptd@mpt0");
    c.ok(&format!("kill -9 {pid}"));
    let restarted = c.until(
        &format!(
            "systemctl is-active --quiet mptd@mpt0 && [ \"$(systemctl show -p MainPID --value mptd@mpt0)\" != {pid} ] && {{ mptctl -s mpt0 show >/dev/null; [ $? -le 2 ]; }}"
        ),
        Duration::from_secs(15),
    );
    assert!(
        restarted,
        "not restarted after its daemon was killed:\n{}",
        c.journal()
    );
    let restarts = c.ok("systemctl show -p NRestarts --value mptd@mpt0");
    assert_eq!(restarts, "1", "{}", c.journal());

    c.ok("systemctl stop mptd@mpt0");
    let state = c.exec("systemctl is-active mptd@mpt0");
    assert_eq!(String::from_utf8_lossy(&state.stdout).trim(), "inactive");
    assert!(
        !c.exec("ip link show mpt0").status.success(),
        "mpt0 is gone"
    );
    assert!(
        !c.ok("ip rule").contains("4754"),
        "no rule is left (failing open)"
    );
    let journal = c.journal();
    assert!(journal.contains("stopped, interface removed"), "{journal}");
    eprintln!("RESULT installed: active, reloaded, restarted once after kill -9, stopped cleanly");
    crate::headline(
        "installed",
        "the package as installed under Debian's systemd (`tests/e2e/installed.rs`, the README's \
         install lines as a user with sudo)",
        "the unit active, `systemctl reload` ok, back after `kill -9`, `mpt0` and its rules gone \
         after stop",
    );
    drop(c);
    let _ = std::fs::remove_dir_all(&pkg);
}
