//! What a shared secret must be: not the example's placeholder, not short. The operator's
//! secret and every tenant's are held to it.

/// The placeholder of the example configuration.
pub(super) const PLACEHOLDER: &str = "change-me";
/// The shortest shared secret taken: a short one is guessed from one signed URL offline.
pub(super) const MIN_SECRET_CHARS: usize = 12;

/// Why `secret` cannot be a shared secret, if it cannot.
pub fn weak_secret(secret: &str) -> Option<&'static str> {
    if secret == PLACEHOLDER {
        return Some(
            "is still the example's placeholder change-me: set the server's shared secret (bbb-conf --secret)",
        );
    }
    (secret.chars().count() < MIN_SECRET_CHARS).then_some(
        "must be at least 12 characters (BigBlueButton's own are 32 or more): a short secret is guessed from one signed URL",
    )
}
