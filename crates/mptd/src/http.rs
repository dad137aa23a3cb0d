//! What the daemon's two HTTP servers (the metrics and the status page) share: reading a
//! request's head.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The longest request head read (a GET has no body).
const MOST: usize = 8192;

/// The request head from `stream`, up to its blank line, [`MOST`] bytes or the stream's end.
pub(crate) async fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MOST {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}
