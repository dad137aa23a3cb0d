//! Satellite links: a path whose links change satellite at fixed times
//! ([`mpt_core::handover`]), dark for a moment at each handover and with a delay that steps.
//! Both directions hand over together, as one satellite does.

use mpt_core::handover::{HandoverSpec, Handovers};

use super::*;

impl Pair {
    /// Both directions of `path` hand over as `spec` says (their delay is then the handovers',
    /// not the links' own; jitter, loss and rate stay theirs), from the simulated clock's zero.
    pub fn hand_over(&mut self, path: usize, spec: HandoverSpec) {
        let seed = self.rng.next_u64();
        for side in [Side::A, Side::B] {
            self.links[side.index()][path].handovers = Some(Handovers::new(spec, seed));
        }
    }

    /// Datagrams `side`'s link `path` lost for leaving while it was dark.
    pub fn darkened(&self, side: Side, path: usize) -> u64 {
        self.links[side.index()][path].dark
    }

    /// Handovers `side`'s link `path` has gone through so far (0 without handovers).
    pub fn handovers(&self, side: Side, path: usize) -> u64 {
        let h = self.links[side.index()][path].handovers.as_ref();
        h.map_or(0, Handovers::count)
    }
}
