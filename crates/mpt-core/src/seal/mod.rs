//! Authenticated encryption of datagrams (specified in `docs/protocol.md`, "Sealed
//! datagrams", and "Handshake").
//!
//! * [`PrivateKey`], [`PublicKey`]: a host's X25519 key pair, base64 in files and configs;
//!   [`Psk`]: a peer's optional pre-shared key.
//! * [`Initiator`] and [`Responder`]: the Noise IKpsk2 handshake (run by snow), which
//!   authenticates both hosts by their static keys and gives each session fresh keys (forward
//!   secrecy).
//! * [`SealKey`]: one direction's AEAD key (ring's ChaCha20-Poly1305 or AES-256-GCM). A sealed
//!   datagram is `header (16) | counter (8) | encrypted body | tag (16)`; header and counter are
//!   the associated data, the counter is the nonce. [`SessionKeys`] are the two of a session.
//! * [`ReplayWindow`]: a sliding bitmap over the counters of one session.
//! * [`CipherChoice`]: a fixed cipher, or `auto`: AES-256-GCM where both ends have it in
//!   hardware, agreed through the handshake's flags ([`negotiate`]).
//!
//! No cryptography is written here: snow runs the handshake, ring the AEAD.

mod aead;
mod cipher;
mod cookie;
mod key;
mod noise;
mod replay;

pub use aead::{counter_of, expand_counter, unseal_in_place, SealError, SealKey};
pub use cipher::{aes_in_hardware, cipher_flags, negotiate, Cipher, CipherChoice, CipherMismatch};
pub use cookie::{
    mac2, Cookies, MacKeys, COOKIE_LIFETIME, COOKIE_NONCE_LEN, MAC_LEN, SEALED_COOKIE_LEN,
};
pub use key::{KeyError, PrivateKey, Psk, PublicKey, SessionKeys};
pub use noise::{HandshakeError, Initiator, Responder, Split, NOISE_PATTERN};
pub use replay::{Replay, ReplayWindow, REPLAY_WINDOW};

pub use crate::wire::{COUNTER_LEN, SEALED_HEADER_LEN, SEAL_OVERHEAD, TAG_LEN};

