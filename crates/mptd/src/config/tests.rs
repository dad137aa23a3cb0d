//! Config parsing and validation: what a file gives, what it is refused for, and the message.

use super::*;
use mpt_core::seal::Cipher;

#[test]
fn routes_go_to_the_table_and_with_the_protocol_named() {
    let c = parse(GOOD).expect("good");
    assert_eq!((c.tunnel.route_table, c.tunnel.route_protocol), (254, 3));
    let with = |keys: &str| GOOD.replace("mtu = 1400", &format!("mtu = 1400\n{keys}"));
    let c = parse(&with("route_table = 100\nroute_protocol = 200")).expect("good");
    let net = "192.168.10.0/24".parse().expect("prefix");
    assert_eq!(
        crate::net::route_args("replace", &c.tunnel, net).join(" "),
        "route replace 192.168.10.0/24 dev tun0 table 100 proto 200"
    );
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
fn a_value_of_the_wrong_type_is_named_by_its_key() {
    let text = "[connection]\ndead_ms = 500\nkeepalive_ms = \"often\"\n\n[[path]]\nname = \"a\"\n\n[[path]]\nname = \"b\"\nweight = \"x\"\n";
    let at = |needle: &str| key_at(text, text.find(needle).unwrap());
    assert_eq!(at("\"often").as_deref(), Some("connection.keepalive_ms"));
    assert_eq!(at("\"x\"").as_deref(), Some("path[1].weight"));
    assert_eq!(at("[connection]"), None);
    let e = Config::parse(text, Path::new("f.toml")).unwrap_err();
    assert_eq!(e.key(), Some("connection.keepalive_ms"), "{e}");
    assert!(e.to_string().starts_with("f.toml:3:"), "{e}");
}

const GOOD: &str = r#"
[tunnel]
name = "tun0"
address = "198.19.0.1/24"
mtu = 1400

[connection]
scheduler = "rate"
reorder_window = 512
reorder_timeout_ms = 100
keepalive_ms = 100
dead_ms = 500

[security]
private_key_file = "keys/host.key"

[[peer]]
name = "b"
public_key = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
allowed = ["198.19.0.2/32", "192.168.10.0/24"]

[[path]]
name = "p1"
interface = "eth1"
local = "198.18.1.1:4754"
remote = "198.18.1.2:4754"
weight = 2
rate = "20mbit"

[[path]]
name = "p2"
local = "198.18.2.1:4754"
remote = "198.18.2.2:4754"
rate = 10000000
backup = true
"#;

const PEER: &str =
    "[[peer]]\nname='b'\npublic_key='HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw='\n";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("test.toml"))
}

