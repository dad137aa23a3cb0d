//! What the two ends agree on in their handshake besides the keys: the version each of our
//! initiations tries (`docs/protocol.md`, "Versions"), and the features each end takes (flags
//! beside the cipher: express data, pieces, resending, parity; and whether a session
//! continues the one before).

use mpt_core::wire::CipherFlags;

use crate::ConnectionConfig;

/// What the peer's handshake said it takes besides the cipher.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PeerFeatures {
    /// Bundles and express data ([`CipherFlags::EXPRESS`]).
    pub(crate) express: bool,
    /// Packets in pieces, put back together ([`CipherFlags::PIECES`]).
    pub(crate) pieces: bool,
    /// Resend requests and resent packets ([`CipherFlags::RESEND`]).
    pub(crate) resend: bool,
    /// Parity ([`CipherFlags::PARITY`]).
    pub(crate) parity: bool,
}

impl PeerFeatures {
    /// What the peer's handshake message `flags` says it takes ([`feature_flags`]).
    pub(crate) fn of(flags: u8) -> PeerFeatures {
        PeerFeatures {
            express: flags & CipherFlags::EXPRESS != 0,
            pieces: flags & CipherFlags::PIECES != 0,
            resend: flags & CipherFlags::RESEND != 0,
            parity: flags & CipherFlags::PARITY != 0,
        }
    }

    /// Whether resending is on: both ends' handshakes said they take resend requests and
    /// resent packets (ours as `cfg` says).
    pub(crate) fn resending(&self, cfg: &ConnectionConfig) -> bool {
        self.resend && cfg.resend
    }

    /// Whether parity may be used: both ends take it, and resending is on.
    pub(crate) fn parity(&self, cfg: &ConnectionConfig) -> bool {
        self.parity && cfg.parity && self.resending(cfg)
    }
}

/// The [`CipherFlags::CONTINUES`] bit of our handshake messages: set while we have a session
/// with the peer (`has_session`: our sequence numbers go on from it).
pub(crate) fn continues(has_session: bool) -> u8 {
    if has_session {
        CipherFlags::CONTINUES
    } else {
        0
    }
}

/// What our handshake messages say we take besides the cipher: bundles and express data,
/// pieces, and (when `cfg` says so) resend requests and parity.
pub(crate) fn feature_flags(cfg: &ConnectionConfig) -> u8 {
    let resend = if cfg.resend { CipherFlags::RESEND } else { 0 };
    let parity = if cfg.resend && cfg.parity {
        CipherFlags::PARITY
    } else {
        0
    };
    CipherFlags::EXPRESS | CipherFlags::PIECES | resend | parity
}

/// What the `attempt`th initiation (from 1) is: ours, with our capability list, on the first
/// two tries (the first is lost whenever the peer is not up yet) and every even one after;
/// every odd one from the third a form a peer that takes no list reads: version 7 without a
/// list (0.1.0), then the versions before it, the next older each time, round again after the
/// oldest spoken. A peer that does not read a form drops it unread (a list: as too long; a
/// later version: `bad_version`), and answers one it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attempt {
    pub(crate) version: u8,
    /// It carries our capability list.
    pub(crate) listed: bool,
}

/// What a session of `version` can do, both ends' handshake messages having set `flags`, and
/// the peer's capability list `list` if it sent one.
pub(crate) fn capabilities(
    version: u8,
    flags: u8,
    list: Option<mpt_core::wire::CapabilityList>,
) -> mpt_core::wire::Capabilities {
    use mpt_core::wire::{our_features, Capabilities};
    match list {
        Some(l) => {
            Capabilities::negotiated(version, flags, our_features(), l.features.unwrap_or(0))
        }
        None => Capabilities::of_version(version, flags),
    }
}

pub(crate) fn initiation(attempt: u32) -> Attempt {
    use mpt_core::wire::{MIN_VERSION, VERSION};
    if attempt < 3 || attempt % 2 == 0 {
        return Attempt {
            version: VERSION,
            listed: true,
        };
    }
    // VERSION without a list, then each older version
    let forms = u32::from(VERSION - MIN_VERSION) + 1;
    let back = ((attempt - 3) / 2) % forms;
    Attempt {
        version: VERSION - back as u8,
        listed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::{initiation, Attempt};
    use mpt_core::wire::{MIN_VERSION, VERSION};

    #[test]
    fn initiations_go_through_the_forms_older_peers_read_every_other_try() {
        let got: Vec<Attempt> = (1..=12).map(initiation).collect();
        let ours = Attempt {
            version: VERSION,
            listed: true,
        };
        assert_eq!(&got[..2], &[ours, ours]);
        // the even tries are ours
        assert!(got.iter().skip(1).step_by(2).all(|&g| g == ours));
        // the third is 0.1.0's form; every older version is tried after it
        let odd: Vec<Attempt> = got.iter().skip(2).step_by(2).copied().collect();
        assert_eq!(
            odd[0],
            Attempt {
                version: VERSION,
                listed: false
            }
        );
        for (k, v) in (MIN_VERSION..VERSION).rev().enumerate() {
            assert_eq!(
                odd[k + 1],
                Attempt {
                    version: v,
                    listed: false
                }
            );
        }
    }
}
