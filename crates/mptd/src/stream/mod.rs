//! Paths over a byte stream, for networks that block UDP: a `[[path]]` with `transport =
//! "tcp"` carries its sealed datagrams as frames ([`frame`]) on one TCP connection
//! ([`conn::StreamConn`]), set up so that its queue stays short and visible ([`sockopt`]);
//! with `transport = "tls"`, in TLS 1.3 on that connection ([`tls`]), for networks that pass
//! only HTTPS.
//! The engine knows the path as a stream ([`mpt_tunnel::Transport::Stream`]) and resends
//! nothing there.

pub mod auto;
pub mod conn;
pub mod frame;
mod listen;
pub mod side;
pub mod sockopt;
pub mod tls;

pub use conn::{Closed, Frames, Inbox, Probe, StreamConn};
pub use frame::Sizes;
pub use side::{DialTls, Role, StreamSide, Way};

/// Where every stream's frames meet: the readers send them, the receive task takes them
/// ([`Hub::take_inbox`], once).
#[derive(Debug)]
pub struct Hub {
    pub frames: tokio::sync::mpsc::Sender<Frames>,
    inbox: std::sync::Mutex<Option<Inbox>>,
}

impl Default for Hub {
    fn default() -> Hub {
        let (frames, inbox) = tokio::sync::mpsc::channel(conn::INBOX);
        Hub {
            frames,
            inbox: std::sync::Mutex::new(Some(inbox)),
        }
    }
}

impl Hub {
    /// The receive task's end (the first call's; later ones get `None`).
    pub fn take_inbox(&self) -> Option<Inbox> {
        self.inbox.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}