fn invalid_key(text: &str) -> String {
    match parse(text) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected a validation error, got {other:?}"),
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
fn a_config_file_written_by_serialising_parses_back() {
    let file = ConfigFile {
        tunnel: Some(TunnelFile {
            name: Some("mpt0".into()),
            addresses: Some(vec!["198.19.0.1/24".into(), "2001:db8:19::1/64".into()]),
            mtu: Some(1400),
            ..TunnelFile::default()
        }),
        connection: ConnectionFile {
            scheduler: Some("wrr".into()),
            keepalive_ms: Some(50),
            ..ConnectionFile::default()
        },
        security: SecurityFile {
            encryption: Some("none".into()),
            private_key_file: Some("k".into()),
            ..SecurityFile::default()
        },
        peer: vec![PeerFile {
            name: Some("b".into()),
            public_key: Some(PrivateKey::from_bytes([1; 32]).public().encode()),
            endpoint: Some("vps.example.net:4754".into()),
            ..PeerFile::default()
        }],
        path: vec![PathFile {
            name: Some("p0".into()),
            local: Some("198.18.1.1:4754".into()),
            remote: Some("198.18.1.2:4754".into()),
            weight: Some(2),
            rate: Some(RateFile::Bits(20_000_000)),
            ..PathFile::default()
        }],
        ..ConfigFile::default()
    };
    let text = toml::to_string(&file).expect("serialises");
    let c = parse(&text).expect("the serialised file is valid");
    assert_eq!(c.tunnel.mtu, 1400);
    assert_eq!(c.tunnel.addresses.len(), 2);
    assert_eq!(c.connection.scheduler, SchedulerKind::WeightedRoundRobin);
    assert_eq!(c.connection.keepalive, Duration::from_millis(50));
    assert_eq!(c.security.cipher, None);
    assert_eq!(
        (c.paths[0].weight, c.paths[0].rate_bps),
        (2, Some(20_000_000))
    );
}

#[test]
fn parses_the_documented_example() {
    let c = parse(GOOD).expect("valid");
    assert_eq!(c.tunnel.name, "tun0");
    assert_eq!(
        c.tunnel.addresses,
        vec!["198.19.0.1/24".parse::<IpNet>().unwrap()]
    );
    assert_eq!(c.connection.scheduler, SchedulerKind::Rate);
    assert_eq!(c.connection.dead, Duration::from_millis(500));
    assert_eq!(c.paths.len(), 2);
    assert_eq!(c.paths[0].id, PathId(0));
    assert_eq!(c.paths[0].interface.as_deref(), Some("eth1"));
    assert_eq!(c.paths[0].weight, 2);
    assert_eq!(c.paths[0].rate_bps, Some(20_000_000));
    assert_eq!(c.paths[1].weight, 1);
    assert!(c.paths[1].backup);
    assert_eq!(c.control.socket, PathBuf::from("/run/mptd/tun0.sock"));
    assert_eq!(c.security.cipher, Some(CipherChoice::Auto));
    // relative to the config file's directory
    assert_eq!(c.security.private_key_file, PathBuf::from("keys/host.key"));
    let c = Config::parse(GOOD, Path::new("/etc/mptd/a.toml")).expect("valid");
    assert_eq!(
        c.security.private_key_file,
        PathBuf::from("/etc/mptd/keys/host.key")
    );
    let p = &c.peers[0];
    assert_eq!((p.name.as_str(), p.endpoint.as_ref()), ("b", None));
    assert_eq!(p.allowed.len(), 2);
    assert_eq!(
        c.paths[0].remote,
        Some("198.18.1.2:4754".parse().expect("addr"))
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
        // whatever address the interface has; the remote is the peer's endpoint
        assert_eq!(p.local, "0.0.0.0:0".parse().expect("addr"));
        assert_eq!(p.remote, None);
    }
    let v6 = site.replace("vps.example.net:4754", "[2001:db8::1]:4754");
    assert_eq!(
        parse(&v6).expect("valid").paths[0].local,
        "[::]:0".parse().expect("addr")
    );
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

#[test]
fn shipped_example_configs_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("config/ exists") {
        let p = entry.expect("dir entry").path();
        if p.extension().is_some_and(|e| e == "toml") {
            Config::load(&p).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 2, "expected the example pair in config/");
}

#[test]
fn defaults_apply() {
    let c = parse(
        &format!("[tunnel]\nname='t'\naddresses=['198.19.0.1/24','2001:db8::1/64']\n[security]\nprivate_key_file='k'\n{PEER}[[path]]\nname='a'\nlocal='198.18.1.1:1'\nremote='198.18.1.2:1'\n"),
    )
    .expect("valid: adaptive needs no rate");
    assert_eq!(c.tunnel.mtu, defaults::MTU);
    assert_eq!(c.tunnel.queues, defaults::QUEUES);
    assert_eq!(c.tunnel.addresses.len(), 2);
    assert_eq!(c.connection.reorder_window, defaults::REORDER_WINDOW);
    assert_eq!(c.connection.scheduler, SchedulerKind::Adaptive);
    assert_eq!(c.paths[0].rate_bps, None);
    // With every rate given and no scheduler named: rate.
    let text = GOOD.replace("scheduler = \"rate\"\n", "");
    assert_eq!(
        parse(&text).expect("valid").connection.scheduler,
        SchedulerKind::Rate
    );
}

#[test]
fn classes_come_first_then_the_built_in_ones_and_bad_ones_are_refused() {
    let voice = "\n[[class]]\nname = \"voice\"\nmode = \"duplicate\"\nprotocol = \"udp\"\nport = \"5000-5100\"\nmax_size = 300\n\n[[class]]\nname = \"marked\"\nmode = \"fastest\"\ndscp = [34, 46]\n";
    let c = parse(&format!("{GOOD}{voice}")).expect("valid");
    let names: Vec<&str> = c
        .connection
        .classes
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["voice", "marked", "ef", "dns", "tcp-handshake", "tcp-ack"]
    );
    let v = &c.connection.classes[0];
    assert_eq!(
        (v.mode, v.protocol, v.ports, v.max_size),
        (
            mpt_tunnel::Mode::Duplicate,
            Some(17),
            Some((5000, 5100)),
            Some(300)
        )
    );
    assert_eq!(c.connection.classes[1].dscp, [34, 46]);
    // no built-in classes when asked
    let off = GOOD.replace("dead_ms = 500", "dead_ms = 500\ndefault_classes = false");
    assert!(parse(&off).expect("valid").connection.classes.is_empty());
    let with = |class: &str| format!("{GOOD}\n[[class]]\nname = \"c\"\n{class}\n");
    for (class, key) in [
        ("mode = \"fast\"", "class[0].mode"),
        ("dscp = [64]", "class[0].dscp"),
        ("dscp = []", "class[0].dscp"),
        ("protocol = \"sctp\"", "class[0].protocol"),
        ("protocol = 300", "class[0].protocol"),
        ("port = 0", "class[0].port"),
        ("port = \"6000-5000\"", "class[0].port"),
        ("port = \"http\"", "class[0].port"),
        ("protocol = \"icmp\"\nport = 53", "class[0].port"),
        ("protocol = \"udp\"\ntcp_syn = true", "class[0].tcp_syn"),
        ("protocol = \"udp\"\ntcp_ack = true", "class[0].tcp_ack"),
        ("tcp_syn = true\ntcp_ack = true", "class[0].tcp_ack"),
        ("max_size = 10", "class[0].max_size"),
    ] {
        assert_eq!(invalid_key(&with(class)), key, "{class}");
    }
    let twice = format!("{GOOD}\n[[class]]\nname = \"c\"\n[[class]]\nname = \"c\"\n");
    assert_eq!(invalid_key(&twice), "class[1].name");
}

#[test]
fn tiers_and_idle_keepalives_parse_with_their_defaults() {
    let c = parse(GOOD).expect("valid");
    assert!(c.paths.iter().all(|p| p.priority == 1));
    assert_eq!(c.connection.idle_keepalive, Some(Duration::from_secs(10)));
    let text = GOOD
        .replace("weight = 2", "weight = 2\npriority = 3")
        .replace(
            "keepalive_ms = 100",
            "keepalive_ms = 100\nidle_keepalive_ms = 0",
        );
    let c = parse(&text).expect("valid");
    assert_eq!(c.paths[0].priority, 3);
    assert_eq!(c.connection.idle_keepalive, None, "0: never idle");
}

#[test]
fn unknown_key_is_refused_with_its_name_and_line() {
    let text = GOOD.replace("mtu = 1400", "mtu = 1400\ncolour = \"blue\"");
    let e = parse(&text).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("test.toml:6:"), "{msg}");
    assert!(msg.contains("colour"), "{msg}");
}

