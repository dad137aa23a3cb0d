//! A path's transport and a listen socket's `tcp` and `tls`: their defaults, and what is
//! refused.

use super::*;
use crate::config::PathTransport;

fn with(keys: &str) -> String {
    let text = GOOD.replacen("weight = 2", &format!("weight = 2\n{keys}"), 1);
    assert_ne!(text, GOOD);
    text
}

#[test]
fn a_path_is_auto_unless_it_says_udp_or_tcp_and_a_host_that_starts_the_handshakes_dials() {
    let c = parse(GOOD).expect("valid");
    let dial = c.peers.iter().any(|p| p.endpoint.is_some());
    assert!(c
        .paths
        .iter()
        .all(|p| p.transport == PathTransport::Auto { dial }));
    assert!(c.listen_tcp.is_empty());
    let c = parse(&with("transport = \"tcp\"")).expect("valid");
    assert_eq!(c.paths[0].transport, PathTransport::Tcp { dial });
    let c = parse(&with("transport = \"udp\"")).expect("valid");
    assert_eq!(c.paths[0].transport, PathTransport::Udp);
    let c = parse(&with("transport = \"auto\"")).expect("valid");
    assert_eq!(c.paths[0].transport, PathTransport::Auto { dial });
}

#[test]
fn a_transport_other_than_auto_udp_tcp_or_tls_is_refused_naming_its_key() {
    for keys in ["transport = \"quic\"", "transport = \"\""] {
        assert_eq!(invalid_key(&with(keys)), "path[0].transport", "{keys}");
    }
}

#[test]
fn a_tls_path_names_a_host_name_endpoint_in_its_hello_and_not_an_address() {
    let c = parse(&with("transport = \"tls\"")).expect("valid");
    let taken = PathTransport::Tls {
        dial: false,
        server_name: None,
    };
    assert_eq!(c.paths[0].transport, taken, "no endpoint: taken at local");
    for (endpoint, server_name) in [
        ("vpn.example.net:443", Some("vpn.example.net".to_owned())),
        ("198.18.1.2:443", None),
    ] {
        let text = with("transport = \"tls\"").replacen(
            "allowed =",
            &format!("endpoint = \"{endpoint}\"\nallowed ="),
            1,
        );
        let c = parse(&text).expect("valid");
        let dialled = PathTransport::Tls {
            dial: true,
            server_name,
        };
        assert_eq!(c.paths[0].transport, dialled, "{endpoint}");
    }
}

#[test]
fn a_listen_entry_takes_tcp_with_tcp_or_tls_and_refuses_tls_without_tcp() {
    let listen = |keys: &str| {
        GOOD.to_owned() + &format!("\n[[listen]]\naddress = \"0.0.0.0:443\"\n{keys}\n")
    };
    for keys in ["tcp = true", "tls = true", "tcp = true\ntls = true"] {
        let c = parse(&listen(keys)).expect(keys);
        assert_eq!(
            c.listen_tcp,
            vec!["0.0.0.0:443".parse().expect("addr")],
            "{keys}"
        );
    }
    let c = parse(&listen("tls = false")).expect("valid");
    assert!(c.listen_tcp.is_empty());
    assert_eq!(
        invalid_key(&listen("tcp = false\ntls = true")),
        "listen[0].tcp"
    );
}
