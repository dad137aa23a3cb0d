//! `[control]`: the status page's address and token.

use super::*;

fn with_control(keys: &str) -> String {
    format!("{GOOD}\n[control]\n{keys}\n")
}

#[test]
fn the_status_page_is_off_unless_configured_and_takes_its_token() {
    let c = parse(GOOD).expect("valid");
    assert_eq!((c.control.web, c.control.web_token), (None, None));
    let c = parse(&with_control("web = \"127.0.0.1:9190\"")).expect("loopback, no token");
    assert_eq!(c.control.web, Some("127.0.0.1:9190".parse().expect("addr")));
    assert_eq!(c.control.web_token, None);
    let c = parse(&with_control(
        "web = \"[::]:9190\"\nweb_token = \"0123456789abcdef0123\"",
    ))
    .expect("any address, with a token");
    assert_eq!(c.control.web_token.as_deref(), Some("0123456789abcdef0123"));
}

#[test]
fn a_status_page_off_loopback_without_a_token_is_refused() {
    for addr in ["0.0.0.0:9190", "198.18.1.1:9190", "[::]:9190"] {
        let text = with_control(&format!("web = \"{addr}\""));
        let e = parse(&text).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.key(), Some("control.web_token"), "{msg}");
        assert!(
            msg.starts_with("test.toml: control.web_token: missing"),
            "{msg}"
        );
        assert!(msg.contains("expected a token"), "{msg}");
        assert!(msg.contains("not a loopback address"), "{msg}");
    }
}

#[test]
fn bad_status_page_keys_are_refused_by_name() {
    for (keys, key) in [
        ("web = \"localhost\"", "control.web"),
        ("web = \"127.0.0.1\"", "control.web"),
        ("web_token = \"0123456789abcdef0123\"", "control.web_token"),
        (
            "web = \"127.0.0.1:9190\"\nweb_token = \"short\"",
            "control.web_token",
        ),
        (
            "web = \"127.0.0.1:9190\"\nweb_token = \"with a space in it, long\"",
            "control.web_token",
        ),
        ("metrics = \"9754\"", "control.metrics"),
    ] {
        assert_eq!(invalid_key(&with_control(keys)), key, "{keys}");
    }
}
