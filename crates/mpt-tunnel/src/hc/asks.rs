//! The references a receiver asks the sender for by their global sequence numbers
//! (`docs/protocol.md`, "Resend requests"): a packet compressed against a reference that has
//! not come names it. The sender may not know it was lost (it was in a run of losses too long
//! to ask for, or the request for it was lost), and would go on compressing the flow's packets
//! against it; asked, it forgets it (the flow's next packet goes whole as its new one) and
//! sends it again if it still keeps it.

use std::collections::VecDeque;
use std::time::Duration;

use mpt_core::Time;

/// A reference asked for is not asked for again sooner than this (the request, or the resend,
/// may be lost).
pub const ASK_AGAIN: Duration = Duration::from_millis(100);
/// References asked for lately, remembered so as not to ask again sooner than [`ASK_AGAIN`].
const ASKED: usize = 16;
/// Most references waiting to be asked for: nothing drains them while resending is off
/// (compressed packets then come from no peer of ours), bounded all the same.
const MOST: usize = 256;

/// References to ask for, and those asked for lately, when.
#[derive(Debug, Default)]
pub(crate) struct Asks {
    to_ask: Vec<u32>,
    asked: VecDeque<(u32, Time)>,
}

impl Asks {
    /// Reference `want` has not come and a packet names it at `now`: ask for it, unless it was
    /// asked for less than [`ASK_AGAIN`] ago.
    pub(crate) fn ask(&mut self, now: Time, want: u32) {
        if self
            .asked
            .iter()
            .any(|&(seq, at)| seq == want && now.saturating_since(at) < ASK_AGAIN)
        {
            return;
        }
        if self.to_ask.len() >= MOST {
            return;
        }
        if self.asked.len() >= ASKED {
            self.asked.pop_front();
        }
        self.asked.push_back((want, now));
        self.to_ask.push(want);
    }

    /// The references to ask for since the last call.
    pub(crate) fn take(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.to_ask)
    }

    /// A new session of the peer's: nothing of the old one is asked for.
    pub(crate) fn clear(&mut self) {
        self.to_ask.clear();
        self.asked.clear();
    }
}
