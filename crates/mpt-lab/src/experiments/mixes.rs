//! The mixes of paths `mpt-lab run realworld` measures, each a scenario of its table and
//! plot.

use super::satellite::{link as path, satellite};
use crate::harness::LinkSpec;

/// One scenario: its name and paths.
pub(super) struct Scenario {
    pub(super) id: u32,
    pub(super) name: &'static str,
    /// The name under its bars in the plot.
    pub(super) short: &'static str,
    pub(super) paths: Vec<LinkSpec>,
    /// Pings beside the transfers ([`super::pings::PingRuns`]).
    pub(super) pings: bool,
}

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            id: 1,
            name: "20 Mbit/s at 10 ms + 20 Mbit/s at 60 ms",
            short: "10 + 60 ms",
            paths: vec![path(20, 10.0, 0.0, 0.0), path(20, 60.0, 0.0, 0.0)],
            pings: false,
        },
        Scenario {
            id: 2,
            name: "40 Mbit/s 10 ms clean + 20 Mbit/s 35 ms ±3 ms 0.5 % loss + 30 Mbit/s 25 ms ±1.5 ms 1 % loss",
            short: "three, two lossy",
            paths: vec![
                path(40, 10.0, 0.0, 0.0),
                path(20, 35.0, 3.0, 0.5),
                path(30, 25.0, 1.5, 1.0),
            ],
            pings: false,
        },
        Scenario {
            id: 3,
            name: "20 Mbit/s at 5 ms + 20 Mbit/s at 120 ms",
            short: "5 + 120 ms",
            paths: vec![path(20, 5.0, 0.0, 0.0), path(20, 120.0, 0.0, 0.0)],
            pings: false,
        },
        Scenario {
            id: 4,
            name: "20/20/10/10 Mbit/s, no delay",
            short: "four, no delay",
            paths: vec![
                path(20, 0.0, 0.0, 0.0),
                path(20, 0.0, 0.0, 0.0),
                path(10, 0.0, 0.0, 0.0),
                path(10, 0.0, 0.0, 0.0),
            ],
            pings: false,
        },
        Scenario {
            id: 5,
            name: "satellite + LTE: 40 Mbit/s with Starlink's handovers + 20 Mbit/s at 30 ms ±5 ms 0.1 % loss",
            short: "satellite + LTE",
            paths: vec![satellite(40), path(20, 30.0, 5.0, 0.1)],
            pings: true,
        },
    ]
}