#[test]
fn invalid_values_name_their_key() {
    let cases = [
        ("198.19.0.1/24", "198.19.0.1", "tunnel.address"),
        ("198.19.0.1/24", "300.1.1.1/24", "tunnel.address"),
        ("mtu = 1400", "mtu = 100", "tunnel.mtu"),
        ("mtu = 1400", "mtu = 1400\nqueues = 0", "tunnel.queues"),
        ("\"rate\"\n", "\"fastest\"\n", "connection.scheduler"),
        (
            "reorder_window = 512",
            "reorder_window = -1",
            "connection.reorder_window",
        ),
        ("dead_ms = 500", "dead_ms = 150", "connection.dead_ms"),
        (
            "keepalive_ms = 100",
            "keepalive_ms = 0",
            "connection.keepalive_ms",
        ),
        ("name = \"p2\"", "name = \"p1\"", "path[1].name"),
        ("198.18.2.1:4754", "198.18.1.1:4754", "path[1].local"),
        (
            "local = \"198.18.1.1:4754\"",
            "local = \"198.18.1.1\"",
            "path[0].local",
        ),
        (
            "remote = \"198.18.1.2:4754\"",
            "remote = \"[2001:db8::2]:4754\"",
            "path[0].remote",
        ),
        (
            "remote = \"198.18.1.2:4754\"",
            "remote = \"198.18.1.2:0\"",
            "path[0].remote",
        ),
        ("weight = 2", "weight = 0", "path[0].weight"),
        ("weight = 2", "weight = 2\npriority = 0", "path[0].priority"),
        (
            "weight = 2",
            "weight = 2\npriority = 255",
            "path[0].priority",
        ),
        (
            "weight = 2",
            "weight = 2\npriority = 2\nbackup = true",
            "path[0].priority",
        ),
        (
            "keepalive_ms = 100",
            "keepalive_ms = 100\nidle_keepalive_ms = 50",
            "connection.idle_keepalive_ms",
        ),
        (
            "keepalive_ms = 100",
            "keepalive_ms = 100\nidle_keepalive_ms = -1",
            "connection.idle_keepalive_ms",
        ),
        (
            "rate = \"20mbit\"",
            "rate = \"20 furlongs\"",
            "path[0].rate",
        ),
        ("rate = \"20mbit\"", "rate = 0", "path[0].rate"),
        ("rate = \"20mbit\"", "", "path[0].rate"),
        (
            "interface = \"eth1\"",
            "interface = \"a/b\"",
            "path[0].interface",
        ),
        (
            "name = \"tun0\"",
            "name = \"a-very-long-interface-name\"",
            "tunnel.name",
        ),
        (
            "backup = true",
            "backup = true\n[control]\nsocket = \"\"",
            "control.socket",
        ),
    ];
    for (from, to, key) in cases {
        assert!(GOOD.contains(from), "{from}");
        let text = GOOD.replacen(from, to, 1);
        assert_eq!(invalid_key(&text), key, "replacing {from:?} with {to:?}");
    }
}

