//! Drivers for the cargo-fuzz targets `handshake`, `control_datagrams` and `connection` (`fuzz/`); the
//! suite replays their corpora through the same functions (`tests/fuzz_corpus`). Each takes
//! arbitrary bytes and must never panic: what it builds from them is handed to the engine as
//! a peer (or anyone on the path) would send it, on a clock the input moves.

mod handshake;
pub mod hostile;
mod pair;

use std::net::SocketAddr;
use std::time::Duration;

use mpt_core::seal::{Cipher, CipherChoice, PrivateKey};
use mpt_core::wire::Overhead;
use mpt_core::Time;

use crate::{ConnectionConfig, KeySettings, PathSettings, Random};

pub use handshake::handshake;
pub use pair::{connection, control_datagrams};

/// The fuzz input, read front to back; zeros once it runs out.
pub(crate) struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Input<'a> {
        Input(data)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// Up to `n` bytes (fewer when the input ends).
    pub(crate) fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (b, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        b
    }

    /// A datagram changed as the input says: kept, a byte flipped, cut short, bytes written
    /// over it, or bytes added.
    pub(crate) fn mutate(&mut self, d: &mut Vec<u8>) {
        let how = self.byte();
        let at = usize::from(self.u16()) % d.len().max(1);
        match how % 5 {
            0 => {}
            1 => {
                let flip = self.byte().max(1);
                if let Some(b) = d.get_mut(at) {
                    *b ^= flip;
                }
            }
            2 => d.truncate(at),
            3 => {
                let n = usize::from(self.byte() % 64);
                for (i, &b) in self.bytes(n).iter().enumerate() {
                    if let Some(x) = d.get_mut(at + i) {
                        *x = b;
                    }
                }
            }
            _ => {
                let n = usize::from(self.byte());
                d.extend_from_slice(self.bytes(n));
            }
        }
    }
}

/// Randomness from a fixed seed: every run of an input is the same.
pub(crate) fn random(seed: u64) -> Random {
    let mut rng = mpt_core::rng::Rng::new(seed);
    Box::new(move |b: &mut [u8]| rng.fill(b))
}

/// Side `n`'s (0 or 1) private key.
pub(crate) fn key(n: u8) -> PrivateKey {
    PrivateKey::from_bytes([n + 1; 32])
}

/// The address of side `n` (0 or 1) on `path`.
pub(crate) fn addr(n: u8, path: usize) -> SocketAddr {
    SocketAddr::from(([198, 18, path as u8, n + 1], 4000 + path as u16))
}

/// Settings of side `n` (0 initiates) of a sealed pair with `paths` paths, every feature on.
pub(crate) fn config(n: u8, paths: usize) -> ConnectionConfig {
    ConnectionConfig {
        paths: (0..paths)
            .map(|i| PathSettings {
                name: format!("p{i}"),
                remote: Some(addr(1 - n, i)),
                weight: 1,
                rate_bps: None,
                backup: false,
                priority: 1,
                overhead: Overhead::new(true, false).outer_link(),
                mtu: None,
            })
            .collect(),
        scheduler: mpt_sched::SchedulerKind::RoundRobin,
        reorder_window: 64,
        reorder_timeout: Duration::from_millis(100),
        keepalive: Duration::from_millis(100),
        dead: Duration::from_millis(500),
        idle_keepalive: None,
        mtu: 1400,
        keys: KeySettings {
            private: key(n),
            peer: key(1 - n).public(),
            psk: None,
            encryption: Some(CipherChoice::Only(Cipher::ChaCha20Poly1305)),
            aes_in_hardware: false,
            initiate: n == 0,
            unix_nanos_at_zero: 1_800_000_000_000_000_000,
            rekey_after: crate::REKEY_AFTER,
        },
        index_slot: None,
        follow_peer_paths: false,
        bundle: true,
        resend: true,
        parity: true,
        equalise: true,
        compress: true,
        pace: false,
        classes: crate::default_classes(),
    }
}

/// `now` moved on by what the input says: up to about a second, sometimes a minute.
pub(crate) fn later(now: Time, inp: &mut Input<'_>) -> Time {
    let step = u64::from(inp.u16());
    let step = if step & 0x8000 != 0 {
        Duration::from_millis((step & 0x7fff) * 2)
    } else {
        Duration::from_micros(step * 16)
    };
    now + step
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The drivers on random inputs.
        #[test]
        fn the_drivers_hold_on_arbitrary_input(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            super::handshake(&data);
            super::control_datagrams(&data);
            super::connection(&data);
        }
    }
}
