//! A Standard Webhooks verifier written apart from `quire_webhooks::signing`, as a receiver
//! would write it: its own base64 decoder and its own HMAC over sha2, so a shared mistake
//! cannot make signer and verifier agree on a wrong signature.

use sha2::{Digest as _, Sha256};

/// How far the signed timestamp may be from the receiver's clock, as the standard advises.
const TOLERANCE_SECONDS: i64 = 5 * 60;

/// Why a message does not verify.
#[derive(Debug, PartialEq, Eq)]
pub enum Rejection {
    BadSecret,
    BadTimestamp,
    StaleTimestamp,
    NoMatchingSignature,
}

/// Checks one message as a receiver would: `signature_header` may list several
/// space-separated `v1,<base64>` signatures; one match is enough.
pub fn verify(
    secret: &str,
    msg_id: &str,
    timestamp: &str,
    signature_header: &str,
    body: &[u8],
    now: i64,
) -> Result<(), Rejection> {
    let key = decode_base64(secret.trim_start_matches("whsec_")).ok_or(Rejection::BadSecret)?;
    let signed_at: i64 = timestamp.parse().map_err(|_| Rejection::BadTimestamp)?;
    if (now - signed_at).abs() > TOLERANCE_SECONDS {
        return Err(Rejection::StaleTimestamp);
    }
    let mut content = Vec::new();
    content.extend_from_slice(msg_id.as_bytes());
    content.push(b'.');
    content.extend_from_slice(timestamp.as_bytes());
    content.push(b'.');
    content.extend_from_slice(body);
    let expected = hmac(&key, &content);
    let matched = signature_header
        .split(' ')
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(decode_base64)
        .any(|candidate| constant_time_eq(&candidate, &expected));
    if matched {
        Ok(())
    } else {
        Err(Rejection::NoMatchingSignature)
    }
}

/// HMAC-SHA256 from the RFC 2104 definition, on whole buffers.
fn hmac(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut key = if key.len() > 64 {
        Sha256::digest(key).to_vec()
    } else {
        key.to_vec()
    };
    key.resize(64, 0);
    let mut inner: Vec<u8> = key.iter().map(|b| b ^ 0x36).collect();
    inner.extend_from_slice(message);
    let mut outer: Vec<u8> = key.iter().map(|b| b ^ 0x5c).collect();
    outer.extend_from_slice(&Sha256::digest(&inner));
    Sha256::digest(&outer).to_vec()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Standard-alphabet base64 with optional padding.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    (!out.is_empty()).then_some(out)
}

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TIMESTAMP: &str = "1614265330";
const BODY: &str = r#"{"test": 2432232314}"#;
const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
const NOW: i64 = 1614265330 + 10;

#[test]
fn verifier_accepts_the_standard_webhooks_test_vector() {
    assert_eq!(
        verify(SECRET, MSG_ID, TIMESTAMP, SIGNATURE, BODY.as_bytes(), NOW),
        Ok(())
    );
    let several = format!("v1,bm90IGl0 {SIGNATURE}");
    assert_eq!(
        verify(SECRET, MSG_ID, TIMESTAMP, &several, BODY.as_bytes(), NOW),
        Ok(())
    );
}

#[test]
fn verifier_accepts_what_the_signer_produces() {
    let secret = quire_webhooks::new_secret().unwrap();
    let body = r#"{"type":"document.indexed","data":{"id":"d1"}}"#;
    let headers = quire_webhooks::headers(&secret, "msg_42", NOW, body).unwrap();
    assert_eq!(
        verify(
            &secret,
            &headers.id,
            &headers.timestamp,
            &headers.signature,
            body.as_bytes(),
            NOW
        ),
        Ok(())
    );
}

#[test]
fn verifier_rejects_tampering() {
    let tampered_body = r#"{"test": 2432232315}"#;
    assert_eq!(
        verify(
            SECRET,
            MSG_ID,
            TIMESTAMP,
            SIGNATURE,
            tampered_body.as_bytes(),
            NOW
        ),
        Err(Rejection::NoMatchingSignature)
    );
    assert_eq!(
        verify(
            SECRET,
            MSG_ID,
            "1614265331",
            SIGNATURE,
            BODY.as_bytes(),
            NOW
        ),
        Err(Rejection::NoMatchingSignature)
    );
    assert_eq!(
        verify(
            SECRET,
            "msg_p5jXN8AQM9LWM0D4loKWxJel",
            TIMESTAMP,
            SIGNATURE,
            BODY.as_bytes(),
            NOW
        ),
        Err(Rejection::NoMatchingSignature)
    );
    let other_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx";
    assert_eq!(
        verify(
            other_secret,
            MSG_ID,
            TIMESTAMP,
            SIGNATURE,
            BODY.as_bytes(),
            NOW
        ),
        Err(Rejection::NoMatchingSignature)
    );
    assert_eq!(
        verify(
            SECRET,
            MSG_ID,
            TIMESTAMP,
            "v0,g0hM9SsE",
            BODY.as_bytes(),
            NOW
        ),
        Err(Rejection::NoMatchingSignature)
    );
}

#[test]
fn verifier_rejects_stale_timestamps() {
    assert_eq!(
        verify(
            SECRET,
            MSG_ID,
            TIMESTAMP,
            SIGNATURE,
            BODY.as_bytes(),
            NOW + 3600
        ),
        Err(Rejection::StaleTimestamp)
    );
    assert_eq!(
        verify(SECRET, MSG_ID, "soon", SIGNATURE, BODY.as_bytes(), NOW),
        Err(Rejection::BadTimestamp)
    );
}
