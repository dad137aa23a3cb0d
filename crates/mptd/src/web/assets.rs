//! The page and what it loads, embedded in the binary: the HTML, its script and styles, and
//! uPlot 1.6.32 (`vendor/uplot/README.md`).

use super::request::percent_encode;

const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/mptd.js");
const STYLE: &str = include_str!("page/mptd.css");
const ICON: &str = include_str!("page/favicon.svg");
const UPLOT_JS: &str = include_str!("vendor/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("vendor/uplot/uPlot.min.css");

/// The page, its assets' URLs carrying `token` when there is one (the browser asks for them
/// as for the page, without the script's `Authorization` header).
pub fn page(token: Option<&str>) -> String {
    let query = token
        .map(|t| format!("?token={}", percent_encode(t)))
        .unwrap_or_default();
    PAGE.replace("{{query}}", &query)
}

/// The asset at `path`: its content type and bytes.
pub fn get(path: &str) -> Option<(&'static str, &'static [u8])> {
    let (kind, text) = match path {
        "/mptd.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "/mptd.css" => ("text/css; charset=utf-8", STYLE),
        "/favicon.svg" => ("image/svg+xml", ICON),
        "/uplot.js" => ("text/javascript; charset=utf-8", UPLOT_JS),
        "/uplot.css" => ("text/css; charset=utf-8", UPLOT_CSS),
        _ => return None,
    };
    Some((kind, text.as_bytes()))
}
