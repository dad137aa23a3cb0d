//! The resequencer fed arbitrary operation sequences (see `mpt_reseq::fuzz::run_ops`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mpt_reseq::fuzz::run_ops(data));
