//! Traffic classes: how an inner packet is sent, by what it is. A class matches on the
//! packet's DSCP, IP protocol, TCP/UDP port, TCP SYN flag and size; its mode says how packets
//! that match are sent:
//!
//! * [`Mode::Bond`] (every packet no class matches): the scheduler shares them out over the
//!   paths, and a busy path may bundle them;
//! * [`Mode::Fastest`]: on the path where a datagram sent now arrives soonest
//!   (`Sending::soonest`), never held in a bundle; for [`LIGHT_HOLD`] after it, bulk may
//!   queue no more than [`LIGHT_QUEUE`] on that path (`Classes::light_sent`); where that
//!   path lost something lately (it keeps its packets for resending) or is in its first
//!   minute (it has not shown whether it loses), a packet of up to
//!   [`crate::WAKE_COPY_MAX`] bytes that keeps it short (no acknowledgement) goes twice, as a
//!   duplicate class's does;
//! * [`Mode::Duplicate`]: on the two soonest paths at once, under one sequence number; the
//!   receiver delivers the copy that arrives first and drops the other as a duplicate.
//!
//! The first class that matches decides. Unless the configuration says otherwise, the
//! [`default_classes`] follow the ones configured: DSCP EF (voice), DNS, TCP handshakes and
//! pure TCP acknowledgements go the fastest way, so that light traffic never waits behind bulk.

use std::time::Duration;

use mpt_core::inner::{self, Ip, Tcp};
use mpt_core::{PathId, Time};
use mpt_sched::Scheduler;

/// How the packets of a class are sent (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Bond,
    Fastest,
    Duplicate,
}

impl Mode {
    /// As the configuration names it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Bond => "bond",
            Mode::Fastest => "fastest",
            Mode::Duplicate => "duplicate",
        }
    }

    /// The mode the configuration names `s`.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "bond" => Some(Mode::Bond),
            "fastest" => Some(Mode::Fastest),
            "duplicate" => Some(Mode::Duplicate),
            _ => None,
        }
    }
}

/// IP protocol numbers a class may name.
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;

/// The IP protocol number the configuration names `name` ("tcp", "udp", "icmp", "icmpv6").
pub fn protocol_number(name: &str) -> Option<u8> {
    match name.to_ascii_lowercase().as_str() {
        "tcp" => Some(PROTO_TCP),
        "udp" => Some(PROTO_UDP),
        "icmp" => Some(PROTO_ICMP),
        "icmpv6" | "ipv6-icmp" => Some(PROTO_ICMPV6),
        _ => None,
    }
}

/// DSCP "expedited forwarding" (RFC 3246): voice.
pub const DSCP_EF: u8 = 46;

/// One class: what it matches (every condition given must hold; none given matches every
/// packet) and how its packets are sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassRule {
    pub name: String,
    /// The DSCP is one of these (empty: any).
    pub dscp: Vec<u8>,
    /// The IP protocol (IPv6: the first header after the fixed one).
    pub protocol: Option<u8>,
    /// A TCP or UDP packet whose source or destination port lies in this range (inclusive).
    pub ports: Option<(u16, u16)>,
    /// A TCP segment with SYN set (a handshake's first two segments).
    pub tcp_syn: bool,
    /// A pure TCP acknowledgement: a segment that carries no data and sets none of SYN, FIN
    /// and RST.
    pub tcp_ack: bool,
    /// The inner packet is at most this many bytes long.
    pub max_size: Option<usize>,
    pub mode: Mode,
}

/// The classes that follow the configured ones unless `[connection] default_classes = false`:
/// DSCP EF, DNS (port 53, UDP or TCP) and TCP handshakes, all `fastest`.
pub fn default_classes() -> Vec<ClassRule> {
    vec![
        ClassRule {
            name: "ef".into(),
            dscp: vec![DSCP_EF],
            mode: Mode::Fastest,
            ..ClassRule::default()
        },
        ClassRule {
            name: "dns".into(),
            ports: Some((53, 53)),
            mode: Mode::Fastest,
            ..ClassRule::default()
        },
        ClassRule {
            name: "tcp-handshake".into(),
            protocol: Some(PROTO_TCP),
            tcp_syn: true,
            mode: Mode::Fastest,
            ..ClassRule::default()
        },
        ClassRule {
            name: "tcp-ack".into(),
            protocol: Some(PROTO_TCP),
            tcp_ack: true,
            mode: Mode::Fastest,
            ..ClassRule::default()
        },
    ]
}

