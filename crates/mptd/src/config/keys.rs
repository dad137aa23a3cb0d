//! The key files a configuration names: read, their permissions checked.

use std::path::Path;

use mpt_core::seal::{PrivateKey, Psk};

use super::{Config, ConfigError};

/// The keys a configuration names, read from their files.
#[derive(Debug, Clone)]
pub struct Keys {
    pub private: PrivateKey,
    /// Per peer, in `peers` order.
    pub psks: Vec<Option<Psk>>,
}

/// Read a key file: refused when group or others may read it, or when it does not hold base64
/// of 32 bytes. `config` and `key` name the config file and its key, for the message.
fn read_key_file<T>(
    file: &Path,
    config: &Path,
    key: &str,
    parse: impl Fn(&str) -> Result<T, mpt_core::seal::KeyError>,
) -> Result<T, ConfigError> {
    let err = |message: String| ConfigError::Invalid {
        file: config.to_owned(),
        key: key.into(),
        message,
    };
    let meta =
        std::fs::metadata(file).map_err(|e| err(format!("cannot read {}: {e}", file.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(err(format!(
                "{} is readable by group or others (mode {mode:04o}), expected 0600 or \
                 stricter: chmod 600 {}",
                file.display(),
                file.display()
            )));
        }
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| err(format!("cannot read {}: {e}", file.display())))?;
    parse(&text).map_err(|e| {
        err(format!(
            "{}: {e}; `mptd genkey` writes a valid key",
            file.display()
        ))
    })
}

impl Config {
    /// Read the keys the configuration names: this host's private key and each peer's
    /// pre-shared key. `config` is the config file, for the messages.
    pub fn load_keys(&self, config: &Path) -> Result<Keys, ConfigError> {
        let private = read_key_file(
            &self.security.private_key_file,
            config,
            "security.private_key_file",
            PrivateKey::parse,
        )?;
        let psks = self
            .peers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                p.preshared_key_file
                    .as_ref()
                    .map(|f| {
                        read_key_file(
                            f,
                            config,
                            &format!("peer[{i}].preshared_key_file"),
                            Psk::parse,
                        )
                    })
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        Ok(Keys { private, psks })
    }
}
