//! The fastest way: the path where a datagram sent now arrives soonest, which light traffic
//! takes ([`crate::Mode::Fastest`]), and the copies of duplicate classes and of packets on a
//! woken path, which go on the next soonest path.

use std::time::Duration;

use mpt_core::{PathId, Time};
use mpt_sched::Scheduler;

use crate::path::PathState;
use crate::PathSettings;

/// The path where a datagram sent at `now` arrives soonest among those `allowed` admits: its
/// delay plus its queue ([`PathState::queue_seen`], or the scheduler's clock). The delay is
/// the path's smallest one-way delay above the nearest path's, as the peer's last report
/// (within a second) gives it, or else half its smoothed round-trip time (which a report's
/// way back and the queue of the packet it answers are part of). Only paths the scheduler may
/// use (`paths` with their settings `cfg`), backup paths only while no regular one is
/// usable, and stream paths (TCP or TLS, whose losses wait for their transport's resending)
/// only while no datagram path is.
pub(crate) fn soonest_where(
    now: Time,
    paths: &[PathState],
    cfg: &[PathSettings],
    sched: &dyn Scheduler,
    allowed: impl Fn(PathId) -> bool + Copy,
) -> Option<PathId> {
    let any = || {
        (0..paths.len())
            .map(|i| PathId(i as u8))
            .filter(move |&p| allowed(p) && paths[p.index()].usable())
    };
    let datagrams = any().any(|p| !paths[p.index()].stream);
    let usable = move || any().filter(move |&p| !(datagrams && paths[p.index()].stream));
    // the highest tier that has a usable path
    let tier = |p: PathId| cfg[p.index()].tier();
    let top = usable().map(tier).min()?;
    let arrival = |p: PathId| {
        let path = &paths[p.index()];
        let delay = match path.peer_report {
            Some((at, e)) if now.saturating_since(at) <= Duration::from_secs(1) => {
                Duration::from_micros(u64::from(e.owd_min_us))
            }
            _ => {
                path.srtt_us
                    .map_or(crate::class::UNMEASURED_RTT, Duration::from_micros)
                    / 2
            }
        };
        let clock = sched.backlog(now, p);
        let queue = path
            .queue_seen(now, clock, cfg[p.index()].rate_bps.is_some())
            .unwrap_or(clock);
        (delay, delay + queue)
    };
    let candidates = || usable().filter(move |&p| tier(p) == top);
    let soonest = candidates().map(|p| arrival(p).1).min()?;
    // Bulk spread by earliest delivery queues on the near paths until they are no sooner
    // than the far ones, so the paths that carry it tie. Of those, the nearest: the
    // stream keeps its path short, and there the queue drains, where on a farther path
    // every packet after would pay the difference in delay.
    candidates()
        .map(|p| (arrival(p), p))
        .filter(|&((_, at), _)| at <= soonest + crate::class::SOONEST_TIE)
        .min_by_key(|&(key, _)| key)
        .map(|(_, p)| p)
}
