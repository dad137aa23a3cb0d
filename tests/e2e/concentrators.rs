//! Beyond one server: a site served by two concentrators that announce it to a core router
//! over BGP, with Debian's BIRD 2 (`docs/deploy.md`, "Several servers"; the concentrators run
//! the shipped `contrib/bird/concentrator.conf`, its addresses moved to the lab's):
//!
//! ```text
//! lan ── site ══ up1 ══ cgnat ── core (BIRD, AS 65000) ── office
//!             ══ up2 ══ (NAT,     ├── c1 (mptd + BIRD, AS 65001, MED 10)
//!                       random    └── c2 (mptd + BIRD, AS 65001, MED 20)
//!                       ports)
//! ```
//!
//! The site's two server peers carry `0.0.0.0/0` (a full tunnel) with priorities 1 (c1) and 2
//! (c2); both tunnels are up, c2 standing by. Each concentrator routes the site's LAN into its
//! tunnel while the site is up there (`tunnel.route_protocol = 200`), and BIRD exports that
//! route to the core, which prefers c1's. c1 is killed (its mptd and its BIRD, SIGKILL): new
//! connections from the LAN to the office go through c2 within 3 s, and the office reaches the
//! LAN through c2 within 5 s. c1 comes back: the site returns to it after its failback hold,
//! while the office keeps reaching the LAN. Then c1 is blackholed at the core (its BGP
//! session too, which BFD finds broken): the same bounds, and back on c1 when it heals.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_core::seal::PrivateKey;
use mpt_lab::harness::{in_netns, mptd_bin, sibling_bin};

use crate::need;

const HOSTS: [&str; 7] = ["lan", "site", "cgnat", "core", "c1", "c2", "office"];
const LAN_HOST: &str = "198.18.210.2";
const LAN: &str = "198.18.210.0/24";
const OFFICE: &str = "198.18.160.2";
const OFFICE_PORT: u16 = 8081;
/// The site's failback hold (`tunnel.failback_ms`).
const FAILBACK_MS: u64 = 3000;

/// Concentrator `k` (1 or 2): its address and the core's on their link.
fn concentrator(k: usize) -> (String, String) {
    (format!("198.18.17{k}.1"), format!("198.18.17{k}.254"))
}

