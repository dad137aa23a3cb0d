//! The Summary's rows of Table II (`crate::summary`): what each run of a case measured, and
//! the headlines made from them.

use crate::summary::Headline;

/// One variant of one case, as its row of the table says it.
pub(super) struct Row {
    pub(super) case: String,
    /// Its datagrams' payload, bytes.
    pub(super) datagram: usize,
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

/// The paper's stream's datagram (iperf's default), which cases 11-17 send unless told.
const PAPER_DATAGRAM: usize = 1470;

/// The headlines the rows give: case 16 in the paper's datagrams, the 160-byte streams over
/// full lines (11s, 12s, 15s), and case 17 in datagrams of another size (`--datagram`).
pub(super) fn headlines(rows: &[Row], mtu: Option<u16>) -> Vec<Headline> {
    let mut out = Vec::new();
    let sized = |case: &str, scheduler: &str, reseq: bool, len: usize| {
        find(rows, case, scheduler, reseq).filter(|r| r.datagram == len)
    };
    if let (Some(r), Some(w)) = (
        sized("16", "rate", true, PAPER_DATAGRAM),
        sized("16", "wrr", false, PAPER_DATAGRAM),
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
        .filter_map(|c| sized(c, "rate", true, 160))
        .collect();
    if small.len() == 3 {
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
    let other = find(rows, "17", "rate", true).filter(|r| r.datagram != PAPER_DATAGRAM);
    if let Some(r) = other {
        let d = r.datagram;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: &str, datagram: usize, scheduler: &'static str, reseq: bool) -> Row {
        Row {
            case: case.into(),
            datagram,
            scheduler,
            reseq,
            kbit: 128.0,
            jitter_ms: 0.4,
            loss_pct: 0.0,
            reordered_pct: 0.0,
            plain: (128.0, 0.0, 0.1),
            paper: (Some(61.0), Some(32.8)),
        }
    }

    fn keys(rows: &[Row]) -> Vec<String> {
        headlines(rows, None).into_iter().map(|h| h.key).collect()
    }

    #[test]
    fn each_run_gives_the_headlines_of_the_datagrams_it_sent() {
        // the whole table: case 16 and the small datagrams; case 17 in the paper's datagrams
        // is no headline of its own
        let mut table = Vec::new();
        for (case, len) in [
            ("16", 1470),
            ("17", 1470),
            ("11s", 160),
            ("12s", 160),
            ("15s", 160),
        ] {
            for (s, r) in [
                ("wrr", false),
                ("wrr", true),
                ("rate", false),
                ("rate", true),
            ] {
                table.push(row(case, len, s, r));
            }
        }
        assert_eq!(keys(&table), ["table2-case16", "table2-small"]);
        // case 17 at 1200 bytes (`--cases 17 --datagram 1200`)
        let c17 = [row("17", 1200, "rate", true), row("17", 1200, "wrr", true)];
        assert_eq!(keys(&c17), ["table2-case17"]);
        // every case at 1200 bytes: neither case 16 nor the small ones are the Summary's
        let all = [
            row("16", 1200, "rate", true),
            row("16", 1200, "wrr", false),
            row("11s", 1200, "rate", true),
        ];
        assert!(keys(&all).is_empty());
    }
}
