//! Paths over a byte stream, for networks that block UDP: a `[[path]]` with `transport =
//! "tcp"` carries its sealed datagrams as frames ([`frame`]) on one TCP connection
//! ([`conn::StreamConn`]), set up so that its queue stays short and visible ([`sockopt`]).
//! The engine knows the path as a stream ([`mpt_tunnel::Transport::Stream`]) and resends
//! nothing there.

pub mod conn;
pub mod frame;
pub mod sockopt;

pub use conn::{Closed, Frames, Inbox, Probe, StreamConn};