/// What a class can match on, read from an inner packet's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketInfo {
    pub dscp: u8,
    pub protocol: u8,
    /// Source and destination port (TCP and UDP, in a packet that is not a later fragment).
    pub ports: Option<(u16, u16)>,
    pub syn: bool,
    /// ACK set (TCP).
    pub ack: bool,
    /// A TCP segment without data and without SYN, FIN or RST.
    pub ack_only: bool,
    pub len: usize,
}

impl PacketInfo {
    /// Read an IPv4 or IPv6 packet's headers; `None` when it is neither or too short.
    pub fn parse(p: &[u8]) -> Option<PacketInfo> {
        let ip = Ip::new_checked(p)?;
        let (dscp, protocol) = (ip.dscp(), ip.protocol());
        // a later fragment carries no transport header
        let l4 = ip.l4().filter(|_| !ip.later_fragment());
        let mut info = PacketInfo {
            dscp,
            protocol,
            ports: None,
            syn: false,
            ack: false,
            ack_only: false,
            len: p.len(),
        };
        if let Some(l4) = l4 {
            if matches!(protocol, PROTO_TCP | PROTO_UDP) {
                info.ports = inner::ports(l4);
            }
            if let Some(flags) = inner::tcp_flags(l4).filter(|_| protocol == PROTO_TCP) {
                info.syn = flags & Tcp::SYN != 0;
                info.ack = flags & Tcp::ACK != 0;
                // no data: the segment ends with its header (SYN, FIN, RST off)
                info.ack_only = flags & (Tcp::SYN | Tcp::FIN | Tcp::RST) == 0
                    && Tcp::new_checked(l4).is_some_and(|t| t.payload().is_empty());
            }
        }
        Some(info)
    }
}

/// Whether IP packet `p` opens a TCP connection: a SYN without ACK.
pub(crate) fn opens_tcp(p: &[u8]) -> bool {
    PacketInfo::parse(p).is_some_and(|i| i.protocol == PROTO_TCP && i.syn && !i.ack)
}

impl ClassRule {
    /// Whether the packet `info` describes is of this class.
    pub fn matches(&self, info: &PacketInfo) -> bool {
        (self.dscp.is_empty() || self.dscp.contains(&info.dscp))
            && self.protocol.is_none_or(|p| p == info.protocol)
            && self.ports.is_none_or(|(lo, hi)| {
                info.ports
                    .is_some_and(|(s, d)| (lo..=hi).contains(&s) || (lo..=hi).contains(&d))
            })
            && (!self.tcp_syn || (info.protocol == PROTO_TCP && info.syn))
            && (!self.tcp_ack || (info.protocol == PROTO_TCP && info.ack_only))
            && self.max_size.is_none_or(|m| info.len <= m)
    }
}

/// The first of `classes` the inner packet `packet` is of (`None`: no class, or not an IP
/// packet: [`Mode::Bond`]).
pub fn classify(classes: &[ClassRule], packet: &[u8]) -> Option<usize> {
    if classes.is_empty() {
        return None;
    }
    let info = PacketInfo::parse(packet)?;
    classes.iter().position(|c| c.matches(&info))
}

