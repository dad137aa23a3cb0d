//! A site with an IPv4-only uplink and an IPv6-only uplink finds its dual-stack server by name
//! (the site's `/etc/netns/<ns>/hosts` gives both addresses), each path in its uplink's family;
//! then the IPv6-only uplink is renumbered to IPv4 only, and its path follows:
//!
//! ```text
//! site ── wan4 (198.18.30.2, no IPv6) ──── inet ── vps (198.18.100.1, 2001:db8:100::1,
//!      ── wan6 (2001:db8:31::2, no IPv4) ──        [[listen]] 0.0.0.0:4754 and [::]:4754)
//! ```

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mpt_core::seal::PrivateKey;
use mpt_lab::harness::{tbf, terminate};
use mptd::status::PathStatus;

use crate::handmade::Namespaces;
use crate::need;

const HOSTS: [&str; 3] = ["site", "inet", "vps"];
const V4: &str = "198.18.100.1";
const V6: &str = "2001:db8:100::1";
/// The server's tunnel address.
const INNER: &str = "198.19.31.1";

/// The lab's namespaces and daemons; dropping it stops the daemons (by pid) and removes the
/// namespaces and the site's `/etc/netns` entry.
struct Families {
    net: Namespaces,
}

impl std::ops::Deref for Families {
    type Target = Namespaces;
    fn deref(&self) -> &Namespaces {
        &self.net
    }
}

impl std::ops::DerefMut for Families {
    fn deref_mut(&mut self) -> &mut Namespaces {
        &mut self.net
    }
}

impl Families {
    fn new() -> Families {
        let lab = Families {
            net: Namespaces::new("f", &HOSTS, Some(30)),
        };
        let inet = lab.ns("inet");
        let shape = tbf(20_000_000);
        lab.sh(
            "site",
            &format!(
                "ip link add wan4 type veth peer name s4 netns {inet}
                 ip link add wan6 type veth peer name s6 netns {inet}
                 sysctl -qw net.ipv6.conf.wan4.disable_ipv6=1
                 ip link set wan4 up; ip link set wan6 up
                 ip addr add 198.18.30.2/24 dev wan4; ip route add default via 198.18.30.1 dev wan4
                 ip addr add 2001:db8:31::2/64 dev wan6 nodad
                 ip -6 route add default via 2001:db8:31::1 dev wan6
                 tc qdisc add dev wan4 root {shape}; tc qdisc add dev wan6 root {shape}"
            ),
        );
        lab.sh(
            "inet",
            &format!(
                "sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
                 ip link set s4 up; ip link set s6 up
                 ip link add vps type veth peer name eth0 netns {}; ip link set vps up
                 ip addr add 198.18.30.1/24 dev s4; ip addr add 2001:db8:31::1/64 dev s6 nodad
                 ip addr add 198.18.100.254/24 dev vps; ip addr add 2001:db8:100::fe/64 dev vps nodad
                 tc qdisc add dev s4 root {shape}; tc qdisc add dev s6 root {shape}",
                lab.ns("vps")
            ),
        );
        lab.sh(
            "vps",
            &format!(
                "ip link set eth0 up
                 ip addr add {V4}/24 dev eth0; ip route add default via 198.18.100.254
                 ip addr add {V6}/64 dev eth0 nodad; ip -6 route add default via 2001:db8:100::fe"
            ),
        );
        // the site finds its server by name: both its addresses
        let etc = Path::new("/etc/netns").join(lab.ns("site"));
        std::fs::create_dir_all(&etc).expect("/etc/netns");
        std::fs::write(
            etc.join("hosts"),
            format!("127.0.0.1 localhost\n{V4} vps.example.net\n{V6} vps.example.net\n"),
        )
        .expect("hosts");
        lab
    }

