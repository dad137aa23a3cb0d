//! Instructions per packet, counted by callgrind (gungraun): the sender's work for a batch of
//! [`BATCH`] inner packets read from the TUN device (classify, schedule, compress, number,
//! seal; `send_batch_of_64`) and the receiver's for the datagrams they made (route, open,
//! replay check, resequence, rebuild, deliver; `receive_batch_of_64`), between two connections
//! past their handshake and a warm-up (`mpt_benches::packet_cost`); and the AEAD alone: sealing
//! and opening bodies of the sizes that batch's datagrams carry (`aead_*_batch_of_64`, the same
//! ids), so that the tunnel's own work is the difference, and 64 of one body size
//! (`aead_*_64_of_one_size`). No system call is in any of them: the engine is sans-IO, and
//! the sockets, the TUN device and the locks are mptd's (`crates/mptd/src/datapath`).
//!
//! Each count is one run's, exact (not a sample); the batch benchmarks' are for the whole
//! batch: divide by 64 (`benches/packet_cost.sh` does, and prints the tables).
//!
//! ```sh
//! cargo install gungraun-runner --version 0.18.2 --locked   # once: the lib's version
//! cargo bench -p mpt-benches --bench packet_cost
//! benches/packet_cost.sh                                   # per packet, and the shares
//! ```

use std::hint::black_box;

use gungraun::prelude::*;
use mpt_benches::packet_cost::{
    check_received, check_sent, receive, receiver, sealed_bodies, send, sender, Case, Inner,
    Receiver, Sender, BATCH,
};
use mpt_core::seal::{Cipher, SealKey, SessionKeys, KEY_LEN, SEALED_HEADER_LEN, TAG_LEN};
use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::PathId;

// the benchmarks' names say the batch size
const _: () = assert!(BATCH == 64);

const CHACHA: Cipher = Cipher::ChaCha20Poly1305;
const AES: Cipher = Cipher::Aes256Gcm;

fn tcp(cipher: Cipher, len: usize) -> Case {
    Case::new(cipher, Inner::Tcp(len))
}

fn udp(cipher: Cipher, len: usize) -> Case {
    Case::new(cipher, Inner::Udp(len))
}

/// The setups' results are boxed: what the benchmark function takes and gives back is moved
/// as a pointer, not copied inside the measured region.
fn boxed_sender(case: Case) -> Box<Sender> {
    Box::new(sender(case))
}

fn boxed_receiver(case: Case) -> Box<Receiver> {
    Box::new(receiver(case))
}

fn sent(s: Box<Sender>) {
    check_sent(&s, s.conn.config().compress);
}

fn received(r: Box<Receiver>) {
    check_received(&r);
}

#[library_benchmark(teardown = sent)]
#[bench::tcp1400_chacha(args = (tcp(CHACHA, 1400)), setup = boxed_sender)]
#[bench::tcp1400_aes(args = (tcp(AES, 1400)), setup = boxed_sender)]
#[bench::tcp100_chacha(args = (tcp(CHACHA, 100)), setup = boxed_sender)]
#[bench::tcp100_aes(args = (tcp(AES, 100)), setup = boxed_sender)]
#[bench::udp1400_chacha(args = (udp(CHACHA, 1400)), setup = boxed_sender)]
#[bench::udp1400_aes(args = (udp(AES, 1400)), setup = boxed_sender)]
#[bench::tcp1400_chacha_nocompress(args = (tcp(CHACHA, 1400).uncompressed()), setup = boxed_sender)]
#[bench::tcp1400_aes_nocompress(args = (tcp(AES, 1400).uncompressed()), setup = boxed_sender)]
#[bench::tcp100_chacha_nocompress(args = (tcp(CHACHA, 100).uncompressed()), setup = boxed_sender)]
#[bench::tcp100_aes_nocompress(args = (tcp(AES, 100).uncompressed()), setup = boxed_sender)]
fn send_batch_of_64(mut s: Box<Sender>) -> Box<Sender> {
    send(black_box(&mut s));
    s
}

