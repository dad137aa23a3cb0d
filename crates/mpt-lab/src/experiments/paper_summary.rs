//! The Summary's rows of Table II (`crate::summary`): what each run of a case measured, and
//! the headlines made from them.

use crate::summary::Headline;

/// One variant of one case, as its row of the table says it.
pub(super) struct Row {
    pub(super) case: String,
    pub(super) scheduler: &'static str,
    pub(super) reseq: bool,
    pub(super) kbit: f64,
    pub(super) jitter_ms: f64,
    pub(super) loss_pct: f64,
    pub(super) reordered_pct: f64,
    /// The same stream over the lines without a tunnel: kbit/s, loss %, jitter ms.
    pub(super) plain: (f64, f64, f64),
    /// The paper's jitter (ms) and reordered (%) for this case, where it gives them.
    pub(super) paper: (Option<f64>, Option<f64>),
}

fn find<'a>(rows: &'a [Row], case: &str, scheduler: &str, reseq: bool) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.case == case && r.scheduler == scheduler && r.reseq == reseq)
}

/// The headlines the rows give: case 16 at the suite's datagram, the 160-byte streams over
/// full lines (11s, 12s, 15s), and case 17 at another datagram (`datagram`: the one given).
pub(super) fn headlines(rows: &[Row], datagram: Option<usize>, mtu: Option<u16>) -> Vec<Headline> {
    let mut out = Vec::new();
    if let (None, Some(r), Some(w)) = (
        datagram,
        find(rows, "16", "rate", true),
        find(rows, "16", "wrr", false),
    ) {
        let paper = match w.paper {
            (Some(j), Some(o)) => format!(" (MPT measured {o:.1} % and {j:.0} ms)"),
            _ => String::new(),
        };
        out.push(Headline {
            key: "table2-case16".into(),
            what: "the MPT paper's Table II case 16: 128 kbit/s of 1470-byte datagrams over \
                   64/128/64/128 kbit/s serial lines (`mpt-lab run table2`)"
                .into(),
            figure: format!(
                "`rate`: **{:.2} % out of order, {:.2} ms jitter**, {:.2} % lost; `wrr` without \
                 resequencing: {:.1} %, {:.1} ms{paper}",
                r.reordered_pct, r.jitter_ms, r.loss_pct, w.reordered_pct, w.jitter_ms
            ),
        });
    }
    let small: Vec<&Row> = ["11s", "12s", "15s"]
        .iter()
        .filter_map(|c| find(rows, c, "rate", true))
        .collect();
    if datagram.is_none() && small.len() == 3 {
        let share: f64 = small.iter().map(|r| r.kbit).sum::<f64>()
            / small
                .iter()
                .map(|r| r.plain.0)
                .sum::<f64>()
                .max(f64::MIN_POSITIVE);
        let loss = |f: fn(&Row) -> f64| {
            small
                .iter()
                .map(|r| format!("{:.1}", f(r)))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        out.push(Headline {
            key: "table2-small".into(),
            what: "Table II, 160-byte datagrams over full serial lines (cases 11s, 12s, 15s, \
                   `rate`, `mpt-lab run table2`)"
                .into(),
            figure: format!(
                "bundled, **{:.0} % of plain UDP's throughput** over the same lines; lost {} % \
                 (plain UDP {} %)",
                100.0 * share,
                loss(|r| r.loss_pct),
                loss(|r| r.plain.1)
            ),
        });
    }
    if let (Some(d), Some(r)) = (datagram, find(rows, "17", "rate", true)) {
        out.push(Headline {
            key: "table2-case17".into(),
            what: format!(
                "Table II case 17: 256 kbit/s of {d}-byte datagrams over 64/128/64/128 kbit/s \
                 serial lines, `rate`, tunnel MTU {} (`mpt-lab run table2 --cases 17 \
                 --datagram {d}`)",
                mtu.map_or("the default".to_owned(), |m| m.to_string())
            ),
            figure: format!(
                "**{:.2} ms jitter** (plain UDP over the same lines {:.2}), {:.2} % lost, {:.2} % \
                 out of order",
                r.jitter_ms, r.plain.2, r.loss_pct, r.reordered_pct
            ),
        });
    }
    out
}
