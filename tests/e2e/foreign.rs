//! The router's build on this machine, under Debian's `qemu-user-static`: the aarch64 static
//! mptd that the OpenWrt and arm64 packages ship (`scripts/release.sh aarch64`).
//!
//! - A tunnel with one foreign end: the aarch64 mptd (side A, the site, run by
//!   `qemu-aarch64-static`) and this machine's mptd (side B) over two shaped paths. A ping,
//!   20 MB by FTP intact with each path carrying at least 30 %, then a path taken down and
//!   brought back: dropped and readopted.
//! - The arm64 `.deb` installed with dpkg into a Debian arm64 tree (`debootstrap --foreign`,
//!   its second stage run through qemu; made once and kept in `/var/cache/mptd-tests`, each
//!   run on a throw-away overlay of it), where `mptd --version` and `mptd --check` run on every
//!   shipped example.
//! - The OpenWrt `.ipk` and the `.apk`: their files, control fields and conffiles, and the
//!   procd init script through `shellcheck`. No OpenWrt image can be fetched here, so nothing
//!   runs them on OpenWrt itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mpt_lab::harness::{Lab, LinkSpec, Side, TunnelOpts};

use crate::package::run;
use crate::{need, sha256};

const CACHE: &str = "/var/cache/mptd-tests";
const QEMU: &str = "qemu-aarch64-static";

fn tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The aarch64 packages (`scripts/release.sh aarch64`, which installs its toolchain the first
/// time), made once for the tests of this file; returns the directory the packages are in.
fn aarch64_release() -> PathBuf {
    static MADE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MADE.get_or_init(make_aarch64_release).clone()
}

fn make_aarch64_release() -> PathBuf {
    let out = Command::new("bash")
        .arg(tree().join("scripts/release.sh"))
        .arg("aarch64")
        .stderr(Stdio::inherit())
        .output()
        .expect("release.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(out.status.success(), "scripts/release.sh aarch64 failed");
    let size = |f: &str| {
        std::fs::metadata(tree().join("target/pkg/stage-arm64/usr/bin").join(f))
            .map_or(0.0, |m| m.len() as f64 / 1e6)
    };
    let ipk = std::fs::read_dir(tree().join("target/packages"))
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with("_aarch64_generic.ipk")
        })
        .and_then(|e| e.metadata().ok())
        .map_or(0.0, |m| m.len() as f64 / 1e6);
    crate::headline(
        "release-size",
        "the router's build (`scripts/release.sh`: aarch64, static musl, `dist` profile)",
        &format!(
            "mptd **{:.2} MB** + mptctl {:.2} MB stripped; the OpenWrt `.ipk` {ipk:.2} MB",
            size("mptd"),
            size("mptctl")
        ),
    );
    tree().join("target/packages")
}

/// A script that runs the aarch64 mptd under qemu-user (`exec`: its pid is the daemon's).
fn qemu_mptd(dir: &Path) -> PathBuf {
    let bin = tree().join("target/aarch64-unknown-linux-musl/dist/mptd");
    assert!(bin.exists(), "{} is not built", bin.display());
    let script = dir.join("mptd-aarch64");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {QEMU} {} \"$@\"\n",
            bin.canonicalize().expect("mptd").display()
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    script
}

