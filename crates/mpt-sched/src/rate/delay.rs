//! The paths' one-way delay offsets: what the receiver's reports say one path's delay is above
//! the nearest path's, and what that adds to a packet's delivery time.

use mpt_core::bits;
use mpt_core::wire::ReportEntry;

use super::RateScheduler;

impl RateScheduler {
    /// What a packet on path `i` adds to its delivery time beyond its queue and
    /// serialisation: the path's one-way delay above the nearest path's, or, where the receiver
    /// equalises, that of the farthest path it waits for (every path not a backup, up to the
    /// receiver's longest wait).
    pub(super) fn offset(&self, i: usize, far: u64) -> u64 {
        if self.equalised == 0 || self.paths.is_backup(i) {
            self.owd[i]
        } else {
            self.owd[i].max(far.min(self.owd[i] + self.equalised))
        }
    }

    /// The farthest path the receiver equalises to: the largest offset among the paths up
    /// that are not backups.
    pub(super) fn farthest(&self) -> u64 {
        if self.equalised == 0 {
            return 0;
        }
        bits(self.paths.eligible())
            .filter(|&j| !self.paths.is_backup(j))
            .map(|j| self.owd[j])
            .max()
            .unwrap_or(0)
    }

    /// Take a report's delay figures. A reported minimum delay includes the serialisation of
    /// the packet that saw it (on a 64 kbit/s line a 200-byte packet takes 25 ms, a ping half
    /// of that), and this scheduler adds serialisation itself; so the path's offset is its
    /// minimum minus that serialisation, relative to the smallest such value over the paths.
    pub fn take_delay_report(&mut self, report: &ReportEntry) {
        let i = report.path.index();
        let Some(slot) = self.owd_reported.get_mut(i) else {
            return;
        };
        // No data measured on the path yet (reported as 0 us on a packet of no length): what
        // was known stands. Taken as measured, an idle path would sit a full packet's
        // serialisation further than the busy ones, measured on full packets, and on a slow
        // line (95 ms for 1500 bytes at 128 kbit/s) no packet would go there to measure it.
        if report.owd_min_len == 0 {
            return;
        }
        *slot = Some((report.owd_min_us, report.owd_min_len));
        // Inner packet + what the path adds to it (header, seal, outer IP/UDP, framing).
        let prop = |s: &Self, j: usize| -> Option<i64> {
            let (min_us, len) = s.owd_reported[j]?;
            let wire = usize::from(len) + s.overhead[j];
            Some(i64::from(min_us) * 1_000 - s.serialisation(j, wire) as i64)
        };
        let Some(floor) = (0..self.owd.len()).filter_map(|j| prop(self, j)).min() else {
            return;
        };
        for j in 0..self.owd.len() {
            self.owd[j] = prop(self, j).map_or(0, |p| (p - floor) as u64);
        }
    }
}
