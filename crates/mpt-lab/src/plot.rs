//! Grouped bar charts as SVG, drawn by hand so that a plot in the docs needs nothing but the
//! lab: the same text for the same figures, readable in a browser and on GitHub.

use std::fmt::Write as _;

/// One group of bars: a label under it and one value per series (`None`: not measured).
#[derive(Debug, Clone)]
pub struct Group {
    pub label: String,
    pub values: Vec<Option<f64>>,
}

/// The series' colours, in order (colour-blind safe: Okabe and Ito's palette).
const COLOURS: [&str; 6] = [
    "#999999", "#56B4E9", "#0072B2", "#E69F00", "#D55E00", "#009E73",
];

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 64.0;

/// A grouped bar chart: `series` names the bars of each group (the legend), `unit` the y axis.
pub fn bars_svg(title: &str, unit: &str, series: &[&str], groups: &[Group]) -> String {
    let most = groups
        .iter()
        .flat_map(|g| g.values.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    let (top, step) = axis(most);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (1.0 - v / top);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"##,
        escape(title)
    );
    // the y axis: grid lines and their values
    let mut v = 0.0;
    while v <= top + 1e-9 {
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444444">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y(v) + 4.0,
            trim(v),
            y = y(v)
        );
        v += step;
    }
    let _ = writeln!(
        s,
        r##"<text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle" fill="#444444">{}</text>"##,
        TOP + plot_h / 2.0,
        escape(unit)
    );
    // the bars, group by group
    let group_w = plot_w / groups.len().max(1) as f64;
    let bar_w = group_w * 0.8 / series.len().max(1) as f64;
    for (gi, g) in groups.iter().enumerate() {
        let x0 = LEFT + group_w * gi as f64 + group_w * 0.1;
        for (si, v) in g.values.iter().enumerate().take(series.len()) {
            let Some(v) = *v else { continue };
            let x = x0 + bar_w * si as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {v:.1} {}</title></rect>"#,
                y(v),
                bar_w - 1.0,
                (TOP + plot_h - y(v)).max(0.0),
                COLOURS[si % COLOURS.len()],
                escape(series[si]),
                escape(unit)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x0 + group_w * 0.4,
            TOP + plot_h + 18.0,
            escape(&g.label)
        );
    }
    // the legend, in one row under the groups' labels
    let item_w = plot_w / series.len().max(1) as f64;
    for (si, name) in series.iter().enumerate() {
        let x = LEFT + item_w * si as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            HEIGHT - 24.0,
            COLOURS[si % COLOURS.len()],
            x + 16.0,
            HEIGHT - 14.0,
            escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The axis' top and the step between its grid lines: 1, 2 or 5 times a power of ten, about
/// five steps up to the largest value.
fn axis(most: f64) -> (f64, f64) {
    if most <= 0.0 || !most.is_finite() {
        return (1.0, 0.2);
    }
    let raw = most / 5.0;
    let pow = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * pow)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * pow);
    ((most / step).ceil() * step, step)
}

fn trim(v: f64) -> String {
    let t = format!("{v:.2}");
    t.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_as_tall_as_their_values_and_unmeasured_ones_are_left_out() {
        let groups = [
            Group {
                label: "1".into(),
                values: vec![Some(40.0), Some(20.0)],
            },
            Group {
                label: "a < b".into(),
                values: vec![None, Some(10.0)],
            },
        ];
        let svg = bars_svg("t", "Mbit/s", &["alone", "mptd"], &groups);
        // the axis goes to 40 in steps of 10: the plot is 256 high, 40 fills it
        assert_eq!(axis(40.0), (40.0, 10.0));
        assert_eq!(
            svg.matches("<rect x=").count(),
            3 + 2,
            "3 bars, 2 legend keys"
        );
        assert!(svg.contains(r#"height="256.0""#), "{svg}");
        assert!(svg.contains(r#"height="64.0""#), "10 of 40: a quarter");
        assert!(svg.contains("a &lt; b"));
        assert!(svg.ends_with("</svg>\n"));
    }

    #[test]
    fn the_axis_takes_a_round_step() {
        assert_eq!(axis(83.3), (100.0, 20.0));
        assert_eq!(axis(36.6), (40.0, 10.0));
        assert_eq!(axis(0.0), (1.0, 0.2));
    }
}
