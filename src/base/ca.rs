//! A file of CA certificates (PEM), as `ca_file` keys name it: read and checked once.

use std::sync::Arc;

/// CA certificates (PEM) that a `rediss://` server's certificate must chain to.
#[derive(Clone)]
pub struct Ca(Arc<[u8]>);

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ca(..)")
    }
}

/// Why a file of CA certificates cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NoCertificate { path: String },
}

impl Ca {
    /// Reads the PEM certificates of `path`.
    ///
    /// # Errors
    /// When the file cannot be read or holds no certificate.
    pub fn read(path: &std::path::Path) -> Result<Self, CaError> {
        let shown = path.display().to_string();
        let pem = std::fs::read(path).map_err(|error| CaError::Read {
            path: shown.clone(),
            error,
        })?;
        if !pem
            .windows(b"-----BEGIN CERTIFICATE-----".len())
            .any(|w| w == b"-----BEGIN CERTIFICATE-----")
        {
            return Err(CaError::NoCertificate { path: shown });
        }
        Ok(Self(pem.into()))
    }

    /// The file's certificates (PEM).
    pub fn pem(&self) -> &[u8] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_a_certificate_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").expect("write");
        assert!(matches!(
            Ca::read(&path),
            Err(CaError::NoCertificate { .. })
        ));
        assert!(matches!(
            Ca::read(&dir.path().join("missing.pem")),
            Err(CaError::Read { .. })
        ));
    }
}
