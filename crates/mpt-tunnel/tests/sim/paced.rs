//! The driver's side of pacing (`connection.pace`), as the daemon's tx task does it: the
//! packets pacing held wait in the node, the oldest dropped while CoDel's rule says so, and are
//! offered again, ahead of what the application sends next, with it or when the connection
//! said.

use std::time::Duration;

use super::*;

impl Pair {
    /// `side`'s application sends `packet` through a driver that paces: it joins the packets
    /// pacing holds, and they are offered as one batch.
    pub fn send_paced(&mut self, side: Side, packet: Vec<u8>) {
        let now = self.now;
        self.nodes[side.index()].paced.push_back((now, packet));
        self.offer_paced(side);
    }

    /// Offer what `side` holds again.
    pub(super) fn offer_paced(&mut self, side: Side) {
        let now = self.now;
        let node = &mut self.nodes[side.index()];
        node.wake = None;
        while let Some(&(born, _)) = node.paced.front() {
            if !node.ep.pace_drop(now, now.saturating_since(born)) {
                break;
            }
            node.paced.pop_front();
        }
        // beyond the most a driver holds, the oldest go (the daemon counts them)
        let excess = node.paced.len().saturating_sub(mpt_tunnel::PACE_HOLD_MAX);
        node.paced.drain(..excess);
        let (born, packets): (Vec<Time>, Vec<Vec<u8>>) = node.paced.drain(..).unzip();
        let (held, wake) = self.number_and_send(side, &packets);
        let node = &mut self.nodes[side.index()];
        node.paced
            .extend(held.into_iter().map(|k| (born[k], packets[k].clone())));
        node.wake = wake.filter(|_| !node.paced.is_empty());
    }

    /// As [`Pair::stream`], through a driver that paces ([`Pair::send_paced`]).
    pub fn stream_paced(
        &mut self,
        side: Side,
        d: Duration,
        every: Duration,
        len: usize,
        first: u32,
    ) -> u32 {
        self.stream_each(d, every, |p, n| p.send_paced(side, packet(first + n, len)))
    }
}