struct Fabric {
    tag: String,
    dir: PathBuf,
    /// What this test started, by host.
    procs: Vec<(String, Child)>,
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for (_, c) in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
        for h in HOSTS {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(h)])
                .output();
        }
        if std::env::var_os("MPT_LAB_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Fabric {
    fn ns(&self, host: &str) -> String {
        format!("{}{host}", self.tag)
    }

    fn try_sh(&self, host: &str, script: &str) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", &self.ns(host), "sh", "-ec", script])
            .output()
            .expect("ip netns exec")
    }

    fn sh(&self, host: &str, script: &str) -> String {
        let out = self.try_sh(host, script);
        assert!(
            out.status.success(),
            "in {host}: {script}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn new() -> Fabric {
        let (tag, dir) = crate::netns_hosts("b", &HOSTS);
        let f = Fabric {
            tag,
            dir,
            procs: Vec::new(),
        };
        for h in HOSTS {
            f.sh(
                h,
                "sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0",
            );
        }
        let veth = |a: &str, an: &str, b: &str, bn: &str| {
            let nb = f.ns(b);
            f.sh(
                a,
                &format!(
                    "ip link add {an} type veth peer name {bn} netns {nb}; ip link set {an} up; ip -n {nb} link set {bn} up"
                ),
            );
        };
        veth("lan", "eth0", "site", "lan0");
        veth("site", "up1", "cgnat", "s1");
        veth("site", "up2", "cgnat", "s2");
        veth("cgnat", "up0", "core", "cg");
        veth("c1", "eth0", "core", "c1");
        veth("c2", "eth0", "core", "c2");
        veth("office", "eth0", "core", "office");
        f.sh(
            "lan",
            &format!("ip addr add {LAN_HOST}/24 dev eth0; ip route add default via 198.18.210.1"),
        );
        f.sh(
            "site",
            "ip addr add 198.18.210.1/24 dev lan0
             ip addr add 198.18.12.2/24 dev up1; ip route add default via 198.18.12.1 dev up1 metric 100
             ip addr add 198.18.13.2/24 dev up2; ip route add default via 198.18.13.1 dev up2 metric 200",
        );
        f.sh(
            "cgnat",
            "ip addr add 198.18.12.1/24 dev s1; ip addr add 198.18.13.1/24 dev s2
             ip addr add 198.18.20.2/24 dev up0; ip route add default via 198.18.20.1
             nft 'add table ip cgn; add chain ip cgn post { type nat hook postrouting priority 100; }; add rule ip cgn post oifname up0 masquerade random'",
        );
        f.sh(
            "core",
            "ip addr add 198.18.20.1/24 dev cg
             ip addr add 198.18.171.254/24 dev c1; ip addr add 198.18.172.254/24 dev c2
             ip addr add 198.18.160.1/24 dev office",
        );
        for k in 1..=2 {
            let (me, core) = concentrator(k);
            f.sh(
                &format!("c{k}"),
                &format!("ip addr add {me}/24 dev eth0; ip route add default via {core}"),
            );
        }
        f.sh(
            "office",
            &format!("ip addr add {OFFICE}/24 dev eth0; ip route add default via 198.18.160.1"),
        );
        f
    }

    /// Start `program` (with `args`) in `host`'s namespace, its output in `<host>.<what>.log`.
    fn spawn(&mut self, host: &str, what: &str, program: &std::path::Path, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("{host}.{what}.log"))).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(host)])
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn");
        self.procs.push((host.to_owned(), child));
    }

    fn log(&self, host: &str, what: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{host}.{what}.log"))).unwrap_or_default()
    }

    /// Write `text` as `host`'s mptd config and start mptd on it.
    fn mptd(&mut self, host: &str, key: &PrivateKey, text: &str) {
        let home = self.dir.join(host);
        std::fs::create_dir_all(&home).expect("dir");
        let key_file = home.join("mpt0.key");
        std::fs::write(&key_file, format!("{}\n", key.encode())).expect("key");
        std::fs::set_permissions(
            &key_file,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("chmod");
        let text = format!(
            "{text}\n[security]\nprivate_key_file = \"{}\"\n\n[control]\nsocket = \"{}\"\n",
            key_file.display(),
            self.sock(host).display()
        );
        let file = home.join("mpt0.toml");
        std::fs::write(&file, text).expect("config");
        let bin = mptd_bin().expect("mptd");
        self.spawn(host, "mptd", &bin, &["-c", file.to_str().expect("utf-8")]);
    }

    /// Write `text` as `host`'s BIRD config and start BIRD on it (in the foreground).
    fn bird(&mut self, host: &str, text: &str) {
        let conf = self.dir.join(format!("{host}.bird.conf"));
        std::fs::write(&conf, text).expect("bird config");
        let sock = self.dir.join(format!("{host}.bird.ctl"));
        let (conf, sock) = (conf.display().to_string(), sock.display().to_string());
        self.spawn(
            host,
            "bird",
            std::path::Path::new("/usr/sbin/bird"),
            &["-f", "-c", &conf, "-s", &sock],
        );
    }

    /// Kill everything this test started on `host` (SIGKILL, by pid): the machine dies.
    fn kill(&mut self, host: &str) {
        for (h, c) in &mut self.procs {
            if h == host {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        self.procs.retain(|(h, _)| h != host);
    }

    fn sock(&self, host: &str) -> PathBuf {
        self.dir.join(format!("{host}.sock"))
    }

    /// The site's status, as `mptctl status --json` gives it.
    fn site_status(&self) -> Option<mptd::status::Status> {
        let out = Command::new(sibling_bin("mptctl").expect("mptctl"))
            .arg("-s")
            .arg(self.sock("site"))
            .args(["status", "--json"])
            .output()
            .ok()?;
        serde_json::from_slice(&out.stdout).ok()
    }

    /// The site's role line of peer `name` (`mptctl show`'s "role").
    fn role(&self, name: &str) -> String {
        self.site_status()
            .and_then(|s| s.peers.into_iter().find(|p| p.name == name))
            .and_then(|p| p.role)
            .unwrap_or_default()
    }

    /// Wait up to `limit` for `ok`; how long it took, or a panic naming `what`.
    fn until(&self, what: &str, limit: Duration, ok: impl Fn() -> bool) -> Duration {
        let t0 = Instant::now();
        loop {
            if ok() {
                return t0.elapsed();
            }
            assert!(
                t0.elapsed() < limit,
                "{what}: not after {limit:?}\nsite:\n{}\nc1:\n{}\nc2:\n{}\ncore BIRD:\n{}",
                self.log("site", "mptd"),
                self.log("c1", "mptd"),
                self.log("c2", "mptd"),
                self.log("core", "bird")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The core's route to the site's LAN, as `ip route` shows it.
    fn core_route(&self) -> String {
        self.sh("core", &format!("ip route show {LAN}"))
    }

    /// One ping from the office to the LAN host answered within 300 ms.
    fn office_reaches_lan(&self) -> bool {
        self.try_sh("office", &format!("ping -n -c1 -W0.3 {LAN_HOST}"))
            .status
            .success()
    }

    /// A new TCP connection from the LAN host to the office's server, answered, within 300 ms.
    fn lan_connects(&self) -> bool {
        in_netns(&self.ns("lan"), || {
            let to = SocketAddr::from(([198, 18, 160, 2], OFFICE_PORT));
            let Ok(mut s) = TcpStream::connect_timeout(&to, Duration::from_millis(300)) else {
                return false;
            };
            let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
            let mut b = [0u8; 2];
            s.read_exact(&mut b).is_ok() && &b == b"ok"
        })
        .unwrap_or(false)
    }
}

/// A TCP server in the office that answers "ok" to every connection.
struct Office {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Office {
    fn start(ns: String) -> Office {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let _ = in_netns(&ns, move || {
                let l = TcpListener::bind(("0.0.0.0", OFFICE_PORT)).expect("bind");
                l.set_nonblocking(true).expect("nonblocking");
                ready_tx.send(()).expect("ready");
                while !s.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((mut c, _)) => {
                            let _ = c.write_all(b"ok");
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            });
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("office server");
        Office {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Office {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The shipped concentrator BIRD config, for concentrator `k` of the lab.
fn concentrator_bird(k: usize) -> String {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/bird/concentrator.conf");
    let text = std::fs::read_to_string(&path).expect("contrib/bird/concentrator.conf");
    let (me, core) = concentrator(k);
    for shipped in ["198.51.100.1", "198.51.100.254", "bgp_med = 10"] {
        assert!(text.contains(shipped), "{path:?} no longer says {shipped}");
    }
    text.replace("198.51.100.254", &core)
        .replace("198.51.100.1", &me)
        .replace("bgp_med = 10", &format!("bgp_med = {}", 10 * k))
}

/// The core: BGP with both concentrators, the best routes into its kernel table.
fn core_bird() -> String {
    let mut t = String::from(
        "router id 198.18.20.1;\nprotocol device {\n}\n\
         protocol kernel {\n    ipv4 { import none; export all; };\n}\n\
         protocol bfd {\n    interface \"*\" { interval 100 ms; multiplier 5; };\n}\n",
    );
    for k in 1..=2 {
        let (me, core) = concentrator(k);
        t += &format!(
            "protocol bgp c{k} {{\n    local {core} as 65000;\n    neighbor {me} as 65001;\n    \
             hold time 3;\n    keepalive time 1;\n    connect retry time 1;\n    error wait time 1, 10;\n    bfd on;\n    \
             ipv4 {{ import all; export none; }};\n}}\n"
        );
    }
    t
}

fn concentrator_mptd(k: usize, site: &PrivateKey) -> String {
    format!(
        "[tunnel]\nname = \"mpt0\"\naddresses = [\"198.19.99.{}/24\"]\nroute_protocol = 200\n\n\
         [[listen]]\naddress = \"0.0.0.0:4754\"\n\n\
         [[peer]]\nname = \"site\"\npublic_key = \"{}\"\nallowed = [\"198.19.99.2/32\", \"{LAN}\"]\n",
        2 * k - 1,
        site.public().encode()
    )
}

fn site_mptd(c: &[PrivateKey; 2], hook_file: &std::path::Path) -> String {
    let mut t = format!(
        "[tunnel]\nname = \"mpt0\"\naddresses = [\"198.19.99.2/24\"]\nfailback_ms = {FAILBACK_MS}\n\n\
         [hooks]\npeer_active = 'echo \"$MPTD_PEER $MPTD_PREVIOUS $MPTD_PREFIX\" >> {}'\n\n",
        hook_file.display()
    );
    for k in 1..=2 {
        let (me, _) = concentrator(k);
        t += &format!(
            "[[peer]]\nname = \"c{k}\"\npublic_key = \"{}\"\nendpoint = \"{me}:4754\"\n\
             allowed = [\"0.0.0.0/0\", \"198.19.99.{}/32\"]\npriority = {k}\n\n",
            c[k - 1].public().encode(),
            2 * k - 1
        );
    }
    t + "[[path]]\nname = \"up1\"\ninterface = \"up1\"\n\n[[path]]\nname = \"up2\"\ninterface = \"up2\"\n"
}

/// c1 has just failed (`how`): new connections from the LAN to the office work through c2
/// within 3 s, and the office reaches the LAN through c2 within 5 s.
fn moves_to_c2(f: &Fabric, how: &str) -> (Duration, Duration) {
    let failed = Instant::now();
    let (lan, office) = std::thread::scope(|s| {
        let lan = s.spawn(|| {
            f.until(
                "a new connection from the LAN by c2",
                Duration::from_secs(10),
                || f.lan_connects(),
            );
            failed.elapsed()
        });
        let office = s.spawn(|| {
            f.until(
                "the office reaching the LAN by c2",
                Duration::from_secs(10),
                || f.office_reaches_lan(),
            );
            failed.elapsed()
        });
        (
            lan.join().expect("lan thread"),
            office.join().expect("office thread"),
        )
    });
    let role = f.role("c2");
    assert!(role.starts_with("active for 0.0.0.0/0"), "{role}");
    f.until("the core's route by c2", Duration::from_secs(5), || {
        f.core_route().contains("via 198.18.172.1")
    });
    eprintln!(
        "RESULT concentrators: c1 {how}: the LAN's new connections through c2 after {:.2} s, the office reaches the LAN through c2 after {:.2} s",
        lan.as_secs_f64(),
        office.as_secs_f64()
    );
    assert!(lan <= Duration::from_secs(3), "LAN to office after {lan:?}");
    assert!(
        office <= Duration::from_secs(5),
        "office to LAN after {office:?}"
    );
    (lan, office)
}

#[test]
fn a_site_moves_to_the_next_concentrator_and_bgp_follows() {
    need!(
        "concentrators::a_site_moves_to_the_next_concentrator_and_bgp_follows",
        "nft",
        "ping"
    );
    mpt_lab::harness::ensure_package("bird", "bird2").expect("BIRD 2 (Debian's bird2)");
    let site_key = PrivateKey::generate().expect("key");
    let c_keys = [
        PrivateKey::generate().expect("key"),
        PrivateKey::generate().expect("key"),
    ];
    let mut f = Fabric::new();
    let hook_file = f.dir.join("peer_active.txt");
    let _office = Office::start(f.ns("office"));
    f.bird("core", &core_bird());
    for k in 1..=2 {
        f.bird(&format!("c{k}"), &concentrator_bird(k));
        let text = concentrator_mptd(k, &site_key);
        f.mptd(&format!("c{k}"), &c_keys[k - 1], &text);
    }
    f.mptd("site", &site_key, &site_mptd(&c_keys, &hook_file));
    // both tunnels up, c1 carrying the site, the core routing the LAN to c1
    f.until(
        "both of the site's tunnels up",
        Duration::from_secs(15),
        || {
            f.site_status().is_some_and(|s| {
                s.peers.len() == 2
                    && s.peers
                        .iter()
                        .all(|p| p.paths.iter().all(|x| x.state == "up"))
            })
        },
    );
    assert!(
        f.role("c1").starts_with("active for 0.0.0.0/0"),
        "{}",
        f.role("c1")
    );
    assert!(
        f.role("c2")
            .starts_with("standby for 0.0.0.0/0: c1 carries it"),
        "{}",
        f.role("c2")
    );
    let bgp = f.until(
        "the core's route to the LAN by c1",
        Duration::from_secs(20),
        || f.core_route().contains("via 198.18.171.1"),
    );
    f.until("the office reaches the LAN", Duration::from_secs(5), || {
        f.office_reaches_lan()
    });
    f.until(
        "the LAN connects to the office",
        Duration::from_secs(5),
        || f.lan_connects(),
    );
    eprintln!("RESULT concentrators: the core routes the site's LAN by c1 {bgp:.1?} after both tunnels were up");

    // c1 dies: the site's new connections go by c2, and the core's route moves to c2
    f.kill("c1");
    let killed = moves_to_c2(&f, "killed");

    // c1 comes back: the office keeps reaching the LAN, and the site returns to c1 after its
    // failback hold
    let pings = Command::new("ip")
        .args([
            "netns",
            "exec",
            &f.ns("office"),
            "ping",
            "-n",
            "-q",
            "-i",
            "0.1",
            "-c",
            "150",
            "-W1",
            LAN_HOST,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ping");
    let restarted = {
        std::thread::sleep(Duration::from_millis(500));
        let back = Instant::now();
        f.bird("c1", &concentrator_bird(1));
        let text = concentrator_mptd(1, &site_key);
        f.mptd("c1", &c_keys[0], &text);
        f.until(
            "c1 carrying the site again",
            Duration::from_secs(20),
            || {
                f.role("c1")
                    .starts_with("active for 0.0.0.0/0: the highest priority up")
            },
        );
        let returned = back.elapsed();
        f.until(
            "the core's route back by c1",
            Duration::from_secs(10),
            || f.core_route().contains("via 198.18.171.1"),
        );
        eprintln!(
            "RESULT concentrators: c1 restarted: the site back on it after {:.2} s (failback hold {FAILBACK_MS} ms)",
            returned.as_secs_f64()
        );
        assert!(
            returned >= Duration::from_millis(FAILBACK_MS),
            "back on c1 after {returned:?}, before its failback hold"
        );
        returned
    };
    let pings = pings.wait_with_output().expect("ping");
    let out = String::from_utf8_lossy(&pings.stdout).into_owned();
    let received: u32 = out
        .split(',')
        .find_map(|p| {
            p.trim()
                .strip_suffix(" received")
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or_else(|| panic!("ping's summary: {out}"));
    eprintln!("RESULT concentrators: while c1 came back, {received} of 150 pings from the office to the LAN answered");
    assert!(
        received >= 140,
        "the office lost the LAN while c1 came back: {out}"
    );
    assert!(f.lan_connects(), "the LAN cannot reach the office on c1");
    // c1 blackholed at the core, its BGP session with it: the same, by silence alone
    f.sh(
        "core",
        "nft 'add table inet hole; \
         add chain inet hole pass { type filter hook forward priority 0; }; \
         add chain inet hole inp { type filter hook input priority 0; }; \
         add chain inet hole outp { type filter hook output priority 0; }; \
         add rule inet hole pass ip daddr 198.18.171.1 drop; \
         add rule inet hole pass ip saddr 198.18.171.1 drop; \
         add rule inet hole inp ip saddr 198.18.171.1 drop; \
         add rule inet hole outp ip daddr 198.18.171.1 drop'",
    );
    let blackholed = moves_to_c2(&f, "blackholed");
    f.sh("core", "nft delete table inet hole");
    let healed = Instant::now();
    f.until(
        "c1 carrying the site again after the blackhole",
        Duration::from_secs(25),
        || {
            f.role("c1")
                .starts_with("active for 0.0.0.0/0: the highest priority up")
        },
    );
    f.until(
        "the core's route back by c1 after the blackhole",
        Duration::from_secs(15),
        || f.core_route().contains("via 198.18.171.1"),
    );
    let healed = healed.elapsed();
    eprintln!(
        "RESULT concentrators: c1 reachable again: the site back on it after {:.2} s",
        healed.as_secs_f64()
    );
    let s = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    crate::headline(
        "concentrators",
        "a site with two concentrators that announce it to a core router over BGP (BIRD 2 with \
         BFD), the first killed, then blackholed (`tests/e2e/concentrators.rs`)",
        &format!(
            "new connections from the LAN work through the next concentrator **{} / {}** after \
             (killed / blackholed), and the office reaches the LAN {} / {} after; back on the \
             first {} / {} after it returns (failback hold {FAILBACK_MS} ms), {received} of 150 \
             pings answered meanwhile",
            s(killed.0),
            s(blackholed.0),
            s(killed.1),
            s(blackholed.1),
            s(restarted),
            s(healed)
        ),
    );
    assert!(f.lan_connects() && f.office_reaches_lan());
    let hooks = std::fs::read_to_string(&hook_file).unwrap_or_default();
    assert!(
        hooks.contains("c2 c1 0.0.0.0/0") && hooks.contains("c1 c2 0.0.0.0/0"),
        "hooks.peer_active: {hooks:?}"
    );
}
