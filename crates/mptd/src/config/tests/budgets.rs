//! A path's data budget: its keys, their defaults, and what is refused.

use super::*;
use crate::budget::calendar::Period;

fn with(keys: &str) -> String {
    let text = GOOD.replacen("weight = 2", &format!("weight = 2\n{keys}"), 1);
    assert_ne!(text, GOOD);
    text
}

#[test]
fn a_budget_takes_bytes_or_units_and_defaults_to_a_month_from_the_1st_then_backup() {
    let c = parse(&with("budget = \"20 GB\"")).expect("valid");
    let b = c.paths[0].budget.expect("a budget");
    assert_eq!(b.limit, 20_000_000_000);
    assert_eq!((b.period, b.reset_day), (Period::Month, 1));
    assert_eq!(b.exhausted, Exhausted::Backup);
    assert_eq!(c.paths[1].budget, None);
    let c = parse(&with(
        "budget = 5000000\nbudget_period = \"week\"\nbudget_reset = 7\nbudget_exhausted = \"off\"",
    ))
    .expect("valid");
    let b = c.paths[0].budget.expect("a budget");
    assert_eq!(
        (b.limit, b.period, b.reset_day),
        (5_000_000, Period::Week, 7)
    );
    assert_eq!(b.exhausted, Exhausted::Off);
    let c = parse(&with("budget = \"1.5 GiB\"\nbudget_period = \"day\"")).expect("valid");
    assert_eq!(c.paths[0].budget.map(|b| b.limit), Some(1_610_612_736));
}

#[test]
fn bytes_are_read_in_decimal_and_binary_units() {
    assert_eq!(parse_bytes("20 GB"), Some(20_000_000_000));
    assert_eq!(parse_bytes("500MiB"), Some(524_288_000));
    assert_eq!(parse_bytes("1.5 TB"), Some(1_500_000_000_000));
    assert_eq!(parse_bytes("1000000"), Some(1_000_000));
    assert_eq!(parse_bytes("2 KiB"), Some(2048));
    assert_eq!(parse_bytes("20 gigs"), None);
    assert_eq!(parse_bytes("GB"), None);
    assert_eq!(parse_bytes(""), None);
}

#[test]
fn a_bad_budget_is_refused_naming_its_key() {
    let cases = [
        ("budget = \"20 furlongs\"", "path[0].budget"),
        ("budget = 0", "path[0].budget"),
        ("budget = \"500 kB\"", "path[0].budget"),
        ("budget = -5", "path[0].budget"),
        (
            "budget = \"1 GB\"\nbudget_period = \"year\"",
            "path[0].budget_period",
        ),
        (
            "budget = \"1 GB\"\nbudget_reset = 32",
            "path[0].budget_reset",
        ),
        (
            "budget = \"1 GB\"\nbudget_reset = 0",
            "path[0].budget_reset",
        ),
        (
            "budget = \"1 GB\"\nbudget_period = \"week\"\nbudget_reset = 8",
            "path[0].budget_reset",
        ),
        (
            "budget = \"1 GB\"\nbudget_period = \"day\"\nbudget_reset = 1",
            "path[0].budget_reset",
        ),
        (
            "budget = \"1 GB\"\nbudget_exhausted = \"panic\"",
            "path[0].budget_exhausted",
        ),
        ("budget_period = \"week\"", "path[0].budget_period"),
        ("budget_reset = 3", "path[0].budget_reset"),
        ("budget_exhausted = \"off\"", "path[0].budget_exhausted"),
    ];
    for (keys, key) in cases {
        assert_eq!(invalid_key(&with(keys)), key, "{keys}");
    }
}