/// The path a packet of a light stream (of a `fastest` or `duplicate` class) took is kept
/// short this long after it (`Classes::light_sent`).
pub const LIGHT_HOLD: Duration = Duration::from_secs(1);
/// A light packet is part of a stream when it is voice (marked EF), or when its flow sent one
/// at least this long (and less than [`LIGHT_HOLD`]) before it: a game's second packet, some
/// milliseconds after its first. Packets closer together are one burst: a DNS lookup's A and
/// AAAA queries, sent at once from one port, are no stream. Kept short for a second after each
/// lookup, the near path gave bulk half of what it carried for that second: a UDP stream at
/// 80 % of two paths lost 8.8 % of its datagrams with a lookup every 2 s (simulator), and BBR
/// through the lab's 10/60 ms pair fell from 32 to 20 Mbit/s.
pub const LIGHT_BURST: Duration = Duration::from_millis(2);
/// Light packets remembered to tell a stream (other flows' among them).
const LIGHT_RECENT: usize = 8;
/// The queue bulk may build on that path meanwhile. Bulk's standing queue goes to the other
/// paths, and a TCP flow through the tunnel waits for its slowest: with 2 ms, a 100/s EF ping
/// beside one BBR flow over a UDP and a TCP path (20 Mbit/s each) put the flow's queue on the
/// TCP path alone, and the flow got 0.80 of the links' sum (cubic 0.87); with 5 ms, 0.92-0.93
/// (cubic 0.94), while the ping's p99 stayed within 4.4 ms of the idle link's
/// (`tests/e2e/transports.rs`).
pub const LIGHT_QUEUE: Duration = Duration::from_millis(5);

/// Paths where a light packet arrives within this of the soonest tie: it takes the nearest.
pub const SOONEST_TIE: Duration = Duration::from_millis(5);

/// A path whose round-trip time is not measured yet counts as this slow.
pub(crate) const UNMEASURED_RTT: Duration = Duration::from_secs(1);

/// A light packet's flow ([`Classes::flow`]): its IP protocol and ports, and whether it is
/// marked EF (voice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flow {
    pub(crate) id: u64,
    pub(crate) ef: bool,
}

/// A packet to copy on another path once its batch is numbered (`Sending::send_copy`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CopyOf {
    /// Its class, for the counts.
    pub(crate) class: Option<usize>,
    /// Its global sequence number.
    pub(crate) seq: u32,
    /// The path it went on.
    pub(crate) first: PathId,
    /// Delivered at once, as light traffic is (else in order, as bonded data).
    pub(crate) express: bool,
}

/// What classes keep per connection: the path light traffic keeps short, and the packets
/// sent per class.
#[derive(Debug, Clone, Default)]
pub(crate) struct Classes {
    /// The path light traffic took lately, kept short until when ([`Classes::light_sent`]).
    light_kept: Option<(PathId, Time)>,
    /// When the last light packets went, and their flows ([`Classes::flow`]), newest first.
    light_before: [Option<(Time, u64)>; LIGHT_RECENT],
    /// Packets sent per class (configuration order) and path; copies sent.
    sent: Vec<Vec<u64>>,
    copies_sent: u64,
}

impl Classes {
    /// The class of the inner packet `packet` among `rules` (its index) and how it is sent.
    pub(crate) fn of(rules: &[ClassRule], packet: &[u8]) -> (Option<usize>, Mode) {
        let class = classify(rules, packet);
        (class, class.map_or(Mode::Bond, |c| rules[c].mode))
    }

    /// Whether a packet of `class` (of `rules`), sent the fastest way, keeps its path short
    /// ([`Classes::light_sent`]) and never waits in a bundle: not a pure TCP
    /// acknowledgement, nor a SYN (one packet: kept short for a second, its path starved the
    /// transfer it opened, which the learned rates then held to the far path). A transfer's
    /// acknowledgements are a stream too, and they would keep the near path short for bulk
    /// going their way whenever transfers run both ways at once; bundled, they wait no
    /// longer than the path's queue would hold them anyway.
    pub(crate) fn keeps_short(rules: &[ClassRule], class: Option<usize>) -> bool {
        class.is_none_or(|c| !rules[c].tcp_ack && !rules[c].tcp_syn)
    }

    /// The flow of a light packet, for telling a stream ([`LIGHT_BURST`]): its IP protocol
    /// and ports (its addresses are left out: two hosts' flows on one pair of ports at once
    /// are rare, and taken for one they only keep a path short longer); and whether it is
    /// marked EF (voice).
    pub(crate) fn flow(packet: &[u8]) -> Flow {
        PacketInfo::parse(packet).map_or(Flow { id: 0, ef: false }, |i| {
            let (s, d) = i.ports.unwrap_or_default();
            let id = u64::from(i.protocol) << 32 | u64::from(s) << 16 | u64::from(d);
            Flow {
                id,
                ef: i.dscp == DSCP_EF,
            }
        })
    }

