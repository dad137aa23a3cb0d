//! Refused configs: each error names its key, line or file, and what was expected.

use super::*;

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
        ("\"rate\"\n", "\"wrr\"\npace = true\n", "connection.pace"),
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
