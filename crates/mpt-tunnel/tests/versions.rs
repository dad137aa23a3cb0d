//! Protocol versions: a session speaks the initiator's version; two ends of this version whose
//! first two initiations were lost (and so made their session in the version before, on the
//! retry that tries it) come back to this one soon after. Two connections over simulated links (`sim`).

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::wire::VERSION;
use sim::{Pair, Side};

#[test]
fn a_session_made_in_the_older_version_after_a_lost_initiation_comes_back_to_ours() {
    let mut p = Pair::new(sim::seed(81), 2, true);
    // A's first two initiations, each sent on both paths, are lost
    p.drop_next(Side::A, 0, 2);
    p.drop_next(Side::A, 1, 2);
    p.run_until(Duration::from_secs(5), Pair::agreed)
        .expect("keys agreed on a retry");
    assert_eq!(
        p.ep(Side::A).wire_version(),
        VERSION - 1,
        "the retry's version"
    );
    assert_eq!(p.ep(Side::B).wire_version(), VERSION - 1);
    // a few seconds on, a rekey that tries ours first
    p.run(Duration::from_secs(8));
    assert_eq!(p.ep(Side::A).wire_version(), VERSION);
    assert_eq!(p.ep(Side::B).wire_version(), VERSION);
}

#[test]
fn a_first_initiation_that_arrives_makes_the_session_in_our_version() {
    let mut p = Pair::new(sim::seed(82), 2, true);
    p.run_until(Duration::from_secs(1), Pair::agreed)
        .expect("keys agreed");
    assert_eq!(p.ep(Side::A).wire_version(), VERSION);
    assert_eq!(p.ep(Side::B).wire_version(), VERSION);
}
