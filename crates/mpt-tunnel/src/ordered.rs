//! Streams that do not back off keep their order (`docs/protocol.md`, "Resequencing rules"):
//! with resending on, the resequencer gives a lost packet's number up at once and the packet,
//! resent, comes late ([`crate::Connection::update_repair_wait`] says why TCP must not wait
//! for it). A packet that is not TCP (a UDP stream of a video call, a game, a tunnel inside the
//! tunnel; ICMP) released behind such a number waits for it here instead, until it comes or
//! the hold time after it was given up has passed, and goes on after it. TCP, and the packets
//! that go the fastest way (express data), never wait here.

use std::collections::VecDeque;

use mpt_core::wire::seq_diff;
use mpt_core::Time;

/// Where the packets go: to the driver ([`Sink::give`]), or first made their own
/// ([`Sink::keep`]) when they wait.
pub(crate) trait Sink<T> {
    /// `item`, its bytes its own (it may lie in the datagram being handled).
    fn keep(&mut self, item: T) -> T;
    /// `item` goes on, to the driver.
    fn give(&mut self, item: T);
}

/// Given-up numbers waited for at once; past that, the oldest is no longer waited for.
pub const AWAITED: usize = 256;
/// Packets that wait behind them; past that, the oldest goes on.
pub const WAITING: usize = 1024;

/// The numbers given up that may come again, and the packets that wait for them.
#[derive(Debug)]
pub(crate) struct InOrder<T> {
    /// Given-up global sequence numbers, and until when they are waited for (in the order
    /// they were given up, so in increasing order of both).
    awaited: VecDeque<(u32, Time)>,
    /// Packets that wait, by global sequence number (increasing).
    waiting: VecDeque<(u32, T)>,
    /// Packets that waited, in all.
    waited: u64,
}

impl<T> Default for InOrder<T> {
    fn default() -> Self {
        InOrder {
            awaited: VecDeque::new(),
            waiting: VecDeque::new(),
            waited: 0,
        }
    }
}

/// Whether global sequence number `a` comes before `b`.
fn before(a: u32, b: u32) -> bool {
    seq_diff(a, b) < 0
}

impl<T> InOrder<T> {
    /// The resequencer gave `seqs` up: their packets are waited for until `until` (no sooner
    /// than those given up before them: the hold time may have been shortened).
    pub(crate) fn given_up(&mut self, seqs: &[u32], until: Time, out: &mut impl Sink<T>) {
        let until = self.awaited.back().map_or(until, |&(_, u)| u.max(until));
        for &s in seqs {
            if self.awaited.len() >= AWAITED {
                self.awaited.pop_front();
            }
            self.awaited.push_back((s, until));
        }
        if self.awaited.len() == AWAITED {
            self.release(out);
        }
    }

    /// A packet released with global sequence number `seq`: it goes to `out` now, unless it
    /// is `patient` and a number before it is awaited (then it waits, made its own, behind the
    /// packets that wait already). One that was awaited lets the packets behind it go on.
    pub(crate) fn pass(&mut self, seq: u32, patient: bool, item: T, out: &mut impl Sink<T>) {
        let came = self.arrived(seq);
        if self.waits(seq, patient) {
            let item = out.keep(item);
            if let Some(first) = self.wait(seq, item) {
                out.give(first);
            }
        } else {
            out.give(item);
        }
        if came {
            self.release(out);
        }
    }

    /// The packet numbered `seq` was released: whether it was awaited (then it is no longer,
    /// and the packets behind it may go on: [`InOrder::release`]).
    fn arrived(&mut self, seq: u32) -> bool {
        match self.awaited.iter().position(|&(s, _)| s == seq) {
            Some(i) => {
                self.awaited.remove(i);
                true
            }
            None => false,
        }
    }

    /// Whether a packet numbered `seq` waits: it is `patient`, and a number before it is
    /// awaited.
    fn waits(&self, seq: u32, patient: bool) -> bool {
        patient && self.awaits_before(seq)
    }

    /// Whether a number before `seq` is awaited (they are in increasing order: the first is
    /// the lowest).
    fn awaits_before(&self, seq: u32) -> bool {
        self.awaited.front().is_some_and(|&(s, _)| before(s, seq))
    }

    /// The packet numbered `seq` waits, after those that wait with a lower number (a late one
    /// goes before them); past [`WAITING`], the first goes on (returned).
    fn wait(&mut self, seq: u32, item: T) -> Option<T> {
        let at = self
            .waiting
            .iter()
            .rposition(|&(s, _)| before(s, seq))
            .map_or(0, |i| i + 1);
        self.waiting.insert(at, (seq, item));
        self.waited += 1;
        if self.waiting.len() > WAITING {
            return self.waiting.pop_front().map(|(_, first)| first);
        }
        None
    }

    /// The time is `now`: numbers waited for long enough are no longer, and the packets behind
    /// them go on.
    pub(crate) fn expire(&mut self, now: Time, out: &mut impl Sink<T>) {
        let mut expired = false;
        while let Some(&(_, until)) = self.awaited.front() {
            if until > now {
                break;
            }
            self.awaited.pop_front();
            expired = true;
        }
        if expired {
            self.release(out);
        }
    }