    /// A packet of a `fastest` or `duplicate` class of `flow` ([`Classes::flow`]) went on
    /// `path` at `now`. Where it is voice (EF), or its flow is a stream
    /// (one of the last [`LIGHT_RECENT`] light packets is the flow's, from [`LIGHT_BURST`] to
    /// [`LIGHT_HOLD`] ago), `sched` keeps the path's queue within [`LIGHT_QUEUE`] for
    /// [`LIGHT_HOLD`]: bulk that would queue longer there goes to the other paths, so that the
    /// stream's next packets wait behind nothing. The tunnel cannot reorder the link's own
    /// queue, only keep it short: the queue that stood when the stream began drains at the
    /// link's rate (at 20 Mbit/s a full 50 ms queue is gone before a voice call's third
    /// packet). The hold covers a stream's pauses (a voice call that sends nothing while its
    /// speaker is silent). Any other lone light packet (a DNS lookup) keeps nothing short: it
    /// meets the queue its path has, as the first packet of such a stream does.
    pub(crate) fn light_sent(
        &mut self,
        now: Time,
        path: PathId,
        flow: Flow,
        sched: &mut dyn Scheduler,
    ) {
        let Flow { id: flow, ef } = flow;
        let stream = ef
            || self.light_before.iter().any(|t| {
                t.is_some_and(|(t, f)| {
                    let ago = now.saturating_since(t);
                    f == flow && (LIGHT_BURST..LIGHT_HOLD).contains(&ago)
                })
            });
        self.light_before.rotate_right(1);
        self.light_before[0] = Some((now, flow));
        if !stream {
            return;
        }
        let until = match self.light_kept {
            Some((p, until)) if p == path => until.max(now + LIGHT_HOLD),
            _ => now + LIGHT_HOLD,
        };
        self.light_kept = Some((path, until));
        sched.keep_short(Some(path), LIGHT_QUEUE);
    }

    /// The light stream's path is no longer kept short once [`LIGHT_HOLD`] passed without it.
    pub(crate) fn light_expire(&mut self, now: Time, sched: &mut dyn Scheduler) {
        if self.light_kept.is_some_and(|(_, until)| until <= now) {
            self.light_kept = None;
            sched.keep_short(None, LIGHT_QUEUE);
        }
    }

    /// The path light traffic keeps short at `now`, if any.
    pub(crate) fn kept_path(&self, now: Time) -> Option<PathId> {
        self.light_kept
            .filter(|&(_, until)| now < until)
            .map(|(p, _)| p)
    }

    /// Count a packet of `class` (of `classes` configured) sent on `path`, a copy too.
    pub(crate) fn count(&mut self, classes: usize, class: Option<usize>, path: PathId) {
        let Some(c) = class else { return };
        if self.sent.len() < classes {
            self.sent.resize(classes, Vec::new());
        }
        let per_path = &mut self.sent[c];
        if per_path.len() <= path.index() {
            per_path.resize(path.index() + 1, 0);
        }
        per_path[path.index()] += 1;
    }

    /// A copy of a `duplicate` class was sent.
    pub(crate) fn copy_sent(&mut self) {
        self.copies_sent += 1;
    }

    /// The classes were configured anew: their counts start again.
    pub(crate) fn reconfigured(&mut self) {
        self.sent.clear();
    }