/// Wait until path `i` is `state` on both sides; how long each took.
fn wait_state(lab: &Lab, i: usize, state: &str, limit: Duration) -> [Option<Duration>; 2] {
    let t0 = Instant::now();
    let mut seen = [None, None];
    while t0.elapsed() < limit && seen.iter().any(Option::is_none) {
        for (k, side) in [Side::A, Side::B].into_iter().enumerate() {
            if seen[k].is_none()
                && lab
                    .status(side)
                    .is_ok_and(|s| s.paths.get(i).is_some_and(|p| p.state == state))
            {
                seen[k] = Some(t0.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}

#[test]
fn an_aarch64_mptd_under_qemu_makes_a_tunnel_with_this_one() {
    need!("foreign", QEMU, "vsftpd", "curl");
    aarch64_release();
    let mut lab =
        Lab::new(&[LinkSpec::shaped(10_000_000), LinkSpec::shaped(10_000_000)]).expect("lab");
    let foreign = TunnelOpts {
        mptd: Some(qemu_mptd(&lab.dir)),
        ..TunnelOpts::default()
    };
    let native = TunnelOpts::default();
    lab.start_mptd(Side::B, &native)
        .expect("this machine's mptd");
    lab.start_mptd(Side::A, &foreign)
        .expect("the aarch64 mptd under qemu");
    lab.wait_for_tunnel(Duration::from_secs(20))
        .expect("a ping through the tunnel");
    let version = run(Command::new(QEMU)
        .arg(tree().join("target/aarch64-unknown-linux-musl/dist/mptd"))
        .arg("--version"));

    // 20 MB down by FTP (B to A: the foreign end receives, resequences and writes its TUN)
    let before = lab.status(Side::B).expect("status");
    let ftp = lab.ftp_server(Side::B, 20_000_000).expect("vsftpd");
    let got = lab.dir.join("downloaded.bin");
    let t0 = Instant::now();
    let dl = lab
        .cmd(Side::A, "curl")
        .args(["-sS", "--max-time", "90", "-o"])
        .arg(&got)
        .arg(format!("{}/random.bin", ftp.url))
        .output()
        .expect("curl");
    let secs = t0.elapsed().as_secs_f64();
    assert!(
        dl.status.success(),
        "download failed: {}\n{}",
        String::from_utf8_lossy(&dl.stderr),
        lab.mptd_log(Side::A)
    );
    assert_eq!(sha256(&got), sha256(&ftp.file), "downloaded file differs");
    let after = lab.status(Side::B).expect("status");
    let carried: Vec<u64> = (0..2)
        .map(|i| after.paths[i].tx_bytes - before.paths[i].tx_bytes)
        .collect();
    let total = carried.iter().sum::<u64>().max(1);
    let shares: Vec<f64> = carried
        .iter()
        .map(|&c| c as f64 * 100.0 / total as f64)
        .collect();

    // a path dropped and readopted
    let link = Lab::link(0);
    lab.sh(Side::A, &format!("ip link set {link} down"))
        .expect("link down");
    let down = wait_state(&lab, 0, "down", Duration::from_secs(5));
    lab.sh(Side::A, &format!("ip link set {link} up"))
        .expect("link up");
    let up = wait_state(&lab, 0, "up", Duration::from_secs(10));
    lab.wait_for_tunnel(Duration::from_secs(5))
        .expect("a ping after the path came back");
    let a = lab.status(Side::A).expect("status of the aarch64 end");
    // what qemu-user could not translate, and mptd did without (as on an old kernel)
    let log = lab.mptd_log(Side::A);
    let offload = if log.contains("TUN offload unavailable") {
        "unavailable (one packet per read and write)"
    } else {
        "in use"
    };
    let gso = if log.contains("refuses UDP GSO") {
        "refused (one datagram per send)"
    } else {
        "in use"
    };
    let per_send = a.tunnel.tx_packets as f64 / a.tunnel.calls.udp_sends.max(1) as f64;
    eprintln!(
        "RESULT foreign: {} under qemu with this machine's mptd: 20 MB by FTP intact in {secs:.2} s ({:.1} Mbit/s), paths carried {:.0} %/{:.0} %; path 0 down after {:?} (A) / {:?} (B), up again after {:?} / {:?}; A's drops: send-error {}, no-path {}; on A TUN offload {offload}, UDP GSO {gso}, {per_send:.2} datagrams per send",
        version.trim(),
        160.0 / secs,
        shares[0],
        shares[1],
        down[0],
        down[1],
        up[0],
        up[1],
        a.tunnel.drops.send_error,
        a.tunnel.drops.no_path,
    );
    crate::headline(
        "foreign",
        "the aarch64 mptd under `qemu-aarch64-static` beside this machine's, two 10 Mbit/s paths \
         (`tests/e2e/foreign.rs`)",
        &format!(
            "20 MB by FTP intact at **{:.1} Mbit/s**, {:.0} %/{:.0} % over the paths; a path down \
             after {:.1} ms, back after {:.0} ms",
            160.0 / secs,
            shares[0],
            shares[1],
            down[0].unwrap_or_default().as_secs_f64() * 1e3,
            up[0].unwrap_or_default().as_secs_f64() * 1e3,
        ),
    );
    assert!(
        shares.iter().all(|&s| s >= 30.0),
        "each path must carry at least 30 %: {shares:?}"
    );
    assert!(
        down.iter().all(Option::is_some),
        "path 0 never went down: {down:?}\n{}",
        lab.mptd_log(Side::A)
    );
    assert!(
        up.iter().all(Option::is_some),
        "path 0 never came back: {up:?}\n{}",
        lab.mptd_log(Side::A)
    );
    eprintln!(
        "foreign: what the aarch64 mptd said about this host:\n{}",
        log.lines()
            .filter(|l| l.contains("WARN") || l.contains("unavailable"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// qemu-user runs arm64 programs here when the kernel knows to hand them to it (binfmt_misc;
/// Debian's qemu-user-static ships the registration, `F`: the interpreter is opened once, so
/// it works inside a chroot).
fn binfmt_aarch64() {
    let dir = Path::new("/proc/sys/fs/binfmt_misc");
    if !dir.join("register").exists() {
        run(Command::new("mount").args([
            "-t",
            "binfmt_misc",
            "binfmt_misc",
            "/proc/sys/fs/binfmt_misc",
        ]));
    }
    if dir.join("qemu-aarch64").exists() {
        return;
    }
    let conf = std::fs::read_to_string("/usr/lib/binfmt.d/qemu-aarch64.conf")
        .expect("qemu-user-static's binfmt registration");
    std::fs::write(dir.join("register"), conf.trim()).expect("binfmt_misc register");
}

/// Debian bookworm for arm64 (minbase), made once (debootstrap's second stage runs under
/// qemu: several minutes) and kept.
fn arm64_root() -> PathBuf {
    let root = Path::new(CACHE).join("bookworm-arm64");
    if root.join("usr/bin/dpkg").exists() && root.join(".complete").exists() {
        return root;
    }
    let tmp = Path::new(CACHE).join("bookworm-arm64.tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(CACHE).expect("cache dir");
    eprintln!("foreign: making a Debian arm64 root with debootstrap (once, several minutes)");
    let t0 = Instant::now();
    let st = Command::new("debootstrap")
        .args(["--foreign", "--arch=arm64", "--variant=minbase", "bookworm"])
        .arg(&tmp)
        .stdout(Stdio::null())
        .status()
        .expect("debootstrap");
    assert!(st.success(), "debootstrap --foreign failed");
    let st = Command::new("chroot")
        .arg(&tmp)
        .args(["/debootstrap/debootstrap", "--second-stage"])
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdout(Stdio::null())
        .status()
        .expect("debootstrap --second-stage");
    assert!(st.success(), "debootstrap --second-stage failed");
    std::fs::write(tmp.join(".complete"), "").expect("mark");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&tmp, &root).expect("rename");
    eprintln!("foreign: arm64 root made in {:?}", t0.elapsed());
    root
}

/// An overlay of `lower` (its writes go to a throw-away upper directory), with /proc and /dev
/// mounted;
/// unmounted when dropped.
struct Overlay {
    merged: PathBuf,
    base: PathBuf,
}

impl Overlay {
    fn new(lower: &Path, base: PathBuf) -> Overlay {
        let _ = std::fs::remove_dir_all(&base);
        for d in ["upper", "work", "merged"] {
            std::fs::create_dir_all(base.join(d)).expect("overlay dirs");
        }
        let merged = base.join("merged");
        run(Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!(
                "lowerdir={},upperdir={},workdir={}",
                lower.display(),
                base.join("upper").display(),
                base.join("work").display()
            ))
            .arg(&merged));
        let o = Overlay { merged, base };
        run(Command::new("mount")
            .args(["-t", "proc", "proc"])
            .arg(o.merged.join("proc")));
        // /dev/net/tun, which --check opens
        run(Command::new("mount")
            .arg("--bind")
            .arg("/dev")
            .arg(o.merged.join("dev")));
        o
    }

    /// `script` run by the tree's /bin/sh (arm64, through qemu): its status and output.
    fn sh(&self, script: &str) -> (bool, String) {
        let out = Command::new("chroot")
            .arg(&self.merged)
            .args(["/bin/sh", "-c", script])
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .output()
            .expect("chroot");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    fn ok(&self, script: &str) -> String {
        let (ok, out) = self.sh(script);
        assert!(ok, "in the arm64 tree: {script}: {out}");
        out
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.merged.join("dev")).status();
        let _ = Command::new("umount")
            .arg(self.merged.join("proc"))
            .status();
        let _ = Command::new("umount").arg(&self.merged).status();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

#[test]
fn the_arm64_deb_installs_into_a_debian_arm64_tree_and_checks_its_examples() {
    need!("foreign-deb", QEMU, "debootstrap", "chroot", "dpkg-deb");
    let pkgs = aarch64_release();
    let version = std::fs::read_to_string(tree().join("Cargo.toml"))
        .expect("Cargo.toml")
        .lines()
        .find_map(|l| {
            l.strip_prefix("version = \"")?
                .strip_suffix('"')
                .map(str::to_owned)
        })
        .expect("version");
    let deb = pkgs.join(format!("mptd_{version}-1_arm64.deb"));
    let info = run(Command::new("dpkg-deb").arg("-f").arg(&deb));
    assert!(info.contains("Architecture: arm64"), "{info}");
    binfmt_aarch64();
    let root = arm64_root();
    let o = Overlay::new(
        &root,
        std::env::temp_dir().join(format!("mpt-arm64-{}", std::process::id())),
    );
    std::fs::copy(&deb, o.merged.join("tmp/mptd.deb")).expect("copy deb");
    let arch = o.ok("dpkg --print-architecture");
    assert_eq!(arch.trim(), "arm64");
    o.ok("dpkg -i /tmp/mptd.deb");
    let status = o.ok("dpkg -s mptd");
    assert!(status.contains("Status: install ok installed"), "{status}");
    let version_out = o.ok("mptd --version");
    let file = run(Command::new("file").arg(o.merged.join("usr/bin/mptd")));
    assert!(file.contains("aarch64"), "{file}");
    o.ok("umask 077; mptd genkey > /etc/mptd.key");
    let examples = o.ok("ls /usr/share/doc/mptd/examples/");
    let mut checked = Vec::new();
    for ex in examples.split_whitespace().filter(|e| e.ends_with(".toml")) {
        // the example with this tree's key; its other settings as shipped
        let (_, said) = o.sh(&format!(
            "sed 's|^private_key_file.*|private_key_file = \"/etc/mptd.key\"|' /usr/share/doc/mptd/examples/{ex} > /tmp/{ex}; mptd -c /tmp/{ex} --check; echo \"exit $?\""
        ));
        let code = said
            .lines()
            .find(|l| l.starts_with("exit "))
            .unwrap_or_default()
            .to_owned();
        // valid (0), or valid but for another host: its paths' local addresses are not here (3)
        match code.as_str() {
            "exit 0" => assert!(said.contains(": ok ("), "{ex}: {said}"),
            "exit 3" => assert!(
                said.lines()
                    .filter(|l| l.contains("this host cannot run it"))
                    .all(|l| l.contains("cannot be bound here")),
                "{ex}: {said}"
            ),
            _ => panic!("{ex}: mptd --check in the arm64 tree: {said}"),
        }
        checked.push(format!("{ex} ({})", code.trim_start_matches("exit ")));
    }
    let (_, man) = o.sh("ls /usr/share/man/man8/mpt* /usr/share/man/man5/mpt*");
    eprintln!(
        "RESULT foreign-deb: {} ({} bytes) installed in Debian bookworm arm64 under qemu: {}; --check exit codes: {}; man pages {}",
        deb.file_name().and_then(|n| n.to_str()).unwrap_or_default(),
        std::fs::metadata(&deb).map(|m| m.len()).unwrap_or(0),
        version_out.trim(),
        checked.join(", "),
        man.split_whitespace()
            .filter_map(|m| m.rsplit('/').next())
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert_eq!(checked.len(), 5, "{checked:?}");
    crate::headline(
        "foreign-deb",
        "the arm64 `.deb` in a Debian bookworm arm64 tree under qemu (`tests/e2e/foreign.rs`)",
        "installs with dpkg; `mptd --version` and `--check` on every example as on amd64",
    );
    o.ok("dpkg -r mptd");
}

/// The members of an ipk (a gzipped tar of `debian-binary`, `control.tar.gz`, `data.tar.gz`),
/// unpacked under `into`.
fn unpack_ipk(ipk: &Path, into: &Path) {
    let _ = std::fs::remove_dir_all(into);
    for d in ["control", "data"] {
        std::fs::create_dir_all(into.join(d)).expect("dirs");
    }
    run(Command::new("tar").arg("-xzf").arg(ipk).arg("-C").arg(into));
    for d in ["control", "data"] {
        run(Command::new("tar")
            .arg("-xzf")
            .arg(into.join(format!("{d}.tar.gz")))
            .arg("-C")
            .arg(into.join(d)));
    }
}

#[test]
fn the_openwrt_packages_hold_a_static_mptd_the_init_script_and_kept_settings() {
    need!("openwrt-packages", "shellcheck", "tar");
    let pkgs = aarch64_release();
    let dir = std::env::temp_dir().join(format!("mpt-ipk-{}", std::process::id()));
    let mut checked = Vec::new();
    for arch in ["aarch64_cortex-a53", "aarch64_generic"] {
        let ipk = std::fs::read_dir(&pkgs)
            .expect("packages")
            .filter_map(|e| Some(e.ok()?.path()))
            .find(|p| {
                p.to_str()
                    .is_some_and(|s| s.ends_with(&format!("_{arch}.ipk")))
            })
            .unwrap_or_else(|| panic!("no {arch} ipk in {}", pkgs.display()));
        unpack_ipk(&ipk, &dir);
        assert_eq!(
            std::fs::read_to_string(dir.join("debian-binary"))
                .expect("debian-binary")
                .trim(),
            "2.0"
        );
        let control = std::fs::read_to_string(dir.join("control/control")).expect("control");
        for field in [
            "Package: mptd",
            &format!("Architecture: {arch}"),
            "Version: ",
            "Description: ",
        ] {
            assert!(
                control.contains(field),
                "{field} not in the control file:\n{control}"
            );
        }
        assert!(
            !control.contains("Depends:"),
            "a static build depends on nothing:\n{control}"
        );
        let conffiles = std::fs::read_to_string(dir.join("control/conffiles")).expect("conffiles");
        assert_eq!(conffiles.trim(), "/etc/config/mptd", "conffiles");
        let postinst = std::fs::read_to_string(dir.join("control/postinst")).expect("postinst");
        assert!(postinst.contains("/etc/init.d/mptd enable"), "{postinst}");
        let data = dir.join("data");
        for f in [
            "usr/bin/mptd",
            "usr/bin/mptctl",
            "etc/init.d/mptd",
            "etc/config/mptd",
            "lib/upgrade/keep.d/mptd",
            "usr/share/mptd/examples/site.toml",
            "usr/share/mptd/examples/server.toml",
        ] {
            assert!(data.join(f).exists(), "{f} is not in {}", ipk.display());
        }
        let mode = |f: &str| {
            std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(data.join(f)).expect("file").permissions(),
            ) & 0o777
        };
        assert_eq!(mode("etc/init.d/mptd"), 0o755);
        assert_eq!(mode("etc/mptd"), 0o700, "/etc/mptd holds keys");
        assert_eq!(
            std::fs::read_to_string(data.join("lib/upgrade/keep.d/mptd"))
                .expect("keep.d")
                .trim(),
            "/etc/mptd/",
            "sysupgrade keeps the configs and keys"
        );
        let file = run(Command::new("file").arg(data.join("usr/bin/mptd")));
        assert!(
            file.contains("aarch64") && file.contains("statically linked"),
            "{file}"
        );
        // the init script: procd's shape, and clean under shellcheck (as ash)
        let init = std::fs::read_to_string(data.join("etc/init.d/mptd")).expect("init");
        for want in [
            "USE_PROCD=1",
            "procd_open_instance",
            "procd_set_param respawn",
            "reload_signal HUP",
            "/etc/mptd",
        ] {
            assert!(init.contains(want), "the init script lacks {want}");
        }
        run(Command::new("shellcheck").arg(data.join("etc/init.d/mptd")));
        run(Command::new("shellcheck").arg(dir.join("control/postinst")));
        checked.push(format!(
            "{} ({} bytes)",
            ipk.file_name().and_then(|n| n.to_str()).unwrap_or_default(),
            std::fs::metadata(&ipk).map(|m| m.len()).unwrap_or(0)
        ));
    }
    // the apk (Alpine's format, apk-tools 2): a gzipped tar stream with .PKGINFO and the files
    let apk = std::fs::read_dir(&pkgs)
        .expect("packages")
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| p.to_str().is_some_and(|s| s.ends_with(".aarch64.apk")))
        .expect("the aarch64 apk");
    let list = run(Command::new("tar").arg("-tzf").arg(&apk));
    for f in [
        ".PKGINFO",
        "usr/bin/mptd",
        "etc/init.d/mptd",
        "etc/config/mptd",
    ] {
        assert!(
            list.lines().any(|l| l == f),
            "{f} is not in the apk:\n{list}"
        );
    }
    let info = run(Command::new("tar").arg("-xzOf").arg(&apk).arg(".PKGINFO"));
    assert!(
        info.contains("arch = aarch64") && info.contains("pkgname = mptd"),
        "{info}"
    );
    checked.push(format!(
        "{} ({} bytes)",
        apk.file_name().and_then(|n| n.to_str()).unwrap_or_default(),
        std::fs::metadata(&apk).map(|m| m.len()).unwrap_or(0)
    ));
    eprintln!("RESULT openwrt-packages: checked {}", checked.join(", "));
    let _ = std::fs::remove_dir_all(&dir);
}
