//! The stream paths' keeper ([`stream_task`]): every [`TICK`] it starts the listeners, dials
//! what a dialling side's peers need, lets an `auto` path choose between UDP and its stream
//! ([`crate::stream::auto`]), tells the endpoints which paths are streams, takes a `tcp` or
//! `tls` path whose stream is not up down (and back up when it is), adds the streams' bytes on
//! the wire to their sockets' counts (which data budgets read), and the streams closed as
//! drops (garbage, a slow reader, unauthenticated, refused, a failed TLS handshake) to the
//! tunnel's drop counters.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use mpt_core::PathId;
use mpt_tunnel::{DownReason, LinkState, Transport, UplinkDown};
use tracing::{debug, warn};

use crate::stream::auto::{AutoSide, Carrier, Seen, Step};
use crate::stream::{Role, Sizes, StreamSide};
use crate::tunnel::{SockIo, Tunnel};

/// How often the keeper looks.
pub const TICK: Duration = Duration::from_millis(100);

/// Keep the stream paths, for as long as the daemon runs.
pub async fn stream_task(t: Arc<Tunnel>) {
    let sizes = Sizes {
        min: mpt_core::wire::HEADER_LEN,
        max: t.max_datagram,
    };
    let mut started: Vec<usize> = Vec::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let socks = t.sockets();
        for (s, sock) in socks.iter().enumerate() {
            let Some(side) = &sock.stream else { continue };
            match side.role {
                Role::Listen if !started.contains(&side.id) => {
                    started.push(side.id);
                    let (t2, id) = (t.clone(), side.id);
                    let alive = move || {
                        t2.sockets()
                            .iter()
                            .any(|s| s.stream.as_ref().is_some_and(|x| x.id == id))
                    };
                    tokio::spawn(side.clone().accept(t.streams.frames.clone(), sizes, alive));
                }
                Role::Listen => {}
                Role::Dial { .. } => match &sock.auto {
                    Some(auto) => choose(&t, s, sock, side, auto, sizes),
                    None => dial(&t, s, sock, side, sizes),
                },
            }
            let (tx, rx) = side.take_wire();
            sock.wire.tx.fetch_add(tx, Relaxed);
            sock.wire.rx.fetch_add(rx, Relaxed);
            for (reason, n) in side.closes.take_drops() {
                if n > 0 {
                    t.counters.io_drop(reason, n);
                }
            }
        }
        if socks.iter().any(|s| s.stream.is_some()) {
            mark_streams(&t, &socks);
        }
    }
}

/// A dialling side's socket `s`: dial each peer's address for its path, and take the path
/// down while no stream to the first peer's is up.
fn dial(t: &Tunnel, s: usize, sock: &SockIo, side: &Arc<StreamSide>, sizes: Sizes) {
    let Some(path) = sock.path() else { return };
    let mut up = None;
    for peer in t.peers.list().iter() {
        if peer.listening || peer.socket(path) != s {
            continue;
        }
        let remote = peer.lock().as_ref().and_then(|ep| ep.remote(path));
        let Some(remote) = remote else { continue };
        side.dial(remote, t.clock, &t.streams.frames, sizes);
        up.get_or_insert(side.has(remote));
    }
    let down = up == Some(false);
    let changed = {
        let mut u = sock.lock_uplink();
        let changed = u.stream_down != down;
        u.stream_down = down;
        changed
    };
    if changed {
        t.check_uplinks();
    }
}

/// An `auto` path's socket `s`: look at the path as its first peer sees it, let its choice
/// tick, and act on it (switch, or retry UDP); dial its stream while the choice wants it,
/// and close it when not.
fn choose(
    t: &Tunnel,
    s: usize,
    sock: &SockIo,
    side: &Arc<StreamSide>,
    auto: &AutoSide,
    sizes: Sizes,
) {
    let Some(path) = sock.path() else { return };
    let now = t.clock.now();
    let peers = t.peers.list();
    let mine = || {
        peers
            .iter()
            .filter(move |p| !p.listening && p.socket(path) == s)
    };
    let mut seen = None;
    let mut remotes = Vec::new();
    for peer in mine() {
        let guard = peer.lock();
        let Some(ep) = guard.as_ref() else { continue };
        let Some(remote) = ep.remote(path) else {
            continue;
        };
        remotes.push(remote);
        if seen.is_none() {
            let info = ep.path_info(path);
            let uplink_down = matches!(
                info.down_reason,
                Some(DownReason::Uplink(u)) if u != UplinkDown::Connecting
            ) || info.down_reason == Some(DownReason::PeerClosed);
            seen = Some(Seen {
                up: info.state == LinkState::Up && ep.keys_agreed(),
                uplink_down,
                stream_up: side.has(remote),
                udp_heard: None,
            });
        }
    }
    let Some(seen) = seen else { return };
    match auto.tick(now, seen) {
        Some(Step::Switch(to)) => {
            let (_, why, changes) = auto.describe(now);
            let to = match to {
                Carrier::Udp => "udp",
                Carrier::Stream => "tcp",
            };
            warn!(path = %sock.name(), transport = to, why, changes, "path transport changed");
        }
        Some(Step::Probe) => {
            let mut buf = Vec::new();
            for peer in mine() {
                let made = peer
                    .lock()
                    .as_mut()
                    .and_then(|ep| ep.probe_keepalive(now, path, &mut buf));
                let Some(tx) = made else { continue };
                match sock.io.try_send(&buf, tx.destination, None) {
                    Ok(()) => sock.wire.sent(tx.destination, 1, buf.len()),
                    Err(e) => debug!(path = %sock.name(), error = %e, "UDP retry not sent"),
                }
            }
        }
        None => {}
    }
    if auto.wants_stream(now) {
        for remote in remotes {
            side.dial(remote, t.clock, &t.streams.frames, sizes);
        }
    } else if side.backlog().0 > 0 {
        side.close_all();
    }
}

/// Tell each endpoint which of its paths are streams now: a dialling side's always; a
/// listening side's while the peer's address on that path is one of its streams'.
fn mark_streams(t: &Tunnel, socks: &[Arc<SockIo>]) {
    let now = t.clock.now();
    for peer in t.peers.list().iter() {
        let mut guard = peer.lock();
        let Some(ep) = guard.as_mut() else { continue };
        for p in 0..ep.path_count() {
            let path = PathId(p as u8);
            let Some(sock) = socks.get(peer.socket(path)) else {
                continue;
            };
            let stream = match &sock.stream {
                None => false,
                Some(side) => match side.role {
                    Role::Dial { .. } => sock.auto.as_ref().is_none_or(|a| a.on_stream()),
                    Role::Listen => ep.remote(path).is_some_and(|r| side.has(r)),
                },
            };
            let transport = if stream {
                Transport::Stream
            } else {
                Transport::Datagram
            };
            ep.set_path_transport(now, path, transport);
        }
    }
}
