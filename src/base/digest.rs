//! The digest algorithms of API checksums and callback signatures (BBB's sha1, and the sha2
//! family that newer servers accept), chosen by name in the configuration or by the length of a
//! hex digest.

use serde::{Deserialize, Serialize};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};

/// A digest usable for API checksums and callback signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl Algorithm {
    pub const ALL: [Algorithm; 4] = [Self::Sha1, Self::Sha256, Self::Sha384, Self::Sha512];

    /// The algorithm whose lowercase hex digest has `len` characters.
    pub fn from_hex_len(len: usize) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.hex_len() == len)
    }

    pub fn hex_len(self) -> usize {
        match self {
            Self::Sha1 => 40,
            Self::Sha256 => 64,
            Self::Sha384 => 96,
            Self::Sha512 => 128,
        }
    }

    /// Lowercase hex digest of the concatenation of `parts`.
    pub fn hex_digest(self, parts: &[&[u8]]) -> String {
        fn run<D: Digest>(parts: &[&[u8]]) -> String {
            let mut d = D::new();
            for p in parts {
                d.update(p);
            }
            hex::encode(d.finalize())
        }
        match self {
            Self::Sha1 => run::<Sha1>(parts),
            Self::Sha256 => run::<Sha256>(parts),
            Self::Sha384 => run::<Sha384>(parts),
            Self::Sha512 => run::<Sha512>(parts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithms_by_length() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::from_hex_len(a.hex_len()), Some(a));
            assert_eq!(a.hex_digest(&[b"x"]).len(), a.hex_len());
        }
        assert_eq!(Algorithm::from_hex_len(39), None);
        assert_eq!(
            Algorithm::Sha1.hex_digest(&[b"a", b"bc"]),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
    }
}
