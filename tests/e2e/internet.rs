//! A branch on the internet through its bond, as `docs/deploy.md` sets it up, with the shipped
//! example configs (`config/site.toml`, `config/server.toml`) run as they are but for their
//! keys and their RFC 1918 addresses, which move to the lab's range (10.99.0.x becomes
//! 198.19.99.x, 192.168.10.x becomes 198.18.210.x; their IPv6 addresses are the documentation
//! prefix's already):
//!
//! ```text
//! lan ── site ══ ppp0 (point-to-point, no gateway) ══ cgnat ── inet ── vps
//!             ══ wwan0 (gateway)                  ══        (NAT,      └── web
//!                                                          random ports)
//! ```
//!
//! The site's peer is allowed `0.0.0.0/0` and `::/0`: the LAN host downloads a file from the
//! web host over IPv4 (which the server's `up` hook masquerades) and IPv6 (the LAN's prefix,
//! routed), both uplinks carrying a share, the site's uplink routes untouched. Then the site's
//! daemon stops: failing open the LAN reaches the web host by the uplinks; failing closed it
//! does not.
//!
//! As on a VPS whose interface is not `eth0`, the server's is `ens3`: the example's `up` hook
//! finds it. Both filter reverse paths strictly (`rp_filter = 1`, RHEL's default): the server
//! keeps it; on the site `mptd --check` warns about both uplinks, and the guide's
//! `rp_filter = 2` is set before it starts.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mpt_core::seal::PrivateKey;
use mpt_lab::harness::{mptd_bin, sibling_bin, tbf, terminate};

use crate::handmade::Namespaces;
use crate::need;

const FILE_BYTES: usize = 20 << 20;
const SERVER: &str = "198.18.100.1";
const WEB4: &str = "198.18.150.2";
const WEB6: &str = "2001:db8:150::2";
const LAN6: &str = "2001:db8:10::2";
const CGNAT_OUT: &str = "198.18.20.2";
const PORT: u16 = 8080;

/// The lab's namespaces and what it started; dropping it stops the daemons (by pid) and
/// removes the namespaces and the site's `/etc/netns` entry.
struct Internet {
    net: Namespaces,
}

impl std::ops::Deref for Internet {
    type Target = Namespaces;
    fn deref(&self) -> &Namespaces {
        &self.net
    }
}

impl std::ops::DerefMut for Internet {
    fn deref_mut(&mut self) -> &mut Namespaces {
        &mut self.net
    }
}

const HOSTS: [&str; 6] = ["lan", "site", "cgnat", "inet", "vps", "web"];

