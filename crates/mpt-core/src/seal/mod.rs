//! Authenticated encryption of datagrams (specified in `docs/protocol.md`, "Sealed
//! datagrams").
//!
//! * [`Psk`]: the pre-shared key, 32 bytes, written as base64 in the key file.
//! * [`SealKey`]: one direction's AEAD key (ring's ChaCha20-Poly1305 or AES-256-GCM). A sealed
//!   datagram is `header (16) | counter (8) | encrypted body | tag (16)`; header and counter are
//!   the associated data, the counter is the nonce.
//! * [`handshake_key`] and [`session_keys`]: HKDF-SHA256 over the PSK; the session keys also
//!   over both sides' randoms, so every pair of daemon starts gets fresh keys, one per
//!   direction.
//! * [`ReplayWindow`]: a sliding bitmap over the counters of one session.
//! * [`Handshake`]: the hello exchange that agrees on the randoms (sans-IO; randomness comes
//!   from the caller).
//! * [`CipherChoice`]: a fixed cipher, or `auto`: AES-256-GCM where both ends have it in
//!   hardware, agreed through a hello flag.
//!
//! No cryptography is written here: ring does the AEAD and the HKDF.

mod aead;
mod cipher;
mod handshake;
mod key;
mod replay;

pub use aead::{counter_of, unseal_in_place, SealError, SealKey};
pub use cipher::{aes_in_hardware, Cipher, CipherChoice};
pub use handshake::{Handshake, HelloOutcome, Peer};
pub use key::{handshake_key, session_keys, KeyError, Psk, SessionKeys};
pub use replay::{Replay, ReplayWindow, REPLAY_WINDOW};

pub use crate::wire::{COUNTER_LEN, SEALED_HEADER_LEN, SEAL_OVERHEAD, TAG_LEN};

