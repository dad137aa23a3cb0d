//! Config parsing and validation: what a file gives, what it is refused for, and the message.

mod budgets;
mod control;
mod errors;
mod peers;
mod transports;

use super::*;
use mpt_core::seal::{Cipher, PrivateKey};
use mpt_core::PathId;

pub(super) const GOOD: &str = r#"
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

pub(super) const PEER: &str =
    "[[peer]]\nname='b'\npublic_key='HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw='\n";

pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("test.toml"))
}

pub(super) fn invalid_key(text: &str) -> String {
    match parse(text) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected a validation error, got {other:?}"),
    }
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
    assert!(c.connection.pace, "learned rates are paced");
    // With every rate given and no scheduler named: rate, paced at those rates.
    let text = GOOD.replace("scheduler = \"rate\"\n", "");
    let c = parse(&text).expect("valid");
    assert_eq!(c.connection.scheduler, SchedulerKind::Rate);
    assert!(c.connection.pace);
    let c = parse(&text.replace("[connection]\n", "[connection]\npace = false\n")).expect("valid");
    assert!(!c.connection.pace, "pace = false is kept");
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
