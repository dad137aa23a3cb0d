//! The status page: its history, its requests and its token.

use super::history::{History, SAMPLES};
use super::request::{percent_decode, percent_encode};
use super::*;
use crate::status::{PathStatus, PeerStatus, Status};

/// A status with one peer `b` and a path per `(name, tx_bytes)`.
fn status(paths: &[(&str, u64)]) -> Status {
    let paths = paths
        .iter()
        .map(|&(name, tx)| PathStatus {
            name: name.into(),
            state: "up".into(),
            tx_bytes: tx,
            rx_bytes: tx / 2,
            rtt_us: Some(1500),
            ..PathStatus::default()
        })
        .collect();
    Status {
        peers: vec![PeerStatus {
            name: "b".into(),
            paths,
            ..PeerStatus::default()
        }],
        ..Status::default()
    }
}

#[test]
fn the_history_keeps_rates_per_path_and_stays_bounded() {
    let mut h = History::default();
    h.sample(&status(&[("p0", 0)]), 100.0);
    h.sample(&status(&[("p0", 1_000_000)]), 101.0);
    // p1 appears: unknown before it was there, and for its first sample
    h.sample(&status(&[("p0", 1_500_000), ("p1", 7)]), 102.0);
    let peer = &h.peers[0];
    assert_eq!(peer.t, [100.0, 101.0, 102.0]);
    let p0 = &peer.paths[0];
    assert_eq!(p0.tx_bps, [None, Some(8_000_000), Some(4_000_000)]);
    assert_eq!(p0.rx_bps, [None, Some(4_000_000), Some(2_000_000)]);
    assert_eq!(p0.rtt_ms, [Some(1.5); 3]);
    assert_eq!(peer.paths[1].tx_bps, [None, None, None]);
    assert_eq!(peer.paths[1].rtt_ms, [None, None, Some(1.5)]);
    // 1000 more seconds: 600 samples, the last ones
    for s in 3..1003u64 {
        h.sample(
            &status(&[("p0", s * 1000), ("p1", s * 2000)]),
            100.0 + s as f64,
        );
    }
    let peer = &h.peers[0];
    assert_eq!(peer.t.len(), SAMPLES);
    assert_eq!(peer.t.back(), Some(&1102.0));
    for p in &peer.paths {
        assert_eq!(p.tx_bps.len(), SAMPLES);
        assert_eq!(p.rtt_ms.len(), SAMPLES);
    }
    assert_eq!(peer.paths[1].tx_bps.back(), Some(&Some(16_000)));
    // a path that vanishes is dropped, and so is a peer
    h.sample(&status(&[("p1", 3_000_000)]), 1103.0);
    let names: Vec<_> = h.peers[0].paths.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["p1"]);
    h.sample(&Status::default(), 1104.0);
    assert!(h.peers.is_empty());
}

#[test]
fn a_request_s_token_comes_from_the_query_or_the_bearer_header() {
    let r = Request::parse("GET /api/status?x=1&token=a%2Bb%20c HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.method, r.path), ("GET", "/api/status"));
    assert_eq!(r.token.as_deref(), Some("a+b c"));
    let r = Request::parse("GET / HTTP/1.1\r\nauthorization: Bearer s3cret\r\n\r\n");
    assert_eq!((r.path, r.token.as_deref()), ("/", Some("s3cret")));
    let r = Request::parse("GET / HTTP/1.1\r\nAuthorization: Basic eDp5\r\n\r\n");
    assert_eq!(r.token, None);
    assert_eq!(Request::parse("").method, "");
    assert_eq!(percent_decode("%zz"), None);
    assert_eq!(percent_decode("%4"), None);
    let odd = "a b&c=\"<'>%é";
    assert_eq!(percent_decode(&percent_encode(odd)).as_deref(), Some(odd));
    assert!(percent_encode(odd)
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'%'));
}

