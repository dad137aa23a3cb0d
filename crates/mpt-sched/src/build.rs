//! [`build`]: the scheduler the configuration names, for its paths.

use crate::{
    AdaptiveScheduler, PathSpec, RateScheduler, RoundRobin, Scheduler, SchedulerKind,
    WeightedRoundRobin,
};

/// Build the scheduler named in the config for `paths` (all initially up).
///
/// For `rate`, a path without a configured rate counts as `weight` Mbit/s (the config loader
/// refuses that combination, so this only matters for programmatic use).
pub fn build(kind: SchedulerKind, paths: &[PathSpec]) -> Box<dyn Scheduler> {
    match kind {
        SchedulerKind::RoundRobin => Box::new(RoundRobin::new(paths)),
        SchedulerKind::WeightedRoundRobin => Box::new(WeightedRoundRobin::new(paths)),
        SchedulerKind::Rate => Box::new(RateScheduler::new(paths)),
        SchedulerKind::Adaptive => Box::new(AdaptiveScheduler::new(paths)),
    }
}
