//! `transport = "auto"` (the default of a path we dial): UDP while UDP answers, the path's
//! stream (TCP) while it does not. [`Auto`] is the choice, with time passed in; [`AutoSide`]
//! holds it for a socket, with what the receive task saw and what the send path reads.
//!
//! - **Prepare.** A path not up for [`PREPARE_AFTER`] (not for its uplink's sake: an absent
//!   interface or a spent budget is no reason) dials its stream, so that it is ready.
//! - **Fall back.** Not up for [`FALLBACK_AFTER`], nothing authentic heard by UDP for as
//!   long, and the stream connected: the path moves to the stream.
//! - **Retry UDP.** On the stream, every [`RETRY_EVERY`] (±10 %) a keepalive goes by UDP. If
//!   anything authentic comes back by UDP within [`ANSWER_WITHIN`], the path moves back (the
//!   peer, which learns our address from that keepalive, has moved already), and the stream
//!   closes after [`CLOSE_AFTER`].
//! - **Stream lost.** If the stream breaks while it carries the path, the path moves to UDP
//!   at once, and the stream is dialled again beside it.
//!
//! The rule reads the path's liveness, not when it was last heard: an idle path, whose
//! keepalives are seconds apart, never falls back by mistake.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;
use std::time::Duration;

use mpt_core::Time;

/// A path not up for this long dials its stream.
pub const PREPARE_AFTER: Duration = Duration::from_millis(1000);
/// A path not up for this long, with nothing heard by UDP for as long, moves to its stream.
pub const FALLBACK_AFTER: Duration = Duration::from_millis(1500);
/// On the stream, UDP is tried again this often (±10 %).
pub const RETRY_EVERY: Duration = Duration::from_secs(60);
/// A retry is answered when something authentic comes by UDP within this long.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// A stream no longer wanted closes after this long (what it still carries arrives).
pub const CLOSE_AFTER: Duration = Duration::from_secs(10);

/// What carries the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    Udp,
    Stream,
}

/// Why the path's carrier is what it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Why {
    /// As it started: UDP.
    Start,
    /// UDP got no answer for so long while the stream connected.
    UdpSilent(Duration),
    /// A retry by UDP was answered.
    UdpAnswered,
    /// The stream broke while it carried the path.
    StreamBroke,
    /// UDP was retried at this time, and nothing answered.
    RetryUnanswered(Time),
}

impl Why {
    /// How the status says it, at `now`.
    pub fn describe(&self, now: Time) -> String {
        match self {
            Why::Start => "as started".into(),
            Why::UdpSilent(d) => format!(
                "no answer by UDP for {:.1} s while TCP connected",
                d.as_secs_f64()
            ),
            Why::UdpAnswered => "UDP answered again".into(),
            Why::StreamBroke => "the TCP connection broke".into(),
            Why::RetryUnanswered(at) => format!(
                "UDP tried again {:.0} s ago: no answer",
                now.saturating_since(*at).as_secs_f64()
            ),
        }
    }
}

/// What the path looks like at a tick.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    /// The path is up (heard lately, with a session).
    pub up: bool,
    /// Its uplink cannot carry anything (absent, down, off): nothing to fall back for.
    pub uplink_down: bool,
    /// Its stream is connected.
    pub stream_up: bool,
    /// When something authentic last came by UDP on the path's socket.
    pub udp_heard: Option<Time>,
}

/// What the driver does after a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Carry the path on this from now on.
    Switch(Carrier),
    /// Send a keepalive by UDP (on the stream: is UDP back?).
    Probe,
}

/// The choice of a path's carrier.
#[derive(Debug, Clone)]
pub struct Auto {
    pub on: Carrier,
    pub why: Why,
    /// Times it moved.
    pub changes: u64,
    /// Since when the path has not been up, while on UDP.
    bad_since: Option<Time>,
    /// When it last moved to UDP, or started (a stream no longer wanted closes after
    /// [`CLOSE_AFTER`] from then).
    on_udp_since: Time,
    /// The next retry by UDP, while on the stream, and the one under way.
    next_probe: Time,
    probe_sent: Option<Time>,
    /// For the retries' jitter (xorshift).
    rng: u64,
}

impl Auto {
    /// A path starting on UDP at `now`; `seed` spreads the retries of several paths.
    pub fn new(now: Time, seed: u64) -> Auto {
        Auto {
            on: Carrier::Udp,
            why: Why::Start,
            changes: 0,
            bad_since: None,
            on_udp_since: now,
            next_probe: now,
            probe_sent: None,
            rng: seed | 1,
        }
    }

    /// Whether the stream should be connected at `now`: while it carries the path, while
    /// the path is about to fall back, and for [`CLOSE_AFTER`] after it moved back.
    pub fn wants_stream(&self, now: Time) -> bool {
        match self.on {
            Carrier::Stream => true,
            Carrier::Udp => {
                self.bad_since
                    .is_some_and(|b| now.saturating_since(b) >= PREPARE_AFTER)
                    || (self.changes > 0 && now.saturating_since(self.on_udp_since) < CLOSE_AFTER)
            }
        }
    }

