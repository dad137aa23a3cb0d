//! Stream paths in TLS (`transport = "tls"`), for networks that pass nothing but HTTPS: the
//! same frames ([`super::frame`]) inside TLS 1.3 (rustls, ring's primitives), so that the
//! connection looks like HTTPS on the wire.
//!
//! TLS adds no security here, and is not meant to: every datagram it carries is already
//! sealed and authenticated by the tunnel's own handshake (Noise, with both hosts' keys). So
//! the listening side shows a self-signed certificate made at start ([`server_config`]), and
//! the dialling side accepts any certificate ([`AnyCertificate`]): checking one would only
//! make a deployment need a CA-signed certificate, for nothing the tunnel does not check
//! itself. A stranger who answers the TLS handshake gets no further than one who answers a
//! UDP datagram: nothing of the session opens without the peer's key.
//!
//! A listening side takes plain and TLS connections on the same port: [`sniff`] tells them
//! apart by their first three bytes.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
use tokio::net::TcpStream;

/// How long a TLS handshake may take, either side, once its first bytes came.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a dialling side offers in ALPN, as a browser does; the listening side picks the first.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// What a new connection's first bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// A TLS handshake record: `0x16`, then a record version `0x03 0x00`..`0x03 0x04`.
    Tls,
    /// Frames: a length, then a datagram, whose first byte is never below `0x20` (its
    /// version, 5 to 7 in the top three bits). So a frame 0x1603 bytes long is still told
    /// from TLS by its third byte.
    Plain,
}

impl Sniffed {
    /// What `first` (a connection's first three bytes) is.
    pub fn of(first: [u8; 3]) -> Sniffed {
        match first {
            [0x16, 0x03, 0..=4] => Sniffed::Tls,
            _ => Sniffed::Plain,
        }
    }
}

/// What `stream`'s first three bytes are, looked at without taking them; an error if it
/// closes first or sends fewer within `within`.
pub async fn sniff(stream: &TcpStream, within: Duration) -> std::io::Result<Sniffed> {
    let look = async {
        let mut first = [0u8; 3];
        // a real client's first segment holds them all; one that sends fewer is looked at
        // again after a wait that doubles up to 0.5 s (peek would say the same at once), so
        // that many such connections cost little
        let mut wait = Duration::from_millis(5);
        loop {
            match stream.peek(&mut first).await? {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                3 => return Ok(Sniffed::of(first)),
                _ => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_millis(500));
                }
            }
        }
    };
    tokio::time::timeout(within, look)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// ring's primitives for TLS, as for the tunnel's own sealing: no aws-lc-rs (a C and assembly
/// build, and megabytes on a router's flash). rustls 0.23.48 deprecates this provider because
/// it has no post-quantum key exchange; none is needed here, where what TLS carries is sealed
/// already (the module's note).
#[allow(deprecated)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The dialling side's configuration: TLS 1.3 only, any certificate accepted, ALPN as a
/// browser's.
pub fn client_config() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = provider();
            let schemes = provider
                .signature_verification_algorithms
                .supported_schemes();
            let mut c = ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&[&rustls::version::TLS13])
                .expect("ring's provider speaks TLS 1.3")
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(schemes)))
                .with_no_client_auth();
            c.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
            Arc::new(c)
        })
        .clone()
}

/// The listening side's configuration: TLS 1.3 only, a self-signed certificate made on first
/// use (for this host's name), kept for as long as the daemon runs.
pub fn server_config() -> Result<Arc<ServerConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ServerConfig>, String>> = OnceLock::new();
    CONFIG.get_or_init(make_server_config).clone()
}

fn make_server_config() -> Result<Arc<ServerConfig>, String> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty() && h.is_ascii())
        .unwrap_or_else(|| "localhost".to_owned());
    let mut params =
        rcgen::CertificateParams::new(vec![host.clone()]).map_err(|e| e.to_string())?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, host);
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut c = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], der)
        .map_err(|e| e.to_string())?;
    c.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(c))
}

/// The name a dialling side gives in its hello: `name` (the peer's endpoint, when a host
/// name) as SNI, or else the address dialled, which rustls does not send (no SNI, as a client
/// that connects to an address).
pub fn server_name(name: Option<&str>, to: SocketAddr) -> ServerName<'static> {
    name.and_then(|n| ServerName::try_from(n.to_owned()).ok())
        .unwrap_or_else(|| ServerName::IpAddress(to.ip().to_canonical().into()))
}

/// TLS on `stream` as the dialling side, naming `name`; within [`HANDSHAKE_TIMEOUT`].
pub async fn connect(
    stream: TcpStream,
    name: ServerName<'static>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let connector = tokio_rustls::TlsConnector::from(client_config());
    tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, stream))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// TLS on `stream` as the listening side; within [`HANDSHAKE_TIMEOUT`].
pub async fn accept(
    stream: TcpStream,
) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
    let config = server_config().map_err(std::io::Error::other)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// A certificate verifier that accepts any certificate and signature: deliberate, see the
/// module's note (the tunnel authenticates its peer itself; TLS is only there to pass).
/// It holds the signature schemes it says it takes (ring's).
#[derive(Debug)]
pub struct AnyCertificate(Vec<SignatureScheme>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests;