/// Length of every key: private, public, pre-shared and session keys.
pub const KEY_LEN: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Datagram, HeaderRepr, Kind};
    use crate::PathId;
    use proptest::prelude::*;

    fn psk(b: u8) -> Psk {
        Psk::from_bytes([b; KEY_LEN])
    }

    /// The keys of a session between A and B, seen from A (`a`) and from B (`b`), from
    /// transport keys made of `seed`.
    fn pair(cipher: Cipher, seed: u8) -> (SessionKeys, SessionKeys) {
        let (k1, k2) = ([seed; KEY_LEN], [seed ^ 0x5A; KEY_LEN]);
        (
            SessionKeys::new(cipher, &k1, &k2),
            SessionKeys::new(cipher, &k2, &k1),
        )
    }

    fn header(kind: Kind, seq: u32) -> HeaderRepr {
        HeaderRepr {
            kind,
            path: PathId(1),
            path_seq: 7,
            session: 0xCAFE,
            seq,
            timestamp: 99,
        }
    }

    /// A sealed data datagram carrying an IPv4 packet of `len` bytes.
    fn sealed_data(key: &SealKey, counter: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; SEALED_HEADER_LEN + len + TAG_LEN];
        header(Kind::Data, 5).emit(&mut buf);
        let p = &mut buf[SEALED_HEADER_LEN..][..len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[20..]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        let n = key.seal(counter, &mut buf, len).expect("room");
        assert_eq!(n, buf.len());
        buf
    }

    #[test]
    fn psk_text_round_trips_and_refuses_bad_input() {
        let k = psk(7);
        assert_eq!(Psk::parse(&format!("  {}\n", k.encode())), Ok(k.clone()));
        assert!(matches!(
            Psk::parse("not base64!"),
            Err(KeyError::NotBase64(_))
        ));
        assert_eq!(Psk::parse("AAAA"), Err(KeyError::Length(3)));
        assert_eq!(format!("{k:?}"), "Psk(..)");
    }

    #[test]
    fn ends_that_can_meet_agree_on_one_cipher() {
        use Cipher::*;
        let choices = [
            None,
            Some(CipherChoice::Auto),
            Some(CipherChoice::Only(ChaCha20Poly1305)),
            Some(CipherChoice::Only(Aes256Gcm)),
        ];
        for a in choices {
            for b in choices {
                for (hw_a, hw_b) in [(false, false), (false, true), (true, false), (true, true)] {
                    let (fa, fb) = (cipher_flags(a, hw_a), cipher_flags(b, hw_b));
                    let at_a = negotiate(fa, fb);
                    let at_b = negotiate(fb, fa).map_err(|e| CipherMismatch {
                        ours: e.theirs,
                        theirs: e.ours,
                    });
                    assert_eq!(
                        at_a, at_b,
                        "{a:?} (AES hw {hw_a}) with {b:?} (AES hw {hw_b})"
                    );
                    let want = match (a, b) {
                        (None, None) => Ok(None),
                        (None, _) | (_, None) => Err(()),
                        (Some(CipherChoice::Only(x)), Some(CipherChoice::Only(y))) if x != y => {
                            Err(())
                        }
                        (Some(CipherChoice::Only(x)), _) | (_, Some(CipherChoice::Only(x))) => {
                            Ok(Some(x))
                        }
                        _ if hw_a && hw_b => Ok(Some(Aes256Gcm)),
                        _ => Ok(Some(ChaCha20Poly1305)),
                    };
                    assert_eq!(at_a.map_err(|_| ()), want, "{a:?} {hw_a} / {b:?} {hw_b}");
                }
            }
        }
        let e = negotiate(
            cipher_flags(None, true),
            cipher_flags(Some(CipherChoice::Auto), true),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the ends' encryption settings differ: none here, auto at the peer"
        );
    }

    #[test]
    fn keys_round_trip_as_text_and_the_public_key_is_x25519() {
        let k = PrivateKey::generate().expect("random");
        assert_eq!(PrivateKey::parse(&(k.encode() + "\n")), Ok(k.clone()));
        assert_eq!(format!("{k:?}"), "PrivateKey(..)");
        let p = k.public();
        assert_eq!(PublicKey::parse(&p.encode()), Ok(p));
        assert_ne!(k.public(), PrivateKey::generate().expect("random").public());
        // RFC 7748, section 6.1: Alice's key pair
        let hex = |s: &str| -> [u8; 32] {
            std::array::from_fn(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        };
        let alice = PrivateKey::from_bytes(hex(
            "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
        ));
        assert_eq!(
            alice.public().bytes(),
            &hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        );
    }

    #[test]
    fn the_handshake_authenticates_both_ends_and_agrees_on_keys() {
        let (a, b, c) = (
            PrivateKey::from_bytes([1; 32]),
            PrivateKey::from_bytes([2; 32]),
            PrivateKey::from_bytes([3; 32]),
        );
        let shared = psk(9);
        let mut m1 = [0u8; 256];
        let (init, n1) =
            Initiator::start(&a, &b.public(), Some(&shared), b"hi", &mut m1).expect("init");
        // only B can read it; it learns A's key from it
        let mut p = [0u8; 64];
        assert_eq!(
            Responder::read(&c, &m1[..n1], &mut p).unwrap_err(),
            HandshakeError::Decrypt
        );
        let (resp, pn) = Responder::read(&b, &m1[..n1], &mut p).expect("B reads");
        assert_eq!((&p[..pn], resp.peer()), (&b"hi"[..], &a.public()));
        let mut m2 = [0u8; 256];
        let (n2, at_b) = resp
            .respond(Some(&shared), b"ok", &mut m2)
            .expect("respond");
        let (pn, at_a) = init.finish(&m2[..n2], &mut p).expect("A finishes");
        assert_eq!(&p[..pn], b"ok");
        assert_eq!((at_a.tx, at_a.rx), (at_b.rx, at_b.tx));
        assert_ne!(at_a.tx, at_a.rx);

        // a different pre-shared key at B: A refuses the response
        let (init, n1) =
            Initiator::start(&a, &b.public(), Some(&shared), b"", &mut m1).expect("init");
        let (resp, _) = Responder::read(&b, &m1[..n1], &mut p).expect("read");
        let (n2, _) = resp.respond(None, b"", &mut m2).expect("respond");
        assert_eq!(
            init.finish(&m2[..n2], &mut p).unwrap_err(),
            HandshakeError::Decrypt
        );
        // C, with A's public key but not its private key, cannot pose as A: B reads C's key
        let (_, n1) = Initiator::start(&c, &b.public(), None, b"", &mut m1).expect("init");
        let (resp, _) = Responder::read(&b, &m1[..n1], &mut p).expect("read");
        assert_eq!(resp.peer(), &c.public());
        // every flipped byte of an initiation is refused
        let (_, n1) = Initiator::start(&a, &b.public(), None, b"x", &mut m1).expect("init");
        for i in 0..n1 {
            let mut bad = m1;
            bad[i] ^= 1;
            assert!(Responder::read(&b, &bad[..n1], &mut p).is_err(), "byte {i}");
        }
    }

    #[test]
    fn seal_open_round_trip_for_both_ciphers() {
        for cipher in [Cipher::ChaCha20Poly1305, Cipher::Aes256Gcm] {
            let (keys, peer) = pair(cipher, 1);
            let mut d = sealed_data(&keys.tx, 42, 100);
            assert_eq!(counter_of(&d), Some(42));
            // only the peer's rx key opens it; our own rx key does not (no reflection)
            assert_eq!(keys.rx.open(&mut d.clone(), 42), Err(SealError::BadTag));
            // nor under another counter than the one it was sealed with
            assert_eq!(
                peer.rx.open(&mut d.clone(), 42 + (1 << 32)),
                Err(SealError::BadTag)
            );
            let n = peer.rx.open(&mut d, 42).expect("opens");
            assert_eq!(n, 100);
            unseal_in_place(&mut d);
            let plain = &d[COUNTER_LEN..SEALED_HEADER_LEN + n];
            let Ok(Datagram::Data { header: h, packet }) = Datagram::parse(plain) else {
                panic!("opened datagram does not parse");
            };
            assert_eq!(h, header(Kind::Data, 5));
            assert_eq!(packet.len(), 100);
        }
    }

    #[test]
    fn any_change_to_a_sealed_datagram_is_refused() {
        let (keys, peer) = pair(Cipher::ChaCha20Poly1305, 1);
        let d = sealed_data(&keys.tx, 3, 64);
        for i in 0..d.len() {
            let mut bad = d.clone();
            bad[i] ^= 0x01;
            let counter = expand_counter(Some(3), counter_of(&bad).unwrap_or(0));
            assert_eq!(
                peer.rx.open(&mut bad, counter),
                Err(SealError::BadTag),
                "byte {i}"
            );
        }
        let mut short = d[..d.len() - 1].to_vec();
        assert_eq!(peer.rx.open(&mut short, 3), Err(SealError::BadTag));
        let mut tiny = d[..SEALED_HEADER_LEN + TAG_LEN - 1].to_vec();
        assert!(matches!(
            peer.rx.open(&mut tiny, 3),
            Err(SealError::Truncated(_))
        ));
        // another session, another cipher: nothing opens
        let (_, other) = pair(Cipher::ChaCha20Poly1305, 2);
        assert_eq!(other.rx.open(&mut d.clone(), 3), Err(SealError::BadTag));
        let (_, other) = pair(Cipher::Aes256Gcm, 1);
        assert_eq!(other.rx.open(&mut d.clone(), 3), Err(SealError::BadTag));
    }

    #[test]
    fn a_counter_is_expanded_from_its_low_bits_to_the_nearest_to_the_highest_seen() {
        const SPAN: u64 = 1 << 32;
        // nothing seen yet: the first counters of a session
        assert_eq!(expand_counter(None, 7), 7);
        // near the highest, behind or ahead of it
        assert_eq!(expand_counter(Some(100), 90), 90);
        assert_eq!(expand_counter(Some(100), 130), 130);
        // across a wrap of the low bits, either way
        assert_eq!(expand_counter(Some(SPAN - 2), 3), SPAN + 3);
        assert_eq!(expand_counter(Some(SPAN + 3), u32::MAX - 1), SPAN - 2);
        assert_eq!(expand_counter(Some(5 * SPAN + 10), 4), 5 * SPAN + 4);
        // never below zero, never past the top
        assert_eq!(expand_counter(Some(3), u32::MAX), u64::from(u32::MAX));
        assert_eq!(expand_counter(Some(u64::MAX - 2), 0), u64::MAX - SPAN + 1);
    }

    #[test]
    fn seal_plain_moves_the_body() {
        let (keys, peer) = pair(Cipher::ChaCha20Poly1305, 4);
        let mut buf = vec![0u8; 200];
        let plain = crate::wire::AckRepr {
            header: header(Kind::KeepaliveAck, 0),
            echo: 5,
            hold_us: 6,
        }
        .emit(&mut buf);
        let n = keys.tx.seal_plain(77, &mut buf, plain).expect("room");
        assert_eq!(n, plain + SEAL_OVERHEAD);
        assert!(
            keys.tx.seal_plain(1, &mut buf[..n], n).is_err(),
            "no room must be refused"
        );
        let body = peer.rx.open(&mut buf[..n], 77).expect("opens");
        unseal_in_place(&mut buf);
        assert_eq!(
            Datagram::parse(&buf[COUNTER_LEN..SEALED_HEADER_LEN + body]),
            Ok(Datagram::KeepaliveAck {
                header: header(Kind::KeepaliveAck, 0),
                echo: 5,
                hold_us: 6,
            })
        );
    }

    /// cargo-fuzz's first finding on `datagram` (a driver's, not the parser's): a bundle whose
    /// last entry is a head piece (an IP header claiming more than the datagram holds) is
    /// accepted, and the driver took every entry for a whole packet.
    #[test]
    fn fuzz_driver_takes_a_bundles_head_piece() {
        let mut data = vec![
            0x10, 0xc8, 0xff, 0xfe, 0xff, 0xff, 0x40, 0xfe, 0x00, 0x4b, 0x00, 0x00, 0x00, 0x01,
            0x01, 0x00, 0xaa, 0x00, 0x44, 0x60, 0x60, 0x00, 0x00, 0x25, 0x00,
        ];
        data.resize(data.len() + 85, 0xdb);
        fuzz::datagram(&data);
    }

    proptest! {
        /// The cargo-fuzz target's driver on random inputs.
        #[test]
        fn fuzz_driver_on_random_inputs(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzz::datagram(&data);
        }

        #[test]
        fn arbitrary_bytes_never_open(bytes in proptest::collection::vec(any::<u8>(), 0..300), c: u64) {
            let (keys, _) = pair(Cipher::ChaCha20Poly1305, 1);
            let mut b = bytes.clone();
            prop_assert!(keys.rx.open(&mut b, c).is_err());
            let w = ReplayWindow::default();
            prop_assert_eq!(w.check(c), Ok(()));
        }

        #[test]
        fn mutated_sealed_datagrams_never_open(counter: u64, len in 20usize..200, pos: usize, flip in 1u8..=255, cut in 0usize..8) {
            let (keys, peer) = pair(Cipher::ChaCha20Poly1305, 1);
            let mut d = sealed_data(&keys.tx, counter, len);
            let pos = pos % d.len();
            d[pos] ^= flip;
            d.truncate(d.len() - cut);
            let low = counter_of(&d).unwrap_or(0);
            prop_assert!(peer.rx.open(&mut d, expand_counter(Some(counter), low)).is_err());
        }

    }
}

