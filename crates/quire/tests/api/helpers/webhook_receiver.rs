//! A webhook receiver on loopback: it verifies each delivery's Standard Webhooks signature
//! with its own HMAC (written from the specification, not with the service's code) and keeps
//! what it received, in arrival order.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What the receiver saw: verified deliveries (headers' id, the body) in arrival order.
#[derive(Clone, Default)]
pub(crate) struct Receiver {
    /// The webhook's signing secret (`whsec_…`), set once the webhook is registered.
    pub(crate) secret: Arc<Mutex<String>>,
    received: Arc<Mutex<Vec<(String, Value)>>>,
    bad_signatures: Arc<Mutex<usize>>,
    /// Requests that have arrived, answered or not.
    arrived: Arc<Mutex<usize>>,
    delay: Duration,
}

impl Receiver {
    /// A receiver on loopback that waits `delay` before each answer; returns it and its URL.
    pub(crate) async fn start(delay: Duration) -> (Self, String) {
        let receiver = Receiver {
            delay,
            ..Default::default()
        };
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, format!("http://{addr}/hook"))
    }

    pub(crate) fn received(&self) -> Vec<(String, Value)> {
        self.received.lock().unwrap().clone()
    }

    /// Deliveries refused for a signature that did not verify.
    pub(crate) fn bad_signatures(&self) -> usize {
        *self.bad_signatures.lock().unwrap()
    }

    /// Requests that have arrived, answered or not.
    pub(crate) fn arrived(&self) -> usize {
        *self.arrived.lock().unwrap()
    }
}

async fn receive(State(receiver): State<Receiver>, headers: HeaderMap, body: String) -> AxumStatus {
    *receiver.arrived.lock().unwrap() += 1;
    tokio::time::sleep(receiver.delay).await;
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (id, timestamp, signature) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let secret = receiver.secret.lock().unwrap().clone();
    if !verify(&secret, &id, &timestamp, &body, &signature) {
        *receiver.bad_signatures.lock().unwrap() += 1;
        return AxumStatus::UNAUTHORIZED;
    }
    receiver
        .received
        .lock()
        .unwrap()
        .push((id, serde_json::from_str(&body).unwrap()));
    AxumStatus::NO_CONTENT
}

/// Standard Webhooks verification, written here from the specification (not with the
/// service's code): `v1,` + base64(HMAC-SHA256(base64-decoded secret after `whsec_`,
/// "id.timestamp.body")), the timestamp within five minutes.
fn verify(secret: &str, id: &str, timestamp: &str, body: &str, signature: &str) -> bool {
    let Some(key) = secret.strip_prefix("whsec_").and_then(base64_decode) else {
        return false;
    };
    let Ok(sent_at) = timestamp.parse::<i64>() else {
        return false;
    };
    if (chrono::Utc::now().timestamp() - sent_at).abs() > 300 {
        return false;
    }
    let expected = format!(
        "v1,{}",
        base64_encode(&hmac_sha256(
            &key,
            format!("{id}.{timestamp}.{body}").as_bytes()
        ))
    );
    // Several signatures may be sent, separated by spaces.
    signature.split(' ').any(|s| s == expected)
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .to_vec()
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|c| *c != b'=') {
        let value = ALPHABET.iter().position(|a| *a == c)? as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

#[test]
fn the_test_verifier_accepts_the_specifications_example() {
    // The Standard Webhooks reference vector.
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let key = base64_decode(&secret[6..]).unwrap();
    let signed = hmac_sha256(
        &key,
        b"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}",
    );
    assert_eq!(
        base64_encode(&signed),
        "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    );
}
