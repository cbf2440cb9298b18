//! The API checksum (bbb-events.md 6.2): digest of call name + query without the checksum
//! parameter + shared secret; the algorithm is chosen by the checksum's length among the allowed
//! ones, and the comparison takes constant time.

use subtle::ConstantTimeEq;

use crate::base::digest::Algorithm;

/// The query string without its `checksum` parameter, exactly as the reference cuts it.
pub(crate) fn query_without_checksum(query: &str) -> String {
    let mut params: Vec<&str> = query.split('&').collect();
    if let Some(pos) = params
        .iter()
        .position(|p| p.starts_with("checksum=") || *p == "checksum")
    {
        params.remove(pos);
    }
    params.join("&")
}

/// Which of `secrets` (its index, the first that matches) `supplied` is the checksum of
/// `call` and `raw_query` with; the query is cut once, whatever the number of secrets.
pub(crate) fn matching_secret<'s>(
    call: &str,
    raw_query: &str,
    supplied: &str,
    secrets: impl IntoIterator<Item = &'s str>,
    allowed: &[Algorithm],
) -> Option<usize> {
    let alg = Algorithm::from_hex_len(supplied.len()).filter(|a| allowed.contains(a))?;
    let stripped = query_without_checksum(raw_query);
    secrets.into_iter().position(|secret| {
        let expected = alg.hex_digest(&[call.as_bytes(), stripped.as_bytes(), secret.as_bytes()]);
        expected.as_bytes().ct_eq(supplied.as_bytes()).into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `supplied` is the right checksum for `call` and `raw_query` with `secret`.
    fn verify(
        call: &str,
        raw_query: &str,
        supplied: &str,
        secret: &str,
        allowed: &[Algorithm],
    ) -> bool {
        matching_secret(call, raw_query, supplied, [secret], allowed).is_some()
    }

    #[test]
    fn reference_test_vectors() {
        let q = "callbackURL=http%3A%2F%2Fh.example%2Fcb&meetingID=m1";
        let sha1 = "aa2630bd9fa92214b38cad829c3a18f30da0cf65";
        let sha256 = "357953943f5aff21560633545eaaea64c2fbbe9cc62ba95be516aa1282e6a835";
        assert!(verify(
            "hooks/create",
            &format!("{q}&checksum={sha1}"),
            sha1,
            "s3cr3t",
            &Algorithm::ALL
        ));
        assert!(verify(
            "hooks/create",
            &format!("checksum={sha256}&{q}"),
            sha256,
            "s3cr3t",
            &Algorithm::ALL
        ));
        assert!(!verify(
            "hooks/create",
            q,
            sha256,
            "s3cr3t",
            &[Algorithm::Sha1]
        ));
        assert!(!verify("hooks/list", q, sha1, "s3cr3t", &Algorithm::ALL));
        assert!(!verify("hooks/create", q, sha1, "other", &Algorithm::ALL));
        assert!(!verify(
            "hooks/create",
            q,
            &sha1.to_uppercase(),
            "s3cr3t",
            &Algorithm::ALL
        ));
        assert!(verify(
            "hooks/list",
            "checksum=822fd708a124dfb3e95acd9ba76b009739f0ad75",
            "822fd708a124dfb3e95acd9ba76b009739f0ad75",
            "s3cr3t",
            &Algorithm::ALL
        ));
        for odd in ["", "abc", &sha1[..39]] {
            assert!(!verify("hooks/create", q, odd, "s3cr3t", &Algorithm::ALL));
        }
    }

    #[test]
    fn strips_only_the_checksum() {
        assert_eq!(query_without_checksum("a=1&checksum=x&b=2"), "a=1&b=2");
        assert_eq!(query_without_checksum("checksum=x"), "");
        assert_eq!(
            query_without_checksum("a=1&xchecksum=2&checksum=3"),
            "a=1&xchecksum=2"
        );
    }
}
