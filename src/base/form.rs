//! Form encoding (`application/x-www-form-urlencoded`), as browsers and BBB's clients do it: the
//! callback body and the API's query strings both use it.

/// Form-encodes a value.
pub fn form_encode(value: &str) -> String {
    // Sized for JSON, whose quotes, colons and commas each take three bytes: growing the
    // string piece by piece cost more than encoding it.
    let mut out = String::with_capacity(value.len() + value.len() / 2);
    out.extend(form_urlencoded::byte_serialize(value.as_bytes()));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn spaces_become_plus_and_slashes_are_encoded() {
        assert_eq!(super::form_encode("a b/é&"), "a+b%2F%C3%A9%26");
    }
}