impl Internet {
    fn new() -> Internet {
        let lab = Internet {
            net: Namespaces::new("i", &HOSTS, None),
        };
        let n = |h: &str| lab.ns(h);
        let veth = |a: &str, an: &str, b: &str, bn: &str| {
            lab.sh(
                a,
                &format!(
                    "ip link add {an} type veth peer name {bn} netns {}; ip link set {an} up; ip -n {} link set {bn} up",
                    n(b),
                    n(b)
                ),
            );
        };
        veth("lan", "eth0", "site", "lan0");
        veth("site", "ppp0", "cgnat", "s-ppp");
        veth("site", "wwan0", "cgnat", "s-wwan");
        veth("cgnat", "up0", "inet", "cg");
        veth("vps", "ens3", "inet", "vps");
        veth("web", "eth0", "inet", "web");
        let fwd = "sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1";
        // the site and the server filter reverse paths strictly (RHEL's default): the server
        // keeps it, the site's uplinks are made loose as the guide says, once `--check` has
        // warned about them
        let strict = "sysctl -qw net.ipv4.conf.all.rp_filter=1 net.ipv4.conf.default.rp_filter=1";
        lab.sh(
            "lan",
            "ip addr add 198.18.210.2/24 dev eth0; ip route add default via 198.18.210.1
             ip addr add 2001:db8:10::2/64 dev eth0 nodad; ip -6 route add default via 2001:db8:10::1",
        );
        // the site: a PPPoE-like point-to-point uplink (no ARP, a device route, no gateway) and
        // an LTE uplink with a gateway, each with the default route its DHCP client or pppd
        // would install; it masquerades its LAN on them, as a router does without a tunnel
        let shape = tbf(20_000_000);
        lab.sh(
            "site",
            &format!(
                "{fwd}; {strict}
                 ip addr add 198.18.210.1/24 dev lan0; ip addr add 2001:db8:10::1/64 dev lan0 nodad
                 ip link set ppp0 down; ip link set ppp0 arp off address 02:00:00:00:13:01; ip link set ppp0 up
                 ip addr add 198.18.13.2 peer 198.18.13.1/32 dev ppp0
                 ip route add default dev ppp0 metric 100
                 ip addr add 198.18.12.2/24 dev wwan0; ip route add default via 198.18.12.1 dev wwan0 metric 200
                 tc qdisc add dev ppp0 root {shape}; tc qdisc add dev wwan0 root {shape}
                 nft 'add table ip lan; add chain ip lan post {{ type nat hook postrouting priority 100; }}; add rule ip lan post oifname {{ ppp0, wwan0 }} masquerade'"
            ),
        );
        lab.sh(
            "cgnat",
            &format!(
                "{fwd}
                 ip link set s-ppp down; ip link set s-ppp arp off address 02:00:00:00:13:01; ip link set s-ppp up
                 ip addr add 198.18.13.1 peer 198.18.13.2/32 dev s-ppp
                 ip addr add 198.18.12.1/24 dev s-wwan
                 ip addr add {CGNAT_OUT}/24 dev up0; ip route add default via 198.18.20.1
                 tc qdisc add dev s-ppp root {shape}; tc qdisc add dev s-wwan root {shape}
                 nft 'add table ip cgn; add chain ip cgn post {{ type nat hook postrouting priority 100; }}; add rule ip cgn post oifname up0 masquerade random'"
            ),
        );
        lab.sh(
            "inet",
            &format!(
                "{fwd}
                 ip addr add 198.18.20.1/24 dev cg
                 ip addr add 198.18.100.254/24 dev vps; ip addr add 2001:db8:100::fe/64 dev vps nodad
                 ip addr add 198.18.150.1/24 dev web; ip addr add 2001:db8:150::1/64 dev web nodad
                 ip -6 route add 2001:db8:10::/64 via 2001:db8:100::1
                 ip -6 route add 2001:db8:99::/64 via 2001:db8:100::1"
            ),
        );
        lab.sh(
            "vps",
            &format!(
                "{fwd}; {strict}
                 ip addr add {SERVER}/24 dev ens3; ip route add default via 198.18.100.254
                 ip addr add 2001:db8:100::1/64 dev ens3 nodad; ip -6 route add default via 2001:db8:100::fe"
            ),
        );
        lab.sh(
            "web",
            &format!(
                "ip addr add {WEB4}/24 dev eth0; ip route add default via 198.18.150.1
                 ip addr add {WEB6}/64 dev eth0 nodad; ip -6 route add default via 2001:db8:150::1"
            ),
        );
        // the site finds its server by name
        let etc = Path::new("/etc/netns").join(lab.ns("site"));
        std::fs::create_dir_all(&etc).expect("/etc/netns");
        std::fs::write(
            etc.join("hosts"),
            format!("127.0.0.1 localhost\n{SERVER} vps.example.net\n"),
        )
        .expect("hosts");
        lab
    }

    /// Write `host`'s config (an example, as the guide installs it, its addresses moved to the
    /// lab's range), its key, and start mptd on it; waits until `mptctl show` says all is up.
    fn start(&mut self, host: &'static str, config: &str, keys: &Keys, extra_tunnel: &str) {
        let file = self.write(host, config, keys, extra_tunnel);
        self.spawn_mptd(host, &file);
    }

