//! Figures as people read them: bytes, large counts, rates, ages and budgets.

/// Bytes as people read them.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// Bytes in decimal units, as carriers bill them ("3.21 GB").
fn decimal(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    match u {
        0 => format!("{n} B"),
        _ => format!("{} {}", trim(v), UNITS[u]),
    }
}

/// A number with two decimals, without trailing zeros ("20", "3.21", "5.5").
fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A path's budget line: "budget 3.21 of 20 GB, 16.79 GB left, resets 2027-01-01 00:00".
pub(crate) fn budget_line(b: &mptd::status::BudgetStatus) -> String {
    let limit = decimal(b.limit);
    let unit = limit.rsplit(' ').next().unwrap_or("B");
    let scale = match unit {
        "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => 1.0,
    };
    let used = trim(b.used as f64 / scale);
    let end =
        mptd::budget::calendar::local_minute(b.period_end, mptd::clock::utc_offset(b.period_end));
    let spent = match b.exhausted {
        true => format!(
            ", spent: the path is {}",
            if b.action == "off" {
                "off"
            } else {
                "below every tier"
            }
        ),
        false => String::new(),
    };
    format!(
        "budget {used} of {limit}, {} left, resets {end}{spent}",
        decimal(b.left)
    )
}

/// How long ago, from milliseconds.
pub(crate) fn ago(ms: Option<u64>) -> String {
    match ms {
        None => "never".to_owned(),
        Some(m) if m < 1000 => format!("{m} ms ago"),
        Some(m) if m < 120_000 => format!("{:.1} s ago", m as f64 / 1000.0),
        Some(m) => format!("{} min {} s ago", m / 60_000, m / 1000 % 60),
    }
}
