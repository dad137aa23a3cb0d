//! A hostile peer that holds valid keys: its driver rewrites each numbered datagram before
//! sealing it with the batch's [`crate::Sealer`], so that every one opens at the other end (the
//! session's key, a fresh counter) and reaches the code behind the AEAD. The simulator's
//! hostile tests (`crates/mpt-tunnel/tests/hostile.rs`) and the daemon's (`tests/e2e/insider.rs`,
//! through `mpt_lab::experiments::insider`) send the same abuses.

use mpt_core::rng::Rng;
use mpt_core::wire::{emit_nack, Header, Kind, NackRange};
use mpt_core::{PathId, Time};

use crate::{BatchOut, Connection};

/// What the driver does to a datagram's body before sealing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abuse {
    /// A bundle's or a continuation's entries, whose lengths lie: each says up to 64 KiB.
    LyingEntries,
    /// Data "compressed" against a reference never sent (random context and distance).
    UnknownReferences,
    /// Receiver reports with random figures (rates, delays, counts).
    AbsurdReports,
    /// Resend requests for every path sequence the peer sent lately (and for paths it does
    /// not have), again and again.
    ResendEverything,
    /// Parity of groups never sent.
    StrayParity,
    /// Data on path ids the session does not have.
    PathsOutOfRange,
    /// Data whose global sequence jumps by 2^31 (and back).
    SequenceJumps,
    /// Every abuse above, one at random per datagram, and random bodies of every kind.
    Mixed,
}

impl Abuse {
    /// Each abuse, [`Abuse::Mixed`] last.
    pub const ALL: [Abuse; 8] = [
        Abuse::LyingEntries,
        Abuse::UnknownReferences,
        Abuse::AbsurdReports,
        Abuse::ResendEverything,
        Abuse::StrayParity,
        Abuse::PathsOutOfRange,
        Abuse::SequenceJumps,
        Abuse::Mixed,
    ];
}

/// The adversary's driver: its randomness, and the path sequence of the last datagram the
/// other side sent it (what [`Abuse::ResendEverything`] asks for).
#[derive(Debug)]
pub struct Crafter {
    pub rng: Rng,
    pub last_seq: u64,
}

impl Crafter {
    pub fn new(seed: u64) -> Crafter {
        Crafter {
            rng: Rng::new(seed),
            last_seq: 0,
        }
    }

    /// Note a datagram the other side sent (its path sequence).
    pub fn heard(&mut self, datagram: &[u8]) {
        if datagram.len() >= mpt_core::wire::HEADER_LEN {
            self.last_seq = u64::from(Header::new_unchecked(datagram).path_seq()) + 1;
        }
    }

    /// Rewrite the numbered datagram `buf` (its body from `prefix` on, `len` bytes of it) as
    /// `abuse` says: returns the body's new length.
    pub fn craft(&mut self, abuse: Abuse, buf: &mut [u8], prefix: usize, len: usize) -> usize {
        let rng = &mut self.rng;
        match abuse {
            Abuse::LyingEntries => lying_entries(rng, buf, prefix),
            Abuse::UnknownReferences => unknown_references(rng, buf, prefix, len),
            Abuse::AbsurdReports => random_body(rng, buf, prefix, Kind::Report),
            Abuse::ResendEverything => resend_everything(rng, buf, prefix, self.last_seq),
            Abuse::StrayParity => random_body(rng, buf, prefix, Kind::Parity),
            Abuse::PathsOutOfRange => {
                header(buf).set_path(PathId(1 + rng.below(255) as u8));
                len
            }
            Abuse::SequenceJumps => {
                let mut h = header(buf);
                let jump = [1u32 << 31, (1 << 31) - 1, (1 << 31) + 1][rng.below(3) as usize];
                let seq = h.seq();
                h.set_seq(seq.wrapping_add(jump));
                len
            }
            Abuse::Mixed => match rng.below(8) as usize {
                7 => {
                    let kind = KINDS[rng.below(KINDS.len() as u64) as usize];
                    random_body(rng, buf, prefix, kind)
                }
                k => self.craft(Abuse::ALL[k], buf, prefix, len),
            },
        }
    }

