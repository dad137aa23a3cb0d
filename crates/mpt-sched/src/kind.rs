//! The scheduling algorithms by their configuration names.

use std::fmt;
use std::str::FromStr;

/// The scheduling algorithms, by their config names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerKind {
    /// Round-robin over the paths that are up.
    RoundRobin,
    /// Smooth weighted round-robin by `weight`.
    WeightedRoundRobin,
    /// Earliest delivery by `rate` (and one-way delay when known).
    Rate,
    /// Earliest delivery by rates and delays learned from the receiver's reports; `rate`
    /// keys are optional starting points.
    Adaptive,
}

impl SchedulerKind {
    pub const NAMES: &'static str = "rr | wrr | rate | adaptive";

    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::RoundRobin => "rr",
            SchedulerKind::WeightedRoundRobin => "wrr",
            SchedulerKind::Rate => "rate",
            SchedulerKind::Adaptive => "adaptive",
        }
    }

    /// Whether it keeps a clock of what each path carries, which pacing paces by (`rr` and
    /// `wrr` keep none).
    pub fn can_pace(self) -> bool {
        matches!(self, SchedulerKind::Rate | SchedulerKind::Adaptive)
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SchedulerKind {
    type Err = String;
    /// Case-insensitive.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "rr" | "round-robin" => Ok(SchedulerKind::RoundRobin),
            "wrr" | "weighted-round-robin" => Ok(SchedulerKind::WeightedRoundRobin),
            "rate" => Ok(SchedulerKind::Rate),
            "adaptive" => Ok(SchedulerKind::Adaptive),
            _ => Err(format!(
                "unknown scheduler {s:?}, expected one of {}",
                Self::NAMES
            )),
        }
    }
}