    /// The packets at the front that no awaited number is before go to `out`.
    fn release(&mut self, out: &mut impl Sink<T>) {
        while let Some(&(seq, _)) = self.waiting.front() {
            if self.awaits_before(seq) {
                break;
            }
            if let Some((_, item)) = self.waiting.pop_front() {
                out.give(item);
            }
        }
    }

    /// When a number a packet waits for is given up waiting for.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        if self.waiting.is_empty() {
            return None;
        }
        self.awaited.front().map(|&(_, until)| until)
    }

    /// Packets waiting now, and that waited in all.
    pub(crate) fn waiting(&self) -> (usize, u64) {
        (self.waiting.len(), self.waited)
    }

    /// A new session of the peer's: nothing is awaited, and what waited goes on (returned,
    /// in order).
    pub(crate) fn reset(&mut self) -> impl Iterator<Item = T> + '_ {
        self.awaited.clear();
        self.waiting.drain(..).map(|(_, item)| item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What went on, in order.
    impl Sink<u32> for Vec<u32> {
        fn keep(&mut self, item: u32) -> u32 {
            item
        }
        fn give(&mut self, item: u32) {
            self.push(item);
        }
    }

    /// The resequencer gave `seqs` up: nothing goes on.
    fn given_up(o: &mut InOrder<u32>, seqs: &[u32], until: Time) {
        let mut out = Vec::new();
        o.given_up(seqs, until, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    fn t(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    fn pass(o: &mut InOrder<u32>, seq: u32, patient: bool) -> Vec<u32> {
        let mut out = Vec::new();
        o.pass(seq, patient, seq, &mut out);
        out
    }

    #[test]
    fn a_patient_packet_behind_a_given_up_number_waits_for_it_and_goes_after_it() {
        let mut o = InOrder::default();
        assert_eq!(pass(&mut o, 0, true), [0]);
        given_up(&mut o, &[1], t(100));
        assert!(pass(&mut o, 2, true).is_empty());
        assert!(pass(&mut o, 3, true).is_empty());
        assert_eq!(o.next_deadline(), Some(t(100)));
        assert_eq!(pass(&mut o, 1, true), [1, 2, 3], "the late one first");
        assert_eq!(o.next_deadline(), None);
        assert_eq!(pass(&mut o, 4, true), [4]);
    }

    #[test]
    fn others_never_wait() {
        let mut o = InOrder::default();
        given_up(&mut o, &[1], t(100));
        assert_eq!(pass(&mut o, 2, false), [2]);
        assert!(pass(&mut o, 3, true).is_empty());
        assert_eq!(pass(&mut o, 4, false), [4]);
        assert_eq!(pass(&mut o, 1, false), [1, 3]);
    }

    #[test]
    fn a_number_that_never_comes_is_waited_for_until_its_time() {
        let mut o = InOrder::default();
        given_up(&mut o, &[1, 5], t(100));
        assert!(pass(&mut o, 2, true).is_empty());
        assert!(pass(&mut o, 6, true).is_empty());
        let mut out = Vec::new();
        o.expire(t(99), &mut out);
        assert!(out.is_empty());
        o.expire(t(100), &mut out);
        assert_eq!(out, [2, 6]);
    }

    #[test]
    fn a_late_one_behind_another_awaited_number_waits_before_those_after_it() {
        let mut o = InOrder::default();
        given_up(&mut o, &[1, 3], t(100));
        assert!(pass(&mut o, 2, true).is_empty());
        assert!(pass(&mut o, 4, true).is_empty());
        assert!(pass(&mut o, 3, true).is_empty(), "1 still awaited");
        assert_eq!(pass(&mut o, 1, true), [1, 2, 3, 4]);
    }

    #[test]
    fn numbers_wrap() {
        let mut o = InOrder::default();
        given_up(&mut o, &[u32::MAX], t(100));
        assert!(pass(&mut o, 0, true).is_empty());
        assert_eq!(pass(&mut o, u32::MAX, true), [u32::MAX, 0]);
    }

    #[test]
    fn what_waits_is_bounded() {
        let mut o = InOrder::default();
        given_up(&mut o, &[0], t(100));
        let mut out = Vec::new();
        for s in 1..=WAITING as u32 + 1 {
            o.pass(s, true, s, &mut out);
        }
        assert_eq!(out, [1], "the oldest goes on");
        assert_eq!(o.waiting(), (WAITING, WAITING as u64 + 1));
        let mut out = Vec::new();
        for s in 0..AWAITED as u32 {
            o.given_up(&[10_000 + s], t(100), &mut out);
        }
        assert_eq!(out.len(), WAITING, "0 no longer awaited: all go on");
    }

    #[test]
    fn a_new_session_lets_everything_go() {
        let mut o = InOrder::default();
        given_up(&mut o, &[1], t(100));
        assert!(pass(&mut o, 2, true).is_empty());
        let mut out = Vec::new();
        out.extend(o.reset());
        assert_eq!(out, [2]);
        assert_eq!(pass(&mut o, 3, true), [3]);
    }
}
