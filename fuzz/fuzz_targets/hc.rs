//! Inner header compression on arbitrary input (see `mpt_core::hc::fuzz`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mpt_core::hc::fuzz::hc(data));