#[test]
fn structural_errors() {
    assert_eq!(invalid_key("[[path]]\nname='a'\n"), "tunnel");
    assert_eq!(
        invalid_key("[tunnel]\nname='t'\naddress='198.19.0.1/24'\n"),
        "peer"
    );
    assert_eq!(
        invalid_key(&format!(
            "[tunnel]\nname='t'\naddress='198.19.0.1/24'\n{PEER}"
        )),
        "path"
    );
    let all_backup = GOOD.replace("weight = 2", "weight = 2\nbackup = true");
    assert_eq!(invalid_key(&all_backup), "path");
    let mut many = format!(
        "[tunnel]\nname='t'\naddress='198.19.0.1/24'\n[connection]\nscheduler='rr'\n{PEER}",
    );
    for i in 0..65 {
        many += &format!(
            "[[path]]\nname='p{i}'\nlocal='198.18.1.1:{}'\nremote='198.18.1.2:1'\n",
            i + 1
        );
    }
    assert_eq!(invalid_key(&many), "path");
    // A wrong type is a syntax-level error that still names the key.
    let e = parse(&GOOD.replace("backup = true", "backup = \"yes\"")).unwrap_err();
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e}");
    let e = Config::load(Path::new("/nonexistent/mpt.toml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/mpt.toml: cannot read"),
        "{e}"
    );
}

#[test]
fn rates() {
    assert_eq!(parse_rate("20mbit"), Some(20_000_000));
    assert_eq!(parse_rate("128kbit"), Some(128_000));
    assert_eq!(parse_rate("1.5Gbit"), Some(1_500_000_000));
    assert_eq!(parse_rate("64000"), Some(64_000));
    assert_eq!(parse_rate("mbit"), None);
    assert_eq!(parse_rate("-5mbit"), None);
    assert_eq!(parse_rate("1e99mbit"), None);
}

#[test]
fn scheduler_names_are_case_insensitive() {
    assert_eq!(
        "WRR".parse::<SchedulerKind>(),
        Ok(SchedulerKind::WeightedRoundRobin)
    );
    assert_eq!("Rate".parse::<SchedulerKind>(), Ok(SchedulerKind::Rate));
    assert!("bogus".parse::<SchedulerKind>().is_err());
}
