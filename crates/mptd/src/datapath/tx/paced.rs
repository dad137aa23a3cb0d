//! The tx task's queue of the packets pacing held (`connection.pace`): kept at the front of
//! the batch's buffers, in order, CoDel's rule on the oldest, at most [`HOLD_MAX`].

use mpt_core::Time;
use mpt_tunnel::DropReason;

use super::TxBatch;
use crate::tunnel::Tunnel;

/// Most packets the tx task holds while pacing finds every path full (`connection.pace`).
pub(super) const HOLD_MAX: usize = mpt_tunnel::PACE_HOLD_MAX;

impl TxBatch {
    /// Move the packets pacing held (indices in `held`) to the front, in order, the oldest
    /// dropped beyond [`HOLD_MAX`]; returns how many are held.
    pub(super) fn keep_held(&mut self, t: &Tunnel) -> usize {
        self.held.sort_unstable();
        let excess = self.held.len().saturating_sub(HOLD_MAX);
        if excess > 0 {
            t.io_drop(DropReason::Paced, excess as u64);
        }
        for (j, &k) in self.held[excess..].iter().enumerate() {
            self.bufs.swap(j, k);
            self.sizes[j] = self.sizes[k];
            self.born[j] = self.born[k];
        }
        let held = self.held.len() - excess;
        self.held.clear();
        held
    }

    /// CoDel's rule on the oldest of the `held` packets pacing held: dropped from the head while
    /// their peer's connection says so.
    pub(super) fn pace_drop(&mut self, t: &Tunnel, held: usize, now: Time) {
        for k in 0..held {
            if self.sizes[k] == 0 {
                continue;
            }
            let Some(peer) = self.route[k].and_then(|i| t.peers.get(i)) else {
                return;
            };
            let sojourn = now.saturating_since(self.born[k]);
            if !peer
                .lock()
                .as_mut()
                .is_some_and(|c| c.pace_drop(now, sojourn))
            {
                return;
            }
            self.sizes[k] = 0;
        }
    }
}