#[library_benchmark(teardown = received)]
#[bench::tcp1400_chacha(args = (tcp(CHACHA, 1400)), setup = boxed_receiver)]
#[bench::tcp1400_aes(args = (tcp(AES, 1400)), setup = boxed_receiver)]
#[bench::tcp100_chacha(args = (tcp(CHACHA, 100)), setup = boxed_receiver)]
#[bench::tcp100_aes(args = (tcp(AES, 100)), setup = boxed_receiver)]
#[bench::udp1400_chacha(args = (udp(CHACHA, 1400)), setup = boxed_receiver)]
#[bench::udp1400_aes(args = (udp(AES, 1400)), setup = boxed_receiver)]
#[bench::tcp1400_chacha_nocompress(args = (tcp(CHACHA, 1400).uncompressed()), setup = boxed_receiver)]
#[bench::tcp1400_aes_nocompress(args = (tcp(AES, 1400).uncompressed()), setup = boxed_receiver)]
#[bench::tcp100_chacha_nocompress(args = (tcp(CHACHA, 100).uncompressed()), setup = boxed_receiver)]
#[bench::tcp100_aes_nocompress(args = (tcp(AES, 100).uncompressed()), setup = boxed_receiver)]
#[bench::tcp1400_chacha_by_socket(args = (tcp(CHACHA, 1400).by_socket()), setup = boxed_receiver)]
fn receive_batch_of_64(mut r: Box<Receiver>) -> Box<Receiver> {
    receive(black_box(&mut r));
    r
}

/// A datagram's buffer with its header written, room for a body of `body` bytes and the tag.
fn datagram(body: usize) -> Vec<u8> {
    let mut buf = vec![0x45u8; SEALED_HEADER_LEN + body + TAG_LEN];
    HeaderRepr {
        kind: Kind::Data,
        path: PathId(0),
        path_seq: 1,
        session: 2,
        seq: 3,
        timestamp: 4,
    }
    .emit(&mut buf);
    buf
}

/// Our keys and the peer's for `cipher`, each side's first seal done (the AEAD's one-time
/// work, such as reading the CPU's features, is not the packet's).
fn keys(cipher: Cipher) -> (SessionKeys, SessionKeys) {
    let ours = SessionKeys::new(cipher, &[1; KEY_LEN], &[2; KEY_LEN]);
    let theirs = SessionKeys::new(cipher, &[2; KEY_LEN], &[1; KEY_LEN]);
    for k in [&ours, &theirs] {
        k.tx.seal(0, &mut datagram(64), 64)
            .expect("room for the tag");
    }
    (ours, theirs)
}

/// A key to seal with, and datagrams to seal (bodies of so many bytes).
type ToSeal = (SealKey, Vec<(Vec<u8>, usize)>);
/// A key to open with, and datagrams sealed by the peer.
type ToOpen = (SealKey, Vec<Vec<u8>>);

/// A key to seal with, and datagrams to seal: bodies of `bodies` bytes.
fn to_seal(cipher: Cipher, bodies: &[usize]) -> Box<ToSeal> {
    let bufs = bodies.iter().map(|&b| (datagram(b), b)).collect();
    Box::new((keys(cipher).0.tx, bufs))
}

/// A key to open with, and datagrams the peer sealed: bodies of `bodies` bytes.
fn to_open(cipher: Cipher, bodies: &[usize]) -> Box<ToOpen> {
    let (ours, theirs) = keys(cipher);
    let bufs = bodies
        .iter()
        .enumerate()
        .map(|(k, &b)| {
            let mut buf = datagram(b);
            theirs
                .tx
                .seal(k as u64, &mut buf, b)
                .expect("room for the tag");
            buf
        })
        .collect();
    Box::new((ours.rx, bufs))
}

fn seal_all(mut input: Box<ToSeal>) -> Box<ToSeal> {
    let (key, bufs) = &mut *input;
    for (k, (buf, body)) in bufs.iter_mut().enumerate() {
        black_box(key.seal(k as u64, black_box(buf), *body)).expect("room for the tag");
    }
    input
}

fn open_all(mut input: Box<ToOpen>) -> Box<ToOpen> {
    let (key, bufs) = &mut *input;
    for (k, buf) in bufs.iter_mut().enumerate() {
        black_box(key.open(black_box(buf), k as u64)).expect("authentic");
    }
    input
}

/// The AEAD's share of `send_batch_of_64`: sealing bodies of the sizes that batch's
/// datagrams carry (found by running it first), with a key of the same cipher.
fn batch_to_seal(case: Case) -> Box<ToSeal> {
    to_seal(case.cipher, &sealed_bodies(case))
}

/// The AEAD's share of `receive_batch_of_64`: opening them.
fn batch_to_open(case: Case) -> Box<ToOpen> {
    to_open(case.cipher, &sealed_bodies(case))
}

