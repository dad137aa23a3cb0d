use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

use mpt_core::wire::{Datagram, HeaderRepr, Kind, HEADER_LEN};
use mpt_core::PathId;
use mpt_lab::harness::{mptd_bin, tunnel_addr, Lab, Side, TunnelOpts};

use crate::{four_paths, need};

const GOOD: &str = r#"
[tunnel]
name = "mpt9"
address = "198.19.0.1/24"
[connection]
scheduler = "wrr"
[security]
encryption = "none"
private_key_file = "host.key"
[[peer]]
name = "b"
public_key = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
allowed = ["198.19.0.2/32"]
[[path]]
name = "a"
local = "198.18.1.1:4754"
remote = "198.18.1.2:4754"
[[path]]
name = "b"
local = "198.18.2.1:4754"
remote = "198.18.2.2:4754"
"#;

/// Write a secret to `path`, mode 0600.
fn write_private(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write key");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

/// Run `mptd --check` on `text` (with a private key `host.key` beside it); returns (exit
/// code, stderr).
fn check(text: Option<&str>) -> (i32, String) {
    let bin = match mptd_bin() {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    let dir = std::env::temp_dir().join(format!("mpt-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("mpt.toml");
    write_private(
        &dir.join("host.key"),
        &mpt_core::seal::PrivateKey::generate()
            .expect("key")
            .encode(),
    );
    match text {
        Some(t) => std::fs::write(&file, t).expect("write"),
        None => {
            let _ = std::fs::remove_file(&file);
        }
    }
    let out = Command::new(bin)
        .args(["-c", file.to_str().expect("utf-8 path"), "--check"])
        .output()
        .expect("mptd");
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn invalid_configs_are_refused_naming_the_problem() {
    // valid; this host may lack the lab's addresses, which --check says apart (exit 3)
    let (code, err) = check(Some(GOOD));
    let only_addresses = err
        .lines()
        .filter(|l| !l.trim().is_empty())
        .all(|l| l.contains("cannot be bound here"));
    assert!(
        code == 0 || (code == 3 && only_addresses),
        "the good config was refused ({code}): {err}"
    );
    let cases = [
        (
            Some(GOOD.replace("scheduler = \"wrr\"", "scheduler = \"wrr\"\nspeed = 3")),
            "speed",
        ),
        (
            Some(GOOD.replace("198.18.1.2:4754", "198.18.1.300:4754")),
            "path[0].remote",
        ),
        (
            Some(GOOD.replace("name = \"b\"", "name = \"a\"")),
            "path[1].name",
        ),
        (
            Some(GOOD.replace("198.18.2.1:4754", "198.18.1.1:4754")),
            "path[1].local",
        ),
        (
            Some(GOOD.replace("198.19.0.1/24", "not-an-address")),
            "tunnel.address",
        ),
        (None, "cannot read"),
        (
            Some(GOOD.replace("private_key_file = \"host.key\"", "")),
            "security.private_key_file",
        ),
        (
            Some(GOOD.replace("\"host.key\"", "\"/nonexistent/mpt.key\"")),
            "security.private_key_file",
        ),
        (
            Some(GOOD.replace("HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=", "c2hvcnQ=")),
            "peer[0].public_key",
        ),
        (
            Some(GOOD.replace("allowed = [\"198.19.0.2/32\"]", "endpoint = \"vps.example.net\"")),
            "peer[0].endpoint",
        ),
        (
            Some(GOOD.replace("198.19.0.2/32", "198.19.0.300/32")),
            "peer[0].allowed[0]",
        ),
        (
            Some(GOOD.replace("[[peer]]", "[[peer]]\npreshared_key_file = \"/nonexistent/psk\"")),
            "peer[0].preshared_key_file",
        ),
        (
            Some(GOOD.replacen("local = \"198.18.1.1:4754\"\nremote = \"198.18.1.2:4754\"", "", 1)),
            "path[0].local",
        ),
        (Some(GOOD.replace("[[peer]]", "[[peerz]]")), "peerz"),
        (
            Some(GOOD.to_owned() + "[control]\nweb = \"0.0.0.0:9190\"\n"),
            "control.web_token: missing, expected a token",
        ),
        (
            Some(GOOD.to_owned() + "[[peer]]\nname = \"c\"\npublic_key = \"HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=\"\n"),
            "peer",
        ),
    ];
    for (text, needle) in cases {
        let (code, err) = check(text.as_deref());
        assert_eq!(code, 2, "not refused as a bad config ({needle}): {err}");
        assert!(
            err.contains(needle),
            "message does not name {needle:?}: {err}"
        );
        assert!(
            err.contains("mpt.toml"),
            "message does not name the file: {err}"
        );
    }
}

#[test]
fn genkey_and_pubkey_make_keys_that_check_accepts_only_when_private() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let bin = mptd_bin().expect("mptd built");
    let dir = std::env::temp_dir().join(format!("mpt-genkey-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // `mptd genkey > host.key` leaves a file only its owner may read
    let key_file = dir.join("host.key");
    let status = Command::new(&bin)
        .arg("genkey")
        .stdout(std::fs::File::create(&key_file).expect("create"))
        .status()
        .expect("mptd genkey");
    assert!(status.success());
    let mode = std::fs::metadata(&key_file)
        .expect("key file")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "genkey's file is mode {mode:o}");
    let key = std::fs::read_to_string(&key_file).expect("read");
    assert_eq!(key.trim().len(), 44, "32 bytes in base64: {key:?}");
    let again = Command::new(&bin)
        .arg("genkey")
        .output()
        .expect("mptd genkey");
    assert_ne!(again.stdout, key.as_bytes(), "two keys alike");
    // `mptd pubkey < host.key` prints the public key the library computes
    let mut child = Command::new(&bin)
        .arg("pubkey")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("mptd pubkey");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(key.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("pubkey");
    assert!(out.status.success());
    let public = mpt_core::seal::PrivateKey::parse(&key)
        .expect("key")
        .public()
        .encode();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), public);
    let psk = Command::new(&bin)
        .arg("genpsk")
        .output()
        .expect("mptd genpsk");
    assert_eq!(String::from_utf8_lossy(&psk.stdout).trim().len(), 44);

    let cfg = dir.join("mpt.toml");
    // this host has none of the lab's addresses: the paths bind whatever address there is
    let here = GOOD
        .replace("encryption = \"none\"", "")
        .replace("local = \"198.18.1.1:4754\"", "local = \"127.0.0.1:4754\"")
        .replace("local = \"198.18.2.1:4754\"", "local = \"127.0.0.1:4755\"");
    std::fs::write(&cfg, here).expect("write config");
    let check = || {
        let out = Command::new(&bin)
            .args(["-c", cfg.to_str().expect("utf-8"), "--check"])
            .output()
            .expect("mptd --check");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (code, msg) = check();
    assert_eq!(code, Some(2), "{msg}");
    assert!(
        msg.contains("mpt.toml")
            && msg.contains("security.private_key_file")
            && msg.contains("0644"),
        "{msg}"
    );
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (code, msg) = check();
    assert_eq!(code, Some(0), "{msg}");
    assert!(
        msg.contains("encryption auto") && msg.contains(&public),
        "{msg}"
    );
    std::fs::write(&key_file, "bm90IGEga2V5").expect("write");
    let (code, msg) = check();
    assert_eq!(code, Some(2), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Datagrams that must all be refused; those with a plausible header carry `session` (the
/// receiver's index: the one that passes the session check reaches the parser).
fn junk(n: usize, seed: &mut u64, session: u32) -> Vec<Vec<u8>> {
    let mut next = || {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    };
    let mut out = Vec::new();
    while out.len() < n {
        let kind = out.len() % 4;
        let mut d: Vec<u8> = (0..(next() % 300) as usize).map(|_| next() as u8).collect();
        match kind {
            // random bytes
            0 => {}
            // truncated header
            1 => d.truncate((next() % HEADER_LEN as u64) as usize),
            // valid data header, payload that is not an IP packet
            2 => {
                let mut h = vec![0u8; HEADER_LEN];
                HeaderRepr {
                    kind: Kind::Data,
                    path: PathId(0),
                    path_seq: 0,
                    session,
                    seq: 5,
                    timestamp: 0,
                }
                .emit(&mut h);
                // version nibble 1: no IP version, and no compressed body's marker (0x20, or
                // 0x80 to 0xbf)
                h.extend(d.iter().map(|b| b & 0x0f | 0x10));
                d = h;
            }
            // headers of versions not spoken: 2 (sealed, or of type 15), 1 and 4
            _ => {
                d.resize(HEADER_LEN + 20, 0);
                d[0] = [0x50, 0x4f, 0x20, 0x80][(next() % 4) as usize];
            }
        }
        if Datagram::parse(&d).is_err() {
            out.push(d);
        }
    }
    out
}

#[test]
fn hostile_datagrams_are_dropped_and_counted_and_the_daemon_keeps_running() {
    need!("hostile_datagrams", "ping");
    let mut lab = Lab::new(&four_paths()).expect("lab");
    // The plain format: its parser and the source check (sealed datagrams: tests/e2e/hostile.rs).
    let opts = TunnelOpts {
        encryption: "none".into(),
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let target = format!("{}:4754", lab.path_addr(Side::B, 0));

    // 1. From a stranger's port: refused by the parser, or as of no session.
    let before = lab.status(Side::B).expect("status").tunnel.drops;
    let mut seed = 0x9E37_79B9_7F4A_7C15;
    let stranger = junk(500, &mut seed, 1);
    let t = target.clone();
    let a0 = lab.path_addr(Side::A, 0);
    lab.in_ns(Side::A, move || {
        let s = UdpSocket::bind(format!("{a0}:5999")).expect("bind");
        for d in &stranger {
            s.send_to(d, &t).expect("send");
        }
    })
    .expect("ns");
    std::thread::sleep(Duration::from_millis(300));
    let after = lab.status(Side::B).expect("status").tunnel.drops;
    let refused = |d: &mptd::status::DropCounts| {
        d.malformed()
            + d.unknown_session
            + d.bad_handshake
            + d.stale_handshake
            + d.unknown_key
            + d.unexpected
    };
    assert_eq!(refused(&after) - refused(&before), 500, "drops: {after:?}");

    // 2. From the peer's own address and port (its daemon stopped), with B's session index:
    // malformed and mismatched.
    assert_eq!(
        lab.stop_mptd(Side::A).expect("stop a"),
        Some(0),
        "SIGTERM must exit 0"
    );
    assert!(
        lab.sh(Side::A, "ip link show mpt0").is_err(),
        "the TUN interface outlived mptd"
    );
    let before = lab.status(Side::B).expect("status");
    let session = u32::from_str_radix(&before.tunnel.session, 16).expect("hex session");
    let bad = junk(2000, &mut seed, session);
    let n_bad = bad.len() as u64;
    let t = target.clone();
    let a0 = lab.path_addr(Side::A, 0);
    lab.in_ns(Side::A, move || {
        let s = UdpSocket::bind(format!("{a0}:4754")).expect("bind as the peer");
        for (i, d) in bad.iter().enumerate() {
            s.send_to(d, &t).expect("send");
            if i % 200 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        // A well-formed keepalive (20 bytes) claiming to be path 3, sent on path 0.
        let mut h = vec![0u8; mpt_core::wire::KEEPALIVE_LEN];
        HeaderRepr {
            kind: Kind::Keepalive,
            path: PathId(3),
            path_seq: 0,
            session,
            seq: 0,
            timestamp: 0,
        }
        .emit(&mut h);
        for _ in 0..50 {
            s.send_to(&h, &t).expect("send");
        }
    })
    .expect("ns");
    std::thread::sleep(Duration::from_millis(300));
    let after = lab.status(Side::B).expect("mptd on b still answers");
    let (d0, d1) = (&before.tunnel.drops, &after.tunnel.drops);
    eprintln!("RESULT hostile: drops after {d1:?}");
    assert_eq!(refused(d1) - refused(d0), n_bad, "refused: {d1:?}");
    assert!(
        d1.not_ip > d0.not_ip && d1.truncated > d0.truncated && d1.bad_version > d0.bad_version
    );
    assert_eq!(
        d1.path_mismatch - d0.path_mismatch,
        50,
        "path-mismatch drops"
    );
    assert_eq!(
        after.tunnel.delivered, before.tunnel.delivered,
        "junk reached the TUN device"
    );

    // 3. The peer comes back with a new session: the tunnel works again.
    lab.start_mptd(Side::A, &opts).expect("restart a");
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel after restart");
    let st = lab.status(Side::B).expect("status");
    assert!(st.tunnel.peer_restarts >= 1, "peer restart not noticed");
    let ping = lab
        .cmd(Side::A, "ping")
        .args(["-c", "3", "-i", "0.2", &tunnel_addr(Side::B)])
        .output()
        .expect("ping");
    assert!(ping.status.success());
}
