//! What the experiments write: CSV files, and plots of them where gnuplot is installed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use mptd::status::Status;

/// Per-path and tunnel throughput over time from the receiver's status samples, as CSV
/// (`t,tunnel,path0,path1,…` in kbit/s of inner bytes): what arrived, so what the paths
/// carried (what a sender puts on a path can outrun the link while its queue fills).
pub fn throughput_csv(samples: &[(f64, Status)]) -> String {
    let mut csv = String::new();
    let Some((_, first)) = samples.first() else {
        return csv;
    };
    let _ = write!(csv, "t_s,tunnel_kbit");
    for p in &first.paths {
        let _ = write!(csv, ",{}_kbit", p.name);
    }
    csv.push('\n');
    for w in samples.windows(2) {
        let ((t0, a), (t1, b)) = (&w[0], &w[1]);
        let dt = (t1 - t0).max(1e-3);
        let rate = |x: u64, y: u64| (y.saturating_sub(x)) as f64 * 8.0 / dt / 1000.0;
        let _ = write!(
            csv,
            "{:.2},{:.1}",
            t1 - samples[0].0,
            rate(a.tunnel.rx_bytes, b.tunnel.rx_bytes)
        );
        for (pa, pb) in a.paths.iter().zip(&b.paths) {
            let _ = write!(csv, ",{:.1}", rate(pa.rx_bytes, pb.rx_bytes));
        }
        csv.push('\n');
    }
    csv
}

/// Draw `csv` (first column x, the rest series) into a PNG with gnuplot, if it is installed.
pub fn plot(csv_path: &Path, png: &Path, title: &str, ylabel: &str) {
    let Ok(text) = std::fs::read_to_string(csv_path) else {
        return;
    };
    let ncols = text.lines().next().map_or(0, |l| l.split(',').count());
    if ncols < 2 {
        return;
    }
    let series: Vec<String> = (2..=ncols)
        .map(|c| {
            format!(
                "'{}' using 1:{c} with lines lw 2 title columnheader({c})",
                csv_path.display()
            )
        })
        .collect();
    gnuplot(png, title, ylabel, &series);
}

/// Plot column 2 of several CSV files (`t_s`, value) on the same axes, one line each, titled
/// as given: the variants of one case, as the paper draws them.
pub fn plot_together(series: &[(PathBuf, String)], png: &Path, title: &str, ylabel: &str) {
    let lines: Vec<String> = series
        .iter()
        .filter(|(csv, _)| csv.exists())
        .map(|(csv, label)| {
            format!(
                "'{}' using 1:2 every ::1 with lines lw 2 title '{}'",
                csv.display(),
                label.replace('\'', "")
            )
        })
        .collect();
    if lines.is_empty() {
        return;
    }
    gnuplot(png, title, ylabel, &lines);
}

/// Draw `plots` (gnuplot plot clauses) on one pair of axes into `png`; a missing or failing
/// gnuplot is said, not fatal.
fn gnuplot(png: &Path, title: &str, ylabel: &str, plots: &[String]) {
    let script = format!(
        "set datafile separator ','; set terminal png size 900,500 noenhanced; set output '{}'; \
         set title '{}'; set xlabel 'time (s)'; set ylabel '{}'; set grid; set key outside right; \
         set yrange [0:*]; plot {}",
        png.display(),
        title.replace('\'', ""),
        ylabel,
        plots.join(", ")
    );
    match Command::new("gnuplot").args(["-e", &script]).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => eprintln!(
            "gnuplot failed for {}: {}",
            png.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) => eprintln!("gnuplot not installed: no {}", png.display()),
    }
}

pub fn write(out: &Path, name: &str, text: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    let p = out.join(name);
    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
    Ok(p)
}

/// Where `--write-results` puts an experiment's table: between `<!-- mpt-lab KEY -->` and
/// `<!-- /mpt-lab KEY -->` in the results file, so that the section cannot drift from what the
/// lab measured. The block says the command that measured it. The plots the table
/// shows (`](figures/NAME)`) go from the run's `out` directory to `figures/` beside the file.
pub fn write_results(file: &Path, key: &str, md: &str, out: Option<&Path>) -> Result<()> {
    for name in md
        .split("](figures/")
        .skip(1)
        .filter_map(|t| t.split(')').next())
    {
        let (Some(out), Some(dir)) = (out, file.parent()) else {
            break;
        };
        let figures = dir.join("figures");
        std::fs::create_dir_all(&figures)?;
        std::fs::copy(out.join(name), figures.join(name))
            .with_context(|| format!("copying {name} from {}", out.display()))?;
    }
    let doc = std::fs::read_to_string(file).unwrap_or_default();
    let command = command_without_write_results(std::env::args().skip(1));
    let block = format!(
        "`sudo target/release/mpt-lab {}`\n\n{}\n",
        command.join(" "),
        md.trim_end()
    );
    std::fs::write(file, crate::blocks::splice(&doc, key, &block))
        .with_context(|| format!("writing {}", file.display()))?;
    eprintln!("results written to {} (section {key})", file.display());
    crate::summary::refresh(file)
}

/// The lab's arguments `args` without `--write-results` and the file given with it (as
/// `--write-results=FILE`, or as the next argument when that is no flag).
fn command_without_write_results(args: impl Iterator<Item = String>) -> Vec<String> {
    let mut args = args.peekable();
    let mut command = Vec::new();
    while let Some(a) = args.next() {
        if a == "--write-results" {
            args.next_if(|v| !v.starts_with('-'));
        } else if !a.starts_with("--write-results=") {
            command.push(a);
        }
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_written_leaves_out_write_results_and_its_file() {
        let args = |s: &str| {
            s.split(' ')
                .map(String::from)
                .collect::<Vec<_>>()
                .into_iter()
        };
        for (given, written) in [
            (
                "run realworld --runs 3 --write-results docs/results.md --trace",
                "run realworld --runs 3 --trace",
            ),
            (
                "run realworld --write-results --runs 3",
                "run realworld --runs 3",
            ),
            ("run table1 --write-results=r.md", "run table1"),
            ("run table1 --write-results", "run table1"),
        ] {
            assert_eq!(
                command_without_write_results(args(given)).join(" "),
                written
            );
        }
    }
}