#[library_benchmark]
#[bench::tcp1400_chacha(args = (tcp(CHACHA, 1400)), setup = batch_to_seal)]
#[bench::tcp1400_aes(args = (tcp(AES, 1400)), setup = batch_to_seal)]
#[bench::tcp100_chacha(args = (tcp(CHACHA, 100)), setup = batch_to_seal)]
#[bench::tcp100_aes(args = (tcp(AES, 100)), setup = batch_to_seal)]
#[bench::udp1400_chacha(args = (udp(CHACHA, 1400)), setup = batch_to_seal)]
#[bench::udp1400_aes(args = (udp(AES, 1400)), setup = batch_to_seal)]
#[bench::tcp1400_chacha_nocompress(args = (tcp(CHACHA, 1400).uncompressed()), setup = batch_to_seal)]
#[bench::tcp1400_aes_nocompress(args = (tcp(AES, 1400).uncompressed()), setup = batch_to_seal)]
#[bench::tcp100_chacha_nocompress(args = (tcp(CHACHA, 100).uncompressed()), setup = batch_to_seal)]
#[bench::tcp100_aes_nocompress(args = (tcp(AES, 100).uncompressed()), setup = batch_to_seal)]
fn aead_seal_batch_of_64(input: Box<ToSeal>) -> Box<ToSeal> {
    seal_all(input)
}

#[library_benchmark]
#[bench::tcp1400_chacha(args = (tcp(CHACHA, 1400)), setup = batch_to_open)]
#[bench::tcp1400_aes(args = (tcp(AES, 1400)), setup = batch_to_open)]
#[bench::tcp100_chacha(args = (tcp(CHACHA, 100)), setup = batch_to_open)]
#[bench::tcp100_aes(args = (tcp(AES, 100)), setup = batch_to_open)]
#[bench::udp1400_chacha(args = (udp(CHACHA, 1400)), setup = batch_to_open)]
#[bench::udp1400_aes(args = (udp(AES, 1400)), setup = batch_to_open)]
#[bench::tcp1400_chacha_nocompress(args = (tcp(CHACHA, 1400).uncompressed()), setup = batch_to_open)]
#[bench::tcp1400_aes_nocompress(args = (tcp(AES, 1400).uncompressed()), setup = batch_to_open)]
#[bench::tcp100_chacha_nocompress(args = (tcp(CHACHA, 100).uncompressed()), setup = batch_to_open)]
#[bench::tcp100_aes_nocompress(args = (tcp(AES, 100).uncompressed()), setup = batch_to_open)]
fn aead_open_batch_of_64(input: Box<ToOpen>) -> Box<ToOpen> {
    open_all(input)
}

/// 64 bodies of `body` bytes, for the per-size table.
fn size_to_seal((cipher, body): (Cipher, usize)) -> Box<ToSeal> {
    to_seal(cipher, &[body; BATCH])
}

fn size_to_open((cipher, body): (Cipher, usize)) -> Box<ToOpen> {
    to_open(cipher, &[body; BATCH])
}

/// A 1400-byte TCP segment's body compressed: its 52 bytes of headers in 13.
const COMPRESSED_1400: usize = 1400 - 52 + 13;

#[library_benchmark]
#[bench::chacha_1361(args = ((CHACHA, COMPRESSED_1400)), setup = size_to_seal)]
#[bench::chacha_1400(args = ((CHACHA, 1400)), setup = size_to_seal)]
#[bench::chacha_100(args = ((CHACHA, 100)), setup = size_to_seal)]
#[bench::aes_1361(args = ((AES, COMPRESSED_1400)), setup = size_to_seal)]
#[bench::aes_1400(args = ((AES, 1400)), setup = size_to_seal)]
#[bench::aes_100(args = ((AES, 100)), setup = size_to_seal)]
fn aead_seal_64_of_one_size(input: Box<ToSeal>) -> Box<ToSeal> {
    seal_all(input)
}

#[library_benchmark]
#[bench::chacha_1361(args = ((CHACHA, COMPRESSED_1400)), setup = size_to_open)]
#[bench::chacha_1400(args = ((CHACHA, 1400)), setup = size_to_open)]
#[bench::chacha_100(args = ((CHACHA, 100)), setup = size_to_open)]
#[bench::aes_1361(args = ((AES, COMPRESSED_1400)), setup = size_to_open)]
#[bench::aes_1400(args = ((AES, 1400)), setup = size_to_open)]
#[bench::aes_100(args = ((AES, 100)), setup = size_to_open)]
fn aead_open_64_of_one_size(input: Box<ToOpen>) -> Box<ToOpen> {
    open_all(input)
}

library_benchmark_group!(
    name = tunnel,
    benchmarks = [send_batch_of_64, receive_batch_of_64]
);

library_benchmark_group!(
    name = aead,
    benchmarks = [
        aead_seal_batch_of_64,
        aead_open_batch_of_64,
        aead_seal_64_of_one_size,
        aead_open_64_of_one_size
    ]
);

main!(library_benchmark_groups = [tunnel, aead]);