#[test]
fn tokens_compare_whole() {
    assert!(same("0123456789abcdef", "0123456789abcdef"));
    assert!(!same("0123456789abcdef", "0123456789abcdeF"));
    assert!(!same("0123456789abcdef", "0123456789abcde"));
    assert!(!same("", "0123456789abcdef"));
}

/// A daemon that says `status(&[("p0", 1000)])`.
struct Fake;

impl Source for Fake {
    fn status(&self) -> Status {
        status(&[("p0", 1000)])
    }
    fn reseq_histograms(&self) -> Vec<crate::metrics::ReseqHistograms> {
        Vec::new()
    }
}

fn web(token: Option<&str>) -> Web {
    Web {
        token: token.map(str::to_owned),
        sampled: Mutex::new(Sampled::default()),
    }
}

fn ask(web: &Web, head: &str) -> Reply {
    web.reply(&Request::parse(head), &Fake)
}

#[test]
fn every_route_needs_the_token_when_there_is_one() {
    let w = web(Some("0123456789abcdef"));
    for path in [
        "/",
        "/api/status",
        "/api/history",
        "/uplot.js",
        "/mptd.css",
        "/nope",
    ] {
        let r = ask(&w, &format!("GET {path} HTTP/1.1\r\n\r\n"));
        assert_eq!(r.status, "401 Unauthorized", "{path}");
        let r = ask(
            &w,
            &format!("GET {path}?token=0123456789abcdeX HTTP/1.1\r\n\r\n"),
        );
        assert_eq!(r.status, "401 Unauthorized", "{path}");
    }
    let r = ask(&w, "GET /?token=0123456789abcdef HTTP/1.1\r\n\r\n");
    assert_eq!(r.status, "200 OK");
    let page = String::from_utf8_lossy(&r.body).into_owned();
    assert!(page.contains("/uplot.js?token=0123456789abcdef"), "{page}");
    let r = ask(
        &w,
        "GET /api/status HTTP/1.1\r\nAuthorization: Bearer 0123456789abcdef\r\n\r\n",
    );
    assert_eq!((r.status, r.kind), ("200 OK", "application/json"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
    assert_eq!(v["peers"][0]["paths"][0]["name"], "p0");
    assert_eq!(v["peers"][0]["paths"][0]["rtt_ms"], 1.5);
}

#[test]
fn without_a_token_the_routes_answer_and_only_get_is_served() {
    let w = web(None);
    for (path, kind) in [
        ("/", "text/html; charset=utf-8"),
        ("/uplot.js", "text/javascript; charset=utf-8"),
        ("/uplot.css", "text/css; charset=utf-8"),
        ("/mptd.js", "text/javascript; charset=utf-8"),
        ("/api/history", "application/json"),
    ] {
        let r = ask(&w, &format!("GET {path} HTTP/1.1\r\n\r\n"));
        assert_eq!((r.status, r.kind), ("200 OK", kind), "{path}");
        assert!(!r.body.is_empty(), "{path}");
    }
    let page = ask(&w, "GET / HTTP/1.1\r\n\r\n");
    assert!(!String::from_utf8_lossy(&page.body).contains("{{"));
    assert_eq!(ask(&w, "GET /x HTTP/1.1\r\n\r\n").status, "404 Not Found");
    let r = ask(&w, "POST /api/status HTTP/1.1\r\n\r\n");
    assert_eq!(r.status, "405 Method Not Allowed");
    // the history as sampled
    w.sampled
        .lock()
        .expect("lock")
        .history
        .sample(&Fake.status(), 5.0);
    let r = ask(&w, "GET /api/history HTTP/1.1\r\n\r\n");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
    assert_eq!(v["peers"][0]["t"][0], 5.0);
    assert_eq!(v["peers"][0]["paths"][0]["rtt_ms"][0], 1.5);
    assert_eq!(
        v["peers"][0]["paths"][0]["tx_bps"][0],
        serde_json::Value::Null
    );
}
