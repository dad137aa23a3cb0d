use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::stream::conn::{Frames, Probe, StreamConn};
use crate::stream::frame::{encode, Sizes};
use crate::stream::{tls, Role, StreamSide};

const SIZES: Sizes = Sizes { min: 16, max: 1500 };

fn frame(n: u8) -> Vec<u8> {
    let mut d = vec![n; 100];
    d[0] = 0xE0;
    let mut f = Vec::new();
    encode(&d, &mut f);
    f
}

async fn next(inbox: &mut tokio::sync::mpsc::Receiver<Frames>) -> Frames {
    tokio::time::timeout(Duration::from_secs(5), inbox.recv())
        .await
        .expect("frames within 5 s")
        .expect("inbox open")
}

#[tokio::test]
async fn one_port_takes_plain_and_tls_streams_and_counts_a_bad_hello() {
    let listener = StreamSide::listener("127.0.0.1:0".parse().expect("addr")).expect("listen");
    let at = listener.local_addr().expect("addr");
    let side = StreamSide::new(Role::Listen, Some(listener));
    let (frames, mut inbox) = tokio::sync::mpsc::channel(8);
    tokio::spawn(side.clone().accept(frames, SIZES, || true));

    let mut plain = TcpStream::connect(at).await.expect("connect");
    plain.write_all(&frame(1)).await.expect("write");
    let got = next(&mut inbox).await;
    assert_eq!(got.bytes[1], 1);
    assert!(!got.conn.tls.load(Relaxed), "plain");

    let tcp = TcpStream::connect(at).await.expect("connect");
    let tls = tls::connect(tcp, tls::server_name(None, at))
        .await
        .expect("TLS");
    let conn = StreamConn::new(at);
    let (tx, _rx) = tokio::sync::mpsc::channel(8);
    let probe = Probe {
        fd: None,
        header: 52,
    };
    tokio::spawn(conn.clone().run(tls, tx, SIZES, probe));
    assert!(conn.enqueue(&frame(2)[2..]));
    let got = next(&mut inbox).await;
    assert_eq!(got.bytes[1], 2);
    assert!(got.conn.tls.load(Relaxed), "TLS");
    assert_eq!(side.backlog().0, 2, "both are streams of the side");

    let mut stranger = TcpStream::connect(at).await.expect("connect");
    stranger
        // a handshake record holding an empty ServerHello: no client sends that
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00])
        .await
        .expect("write");
    let counted = async {
        while side.closes.handshake.load(Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), counted)
        .await
        .expect("counted at once");
    assert_eq!(side.backlog().0, 2, "the stranger never was a stream");
    assert_eq!(side.pending.load(Relaxed), 0);
}
