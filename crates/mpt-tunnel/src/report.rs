//! What a receiver report is made of, kept from report to report: the queue and the counts
//! per path that the report pacer weighs, and the entries of the report being sent
//! ([`crate::pending::Pending::Report`] builds from them). Used again, so a report allocates
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

/// Receiver reports: ours, paced to a share of what we receive and built from a scratch kept
/// between them, and the peer's, as they come.
#[derive(Debug, Default)]
pub(crate) struct Reports {
    /// Paces our reports.
    pub(crate) pacer: mpt_reseq::feedback::ReportPacer,
    /// What reports are made of, kept from one to the next.
    pub(crate) scratch: ReportScratch,
    /// When the peer's last report came, and how far apart its reports come lately (the
    /// longer of the last gap and the earlier ones decaying): at a low rate the peer reports
    /// as seldom as once a second ([`mpt_reseq::feedback::MAX_INTERVAL`]).
    pub(crate) heard_at: Option<mpt_core::Time>,
    pub(crate) gap: std::time::Duration,
}
