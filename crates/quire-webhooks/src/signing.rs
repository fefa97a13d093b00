//! Standard Webhooks signing (<https://www.standardwebhooks.com>).
//!
//! A secret is `whsec_` followed by the base64 of random key bytes. A delivery is signed
//! with HMAC-SHA256 over `"{msg_id}.{timestamp}.{body}"` and sent with three headers:
//! `webhook-id`, `webhook-timestamp` (unix seconds) and `webhook-signature` (`v1,<base64>`).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_PAD_INDIFFERENT};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of every secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Header carrying the message id, the same for every attempt of one event.
pub const HEADER_ID: &str = "webhook-id";
/// Header carrying the signing time in unix seconds.
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// Header carrying the signature(s), `v1,<base64>`.
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// Random key bytes in a new secret (the standard allows 24 to 64).
const SECRET_KEY_BYTES: usize = 32;

/// Why a secret cannot be created or used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The part after `whsec_` is not base64.
    #[error("webhook secret is not valid base64 after the `whsec_` prefix")]
    NotBase64,
    /// The secret decodes to no key bytes at all.
    #[error("webhook secret has an empty key")]
    EmptyKey,
    /// The operating system gave no randomness for a new secret.
    #[error("no randomness for a webhook secret: {0}")]
    NoRandomness(getrandom::Error),
}

/// The three Standard Webhooks headers of one signed delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeaders {
    /// Value of `webhook-id`.
    pub id: String,
    /// Value of `webhook-timestamp` (unix seconds).
    pub timestamp: String,
    /// Value of `webhook-signature` (`v1,<base64>`).
    pub signature: String,
}

impl SignatureHeaders {
    /// The headers as `(name, value)` pairs, ready to put on a request.
    pub fn pairs(&self) -> [(&'static str, &str); 3] {
        [
            (HEADER_ID, &self.id),
            (HEADER_TIMESTAMP, &self.timestamp),
            (HEADER_SIGNATURE, &self.signature),
        ]
    }
}

/// A new random secret, `whsec_` + base64 of 32 random bytes.
pub fn new_secret() -> Result<String, SecretError> {
    let mut key = [0u8; SECRET_KEY_BYTES];
    getrandom::fill(&mut key).map_err(SecretError::NoRandomness)?;
    Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(key)))
}

/// The key bytes of a secret. The prefix is optional, as in the reference libraries, so a
/// bare base64 key signs the same as its `whsec_` form.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, SecretError> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    let key = STANDARD_PAD_INDIFFERENT
        .decode(encoded)
        .map_err(|_| SecretError::NotBase64)?;
    if key.is_empty() {
        return Err(SecretError::EmptyKey);
    }
    Ok(key)
}

/// The `webhook-signature` value for one message: `v1,` + base64(HMAC-SHA256(key,
/// "{msg_id}.{timestamp}.{body}")).
pub fn sign(secret: &str, msg_id: &str, timestamp: i64, body: &str) -> Result<String, SecretError> {
    let key = secret_key(secret)?;
    let content = format!("{msg_id}.{timestamp}.{body}");
    let mac = hmac_sha256(&key, content.as_bytes());
    Ok(format!("v1,{}", STANDARD.encode(mac)))
}

/// All three Standard Webhooks headers for one message.
pub fn headers(
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    body: &str,
) -> Result<SignatureHeaders, SecretError> {
    Ok(SignatureHeaders {
        id: msg_id.to_owned(),
        timestamp: timestamp.to_string(),
        signature: sign(secret, msg_id, timestamp, body)?,
    })
}

/// HMAC-SHA256 (RFC 2104), RustCrypto's `hmac`; the RFC 4231 vectors in the tests pin it down.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length (longer ones are hashed first), so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        let large_key = [0xaa; 131];
        let key_0102: Vec<u8> = (1..=25).collect();
        let cases: [(&[u8], &[u8], &str); 6] = [
            (
                &[0x0b; 20],
                b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                &[0xaa; 20],
                &[0xdd; 50],
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
            ),
            (
                &key_0102,
                &[0xcd; 50],
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
            ),
            (
                &large_key,
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
            (
                &large_key,
                b"This is a test using a larger than block-size key and a larger than \
                  block-size data. The key needs to be hashed before being used by the \
                  HMAC algorithm.",
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
            ),
        ];
        for (number, (key, message, expected)) in cases.into_iter().enumerate() {
            assert_eq!(hex(&hmac_sha256(key, message)), expected, "case {number}");
        }
    }

    #[test]
    fn signs_the_standard_webhooks_test_vector() {
        let signature = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn headers_carry_id_timestamp_and_signature() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let headers = headers(secret, "msg_1", 1614265330, "{}").unwrap();
        assert_eq!(
            headers.pairs(),
            [
                ("webhook-id", "msg_1"),
                ("webhook-timestamp", "1614265330"),
                (
                    "webhook-signature",
                    sign(secret, "msg_1", 1614265330, "{}").unwrap().as_str()
                ),
            ]
        );
    }

    #[test]
    fn new_secrets_are_prefixed_random_32_byte_keys() {
        let first = new_secret().unwrap();
        let second = new_secret().unwrap();
        assert!(first.starts_with("whsec_"), "{first}");
        assert_eq!(secret_key(&first).unwrap().len(), 32);
        assert_ne!(first, second);
        assert!(sign(&first, "msg", 1, "{}").is_ok());
    }

    #[test]
    fn malformed_secrets_are_refused() {
        assert!(matches!(
            sign("whsec_not base64!", "msg", 1, "{}"),
            Err(SecretError::NotBase64)
        ));
        assert!(matches!(
            sign("whsec_", "msg", 1, "{}"),
            Err(SecretError::EmptyKey)
        ));
    }

    #[test]
    fn the_prefix_is_optional() {
        assert_eq!(
            sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg", 1, "{}").unwrap(),
            sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg", 1, "{}").unwrap()
        );
    }
}
