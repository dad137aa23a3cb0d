//! Protocol versions and capability lists: a session speaks the initiator's version, with
//! capability lists when its initiation carried one; two ends of this build whose first
//! initiations were lost (and so made their session on a retry in a form an older peer reads:
//! without a list, or in an older version) come back to ours soon after. Two connections over
//! simulated links (`sim`).

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::wire::VERSION;
use sim::{Pair, Side};

#[test]
fn a_session_made_in_an_older_form_after_lost_initiations_comes_back_to_ours() {
    // the third try is version 7 without a list (0.1.0's form), the fifth version 6
    for (lost, version, limit) in [(2, VERSION, 5), (4, VERSION - 1, 15)] {
        let mut p = Pair::new(sim::seed(81), 2, true);
        // A's first initiations, each sent on both paths, are lost
        p.drop_next(Side::A, 0, lost);
        p.drop_next(Side::A, 1, lost);
        p.run_until(Duration::from_secs(limit), Pair::agreed)
            .expect("keys agreed on a retry");
        for side in [Side::A, Side::B] {
            let caps = p.ep(side).capabilities();
            assert_eq!(caps.version(), version, "{lost} lost: the retry's version");
            assert!(!caps.listed(), "{lost} lost: the retry has no list");
        }
        // a few seconds on, a rekey that tries ours first
        p.run(Duration::from_secs(8));
        for side in [Side::A, Side::B] {
            let caps = p.ep(side).capabilities();
            assert_eq!(caps.version(), VERSION);
            assert!(caps.listed() && caps.compresses_tcp() && caps.requests_references());
        }
    }
}

#[test]
fn a_first_initiation_that_arrives_makes_the_session_in_our_version() {
    let mut p = Pair::new(sim::seed(82), 2, true);
    p.run_until(Duration::from_secs(1), Pair::agreed)
        .expect("keys agreed");
    for side in [Side::A, Side::B] {
        let caps = p.ep(side).capabilities();
        assert_eq!(caps.version(), VERSION);
        assert!(
            caps.listed(),
            "the first initiation and its answer carry lists"
        );
    }
}
