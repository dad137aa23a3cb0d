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

/// The version of the `attempt`th initiation (from 1): ours on the first two tries (the first
/// is lost whenever the peer is not up yet), then every other try one of the versions before,
/// the next older each time (the third the one before ours, about three seconds in), round
/// again after the oldest spoken: a peer of any of them answers too (it drops later versions
/// unread).
pub(crate) fn initiation_version(attempt: u32) -> u8 {
    use mpt_core::wire::{MIN_VERSION, VERSION};
    if attempt < 3 || attempt % 2 == 0 {
        return VERSION;
    }
    let older = u32::from(VERSION - MIN_VERSION).max(1);
    let back = ((attempt - 3) / 2) % older + 1;
    VERSION.saturating_sub(back as u8).max(MIN_VERSION)
}

#[cfg(test)]
mod tests {
    #[test]
    fn initiations_go_down_through_the_older_versions_every_other_try() {
        use mpt_core::wire::{MIN_VERSION, VERSION};
        let got: Vec<u8> = (1..=10).map(super::initiation_version).collect();
        assert_eq!(&got[..2], &[VERSION, VERSION]);
        // every older version spoken is tried within the first 2 * (VERSION - MIN_VERSION) + 1
        for v in MIN_VERSION..VERSION {
            let first = got.iter().position(|&g| g == v).expect("tried");
            assert!(
                first < 2 * usize::from(VERSION - MIN_VERSION) + 1,
                "{v} at {first}"
            );
        }
        // the even tries are ours
        assert!(got.iter().skip(1).step_by(2).all(|&g| g == VERSION));
    }
}
