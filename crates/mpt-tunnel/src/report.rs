//! What a receiver report is made of, kept from report to report: the queue and the counts
//! per path that the report pacer weighs, and the entries of the report being sent
//! ([`crate::control::Pending::Report`] builds from them). Used again, so a report allocates
//! nothing.

use mpt_core::wire::ReportEntry;

#[derive(Debug, Default)]
pub(crate) struct ReportScratch {
    /// Per path: the queue building there (µs).
    pub(crate) queues: Vec<f64>,
    /// Per path: packets received and lost, cumulative.
    pub(crate) counts: Vec<(u64, u64)>,
    /// The entries of the report waiting to be built (one report waits at a time: a later one
    /// replaces its entries, which are newer).
    pub(crate) entries: Vec<ReportEntry>,
}
