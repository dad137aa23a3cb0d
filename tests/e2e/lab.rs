use mpt_lab::experiments::{paper, scenario};

use crate::need;

/// The headline of the lab: MPT's Table II case 16 (a 128 kbit/s stream over serial lines of
/// 64/128/64/128 kbit/s), where MPT's weighted round-robin delivered 32.8 % of the datagrams
/// out of order with 61 ms of jitter. Shortened to 12 s per run; the `rate` scheduler must
/// deliver everything, in order, with little jitter, with and without resequencing, and the
/// runner must produce its table, CSV and plots.
#[test]
fn table2_case16_rate_scheduler_delivers_in_order() {
    need!("lab_table2_case16", "iperf3");
    // a stall here: the emulator held a packet 10 ms or more past its time, or a host put
    // datagrams out of their path's order, in the row that missed
    crate::measured_telling_stalls(
        "table2_case16",
        table2_case16_rate_scheduler_delivers_in_order_once,
    );
}

/// The measurement's verdict: the first bound missed, and whether the machine stalled in
/// that row.
fn table2_case16_rate_scheduler_delivers_in_order_once() -> Result<(), (String, bool)> {
    let mut suite = scenario::builtin("table2").expect("suite");
    suite.duration_s = Some(12);
    // the small-packet stream this test was written for (160-byte datagrams)
    suite.datagram = Some(160);
    let out = std::env::temp_dir().join(format!("mpt-lab-test-{}", std::process::id()));
    let md = paper::run_table2(&suite, &[16], &out).expect("run");
    let csv = std::fs::read_to_string(out.join("table2.csv")).expect("csv");
    eprintln!("{md}");
    let _ = std::fs::remove_dir_all(&out);
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 4, "four variants: {csv}");
    let num = |r: &[&str], i: usize| r[i].parse::<f64>().expect("number");
    for r in &rows {
        let (sched, reseq) = (r[3], r[4]);
        let (kbit, jitter, loss, reordered) = (num(r, 5), num(r, 6), num(r, 7), num(r, 8));
        let (late, stalls, path_order) = (num(r, 16), num(r, 17), num(r, 18));
        eprintln!("RESULT lab case 16 {sched} reseq={reseq}: {kbit:.1} kbit/s, jitter {jitter:.2} ms, loss {loss:.2} %, reordered {reordered:.2} % (the emulator wrote {late} packets late, {stalls} of them held by a stall; out of their path's order at B: {path_order})");
        let stalled = stalls > 0.0 || path_order > 0.0;
        let miss = |why: String| Err((why, stalled));
        if loss > 0.5 {
            return miss(format!("{sched}/{reseq}: loss {loss} %"));
        }
        if (sched == "rate" || reseq == "true") && reordered > 0.5 {
            return miss(format!("{sched}/{reseq}: {reordered} % out of order"));
        }
        if sched == "rate" && jitter > 10.0 {
            return miss(format!("{sched}/{reseq}: jitter {jitter} ms"));
        }
    }
    // Without resequencing, wrr on unequal paths reorders: the paper's effect is reproduced.
    let wrr_plain = rows
        .iter()
        .find(|r| r[3] == "wrr" && r[4] == "false")
        .expect("wrr row");
    assert!(
        num(wrr_plain, 8) > 5.0,
        "wrr without resequencing should reorder: {csv}"
    );
    Ok(())
}
