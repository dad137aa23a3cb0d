//! The tasks that move packets:
//!
//! * [`tx`]: TUN → endpoint (scheduler, numbering) → path sockets, a batch at a time.
//! * [`rx`]: path sockets → endpoint (opening, control messages, resequencer) → TUN, and the
//!   endpoint's timers (keepalives, reports, liveness, the resequencer's hold time), so that
//!   every write to the TUN device happens in this one task and in order.
//! * [`tun_write`]: writing released packets to the TUN device from where they lie.

mod mss;
mod payloads;
pub mod rx;
pub mod streams;
pub mod tun_read;
pub mod tun_write;
pub mod tx;
