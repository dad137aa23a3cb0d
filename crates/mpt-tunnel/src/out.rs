//! The way out for datagrams built outside a numbered batch ([`Out`]): sealed in the session,
//! addressed, and given to the scheduler's clock of their path.

use mpt_core::wire::HeaderRepr;
use mpt_core::Time;
use mpt_sched::Scheduler;

use crate::path::PathState;
use crate::session::Session;
use crate::{Datagram, PathSettings, TransmitKind};

/// What a datagram built outside a numbered batch needs to leave: the session to seal it in,
/// where each path's datagrams go, what each path's outer headers cost, and the scheduler,
/// whose clock of the path it takes time on.
pub(crate) struct Out<'a> {
    pub(crate) session: &'a mut Session,
    pub(crate) paths: &'a mut [PathState],
    pub(crate) settings: &'a [PathSettings],
    pub(crate) sched: &'a mut dyn Scheduler,
}

/// A datagram built outside a batch, and the bytes it takes on its link (outer headers
/// included).
pub(crate) struct Built {
    pub(crate) datagram: Datagram,
    pub(crate) cost: usize,
}

impl Out<'_> {
    /// Seal `buf` (`header` goes into its prefix, `body` bytes of body after it) as a datagram
    /// of `kind` on `header.path`, and give its time to the scheduler as control traffic
    /// (outside the data it schedules). `None` while sealing has no key or the path's remote
    /// is unknown.
    pub(crate) fn send(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        buf: Vec<u8>,
        body: usize,
    ) -> Option<Built> {
        let path = header.path;
        let destination = self.paths[path.index()].remote?;
        let contents = self.session.seal_owned(header, buf, body)?;
        let cost = contents.len() + self.settings[path.index()].overhead;
        self.sched.on_control_sent(now, path, cost);
        Some(Built {
            datagram: Datagram {
                path,
                destination,
                kind: TransmitKind::Data,
                contents,
            },
            cost,
        })
    }
}