    /// `c` sends `count` packets of 1000 bytes at `now` as one batch, as the daemon's tx task
    /// does; with `abuse`, each numbered datagram is rewritten before it is sealed. Returns
    /// the datagrams, with their destinations.
    pub fn batch(
        &mut self,
        c: &mut Connection<Vec<u8>>,
        now: Time,
        count: usize,
        abuse: Option<Abuse>,
    ) -> Vec<crate::Datagram> {
        let prefix = c.prefix();
        let mut sizes = vec![1000; count];
        let mut bufs: Vec<Vec<u8>> = (0..count)
            .map(|k| {
                let mut b = vec![0u8; prefix + 1500 + 16];
                b[prefix..prefix + 1000].copy_from_slice(&packet(k as u32, 1000));
                b
            })
            .collect();
        let mut plan = vec![None; count];
        let mut out = BatchOut::default();
        let Some(sealer) = c.number_batch(now, &mut sizes, &mut bufs, &mut plan, &mut out) else {
            return Vec::new();
        };
        let mut ds: Vec<crate::Datagram> = out.before.drain(..).collect();
        for (k, mut buf) in bufs.into_iter().enumerate() {
            let Some(path) = plan[k] else { continue };
            let len = match abuse {
                Some(a) => self.craft(a, &mut buf, prefix, sizes[k]),
                None => sizes[k],
            };
            let Ok(sealed) = sealer.seal(k, &mut buf, len) else {
                continue;
            };
            buf.truncate(sealed);
            let Some(destination) = c.remote(path) else {
                continue;
            };
            ds.push(crate::Datagram {
                path,
                destination,
                kind: crate::TransmitKind::Data,
                contents: buf,
            });
        }
        ds.append(&mut out.after);
        c.batch_sent(sealer.used());
        ds
    }
}

/// Every kind a random body may say it is.
const KINDS: [Kind; 12] = [
    Kind::Data,
    Kind::Keepalive,
    Kind::KeepaliveAck,
    Kind::Report,
    Kind::Goodbye,
    Kind::Bundle,
    Kind::Express,
    Kind::Continued,
    Kind::Probe,
    Kind::ProbeAck,
    Kind::Resent,
    Kind::Parity,
];

/// A minimal IPv4 packet of `len` bytes carrying `n`.
pub fn packet(n: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(24)];
    p[0] = 0x45;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[20..24].copy_from_slice(&n.to_be_bytes());
    p
}

fn header(buf: &mut [u8]) -> Header<&mut [u8]> {
    Header::new_unchecked(buf)
}

/// Random bytes as the body of a datagram of `kind`, of a random length.
fn random_body(rng: &mut Rng, buf: &mut [u8], prefix: usize, kind: Kind) -> usize {
    header(buf).set_kind(kind);
    let len = 1 + rng.below(1400) as usize;
    rng.fill(&mut buf[prefix..prefix + len]);
    len
}

fn lying_entries(rng: &mut Rng, buf: &mut [u8], prefix: usize) -> usize {
    let kind = [Kind::Bundle, Kind::Continued][rng.below(2) as usize];
    let len = random_body(rng, buf, prefix, kind);
    for k in (0..len.saturating_sub(8)).step_by(7) {
        if rng.below(2) == 0 {
            buf[prefix + k..prefix + k + 2].copy_from_slice(&[0xff, 0xff]);
        }
    }
    len
}

fn unknown_references(rng: &mut Rng, buf: &mut [u8], prefix: usize, len: usize) -> usize {
    rng.fill(&mut buf[prefix..prefix + 64]);
    buf[prefix] = [0xc0, 0xc1, 0xff, 0x80][rng.below(4) as usize];
    len.min(64 + rng.below(900) as usize)
}

fn resend_everything(rng: &mut Rng, buf: &mut [u8], prefix: usize, last: u64) -> usize {
    header(buf).set_kind(Kind::Nack);
    let ranges: Vec<NackRange> = (0..mpt_core::wire::MAX_NACK_RANGES as u64)
        .map(|k| NackRange {
            path: PathId((rng.below(8) / 7) as u8),
            first: last.wrapping_sub(255 * (k + 1)) as u16,
            count: 255,
        })
        .collect();
    let len = mpt_core::wire::nack_len(ranges.len()) - mpt_core::wire::HEADER_LEN;
    emit_nack(&mut buf[prefix..prefix + len], &ranges);
    len
}
