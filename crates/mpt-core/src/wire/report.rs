//! Receiver reports: per-path entries, the validated view and the builder.

use super::*;
use crate::PathId;

/// One path's figures in a receiver report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportEntry {
    pub path: PathId,
    /// Bit 0: the reporter has heard from this path within its dead interval.
    pub flags: u8,
    /// Highest per-path sequence number received (wrapping).
    pub path_seq: u16,
    /// Data packets received on the path since the session began (wrapping).
    pub packets: u32,
    /// Data bytes (inner packets) received on the path since the session began (wrapping).
    pub bytes: u64,
    /// Packets found missing from the per-path sequence since the session began (wrapping).
    pub lost: u32,
    /// Smallest one-way delay of this path minus the smallest over all paths, microseconds:
    /// the path's delay offset.
    pub owd_min_us: u32,
    /// RFC 3550 interarrival jitter on this path, microseconds.
    pub jitter_us: u32,
    /// Smoothed one-way delay of this path minus the smallest over all paths, microseconds;
    /// above `owd_min_us` by the queue building on the path.
    pub owd_us: u32,
    /// Send timestamp of the newest data packet received on the path (the sender's clock).
    pub echo: u32,
    /// How long before this report that packet arrived, microseconds (`now - echo - age` is
    /// the sender's RTT sample).
    pub echo_age_us: u32,
    /// Inner length of the packet that saw `owd_min_us`: its serialisation at the path's rate
    /// is part of that delay, so the sender can take it out.
    pub owd_min_len: u16,
}

impl ReportEntry {
    pub const FLAG_UP: u8 = 1;

    pub(crate) fn emit(&self, b: &mut [u8]) {
        b[field::E_PATH] = self.path.0;
        b[field::E_FLAGS] = self.flags;
        b[field::E_PATH_SEQ].copy_from_slice(&self.path_seq.to_be_bytes());
        b[field::E_PACKETS].copy_from_slice(&self.packets.to_be_bytes());
        b[field::E_BYTES].copy_from_slice(&self.bytes.to_be_bytes());
        b[field::E_LOST].copy_from_slice(&self.lost.to_be_bytes());
        b[field::E_OWD_MIN].copy_from_slice(&self.owd_min_us.to_be_bytes());
        b[field::E_JITTER].copy_from_slice(&self.jitter_us.to_be_bytes());
        b[field::E_OWD].copy_from_slice(&self.owd_us.to_be_bytes());
        b[field::E_ECHO].copy_from_slice(&self.echo.to_be_bytes());
        b[field::E_ECHO_AGE].copy_from_slice(&self.echo_age_us.to_be_bytes());
        b[field::E_OWD_MIN_LEN].copy_from_slice(&self.owd_min_len.to_be_bytes());
        b[field::E_RESERVED].fill(0);
    }

    pub(crate) fn parse(b: &[u8]) -> ReportEntry {
        ReportEntry {
            path: PathId(b[field::E_PATH]),
            flags: b[field::E_FLAGS],
            path_seq: be16(&b[field::E_PATH_SEQ]),
            packets: be32(&b[field::E_PACKETS]),
            bytes: be64(&b[field::E_BYTES]),
            lost: be32(&b[field::E_LOST]),
            owd_min_us: be32(&b[field::E_OWD_MIN]),
            jitter_us: be32(&b[field::E_JITTER]),
            owd_us: be32(&b[field::E_OWD]),
            echo: be32(&b[field::E_ECHO]),
            echo_age_us: be32(&b[field::E_ECHO_AGE]),
            owd_min_len: be16(&b[field::E_OWD_MIN_LEN]),
        }
    }
}

/// A validated receiver report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report<'a> {
    count: u8,
    entry_len: u8,
    entries: &'a [u8],
}

impl<'a> Report<'a> {
    pub(crate) fn parse(buf: &'a [u8]) -> Result<Report<'a>, WireError> {
        if buf.len() < REPORT_FIXED_LEN {
            return Err(WireError::Truncated {
                need: REPORT_FIXED_LEN,
                got: buf.len(),
            });
        }
        let count = buf[field::REPORT_COUNT];
        let entry_len = buf[field::REPORT_ENTRY_LEN];
        if usize::from(entry_len) < REPORT_ENTRY_LEN {
            return Err(WireError::ReportEntryLen(entry_len));
        }
        let expected = REPORT_FIXED_LEN + usize::from(count) * usize::from(entry_len);
        exact_len(buf, expected)?;
        Ok(Report {
            count,
            entry_len,
            entries: &buf[REPORT_FIXED_LEN..],
        })
    }

    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The entries, in the order the reporter wrote them.
    pub fn entries(&self) -> impl Iterator<Item = ReportEntry> + 'a {
        self.entries
            .chunks_exact(usize::from(self.entry_len))
            .map(ReportEntry::parse)
    }
}

/// Builds a receiver report: the header and one entry per path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportRepr<'a> {
    pub header: HeaderRepr,
    pub entries: &'a [ReportEntry],
}

impl ReportRepr<'_> {
    /// Bytes [`emit`](Self::emit) writes: [`report_len`] of the entries.
    pub const fn buffer_len(&self) -> usize {
        report_len(self.entries.len())
    }

    /// Write the report into `buf`; returns its length.
    ///
    /// # Panics
    /// If more than 255 entries are given or `buf` is too short; at most [`crate::MAX_PATHS`]
    /// entries exist and buffers are sized by [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let count = u8::try_from(self.entries.len()).expect("at most 255 report entries");
        self.header.emit(buf);
        buf[field::REPORT_COUNT] = count;
        buf[field::REPORT_ENTRY_LEN] = REPORT_ENTRY_LEN as u8;
        buf[field::REPORT_RESERVED].fill(0);
        let mut off = REPORT_FIXED_LEN;
        for e in self.entries {
            e.emit(&mut buf[off..off + REPORT_ENTRY_LEN]);
            off += REPORT_ENTRY_LEN;
        }
        off
    }
}

/// Length of a report with `n` entries.
pub const fn report_len(n: usize) -> usize {
    REPORT_FIXED_LEN + n * REPORT_ENTRY_LEN
}