    /// `mptd --check` of `host`'s config: what it prints.
    fn check(&self, host: &str, file: &Path) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns(host)])
            .arg(mptd_bin().expect("mptd"))
            .arg("-c")
            .arg(file)
            .arg("--check")
            .output()
            .expect("mptd --check");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Write `host`'s config and key; returns the config's path.
    fn write(&mut self, host: &str, config: &str, keys: &Keys, extra_tunnel: &str) -> PathBuf {
        let home = self.dir.join(host);
        std::fs::create_dir_all(&home).expect("dir");
        let key = home.join("mpt0.key");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode_0600()
            .open(&key)
            .expect("key file");
        let own = if host == "site" {
            &keys.site
        } else {
            &keys.vps
        };
        writeln!(f, "{}", own.encode()).expect("key");
        let text =
            example(config, keys).replacen("[tunnel]\n", &format!("[tunnel]\n{extra_tunnel}"), 1)
                + &format!("\n[control]\nsocket = \"{}\"\n", self.sock(host).display());
        let file = home.join("mpt0.toml");
        std::fs::write(&file, text).expect("config");
        file
    }

    /// `mptctl show` on `host` exits 0 (every path up) within `limit`.
    fn wait_up(&self, host: &str, limit: Duration) {
        let t0 = Instant::now();
        loop {
            let ok = Command::new(sibling_bin("mptctl").expect("mptctl"))
                .arg("-s")
                .arg(self.sock(host))
                .arg("show")
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return;
            }
            assert!(
                t0.elapsed() < limit,
                "{host}'s tunnel not up after {limit:?}; its log:\n{}",
                self.log(host)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stop `host`'s daemon (SIGTERM, by pid) and wait for it.
    fn stop(&mut self, host: &str) {
        let i = self
            .daemons
            .iter()
            .position(|(h, _)| *h == host)
            .expect("running");
        let (_, mut c) = self.daemons.remove(i);
        terminate(&mut c);
    }

    /// The site's main routing tables (its uplinks' routes), as `ip route` shows them.
    fn site_routes(&self) -> String {
        self.sh(
            "site",
            "ip -4 route show table main; ip -6 route show table main",
        )
    }

    /// Bytes `host` received on `dev` so far.
    fn rx_bytes(&self, host: &str, dev: &str) -> u64 {
        self.sh(
            host,
            &format!("cat /sys/class/net/{dev}/statistics/rx_bytes"),
        )
        .trim()
        .parse()
        .expect("rx_bytes")
    }
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::mode(self, 0o600)
    }
}

struct Keys {
    site: PrivateKey,
    vps: PrivateKey,
}

