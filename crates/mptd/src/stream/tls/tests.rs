use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::stream::conn::{Frames, Probe, StreamConn};
use crate::stream::frame::Sizes;

#[test]
fn tls_is_told_from_frames_by_three_bytes() {
    // ClientHello records as rustls, browsers and old clients write them
    for v in 0..=4 {
        assert_eq!(Sniffed::of([0x16, 0x03, v]), Sniffed::Tls);
    }
    // frames: a length, then a datagram whose first byte has version 5 to 7 in its top bits;
    // even a frame 0x1603 bytes long
    for first in [0xA0, 0xC4, 0xE0, 0xFF] {
        assert_eq!(Sniffed::of([0x16, 0x03, first]), Sniffed::Plain);
        assert_eq!(Sniffed::of([0x00, 0x94, first]), Sniffed::Plain);
    }
    assert_eq!(Sniffed::of([0x16, 0x04, 0x01]), Sniffed::Plain);
}

#[test]
fn a_host_name_is_sent_as_sni_and_an_address_is_not() {
    let to: SocketAddr = "198.18.0.1:443".parse().expect("addr");
    assert!(matches!(
        server_name(Some("vpn.example.net"), to),
        ServerName::DnsName(n) if n.as_ref() == "vpn.example.net"
    ));
    assert!(matches!(server_name(None, to), ServerName::IpAddress(_)));
    // a name rustls refuses (not a DNS name) falls back to the address
    assert!(matches!(
        server_name(Some("not a name"), to),
        ServerName::IpAddress(_)
    ));
}

const SIZES: Sizes = Sizes { min: 16, max: 1500 };

/// A frame's datagram as the tunnel's would start: version 7 in the top bits.
fn datagram(n: u8, len: usize) -> Vec<u8> {
    let mut d = vec![n; len];
    d[0] = 0xE0;
    d
}

async fn next(inbox: &mut tokio::sync::mpsc::Receiver<Frames>) -> Vec<u8> {
    let f = tokio::time::timeout(Duration::from_secs(5), inbox.recv())
        .await
        .expect("a frame within 5 s")
        .expect("inbox open");
    f.bytes[..f.lens[0]].to_vec()
}

#[tokio::test]
async fn frames_cross_a_tls_1_3_connection_both_ways() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let at = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        let (s, _) = listener.accept().await.expect("accept");
        assert_eq!(
            sniff(&s, Duration::from_secs(5)).await.expect("sniff"),
            Sniffed::Tls
        );
        accept(s).await.expect("TLS accept")
    });
    let tcp = TcpStream::connect(at).await.expect("connect");
    let client = connect(tcp, server_name(None, at))
        .await
        .expect("TLS connect");
    let server = server.await.expect("server task");
    {
        let (_, c) = client.get_ref();
        assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
        assert_eq!(c.alpn_protocol(), Some(&b"h2"[..]));
    }
    let probe = Probe {
        fd: None,
        header: 52,
    };
    let (tx_a, mut in_a) = tokio::sync::mpsc::channel(8);
    let (tx_b, mut in_b) = tokio::sync::mpsc::channel(8);
    let a = StreamConn::new(at);
    let b = StreamConn::new(at);
    tokio::spawn(a.clone().run(client, tx_a, SIZES, probe));
    tokio::spawn(b.clone().run(server, tx_b, SIZES, probe));
    assert!(a.enqueue(&datagram(1, 100)));
    assert!(b.enqueue(&datagram(2, 1500)));
    assert_eq!(next(&mut in_b).await, datagram(1, 100));
    assert_eq!(next(&mut in_a).await, datagram(2, 1500));
    a.close(crate::stream::Closed::Local);
}

#[tokio::test]
async fn plain_frames_are_told_plain_and_a_bad_tls_hello_fails_its_handshake() {
    use tokio::io::AsyncWriteExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let at = listener.local_addr().expect("addr");
    let mut plain = TcpStream::connect(at).await.expect("connect");
    let (s, _) = listener.accept().await.expect("accept");
    let mut frame = Vec::new();
    crate::stream::frame::encode(&datagram(3, 0x1603), &mut frame);
    plain.write_all(&frame[..3]).await.expect("write");
    assert_eq!(
        sniff(&s, Duration::from_secs(5)).await.expect("sniff"),
        Sniffed::Plain
    );

    let mut stranger = TcpStream::connect(at).await.expect("connect");
    let (s, _) = listener.accept().await.expect("accept");
    stranger
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
        .await
        .expect("write");
    assert_eq!(
        sniff(&s, Duration::from_secs(5)).await.expect("sniff"),
        Sniffed::Tls
    );
    assert!(accept(s).await.is_err(), "garbage is no ClientHello");

    // one that sends two bytes and waits is not told anything
    let mut slow = TcpStream::connect(at).await.expect("connect");
    let (s, _) = listener.accept().await.expect("accept");
    slow.write_all(&[0x16, 0x03]).await.expect("write");
    let e = sniff(&s, Duration::from_millis(200)).await;
    assert_eq!(
        e.expect_err("timed out").kind(),
        std::io::ErrorKind::TimedOut
    );
}
