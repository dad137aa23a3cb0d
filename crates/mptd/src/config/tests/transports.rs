//! A path's transport and a listen socket's `tcp`: their defaults, and what is refused.

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
fn a_transport_other_than_auto_udp_or_tcp_is_refused_naming_its_key() {
    for keys in ["transport = \"quic\"", "transport = \"\""] {
        assert_eq!(invalid_key(&with(keys)), "path[0].transport", "{keys}");
    }
}
