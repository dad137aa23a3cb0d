use super::*;

const SIZES: Sizes = Sizes { min: 20, max: 1500 };

const NO_FD: Probe = Probe {
    fd: None,
    header: 52,
};

/// Two streams over an in-memory pipe of `pipe` bytes; returns each end's connection and the
/// inbox of the second.
fn pair(pipe: usize) -> (Arc<StreamConn>, Arc<StreamConn>, Inbox, Inbox) {
    let (a, b) = tokio::io::duplex(pipe);
    let (ca, cb) = (
        StreamConn::new("198.18.0.1:1".parse().unwrap()),
        StreamConn::new("198.18.0.2:2".parse().unwrap()),
    );
    let (ta, ia) = mpsc::channel(INBOX);
    let (tb, ib) = mpsc::channel(INBOX);
    tokio::spawn(ca.clone().run(a, ta, SIZES, NO_FD));
    tokio::spawn(cb.clone().run(b, tb, SIZES, NO_FD));
    (ca, cb, ia, ib)
}

#[tokio::test]
async fn datagrams_cross_whole_and_in_order() {
    let (a, _b, _ia, mut ib) = pair(64 * 1024);
    a.authenticated.store(true, Relaxed);
    let sent: Vec<Vec<u8>> = (0..200u32)
        .map(|k| vec![k as u8; 20 + (k as usize * 7) % 1400])
        .collect();
    for d in &sent {
        assert!(a.enqueue(d), "room in the queue");
    }
    let mut got = Vec::new();
    while got.len() < sent.len() {
        let f = tokio::time::timeout(Duration::from_secs(5), ib.recv())
            .await
            .expect("frames in time")
            .expect("inbox open");
        let mut at = 0;
        for len in f.lens {
            got.push(f.bytes[at..at + len].to_vec());
            at += len;
        }
    }
    assert_eq!(got, sent);
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_and_a_stranger_gets_little_room() {
    // a pipe of 1 byte that nobody reads: the queue fills
    let (a, b) = tokio::io::duplex(1);
    let c = StreamConn::new("198.18.0.1:1".parse().unwrap());
    let (t, _inbox) = mpsc::channel(INBOX);
    tokio::spawn(c.clone().run(a, t, SIZES, NO_FD));
    let d = vec![7u8; 1000];
    let taken = (0..100).filter(|_| c.enqueue(&d)).count();
    assert!(taken <= QUEUE_LIMIT_UNAUTHENTICATED / 1000 + 1, "{taken}");
    assert!(c.full.load(Relaxed) > 0);
    c.authenticated.store(true, Relaxed);
    let more = (0..1000).filter(|_| c.enqueue(&d)).count();
    assert!(more <= QUEUE_LIMIT / 1000 + 1, "bounded: {more}");
    drop(b);
}

#[tokio::test]
async fn a_length_the_tunnel_never_sends_closes_the_stream() {
    let (mut a, b) = tokio::io::duplex(1024);
    let c = StreamConn::new("198.18.0.1:1".parse().unwrap());
    let (t, _inbox) = mpsc::channel(INBOX);
    let run = tokio::spawn(c.clone().run(b, t, SIZES, NO_FD));
    a.write_all(&[0xFF, 0xFF, 1, 2, 3]).await.unwrap();
    let why = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("closed in time")
        .unwrap();
    assert_eq!(why, Closed::Garbage(FrameError::Oversized(0xFFFF)));
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_does_not_read_is_closed_after_the_stall() {
    let (a, _b) = tokio::io::duplex(1);
    let c = StreamConn::new("198.18.0.1:1".parse().unwrap());
    c.authenticated.store(true, Relaxed);
    let (t, _inbox) = mpsc::channel(INBOX);
    let run = tokio::spawn(c.clone().run(a, t, SIZES, NO_FD));
    assert!(c.enqueue(&[1u8; 100]));
    let why = tokio::time::timeout(STALL * 2, run)
        .await
        .expect("closed within twice the stall")
        .unwrap();
    assert_eq!(why, Closed::SlowReader);
    assert!(!c.enqueue(&[1u8; 100]), "nothing goes on a closed stream");
}

#[tokio::test]
async fn the_other_end_closing_ends_the_stream() {
    let (a, b) = tokio::io::duplex(1024);
    let c = StreamConn::new("198.18.0.1:1".parse().unwrap());
    let (t, _inbox) = mpsc::channel(INBOX);
    let run = tokio::spawn(c.clone().run(b, t, SIZES, NO_FD));
    drop(a);
    let why = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("closed in time")
        .unwrap();
    assert_eq!(why, Closed::Ended);
}