/// Length of the pre-shared key and of every derived key.
pub const KEY_LEN: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Datagram, HeaderRepr, HelloRepr, Kind};
    use crate::PathId;
    use proptest::prelude::*;

    fn psk(b: u8) -> Psk {
        Psk::from_bytes([b; KEY_LEN])
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
            CipherChoice::Auto,
            CipherChoice::Only(ChaCha20Poly1305),
            CipherChoice::Only(Aes256Gcm),
        ];
        for a in choices {
            for b in choices {
                // ends with different hello keys never get as far as agreeing
                if a.hello_cipher() != b.hello_cipher() {
                    continue;
                }
                for (hw_a, hw_b) in [(false, false), (false, true), (true, false), (true, true)] {
                    let (offer_a, offer_b) = (a.offers_aes(hw_a), b.offers_aes(hw_b));
                    let at_a = a.agree(offer_a, offer_b);
                    let at_b = b.agree(offer_b, offer_a);
                    assert_eq!(at_a, at_b, "{a} (AES hw {hw_a}) with {b} (AES hw {hw_b})");
                    let both_auto_hw = a == CipherChoice::Auto && b == a && hw_a && hw_b;
                    if a == CipherChoice::Auto || b == CipherChoice::Auto {
                        let want = if both_auto_hw {
                            Aes256Gcm
                        } else {
                            ChaCha20Poly1305
                        };
                        assert_eq!(at_a, want, "{a} (AES hw {hw_a}) with {b} (AES hw {hw_b})");
                    }
                }
            }
        }
        // auto meets a fixed ChaCha20-Poly1305 end, not a fixed AES one
        assert_eq!(CipherChoice::Auto.hello_cipher(), ChaCha20Poly1305);
        assert_eq!(CipherChoice::Only(Aes256Gcm).hello_cipher(), Aes256Gcm);
    }

    #[test]
    fn seal_open_round_trip_for_both_ciphers() {
        for cipher in [Cipher::ChaCha20Poly1305, Cipher::Aes256Gcm] {
            let keys = session_keys(&psk(1), cipher, &[1; 32], &[2; 32]);
            let peer = session_keys(&psk(1), cipher, &[2; 32], &[1; 32]);
            let mut d = sealed_data(&keys.tx, 42, 100);
            assert_eq!(counter_of(&d), Some(42));
            // only the peer's rx key opens it; our own rx key does not (no reflection)
            assert_eq!(keys.rx.open(&mut d.clone()), Err(SealError::BadTag));
            let n = peer.rx.open(&mut d).expect("opens");
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
        let keys = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[1; 32], &[2; 32]);
        let peer = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[2; 32], &[1; 32]);
        let d = sealed_data(&keys.tx, 3, 64);
        for i in 0..d.len() {
            let mut bad = d.clone();
            bad[i] ^= 0x01;
            assert_eq!(peer.rx.open(&mut bad), Err(SealError::BadTag), "byte {i}");
        }
        let mut short = d[..d.len() - 1].to_vec();
        assert_eq!(peer.rx.open(&mut short), Err(SealError::BadTag));
        let mut tiny = d[..SEALED_HEADER_LEN + TAG_LEN - 1].to_vec();
        assert!(matches!(
            peer.rx.open(&mut tiny),
            Err(SealError::Truncated(_))
        ));
        // another PSK, another cipher, another pair of randoms: nothing opens
        let other = session_keys(&psk(9), Cipher::ChaCha20Poly1305, &[2; 32], &[1; 32]);
        assert_eq!(other.rx.open(&mut d.clone()), Err(SealError::BadTag));
        let other = session_keys(&psk(1), Cipher::Aes256Gcm, &[2; 32], &[1; 32]);
        assert_eq!(other.rx.open(&mut d.clone()), Err(SealError::BadTag));
        let other = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[2; 32], &[3; 32]);
        assert_eq!(other.rx.open(&mut d.clone()), Err(SealError::BadTag));
    }

    #[test]
    fn seal_plain_moves_the_body() {
        let hk = handshake_key(&psk(4), Cipher::ChaCha20Poly1305);
        let mut buf = vec![0u8; 200];
        let hello = HelloRepr {
            random: [5; 32],
            challenge: [6; 16],
            echo: [7; 16],
            flags: 1,
        };
        let plain = hello.with(header(Kind::Hello, 0)).emit(&mut buf);
        let n = hk.seal_plain(77, &mut buf, plain).expect("room");
        assert_eq!(n, plain + SEAL_OVERHEAD);
        assert!(
            hk.seal_plain(1, &mut buf[..n], n).is_err(),
            "no room must be refused"
        );
        let body = hk.open(&mut buf[..n]).expect("opens");
        unseal_in_place(&mut buf);
        assert_eq!(
            Datagram::parse(&buf[COUNTER_LEN..SEALED_HEADER_LEN + body]),
            Ok(Datagram::Hello {
                header: header(Kind::Hello, 0),
                hello
            })
        );
    }

    proptest! {
        /// The cargo-fuzz target's driver on random inputs.
        #[test]
        fn fuzz_driver_on_random_inputs(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzz::datagram(&data);
        }

        #[test]
        fn arbitrary_bytes_never_open(bytes in proptest::collection::vec(any::<u8>(), 0..300), c: u64) {
            let keys = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[1; 32], &[2; 32]);
            let mut b = bytes.clone();
            prop_assert!(keys.rx.open(&mut b).is_err());
            let w = ReplayWindow::default();
            prop_assert_eq!(w.check(c), Ok(()));
        }

        #[test]
        fn mutated_sealed_datagrams_never_open(counter: u64, len in 20usize..200, pos: usize, flip in 1u8..=255, cut in 0usize..8) {
            let keys = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[1; 32], &[2; 32]);
            let peer = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[2; 32], &[1; 32]);
            let mut d = sealed_data(&keys.tx, counter, len);
            let pos = pos % d.len();
            d[pos] ^= flip;
            d.truncate(d.len() - cut);
            prop_assert!(peer.rx.open(&mut d).is_err());
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
        hello: SealKey,
    }

    fn keys() -> &'static Keys {
        static K: OnceLock<Keys> = OnceLock::new();
        K.get_or_init(|| {
            let psk = Psk::from_bytes([7; KEY_LEN]);
            Keys {
                ours: session_keys(&psk, Cipher::ChaCha20Poly1305, &[1; 32], &[2; 32]),
                theirs: session_keys(&psk, Cipher::ChaCha20Poly1305, &[2; 32], &[1; 32]),
                hello: handshake_key(&psk, Cipher::ChaCha20Poly1305),
            }
        })
    }

    /// Byte 0 even: `data[1..]` is a received datagram, handled as the daemon does (parse,
    /// replay check, open, unseal, parse); it must never authenticate. Byte 0 odd: a datagram
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
        let mut buf = data.to_vec();
        let Ok((h, true)) = HeaderRepr::parse_outer(&buf) else {
            return;
        };
        let window = ReplayWindow::default();
        if let Some(c) = counter_of(&buf) {
            assert!(window.check(c).is_ok());
        }
        let k = keys();
        let key = if h.kind == Kind::Hello {
            &k.hello
        } else {
            &k.theirs.rx
        };
        assert!(
            key.open(&mut buf).is_err(),
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
        match k.theirs.rx.open(&mut buf) {
            Ok(len) => {
                assert_eq!(flip, 0, "a flipped byte at {pos} went unnoticed");
                assert_eq!(len, body.len());
                assert_eq!(&buf[SEALED_HEADER_LEN..][..len], body);
                assert_eq!(&buf[..SEALED_HEADER_LEN], &original[..SEALED_HEADER_LEN]);
            }
            Err(e) => assert!(flip != 0, "a genuine datagram was refused: {e}"),
        }
        // our own receive key never opens what we sent (no reflection)
        assert!(k.ours.rx.open(&mut original.clone()).is_err());
    }
}