/// Drivers for the cargo-fuzz targets (`fuzz/`), also run by the property tests.
#[doc(hidden)]
pub mod fuzz {
    use std::sync::OnceLock;

    use super::*;
    use crate::wire::{Datagram, HeaderRepr, Kind};

    struct Keys {
        ours: SessionKeys,
        theirs: SessionKeys,
        host: PrivateKey,
    }

    fn keys() -> &'static Keys {
        static K: OnceLock<Keys> = OnceLock::new();
        K.get_or_init(|| {
            let (k1, k2) = ([7; KEY_LEN], [8; KEY_LEN]);
            Keys {
                ours: SessionKeys::new(Cipher::ChaCha20Poly1305, &k1, &k2),
                theirs: SessionKeys::new(Cipher::ChaCha20Poly1305, &k2, &k1),
                host: PrivateKey::from_bytes([9; KEY_LEN]),
            }
        })
    }

    /// Byte 0 even: `data[1..]` is a received datagram, handled as the daemon does (parse,
    /// replay check, open, unseal, parse; a handshake message read by the responder); it must
    /// never authenticate. Byte 0 odd: a datagram
    /// is sealed from the input's fields, then one byte is flipped as the input says; it must
    /// open (to exactly what was sealed) if and only if nothing was flipped.
    pub fn datagram(data: &[u8]) {
        let Some((&mode, rest)) = data.split_first() else {
            return;
        };
        if mode % 2 == 0 {
            received(rest);
        } else {
            sealed_then_mutated(rest);
        }
    }

    fn received(data: &[u8]) {
        if let Ok(Datagram::Report { report, .. }) = Datagram::parse(data) {
            assert_eq!(report.entries().count(), report.len());
        }
        // a bundle accepted is its entries exactly: each a whole IP packet inside the body
        // (or a compressed one's payload, rebuilt whole), one byte of gap before each,
        // nothing else
        if let Ok(Datagram::Bundle {
            header,
            body,
            count,
        }) = Datagram::parse(data)
        {
            let entries: Vec<_> = crate::wire::bundle_entries(body, header.seq)
                .map(|e| e.expect("an accepted bundle's entries are whole"))
                .collect();
            assert_eq!(entries.len(), count);
            assert!((1..=crate::wire::MAX_BUNDLE).contains(&count));
            assert_eq!(entries[0].seq, header.seq);
            let fixed = |e: &crate::wire::BundleEntry| {
                1 + if e.headers.is_some() {
                    crate::wire::COMPRESSED_LEN
                } else {
                    0
                }
            };
            let covered: usize = entries.iter().map(|e| e.len + fixed(e)).sum();
            assert_eq!(covered, body.len());
            for (i, e) in entries.iter().enumerate() {
                if e.is_head() {
                    // the start of a longer packet (checked whole once its pieces come),
                    // only ever the last entry
                    assert_eq!(i + 1, entries.len(), "a head piece before the last entry");
                    assert!(e.len >= crate::wire::MIN_HEAD_PIECE);
                } else {
                    assert!(crate::wire::check_inner_packet(&e.packet(body)).is_ok());
                }
            }
        }
        let k = keys();
        if let Ok(Datagram::Handshake { header, message }) = Datagram::parse(data) {
            let mut payload = [0u8; 64];
            if header.kind == Kind::Initiation {
                assert!(
                    Responder::read(&k.host, message, &mut payload).is_err(),
                    "a forged initiation authenticated"
                );
            }
        }
        let mut buf = data.to_vec();
        let Ok((_, true)) = HeaderRepr::parse_outer(&buf) else {
            return;
        };
        let window = ReplayWindow::default();
        let counter = window.expand(counter_of(&buf).unwrap_or(0));
        assert!(window.check(counter).is_ok());
        assert!(
            k.theirs.rx.open(&mut buf, counter).is_err(),
            "a forged datagram authenticated"
        );
    }

    fn sealed_then_mutated(data: &[u8]) {
        if data.len() < 24 {
            return;
        }
        let (fields, body) = data.split_at(24);
        let mut buf = vec![0u8; SEALED_HEADER_LEN + body.len() + TAG_LEN];
        let b32 =
            |i: usize| u32::from_be_bytes([fields[i], fields[i + 1], fields[i + 2], fields[i + 3]]);
        HeaderRepr {
            kind: Kind::Data,
            path: crate::PathId(fields[0]),
            path_seq: u16::from_be_bytes([fields[1], fields[2]]),
            session: b32(3),
            seq: b32(7),
            timestamp: b32(11),
        }
        .emit(&mut buf);
        buf[SEALED_HEADER_LEN..][..body.len()].copy_from_slice(body);
        let counter = u64::from_be_bytes(fields[15..23].try_into().unwrap_or([0; 8]));
        let k = keys();
        let n = k.ours.tx.seal(counter, &mut buf, body.len()).expect("room");
        let original = buf.clone();
        // the flip: position from the first body bytes, value from the last field byte
        let flip = fields[23];
        let pos = usize::from(u16::from_be_bytes([fields[1], fields[0]])) % n;
        buf[pos] ^= flip;
        // the receiver expands the counter's low bits against the highest it has seen
        let received = expand_counter(Some(counter), counter_of(&buf).unwrap_or(0));
        match k.theirs.rx.open(&mut buf, received) {
            Ok(len) => {
                assert_eq!(flip, 0, "a flipped byte at {pos} went unnoticed");
                assert_eq!(len, body.len());
                assert_eq!(&buf[SEALED_HEADER_LEN..][..len], body);
                assert_eq!(&buf[..SEALED_HEADER_LEN], &original[..SEALED_HEADER_LEN]);
            }
            Err(e) => assert!(flip != 0, "a genuine datagram was refused: {e}"),
        }
        // our own receive key never opens what we sent (no reflection)
        assert!(k.ours.rx.open(&mut original.clone(), counter).is_err());
    }
}
