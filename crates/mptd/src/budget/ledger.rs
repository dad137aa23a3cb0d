//! The paths' budgets by path name: each configured path's count, and the counts read back
//! from the state file for paths not (or not yet) configured with a budget, kept so that a
//! budget removed and given back by reloads keeps its count. Pure: the caller passes the time
//! and the bytes in.

use std::collections::BTreeMap;

use super::{Budget, Count, Crossings};

/// One path's budget and its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub budget: Budget,
    pub count: Count,
}

/// The counts of every path, by name.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: BTreeMap<String, Entry>,
    /// Counts of paths without a budget now (read back at start, or a budget removed).
    idle: BTreeMap<String, Count>,
    /// Something changed since [`Ledger::written`] was last called.
    dirty: bool,
}

impl Ledger {
    /// Counts read back from the state file: taken up by the paths as they are configured.
    pub fn restore(&mut self, saved: BTreeMap<String, Count>) {
        for (name, count) in saved {
            match self.entries.get_mut(&name) {
                Some(e) => e.count = count,
                None => {
                    self.idle.insert(name, count);
                }
            }
        }
    }

    /// Path `name` has `budget` at `now` (the configuration running): its entry is made
    /// (from a count read back, if there is one) or follows a changed budget. The lines that
    /// crossed.
    pub fn configure(&mut self, name: &str, budget: Budget, now: i64) -> Crossings {
        if let Some(e) = self.entries.get_mut(name) {
            if e.budget == budget {
                return Crossings::default();
            }
            e.budget = budget;
            self.dirty = true;
            return e.count.rebase(now, &budget);
        }
        // (a count read back whose period is over begins the one `now` falls in)
        let (count, crossed) = match self.idle.remove(name) {
            Some(mut c) => {
                let crossed = c.rebase(now, &budget);
                (c, crossed)
            }
            None => (Count::new(now, &budget), Crossings::default()),
        };
        self.dirty = true;
        self.entries
            .insert(name.to_owned(), Entry { budget, count });
        crossed
    }

    /// Paths that have no budget any more: their counts are kept aside.
    pub fn keep_only(&mut self, configured: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self
            .entries
            .keys()
            .filter(|n| !configured(n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(e) = self.entries.remove(&name) {
                self.idle.insert(name, e.count);
            }
        }
    }

    /// `bytes` more on path `name` at `now`, and the lines crossed.
    pub fn add(&mut self, name: &str, now: i64, bytes: u64) -> Crossings {
        let Some(e) = self.entries.get_mut(name) else {
            return Crossings::default();
        };
        if bytes > 0 || now >= e.count.window.end {
            self.dirty = true;
        }
        e.count.add(now, bytes, &e.budget)
    }

    /// The operator starts path `name`'s count again at `now` (`mptctl path NAME budget
    /// reset`): 0 in the period `now` falls in. `None`: it has no budget.
    pub fn reset(&mut self, name: &str, now: i64) -> Option<Entry> {
        let e = self.entries.get_mut(name)?;
        e.count = Count::new(now, &e.budget);
        self.dirty = true;
        Some(*e)
    }

    /// Path `name`'s budget and count.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// Every count, of paths with a budget and without, to be written: `None` if nothing
    /// changed since the last call.
    pub fn written(&mut self) -> Option<BTreeMap<String, Count>> {
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        let mut all = self.idle.clone();
        all.extend(self.entries.iter().map(|(n, e)| (n.clone(), e.count)));
        Some(all)
    }

    /// Written later again (a write failed).
    pub fn unwritten(&mut self) {
        self.dirty = true;
    }
}

#[cfg(test)]
mod tests {
    use super::super::calendar::days_from_civil;
    use super::super::Crossing;
    use super::*;

    fn at(y: i64, m: u32, d: u32) -> i64 {
        days_from_civil(y, m, d) * 86_400
    }

    #[test]
    fn a_count_read_back_is_kept_in_its_period_and_not_after() {
        let now = at(2026, 12, 6);
        let mut l = Ledger::default();
        l.configure("lte", super::super::monthly(1000), now);
        l.add("lte", now, 1000);
        let saved = l.written().expect("changed");
        assert_eq!(l.written(), None);
        // a restart in the same period
        let mut again = Ledger::default();
        again.restore(saved.clone());
        assert_eq!(
            again
                .configure("lte", super::super::monthly(1000), now + 60)
                .iter()
                .count(),
            0
        );
        let e = again.get("lte").expect("entry");
        assert!(e.count.exhausted && e.count.used == 1000);
        // a restart after the period's end
        let mut later = Ledger::default();
        later.restore(saved);
        let crossed: Vec<Crossing> = later
            .configure("lte", super::super::monthly(1000), at(2027, 1, 2))
            .iter()
            .collect();
        assert_eq!(crossed, [Crossing::NewPeriod]);
        assert_eq!(later.get("lte").expect("entry").count.used, 0);
    }

    #[test]
    fn a_reset_starts_again_and_a_removed_budget_keeps_its_count_aside() {
        let now = at(2026, 12, 6);
        let mut l = Ledger::default();
        l.configure("lte", super::super::monthly(1000), now);
        l.add("lte", now, 900);
        l.keep_only(|_| false);
        assert!(l.get("lte").is_none());
        l.configure("lte", super::super::monthly(1000), now);
        assert_eq!(l.get("lte").expect("entry").count.used, 900);
        let e = l.reset("lte", now).expect("has a budget");
        assert_eq!((e.count.used, e.count.warned), (0, false));
        assert!(l.reset("dsl", now).is_none());
    }
}
