use super::*;

fn ms(n: u64) -> Time {
    Time::from_millis(n)
}

/// Tick `a` every 100 ms from `from` to `to` (ms) with `seen`; the steps, with their times.
fn run(a: &mut Auto, from: u64, to: u64, seen: Seen) -> Vec<(u64, Step)> {
    (from..=to)
        .step_by(100)
        .filter_map(|t| a.tick(ms(t), seen).map(|s| (t, s)))
        .collect()
}

const BLOCKED: Seen = Seen {
    up: false,
    uplink_down: false,
    stream_up: true,
    udp_heard: None,
};

#[test]
fn a_path_that_udp_never_reaches_moves_to_its_stream() {
    let mut a = Auto::new(ms(0), 7);
    assert!(!a.wants_stream(ms(0)));
    assert_eq!(a.tick(ms(0), BLOCKED), None);
    assert!(!a.wants_stream(ms(900)));
    assert!(a.wants_stream(ms(1000)), "dials ahead of falling back");
    let steps = run(&mut a, 100, 3000, BLOCKED);
    assert_eq!(steps, vec![(1500, Step::Switch(Carrier::Stream))]);
    assert_eq!(a.on, Carrier::Stream);
    assert_eq!(a.changes, 1);
    assert!(a
        .why
        .describe(ms(1500))
        .contains("no answer by UDP for 1.5 s"));
}

#[test]
fn it_waits_for_the_stream_to_connect() {
    let mut a = Auto::new(ms(0), 7);
    let no_stream = Seen {
        stream_up: false,
        ..BLOCKED
    };
    assert!(run(&mut a, 0, 4000, no_stream).is_empty());
    assert!(a.wants_stream(ms(4000)));
    assert_eq!(
        run(&mut a, 4100, 4100, BLOCKED),
        vec![(4100, Step::Switch(Carrier::Stream))]
    );
}

#[test]
fn up_paths_idle_paths_and_dead_uplinks_stay_on_udp() {
    let mut a = Auto::new(ms(0), 7);
    let up = Seen {
        up: true,
        ..BLOCKED
    };
    assert!(run(&mut a, 0, 60_000, up).is_empty());
    let uplink = Seen {
        uplink_down: true,
        ..BLOCKED
    };
    assert!(run(&mut a, 60_100, 120_000, uplink).is_empty());
    assert!(!a.wants_stream(ms(120_000)));
    // heard by UDP lately (a handshake under way): not yet
    let mut b = Auto::new(ms(0), 7);
    for t in (0..5000).step_by(100) {
        let seen = Seen {
            udp_heard: Some(ms(t)),
            ..BLOCKED
        };
        assert_eq!(b.tick(ms(t), seen), None, "at {t} ms");
    }
}

#[test]
fn a_path_that_comes_back_starts_counting_again() {
    let mut a = Auto::new(ms(0), 7);
    assert!(run(&mut a, 0, 1200, BLOCKED).is_empty());
    let up = Seen {
        up: true,
        ..BLOCKED
    };
    a.tick(ms(1300), up);
    assert!(!a.wants_stream(ms(1300)));
    assert!(run(&mut a, 1400, 2800, BLOCKED).is_empty());
    assert_eq!(
        run(&mut a, 2900, 2900, BLOCKED),
        vec![(2900, Step::Switch(Carrier::Stream))]
    );
}

#[test]
fn on_the_stream_it_retries_udp_about_every_minute_and_moves_back_when_answered() {
    let mut a = Auto::new(ms(0), 7);
    run(&mut a, 0, 1500, BLOCKED);
    assert_eq!(a.on, Carrier::Stream);
    let on_stream = Seen {
        up: true,
        ..BLOCKED
    };
    // the first retry, unanswered
    let steps = run(&mut a, 1600, 80_000, on_stream);
    let probes: Vec<u64> = steps.iter().map(|s| s.0).collect();
    assert!(!probes.is_empty());
    let first = probes[0] - 1500;
    assert!(
        (54_000..=66_000).contains(&first),
        "first retry after {first} ms"
    );
    assert!(steps.iter().all(|s| s.1 == Step::Probe));
    let t = *probes.last().unwrap();
    assert!(matches!(a.why, Why::RetryUnanswered(_)) || t + 2000 > 80_000);
    // the next one is answered
    let probe = (80_100..150_000)
        .step_by(100)
        .find(|t| a.tick(ms(*t), on_stream) == Some(Step::Probe))
        .expect("a retry");
    let answered = Seen {
        udp_heard: Some(ms(probe + 40)),
        ..on_stream
    };
    assert_eq!(
        a.tick(ms(probe + 100), answered),
        Some(Step::Switch(Carrier::Udp))
    );
    assert_eq!(
        (a.on, a.why, a.changes),
        (Carrier::Udp, Why::UdpAnswered, 2)
    );
    // the stream stays for a while, then goes
    assert!(a.wants_stream(ms(probe + 100 + 9_000)));
    assert!(!a.wants_stream(ms(probe + 100 + 10_000)));
}

#[test]
fn udp_heard_before_the_retry_does_not_count_as_its_answer() {
    let mut a = Auto::new(ms(0), 7);
    run(&mut a, 0, 1500, BLOCKED);
    let stale = Seen {
        up: true,
        udp_heard: Some(ms(10)),
        ..BLOCKED
    };
    let steps = run(&mut a, 1600, 200_000, stale);
    assert!(steps.iter().all(|s| s.1 == Step::Probe), "{steps:?}");
    assert_eq!(a.on, Carrier::Stream);
}

#[test]
fn a_broken_stream_sends_the_path_to_udp_and_back_when_it_reconnects() {
    let mut a = Auto::new(ms(0), 7);
    run(&mut a, 0, 1500, BLOCKED);
    let broken = Seen {
        stream_up: false,
        ..BLOCKED
    };
    assert_eq!(a.tick(ms(5000), broken), Some(Step::Switch(Carrier::Udp)));
    assert_eq!(a.why, Why::StreamBroke);
    assert!(a.wants_stream(ms(5000)), "dials again at once");
    assert_eq!(a.tick(ms(5100), broken), None);
    assert_eq!(
        a.tick(ms(5200), BLOCKED),
        Some(Step::Switch(Carrier::Stream))
    );
}

#[test]
fn retries_spread() {
    let waits: std::collections::BTreeSet<Duration> = (0..20u64)
        .map(|seed| Auto::new(ms(0), seed * 7919).retry_wait())
        .collect();
    assert!(waits.len() > 10);
    assert!(waits
        .iter()
        .all(|w| *w >= Duration::from_secs(54) && *w < Duration::from_secs(66)));
}
