//! A lab built by hand (`internet.rs`, `families.rs`): a namespace per host (named by the
//! lab's tag and the host), a directory for its files, and the daemons started in them.
//! Dropping it stops the daemons (by pid) and removes the namespaces and the site's
//! `/etc/netns` entry.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use mpt_lab::harness::{mptd_bin, terminate};

pub struct Namespaces {
    pub tag: String,
    pub dir: PathBuf,
    hosts: &'static [&'static str],
    /// Each script run in a namespace ends within this many seconds (`None`: no bound).
    limit_s: Option<u32>,
    /// What was started, by host.
    pub daemons: Vec<(&'static str, Child)>,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for (_, c) in &mut self.daemons {
            terminate(c);
        }
        for h in self.hosts {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(h)])
                .output();
        }
        let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(self.ns("site")));
        if std::env::var_os("MPT_LAB_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Namespaces {
    /// A namespace per host of `hosts` ([`crate::netns_hosts`]), tagged with `suffix`; scripts
    /// bounded by `limit_s`.
    pub fn new(suffix: &str, hosts: &'static [&'static str], limit_s: Option<u32>) -> Namespaces {
        let (tag, dir) = crate::netns_hosts(suffix, hosts);
        Namespaces {
            tag,
            dir,
            hosts,
            limit_s,
            daemons: Vec::new(),
        }
    }

    pub fn ns(&self, host: &str) -> String {
        format!("{}{host}", self.tag)
    }

    /// Run `script` with `sh -ec` in `host`'s namespace (`ip netns exec`, so that the site sees
    /// its own `/etc/hosts`); its output, or a panic naming the script.
    pub fn sh(&self, host: &str, script: &str) -> String {
        let out = self.try_sh(host, script);
        assert!(
            out.status.success(),
            "in {host}: {script}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// [`Namespaces::sh`], its output whatever its exit.
    pub fn try_sh(&self, host: &str, script: &str) -> Output {
        let mut cmd = match self.limit_s {
            Some(s) => {
                let mut c = Command::new("timeout");
                c.args([&s.to_string(), "ip"]);
                c
            }
            None => Command::new("ip"),
        };
        cmd.args(["netns", "exec", &self.ns(host), "sh", "-ec", script])
            .output()
            .expect("ip netns exec")
    }

    /// `host`'s control socket.
    pub fn sock(&self, host: &str) -> PathBuf {
        self.dir.join(format!("{host}.sock"))
    }

    /// `host`'s daemon's log so far.
    pub fn log(&self, host: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{host}.log"))).unwrap_or_default()
    }

    /// Start mptd in `host`'s namespace with the config `file`, its output to `host`'s log
    /// ([`Namespaces::log`]); it is stopped when the lab is dropped.
    pub fn spawn_mptd(&mut self, host: &'static str, file: &Path) {
        let log = std::fs::File::create(self.dir.join(format!("{host}.log"))).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(host)])
            .arg(mptd_bin().expect("mptd"))
            .arg("-c")
            .arg(file)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("mptd");
        self.daemons.push((host, child));
    }
}
