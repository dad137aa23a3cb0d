//! Peers, their keys and their routes.

use super::*;
use mpt_core::seal::{PrivateKey, Psk};

#[test]
fn routes_go_to_the_table_and_with_the_protocol_named() {
    let c = parse(GOOD).expect("good");
    assert_eq!((c.tunnel.route_table, c.tunnel.route_protocol), (254, 3));
    let with = |keys: &str| GOOD.replace("mtu = 1400", &format!("mtu = 1400\n{keys}"));
    let c = parse(&with("route_table = 100\nroute_protocol = 200")).expect("good");
    // the `ip route` arguments these give: `net::tests`
    assert_eq!((c.tunnel.route_table, c.tunnel.route_protocol), (100, 200));
    for bad in [
        "route_table = 0",
        "route_table = 255",
        "route_table = 4754",
        "route_protocol = 2",
        "route_protocol = 256",
    ] {
        let key = bad.split(' ').next().unwrap_or_default();
        assert_eq!(invalid_key(&with(bad)), format!("tunnel.{key}"), "{bad}");
    }
}

#[test]
fn peers_share_a_prefix_only_with_priorities_of_their_own() {
    let servers = |a: &str, b: &str| {
        GOOD.replace(
            "[[path]]\nname = \"p1\"",
            &format!(
                "[[peer]]\nname = \"s1\"\npublic_key = \"{}\"\nallowed = [\"0.0.0.0/0\"]\n{a}\n\n\
                 [[peer]]\nname = \"s2\"\npublic_key = \"{}\"\nallowed = [\"0.0.0.0/0\"]\n{b}\n\n\
                 [[path]]\nname = \"p1\"",
                PublicKey::from_bytes([1; 32]).encode(),
                PublicKey::from_bytes([2; 32]).encode()
            ),
        )
    };
    let c = parse(&servers(
        "priority = 1",
        "priority = 2\nendpoint = \"198.18.9.9:4754\"",
    ))
    .expect("good");
    assert_eq!(c.peers[1].priority, Some(1));
    assert_eq!(c.peers[2].priority, Some(2));
    assert_eq!(c.tunnel.failback, Duration::from_secs(10));
    assert_eq!(
        invalid_key(&servers("", "priority = 2")),
        "peer[2].allowed[0]"
    );
    assert_eq!(
        invalid_key(&servers("priority = 1", "")),
        "peer[2].allowed[0]"
    );
    assert_eq!(
        invalid_key(&servers("priority = 1", "priority = 1")),
        "peer[2].allowed[0]"
    );
    assert_eq!(
        invalid_key(&servers("priority = 0", "priority = 2")),
        "peer[1].priority"
    );
    let hold = servers("priority = 1", "priority = 2")
        .replace("mtu = 1400", "mtu = 1400\nfailback_ms = 2500");
    assert_eq!(
        parse(&hold).expect("good").tunnel.failback,
        Duration::from_millis(2500)
    );
}

#[test]
fn a_site_names_its_server_by_host_name_and_its_paths_by_interface() {
    let site = r#"
[tunnel]
name = "mpt0"
address = "10.99.0.2/24"
[security]
private_key_file = "home.key"
[[peer]]
name = "vps"
public_key = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
endpoint = "vps.example.net:4754"
allowed = ["10.99.0.0/24"]
[[path]]
name = "dsl"
interface = "eth1"
[[path]]
name = "lte"
interface = "wwan0"
"#;
    let c = parse(site).expect("valid");
    let e = c.peers[0].endpoint.as_ref().expect("endpoint");
    assert_eq!((e.host.as_str(), e.port), ("vps.example.net", 4754));
    for p in &c.paths {
        // whatever address the interface has, of either family (a dual-stack socket); the
        // remote is the peer's endpoint
        assert_eq!(p.local, "[::]:0".parse().expect("addr"));
        assert!(p.dual);
        assert_eq!(p.remote, None);
    }
    // an address: a socket of its family, as before
    let v6 = site.replace("vps.example.net:4754", "[2001:db8::1]:4754");
    let v6 = &parse(&v6).expect("valid").paths[0];
    assert_eq!(v6.local, "[::]:0".parse().expect("addr"));
    assert!(!v6.dual);
    let v4 = site.replace("vps.example.net:4754", "198.18.100.1:4754");
    let v4 = &parse(&v4).expect("valid").paths[0];
    assert_eq!(v4.local, "0.0.0.0:0".parse().expect("addr"));
    assert!(!v4.dual);
    for bad in [
        "vps.example.net",
        "vps:0",
        ":4754",
        "[2001:db8::1]",
        "a b:1",
        "2001:db8::1:4754",
    ] {
        let text = site.replace("vps.example.net:4754", bad);
        assert_eq!(invalid_key(&text), "peer[0].endpoint", "{bad}");
    }
}

#[test]
fn security_needs_a_private_key_and_names_the_cipher() {
    let no_key = GOOD.replace("private_key_file = \"keys/host.key\"\n", "");
    assert_eq!(invalid_key(&no_key), "security.private_key_file");
    let e = parse(&no_key).unwrap_err().to_string();
    assert!(
        e.contains("mptd genkey") && e.contains("mptd pubkey"),
        "{e}"
    );
    let none = GOOD.replace("[security]\n", "[security]\nencryption = \"none\"\n");
    assert_eq!(parse(&none).expect("valid").security.cipher, None);
    let aes = GOOD.replace("[security]\n", "[security]\nencryption = \"AES-256-GCM\"\n");
    assert_eq!(
        parse(&aes).expect("valid").security.cipher,
        Some(CipherChoice::Only(Cipher::Aes256Gcm))
    );
    let bad = GOOD.replace("[security]\n", "[security]\nencryption = \"rot13\"\n");
    assert_eq!(invalid_key(&bad), "security.encryption");
    let empty = GOOD.replace("keys/host.key", " ");
    assert_eq!(invalid_key(&empty), "security.private_key_file");
}

#[test]
fn key_files_permissions_and_contents_are_checked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("mpt-key-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("keys")).expect("dir");
    let cfg_file = dir.join("a.toml");
    let key_file = dir.join("keys/host.key");
    let text = GOOD.replace(
        "[[peer]]\n",
        "[[peer]]\npreshared_key_file = \"keys/psk\"\n",
    );
    let c = Config::parse(&text, &cfg_file).expect("valid");
    let load = || c.load_keys(&cfg_file).map_err(|e| e.to_string());
    assert!(load().unwrap_err().contains("cannot read"));
    let key = PrivateKey::from_bytes([3; 32]);
    std::fs::write(&key_file, key.encode() + "\n").expect("write");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let e = load().unwrap_err();
    assert!(
        e.contains("a.toml") && e.contains("security.private_key_file") && e.contains("0644"),
        "{e}"
    );
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let e = load().unwrap_err();
    assert!(e.contains("peer[0].preshared_key_file"), "{e}");
    let psk_file = dir.join("keys/psk");
    std::fs::write(&psk_file, Psk::from_bytes([4; 32]).encode()).expect("write");
    std::fs::set_permissions(&psk_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let keys = load().expect("keys load");
    assert_eq!(keys.private, key);
    assert_eq!(keys.psks, vec![Some(Psk::from_bytes([4; 32]))]);
    std::fs::write(&key_file, "c2hvcnQ=").expect("write");
    assert!(load().unwrap_err().contains("expected 32"));
    let _ = std::fs::remove_dir_all(&dir);
}
