//! What the two ends agree on in their handshake besides the keys: the version each of our
//! initiations tries (`docs/protocol.md`, "Versions"), and the features each end takes (flags
//! beside the cipher: express data, pieces, resending, parity; and whether a session
//! continues the one before).

use mpt_core::wire::CipherFlags;

use crate::Connection;

/// Feature flags of our handshake messages, and the peer's.
impl<P> Connection<P> {
    /// The [`CipherFlags::CONTINUES`] bit of our handshake messages: set while we have a
    /// session with the peer (our sequence numbers go on from it).
    pub(crate) fn continues(&self) -> u8 {
        if self.peer_session.is_some() {
            CipherFlags::CONTINUES
        } else {
            0
        }
    }

    /// What the peer's handshake message says it takes besides the cipher ([`Self::feature_flags`]).
    pub(crate) fn take_feature_flags(&mut self, flags: u8) {
        self.peer_express = flags & CipherFlags::EXPRESS != 0;
        self.peer_pieces = flags & CipherFlags::PIECES != 0;
        self.peer_resend = flags & CipherFlags::RESEND != 0;
        self.peer_parity = flags & CipherFlags::PARITY != 0;
    }

    /// What our handshake messages say we take besides the cipher: bundles and express data,
    /// pieces, and (when configured) resend requests and parity.
    pub(crate) fn feature_flags(&self) -> u8 {
        let resend = if self.cfg.resend {
            CipherFlags::RESEND
        } else {
            0
        };
        let parity = if self.cfg.resend && self.cfg.parity {
            CipherFlags::PARITY
        } else {
            0
        };
        CipherFlags::EXPRESS | CipherFlags::PIECES | resend | parity
    }

    /// The peer takes bundles and express data (its handshake said so): without, every packet
    /// goes in a data datagram of its own.
    pub fn peer_takes_express(&self) -> bool {
        self.peer_express
    }

    /// Behave as towards a peer whose handshake did not say it takes packets in pieces (an
    /// older mptd), until the next handshake: for tests.
    #[doc(hidden)]
    pub fn forget_peer_pieces(&mut self) {
        self.peer_pieces = false;
    }

    /// Behave as towards a peer whose handshake did not say it takes bundles and express data
    /// (an older mptd), until the next handshake: for tests.
    #[doc(hidden)]
    pub fn forget_peer_express(&mut self) {
        self.peer_express = false;
    }
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