/// A shipped example with the lab's keys and addresses.
fn example(name: &str, keys: &Keys) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("example config");
    let mut out = String::new();
    for line in text.lines() {
        let line = if line.trim_start().starts_with("public_key") {
            let key = if name == "site.toml" {
                keys.vps.public()
            } else if line.contains("sZcmuz27") {
                keys.site.public()
            } else {
                // another site, which never comes
                PrivateKey::generate().expect("key").public()
            };
            format!("public_key = \"{}\"", key.encode())
        } else {
            line.replace("10.99.0.", "198.19.99.")
                .replace("192.168.10.", "198.18.210.")
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A web server in `ns` on port [`PORT`] (IPv4 and IPv6): `GET /big` is [`FILE_BYTES`] of
/// `content`, anything else 1 KiB of it; it notes the address of every client.
struct Web {
    stop: Arc<AtomicBool>,
    clients: Arc<Mutex<Vec<IpAddr>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Web {
    fn start(ns: &str, content: Arc<Vec<u8>>) -> Web {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = Arc::new(Mutex::new(Vec::new()));
        let (s, c) = (stop.clone(), clients.clone());
        let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a valid namespace fd; it changes this thread's namespace only.
            assert_eq!(
                unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
                0,
                "setns"
            );
            let l = TcpListener::bind(("::", PORT)).expect("bind [::]:8080");
            l.set_nonblocking(true).expect("nonblocking");
            ready_tx.send(()).expect("ready");
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut conn, from)) => {
                        c.lock().expect("clients").push(from.ip().to_canonical());
                        let content = content.clone();
                        std::thread::spawn(move || {
                            let _ = conn.set_nonblocking(false);
                            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                            let mut req = [0u8; 1024];
                            let n = conn.read(&mut req).unwrap_or(0);
                            let req = String::from_utf8_lossy(&req[..n]);
                            let body = if req.starts_with("GET /big ") {
                                &content[..]
                            } else {
                                &content[..1024]
                            };
                            let _ = write!(
                                conn,
                                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n",
                                body.len()
                            );
                            let _ = conn.write_all(body);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("web server ready");
        Web {
            stop,
            clients,
            thread: Some(thread),
        }
    }

    /// The client addresses seen since the last call.
    fn take_clients(&self) -> Vec<IpAddr> {
        std::mem::take(&mut *self.clients.lock().expect("clients"))
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Pseudo-random bytes (xorshift), so that a transfer that reorders or loses data shows.
fn content(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_branch_reaches_the_internet_through_its_bond_and_falls_back_as_configured() {
    need!("internet", "nft", "curl", "tc", "ping");
    let keys = Keys {
        site: PrivateKey::generate().expect("key"),
        vps: PrivateKey::generate().expect("key"),
    };
    let mut lab = Internet::new();
    let data = Arc::new(content(FILE_BYTES));
    let expected = {
        let f = lab.dir.join("expected");
        std::fs::write(&f, &data[..]).expect("expected");
        crate::sha256(&f)
    };
    let web = Web::start(&lab.ns("web"), data);
    let uplink_routes = lab.site_routes();

    lab.start("vps", "server.toml", &keys, "");
    let file = lab.write("site", "site.toml", &keys, "");
    let check = lab.check("site", &file);
    for dev in ["ppp0", "wwan0"] {
        assert!(
            check.contains(&format!("{dev} filters reverse paths strictly")),
            "--check on the site warns about {dev}'s rp_filter:\n{check}"
        );
    }
    // the guide's /etc/sysctl.d line for a site
    lab.sh("site", "sysctl -qw net.ipv4.conf.all.rp_filter=2");
    let check = lab.check("site", &file);
    assert!(!check.contains("strictly"), "{check}");
    lab.start("site", "site.toml", &keys, "");
    // (the server's `office` never comes: only the site's view says all is up)
    lab.wait_up("site", Duration::from_secs(10));
    let rules = lab.sh("site", "ip rule; ip -6 rule");
    assert!(
        rules.contains("lookup 4754"),
        "the full tunnel's rules:\n{rules}"
    );
    let nat = lab.sh("vps", "nft list table ip mptd");
    assert!(nat.contains("masquerade"), "the up hook's NAT:\n{nat}");

    // the LAN host downloads over IPv4 and IPv6, through the tunnel and over both uplinks
    let mut figures = Vec::new();
    for (family, url, seen) in [
        ("IPv4", format!("http://{WEB4}:{PORT}/big"), SERVER),
        ("IPv6", format!("http://[{WEB6}]:{PORT}/big"), LAN6),
    ] {
        let before = [lab.rx_bytes("site", "ppp0"), lab.rx_bytes("site", "wwan0")];
        let t0 = Instant::now();
        let out = lab.dir.join("got");
        lab.sh(
            "lan",
            &format!("curl -sS --max-time 60 -o {} '{url}'", out.display()),
        );
        let secs = t0.elapsed().as_secs_f64();
        let per: Vec<u64> = [("ppp0", before[0]), ("wwan0", before[1])]
            .iter()
            .map(|(d, b)| lab.rx_bytes("site", d) - b)
            .collect();
        let total = (per[0] + per[1]) as f64;
        let shares: Vec<f64> = per.iter().map(|&b| b as f64 / total).collect();
        let clients = web.take_clients();
        eprintln!(
            "RESULT internet {family}: {} MB in {secs:.1} s ({:.1} Mbit/s), dsl {:.0} % / lte {:.0} %, the web host saw {clients:?}",
            FILE_BYTES >> 20,
            FILE_BYTES as f64 * 8.0 / secs / 1e6,
            shares[0] * 100.0,
            shares[1] * 100.0
        );
        assert_eq!(
            crate::sha256(&out),
            expected,
            "{family}: the file arrived changed"
        );
        assert!(
            shares.iter().all(|&s| s >= 0.30),
            "{family}: each uplink carries at least 30 %: {shares:?}"
        );
        assert_eq!(
            clients,
            vec![seen.parse::<IpAddr>().expect("addr")],
            "{family}: the web host sees the server's address (IPv6: the LAN's routed prefix)"
        );
        figures.push(format!(
            "{family} **{:.1} Mbit/s** ({secs:.1} s), each uplink {:.0} %",
            FILE_BYTES as f64 * 8.0 / secs / 1e6,
            shares[0] * 100.0
        ));
    }
    crate::headline(
        "internet",
        "a branch's LAN downloading from the internet through the full tunnel: two 20 Mbit/s \
         uplinks (one point-to-point) behind a carrier NAT, the shipped `site.toml` and \
         `server.toml`, strict reverse-path filtering (`tests/e2e/internet.rs`)",
        &format!(
            "{} MB intact over {}; the web host sees the server's address",
            FILE_BYTES >> 20,
            figures.join(", ")
        ),
    );

    // the LAN reaches the server's own address through the tunnel
    let before = lab.sh("vps", "cat /sys/class/net/mpt0/statistics/rx_packets");
    lab.sh("lan", &format!("ping -c 5 -i 0.2 -W 2 {SERVER} >/dev/null"));
    let after = lab.sh("vps", "cat /sys/class/net/mpt0/statistics/rx_packets");
    let through: u64 =
        after.trim().parse::<u64>().expect("n") - before.trim().parse::<u64>().expect("n");
    assert!(
        through >= 5,
        "pings to the server's own address went through the tunnel: {through}"
    );

    // failing open: the site's daemon stops, and the LAN goes out by the uplinks
    lab.stop("site");
    let small = format!("curl -sS --max-time 5 -o /dev/null http://{WEB4}:{PORT}/small");
    lab.sh("lan", &small);
    assert_eq!(
        web.take_clients(),
        vec![CGNAT_OUT.parse::<IpAddr>().expect("addr")],
        "failing open, the LAN leaves by the uplinks (through the carrier NAT)"
    );
    let rules = lab.sh("site", "ip rule; ip -6 rule");
    assert!(
        !rules.contains("4754"),
        "failing open, no rule is left:\n{rules}"
    );
    assert_eq!(
        lab.site_routes(),
        uplink_routes,
        "the site's own routes are as before"
    );

    // failing closed: the same with `tunnel.fail_closed = true`, then stopped
    lab.start("site", "site.toml", &keys, "fail_closed = true\n");
    lab.wait_up("site", Duration::from_secs(10));
    lab.sh("lan", &small);
    assert_eq!(
        web.take_clients(),
        vec![SERVER.parse::<IpAddr>().expect("addr")]
    );
    lab.stop("site");
    let blocked = lab.try_sh("lan", &small);
    assert!(
        !blocked.status.success() && web.take_clients().is_empty(),
        "failing closed, nothing leaves while mptd is stopped"
    );
    assert_eq!(
        lab.site_routes(),
        uplink_routes,
        "the site's own routes are as before"
    );
    eprintln!(
        "RESULT internet: fail open reaches the web host by the uplinks; fail closed blocks it"
    );
    drop(web);
}