    /// Write `host`'s config (`body`, with its key file and control socket) and start mptd.
    fn start(&mut self, host: &'static str, key: &PrivateKey, body: &str) {
        let keyfile = self.dir.join(format!("{host}.key"));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&keyfile)
            .expect("key file");
        writeln!(f, "{}", key.encode()).expect("key");
        let text = format!(
            "{body}\n[security]\nprivate_key_file = \"{}\"\n\n[control]\nsocket = \"{}\"\n",
            keyfile.display(),
            self.sock(host).display()
        );
        let file = self.dir.join(format!("{host}.toml"));
        std::fs::write(&file, text).expect("config");
        self.spawn_mptd(host, &file);
    }

    /// The site's paths as its status says now (empty while it does not answer).
    fn paths(&self) -> Vec<PathStatus> {
        mptd::control::status(&self.sock("site"))
            .map(|s| s.paths)
            .unwrap_or_default()
    }

    /// Wait until `ok` holds of the site's paths, polling every 50 ms for at most `limit`: how
    /// long it took, or a panic with the paths and the logs.
    fn wait(&self, what: &str, limit: Duration, ok: impl Fn(&[PathStatus]) -> bool) -> Duration {
        let t0 = Instant::now();
        loop {
            let paths = self.paths();
            if ok(&paths) {
                return t0.elapsed();
            }
            if t0.elapsed() > limit {
                let view: Vec<_> = paths
                    .iter()
                    .map(|p| (&p.name, &p.state, &p.remote))
                    .collect();
                panic!(
                    "{what}: not after {limit:?}: {view:?}\nsite's log:\n{}\nvps's log:\n{}",
                    self.log("site"),
                    self.log("vps")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

use std::os::unix::fs::OpenOptionsExt as _;

/// The family of a status's `remote` (`Some(true)`: IPv6), if it is an address.
fn remote_v6(p: &PathStatus) -> Option<bool> {
    p.remote.parse::<SocketAddr>().ok().map(|a| a.is_ipv6())
}

/// Path `name` is up, to a remote of the family `v6` says.
fn up_in(paths: &[PathStatus], name: &str, v6: bool) -> bool {
    paths
        .iter()
        .any(|p| p.name == name && p.state == "up" && remote_v6(p) == Some(v6))
}

#[test]
fn ipv4_only_and_ipv6_only_uplinks_find_the_server_by_name() {
    need!("families", "tc", "iperf3", "getent", "ping", "nft");
    let (site, vps) = (
        PrivateKey::generate().expect("key"),
        PrivateKey::generate().expect("key"),
    );
    let mut lab = Families::new();
    // the lab's links are ready (IPv6 neighbour discovery on new veths takes a moment)
    let ready = Instant::now();
    lab.sh(
        "site",
        &format!(
            "for i in $(seq 100); do ping -c1 -W1 -I wan4 {V4} >/dev/null 2>&1 && \
             ping -6 -c1 -W1 -I wan6 {V6} >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1"
        ),
    );
    eprintln!(
        "RESULT families: the lab's links answered pings {:.2} s after they were made",
        ready.elapsed().as_secs_f64()
    );
    let ahosts = lab.sh("site", "getent ahosts vps.example.net");
    assert!(
        ahosts.contains(V4) && ahosts.contains(V6),
        "the site's resolver gives both addresses:\n{ahosts}"
    );
    lab.start(
        "vps",
        &vps,
        &format!(
            "[tunnel]\nname = \"mpt0\"\naddresses = [\"{INNER}/24\"]\n\n\
             [[listen]]\naddress = \"0.0.0.0:4754\"\n[[listen]]\naddress = \"[::]:4754\"\n\n\
             [[peer]]\nname = \"site\"\npublic_key = \"{}\"\nallowed = [\"198.19.31.2/32\"]\n",
            site.public().encode()
        ),
    );
    let listening = Instant::now();
    while mptd::control::status(&lab.sock("vps")).is_err() {
        assert!(
            listening.elapsed() < Duration::from_secs(10),
            "the server does not answer its control socket:\n{}",
            lab.log("vps")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    lab.start(
        "site",
        &site,
        &format!(
            "[tunnel]\nname = \"mpt0\"\naddresses = [\"198.19.31.2/24\"]\n\n\
             [[peer]]\nname = \"vps\"\npublic_key = \"{}\"\nendpoint = \"vps.example.net:4754\"\n\
             allowed = [\"198.19.31.0/24\"]\n\n\
             [[path]]\nname = \"wan4\"\ninterface = \"wan4\"\n\
             [[path]]\nname = \"wan6\"\ninterface = \"wan6\"\n",
            vps.public().encode()
        ),
    );
    lab.wait("both paths up", Duration::from_secs(10), |p| {
        up_in(p, "wan4", false) && up_in(p, "wan6", true)
    });
    let up_after = t0.elapsed();
    let paths = lab.paths();
    eprintln!(
        "RESULT families: both paths up {:.2} s after the site's start: wan4 -> {}, wan6 -> {}",
        up_after.as_secs_f64(),
        paths[0].remote,
        paths[1].remote
    );

    // a 10 s transfer puts a share on each path
    let before: Vec<u64> = paths.iter().map(|p| p.tx_bytes).collect();
    let mut server = Command::new("timeout")
        .args([
            "40",
            "ip",
            "netns",
            "exec",
            &lab.ns("vps"),
            "iperf3",
            "-s",
            "-1",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("iperf3 -s");
    std::thread::sleep(Duration::from_millis(500));
    let out = lab.sh("site", &format!("iperf3 -c {INNER} -t 10 -J"));
    let _ = server.wait();
    let v: serde_json::Value = serde_json::from_str(&out).expect("iperf3 JSON");
    let mbps = mpt_lab::harness::tools::iperf3_bps(&v) / 1e6;
    let sent: Vec<u64> = lab
        .paths()
        .iter()
        .zip(&before)
        .map(|(p, b)| p.tx_bytes - b)
        .collect();
    let total = sent.iter().sum::<u64>().max(1) as f64;
    let shares: Vec<f64> = sent.iter().map(|&b| b as f64 / total).collect();
    eprintln!(
        "RESULT families: iperf3 10 s {mbps:.1} Mbit/s; tx bytes wan4 {} ({:.0} %), wan6 {} ({:.0} %)",
        sent[0],
        shares[0] * 100.0,
        sent[1],
        shares[1] * 100.0
    );
    assert!(
        shares.iter().all(|&s| s >= 0.25),
        "each path carries at least 25 % of the bytes sent: {shares:?}"
    );

    // wan6 renumbered to IPv4 only: its path finds the server's IPv4 address
    lab.sh("inet", "ip addr add 198.18.31.1/24 dev s6");
    let renumbered = Instant::now();
    lab.sh(
        "site",
        "ip -6 addr del 2001:db8:31::2/64 dev wan6; sysctl -qw net.ipv6.conf.wan6.disable_ipv6=1
         ip addr add 198.18.31.2/24 dev wan6; ip route add default via 198.18.31.1 dev wan6 metric 200",
    );
    lab.wait("wan6 up again on IPv4", Duration::from_secs(5), |p| {
        let since = renumbered.elapsed().as_millis() as u64;
        up_in(p, "wan6", false)
            && p.iter()
                .any(|p| p.name == "wan6" && p.last_heard_ms.is_some_and(|h| h < since))
    });
    let again = renumbered.elapsed();
    let paths = lab.paths();
    eprintln!(
        "RESULT families: wan6 renumbered to IPv4 only: up again on {} {:.2} s after (wan4 {} to {})",
        paths[1].remote,
        again.as_secs_f64(),
        paths[0].state,
        paths[0].remote
    );
    assert!(
        up_in(&paths, "wan4", false),
        "wan4 stays up: {}",
        paths[0].state
    );

    // wan6 dual-stack, its IPv6 black-holed beyond the uplink: a site started now tries IPv6
    // on it first, then IPv4, and keeps IPv4
    lab.sh(
        "site",
        "sysctl -qw net.ipv6.conf.wan6.disable_ipv6=0; ip addr add 2001:db8:31::2/64 dev wan6 nodad
         ip -6 route add default via 2001:db8:31::1 dev wan6",
    );
    lab.sh(
        "inet",
        "nft 'add table ip6 lab; add chain ip6 lab c { type filter hook forward priority 0; }; add rule ip6 lab c iifname s6 drop'",
    );
    let (_, mut old) = lab.daemons.remove(1);
    terminate(&mut old);
    let site_config = std::fs::read_to_string(lab.dir.join("site.toml")).expect("config");
    let body = site_config
        .split("\n[security]")
        .next()
        .expect("body")
        .to_owned();
    let t0 = Instant::now();
    lab.start("site", &site, &body);
    let tried_v6 = std::sync::atomic::AtomicBool::new(false);
    lab.wait(
        "wan6 (both families, IPv6 black-holed) up on IPv4",
        Duration::from_secs(10),
        |p| {
            if p.iter()
                .any(|p| p.name == "wan6" && remote_v6(p) == Some(true))
            {
                tried_v6.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            up_in(p, "wan6", false) && up_in(p, "wan4", false)
        },
    );
    let took = t0.elapsed();
    let tried_v6 = tried_v6.into_inner();
    eprintln!(
        "RESULT families: wan6 with both families, IPv6 black-holed: up on IPv4 {:.2} s after the site's start (IPv6 tried first: {tried_v6})",
        took.as_secs_f64()
    );
    assert!(tried_v6, "the path tried IPv6 first");
}