    /// Look at the path at `now`.
    pub fn tick(&mut self, now: Time, seen: Seen) -> Option<Step> {
        match self.on {
            Carrier::Udp => {
                if seen.up || seen.uplink_down {
                    self.bad_since = None;
                    return None;
                }
                let bad = now.saturating_since(*self.bad_since.get_or_insert(now));
                let heard_lately = seen
                    .udp_heard
                    .is_some_and(|h| now.saturating_since(h) < FALLBACK_AFTER);
                if bad >= FALLBACK_AFTER && !heard_lately && seen.stream_up {
                    self.switch(now, Carrier::Stream, Why::UdpSilent(bad));
                    self.next_probe = now + self.retry_wait();
                    return Some(Step::Switch(Carrier::Stream));
                }
                None
            }
            Carrier::Stream => {
                if !seen.stream_up {
                    self.switch(now, Carrier::Udp, Why::StreamBroke);
                    // UDP has not answered for a while: dial again at once, and fall back
                    // again as soon as the stream is up if UDP still says nothing
                    self.bad_since = Some(Time::from_nanos(
                        now.as_nanos()
                            .saturating_sub(FALLBACK_AFTER.as_nanos() as u64),
                    ));
                    return Some(Step::Switch(Carrier::Udp));
                }
                if let Some(sent) = self.probe_sent {
                    if seen.udp_heard.is_some_and(|h| h >= sent) {
                        self.switch(now, Carrier::Udp, Why::UdpAnswered);
                        return Some(Step::Switch(Carrier::Udp));
                    }
                    if now.saturating_since(sent) >= ANSWER_WITHIN {
                        self.probe_sent = None;
                        self.why = Why::RetryUnanswered(sent);
                        self.next_probe = now + self.retry_wait();
                    }
                    return None;
                }
                if now >= self.next_probe {
                    self.probe_sent = Some(now);
                    return Some(Step::Probe);
                }
                None
            }
        }
    }

    fn switch(&mut self, now: Time, to: Carrier, why: Why) {
        self.on = to;
        self.why = why;
        self.changes += 1;
        self.probe_sent = None;
        self.bad_since = None;
        if to == Carrier::Udp {
            self.on_udp_since = now;
        }
    }

    /// [`RETRY_EVERY`] ± 10 %.
    fn retry_wait(&mut self) -> Duration {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let spread = RETRY_EVERY.as_millis() as u64 / 5;
        RETRY_EVERY - RETRY_EVERY / 10 + Duration::from_millis(self.rng % spread.max(1))
    }
}

/// A socket's [`Auto`], what the receive task saw, and what the send path reads.
#[derive(Debug)]
pub struct AutoSide {
    pub choice: Mutex<Auto>,
    /// The path rides its stream (read per datagram sent).
    on_stream: AtomicBool,
    /// When something authentic last came by UDP ([`Time`]'s nanoseconds, plus one; 0:
    /// never).
    udp_heard: AtomicU64,
}

impl AutoSide {
    pub fn new(now: Time, seed: u64) -> AutoSide {
        AutoSide {
            choice: Mutex::new(Auto::new(now, seed)),
            on_stream: AtomicBool::new(false),
            udp_heard: AtomicU64::new(0),
        }
    }

    /// Whether the path rides its stream now.
    pub fn on_stream(&self) -> bool {
        self.on_stream.load(Relaxed)
    }

    /// Something authentic came by UDP at `now`.
    pub fn heard_udp(&self, now: Time) {
        self.udp_heard.store(now.as_nanos() + 1, Relaxed);
    }

    pub fn udp_heard(&self) -> Option<Time> {
        match self.udp_heard.load(Relaxed) {
            0 => None,
            n => Some(Time::from_nanos(n - 1)),
        }
    }

    /// Look at the path at `now` (see [`Auto::tick`]); a switch takes effect here.
    pub fn tick(&self, now: Time, mut seen: Seen) -> Option<Step> {
        seen.udp_heard = self.udp_heard();
        let mut choice = self.choice.lock().unwrap_or_else(|p| p.into_inner());
        let step = choice.tick(now, seen);
        if let Some(Step::Switch(to)) = step {
            self.on_stream.store(to == Carrier::Stream, Relaxed);
        }
        step
    }

    /// The carrier, why, and how many times it moved, for the status at `now`.
    pub fn describe(&self, now: Time) -> (Carrier, String, u64) {
        let c = self.choice.lock().unwrap_or_else(|p| p.into_inner());
        (c.on, c.why.describe(now), c.changes)
    }

    /// Whether the stream should be connected at `now`.
    pub fn wants_stream(&self, now: Time) -> bool {
        self.choice
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .wants_stream(now)
    }
}

#[cfg(test)]
mod tests;
