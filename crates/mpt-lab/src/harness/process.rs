//! Running programs: on the host, in a namespace of the lab, and in the background (stopped by
//! their own pid when the lab drops).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::*;

/// Whether this process may build labs. Outside CI a test without root skips loudly;
/// with `CI=true` it fails.
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let have_ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && have_ip && Path::new("/dev/net/tun").exists() {
        return true;
    }
    let why = if !root {
        "not root"
    } else if !have_ip {
        "no `ip` command"
    } else {
        "no /dev/net/tun"
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: needs root, iproute2 and /dev/net/tun for network namespaces ({why}), and CI=true");
    }
    eprintln!("\n!!!!!!!! SKIPPED {test}: needs root + network namespaces ({why}) !!!!!!!!\n");
    false
}

/// Whether `program` is on the PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Make sure `program` is there: if it is not (on the PATH or in /usr/sbin), install Debian's
/// `package` (the test runs as root; `scripts/deps.sh` installs it too). A package installed
/// with a system service has that service stopped: the tests run their own instances.
pub fn ensure_package(program: &str, package: &str) -> Result<()> {
    let there = |p: &str| have(p) || std::path::Path::new("/usr/sbin").join(p).exists();
    if there(program) {
        return Ok(());
    }
    eprintln!("installing Debian's {package} (for {program})");
    let _ = Command::new("apt-get").args(["update", "-qq"]).output();
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends", package])
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    let _ = Command::new("systemctl").args(["stop", program]).output();
    anyhow::ensure!(
        there(program),
        "{package} installed, but {program} is not there"
    );
    Ok(())
}

/// Run a command, failing with its output when it fails.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}

pub(crate) fn sh(script: &str) -> Result<Output> {
    run(Command::new("sh").args(["-ec", script]))
}

/// Run `f` on a thread inside network namespace `ns` (sockets it opens live there).
pub fn in_netns<R: Send>(ns: &str, f: impl FnOnce() -> R + Send) -> Result<R> {
    let file = std::fs::File::open(format!("/run/netns/{ns}"))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a valid namespace fd; it only changes this thread's network
            // namespace, and this thread ends when `f` returns.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(anyhow!("setns: {}", std::io::Error::last_os_error()));
            }
            Ok(f())
        })
        .join()
        .map_err(|_| anyhow!("namespace thread panicked"))?
    })
}

/// Stop a child this process started: SIGTERM, then SIGKILL after 5 s; reaped.
pub fn terminate(c: &mut Child) {
    if matches!(c.try_wait(), Ok(Some(_))) {
        return;
    }
    let pid = c.id() as i32;
    // SAFETY: kill(2) on a pid we spawned and have not yet reaped, so it is still ours.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if matches!(c.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// A binary of this workspace built next to the running program (or one directory up, for
/// test binaries in `target/*/deps`).
pub fn sibling_bin(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(3) {
        let cand = dir.join(name);
        if cand.is_file() {
            return Ok(cand);
        }
    }
    bail!(
        "{name} not found near {}; run `cargo build --release --bins` first",
        exe.display()
    )
}

/// Start `cmd` with its output in `dir/<name>.log`; `what` says where, for the error.
pub(crate) fn spawn_logged(
    dir: &std::path::Path,
    name: &str,
    what: &str,
    cmd: &mut Command,
) -> Result<Child> {
    let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {name} {what}"))
}

/// Whether the child of `pid` among `children` has exited (or is not there).
pub(crate) fn child_exited(children: &mut [(String, Child)], pid: u32) -> bool {
    children
        .iter_mut()
        .find(|(_, c)| c.id() == pid)
        .is_none_or(|(_, c)| matches!(c.try_wait(), Ok(Some(_))))
}

/// Wait until mptd answers on its control socket `sock`: `Err` with `log()` if it exits
/// first (`exited()`) or does not answer within 10 s.
pub(crate) fn wait_for_control(
    sock: &std::path::Path,
    mut exited: impl FnMut() -> bool,
    log: impl Fn() -> String,
) -> Result<()> {
    let t0 = Instant::now();
    while mptd::control::status(sock).is_err() {
        if exited() {
            bail!("mptd exited; log:\n{}", log());
        }
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("mptd did not come up; log:\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Stop child `pid` (SIGTERM, then SIGKILL after 5 s), take it out of `children`, and return
/// its exit code.
pub(crate) fn stop_child(children: &mut Vec<(String, Child)>, pid: u32) -> Result<Option<i32>> {
    let idx = children
        .iter()
        .position(|(_, c)| c.id() == pid)
        .ok_or_else(|| anyhow!("lost child"))?;
    let (_, mut child) = children.remove(idx);
    terminate(&mut child);
    Ok(child.wait()?.code())
}

impl Lab {
    /// A command run inside a namespace.
    pub fn cmd(&self, side: Side, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(side), program]);
        c
    }

    /// Run a shell script inside a namespace.
    pub fn sh(&self, side: Side, script: &str) -> Result<Output> {
        run(self.cmd(side, "sh").args(["-ec", script]))
    }

    /// Start a background process in a namespace; it is stopped (by pid) when the lab drops.
    pub fn spawn(&mut self, side: Side, name: &str, cmd: &mut Command) -> Result<u32> {
        let child = spawn_logged(&self.dir, name, &format!("in {side:?}"), cmd)?;
        let pid = child.id();
        self.children.push((name.to_owned(), child));
        Ok(pid)
    }

    pub(crate) fn exited(&mut self, pid: u32) -> bool {
        child_exited(&mut self.children, pid)
    }

    /// A log file of a process started with [`Lab::spawn`].
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Run `f` on a thread inside `side`'s namespace (sockets it opens live there).
    pub fn in_ns<R: Send>(&self, side: Side, f: impl FnOnce() -> R + Send) -> Result<R> {
        in_netns(&self.ns(side), f)
    }

    /// Stop a started process if it still runs, and forget it.
    pub fn reap(&mut self, pid: u32) {
        if let Some(i) = self.children.iter().position(|(_, c)| c.id() == pid) {
            let (_, mut c) = self.children.remove(i);
            terminate(&mut c);
        }
    }
}