    /// Packets sent per class and path (`[class][path]`), and the copies sent.
    pub(crate) fn counts(&self) -> (&[Vec<u64>], u64) {
        (&self.sent, self.copies_sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 packet of `len` bytes: protocol, DSCP, ports and TCP flags as given.
    fn v4(len: usize, protocol: u8, dscp: u8, ports: (u16, u16), flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[1] = dscp << 2;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[9] = protocol;
        p[20..22].copy_from_slice(&ports.0.to_be_bytes());
        p[22..24].copy_from_slice(&ports.1.to_be_bytes());
        if protocol == PROTO_TCP {
            p[33] = flags;
        }
        p
    }

    fn v6(len: usize, next: u8, dscp: u8, ports: (u16, u16), flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; len];
        let tc = dscp << 2;
        p[0] = 0x60 | (tc >> 4);
        p[1] = tc << 4;
        p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        p[6] = next;
        p[40..42].copy_from_slice(&ports.0.to_be_bytes());
        p[42..44].copy_from_slice(&ports.1.to_be_bytes());
        if next == PROTO_TCP {
            p[53] = flags;
        }
        p
    }

    #[test]
    fn the_default_classes_take_voice_dns_handshakes_and_acknowledgements_and_nothing_else() {
        let c = default_classes();
        let name = |p: &[u8]| classify(&c, p).map(|i| c[i].name.as_str());
        assert_eq!(
            name(&v4(200, PROTO_UDP, DSCP_EF, (4000, 4002), 0)),
            Some("ef")
        );
        assert_eq!(
            name(&v6(200, PROTO_UDP, DSCP_EF, (4000, 4002), 0)),
            Some("ef")
        );
        assert_eq!(name(&v4(80, PROTO_UDP, 0, (40000, 53), 0)), Some("dns"));
        assert_eq!(name(&v6(120, PROTO_UDP, 0, (53, 40000), 0)), Some("dns"));
        assert_eq!(name(&v4(80, PROTO_TCP, 0, (40000, 53), 0x10)), Some("dns"));
        // SYN, SYN-ACK: a handshake; ACK, data: bulk
        assert_eq!(
            name(&v4(60, PROTO_TCP, 0, (40000, 443), 0x02)),
            Some("tcp-handshake")
        );
        assert_eq!(
            name(&v6(80, PROTO_TCP, 0, (443, 40000), 0x12)),
            Some("tcp-handshake")
        );
        assert_eq!(name(&v4(1400, PROTO_TCP, 0, (40000, 443), 0x10)), None);
        // a segment that is all header (32 bytes: with timestamps), ACK alone or with PSH:
        // an acknowledgement; with data after the header, or FIN, or RST: not
        let offset = |mut p: Vec<u8>, at: usize, words: u8| {
            p[at] = words << 4;
            p
        };
        let ack4 = |len, flags| offset(v4(len, PROTO_TCP, 0, (443, 40000), flags), 32, 8);
        assert_eq!(name(&ack4(52, 0x10)), Some("tcp-ack"));
        assert_eq!(name(&ack4(52, 0x18)), Some("tcp-ack"));
        assert_eq!(name(&ack4(53, 0x10)), None);
        assert_eq!(name(&ack4(52, 0x11)), None);
        assert_eq!(name(&ack4(52, 0x14)), None);
        let ack6 = offset(v6(72, PROTO_TCP, 0, (443, 40000), 0x10), 52, 8);
        assert_eq!(name(&ack6), Some("tcp-ack"));
        // a header length the segment does not have: no acknowledgement
        assert_eq!(
            name(&offset(v4(52, PROTO_TCP, 0, (443, 40000), 0x10), 32, 2)),
            None
        );
        assert_eq!(name(&v4(1400, PROTO_UDP, 0, (5201, 40000), 0)), None);
        assert_eq!(name(&v6(1400, PROTO_UDP, 10, (5201, 40000), 0)), None);
        // not IP, or cut short: no class
        assert_eq!(name(&[0x00; 60]), None);
        assert_eq!(name(&[0x45; 10]), None);
    }

    #[test]
    fn every_condition_must_hold_and_the_first_class_that_matches_decides() {
        let voice = ClassRule {
            name: "voice".into(),
            protocol: Some(PROTO_UDP),
            ports: Some((5000, 5100)),
            max_size: Some(300),
            mode: Mode::Duplicate,
            ..ClassRule::default()
        };
        let mut classes = vec![voice];
        classes.extend(default_classes());
        let mode = |p: &[u8]| classify(&classes, p).map(|i| classes[i].mode);
        assert_eq!(
            mode(&v4(200, PROTO_UDP, 0, (5050, 9), 0)),
            Some(Mode::Duplicate)
        );
        assert_eq!(
            mode(&v4(200, PROTO_UDP, 0, (9, 5100), 0)),
            Some(Mode::Duplicate)
        );
        // too big, another port, another protocol: not voice
        assert_eq!(mode(&v4(400, PROTO_UDP, 0, (5050, 9), 0)), None);
        assert_eq!(mode(&v4(200, PROTO_UDP, 0, (5101, 9), 0)), None);
        assert_eq!(mode(&v4(200, PROTO_TCP, 0, (5050, 9), 0x10)), None);
        // voice marked EF: the configured class comes first
        assert_eq!(
            mode(&v4(200, PROTO_UDP, DSCP_EF, (5050, 9), 0)),
            Some(Mode::Duplicate)
        );
        assert_eq!(
            mode(&v4(200, PROTO_UDP, DSCP_EF, (7000, 9), 0)),
            Some(Mode::Fastest)
        );
    }

    #[test]
    fn a_later_fragment_has_no_ports_and_a_short_transport_header_none() {
        let mut p = v4(200, PROTO_UDP, 0, (53, 53), 0);
        p[6] = 0x00;
        p[7] = 0x10; // offset 128 bytes
        assert_eq!(PacketInfo::parse(&p).and_then(|i| i.ports), None);
        let short = &v4(200, PROTO_UDP, 0, (53, 53), 0)[..22];
        assert_eq!(PacketInfo::parse(short).and_then(|i| i.ports), None);
        assert_eq!(Mode::parse("duplicate"), Some(Mode::Duplicate));
        assert_eq!(Mode::parse("fast"), None);
    }

    /// A lone light packet, a DNS lookup's two queries and lookups from several ports keep
    /// nothing short; a flow's second light packet 2 ms to a second after its first makes it
    /// a stream, whose path is kept short for a second after each packet, other flows'
    /// packets in between or not; voice (EF) is one from its first packet.
    #[test]
    fn only_a_light_stream_keeps_its_path_short() {
        let spec = mpt_sched::PathSpec::new(1, None, false);
        let mut sched = mpt_sched::RoundRobin::new(&[spec, spec]);
        let mut c = Classes::default();
        let at = |ms: u64| Time::from_millis(ms);
        let (voice, game, dns) = (
            Classes::flow(&v4(200, PROTO_UDP, DSCP_EF, (5004, 5004), 0)),
            Classes::flow(&v4(120, PROTO_UDP, 0, (27015, 27015), 0)),
            |port| Classes::flow(&v4(80, PROTO_UDP, 0, (port, 53), 0)),
        );
        // a lookup: an A and an AAAA query from one port, at once
        c.light_sent(at(1000), PathId(0), dns(40_000), &mut sched);
        c.light_sent(at(1000), PathId(0), dns(40_000), &mut sched);
        assert_eq!(c.kept_path(at(1000)), None, "a lookup is no stream");
        // lookups from three ports, 40 ms apart
        for (k, ms) in [1200, 1240, 1280].into_iter().enumerate() {
            c.light_sent(at(ms), PathId(1), dns(40_001 + k as u16), &mut sched);
        }
        assert_eq!(c.kept_path(at(1280)), None, "three flows are no stream");
        // a game's flow (a configured `fastest` class) every 60 ms, with lookups from other
        // ports in between: a stream from its second packet
        for (k, ms) in [2000, 2060].into_iter().enumerate() {
            c.light_sent(at(ms), PathId(1), game, &mut sched);
            c.light_sent(at(ms + 1), PathId(1), dns(41_000 + k as u16), &mut sched);
            assert_eq!(c.kept_path(at(ms + 1)), (k == 1).then_some(PathId(1)));
        }
        assert_eq!(c.kept_path(at(3059)), Some(PathId(1)));
        assert_eq!(c.kept_path(at(3060)), None);
        // voice (EF) from its first packet
        c.light_sent(at(5000), PathId(0), voice, &mut sched);
        assert_eq!(c.kept_path(at(5999)), Some(PathId(0)));
        assert_eq!(c.kept_path(at(6000)), None);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_classify_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120)) {
            let _ = classify(&default_classes(), &bytes);
        }
    }
}
