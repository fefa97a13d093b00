//! The box that seals a source's credentials (S3 secret keys) before they are stored, so a
//! copy of the database alone does not give them away.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};

use crate::SyncError;

/// The key file's name in the data directory.
const KEY_FILE: &str = "connectors.key";
/// The prefix of sealed values, naming the format (a later one can change the cipher).
const VERSION: &str = "v1:";
const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 12;
/// Poly1305 tag length: the shortest sealed value is a nonce and a tag.
const TAG_BYTES: usize = 16;

/// Credentials sealed at rest: ChaCha20-Poly1305 with a random 12-byte nonce per value;
/// stored as "v1:" + base64(nonce || ciphertext).
pub struct SecretBox {
    cipher: ChaCha20Poly1305,
}

/// Shows nothing of the key.
impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretBox").finish_non_exhaustive()
    }
}

impl SecretBox {
    /// From the operator's key (`configured`: 32 bytes, base64-encoded; invalid is
    /// [`SyncError::Invalid`]), else from `<data_dir>/connectors.key`, created with 32 random
    /// bytes (base64, owner-only permissions) when missing.
    pub fn load_or_create(data_dir: &Path, configured: Option<&str>) -> Result<Self, SyncError> {
        let key = match configured {
            Some(encoded) => decode_key(encoded).ok_or_else(|| {
                SyncError::Invalid(
                    "the connectors key must be 32 bytes, base64-encoded (connectors.key)".into(),
                )
            })?,
            None => key_file(data_dir)?,
        };
        Ok(Self::with_key(&key))
    }

    fn with_key(key: &[u8; KEY_BYTES]) -> Self {
        Self {
            cipher: ChaCha20Poly1305::new(&Key::from(*key)),
        }
    }

    /// Seals `plain` under a fresh random nonce.
    pub fn seal(&self, plain: &str) -> String {
        let mut nonce = [0; NONCE_BYTES];
        getrandom::fill(&mut nonce).expect("the operating system's random source failed");
        let ciphertext = self
            .cipher
            .encrypt(&Nonce::from(nonce), plain.as_bytes())
            .expect("ChaCha20-Poly1305 seals any value that fits in memory");
        let mut sealed = Vec::with_capacity(NONCE_BYTES + ciphertext.len());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        format!("{VERSION}{}", STANDARD.encode(sealed))
    }

    /// The value `seal` was given; [`SyncError::Invalid`] when it was sealed with another
    /// key or is damaged.
    pub fn open(&self, sealed: &str) -> Result<String, SyncError> {
        let damaged = || {
            SyncError::Invalid(
                "a sealed credential cannot be opened: it is damaged or was sealed with another \
                 connectors key"
                    .into(),
            )
        };
        let bytes = sealed
            .strip_prefix(VERSION)
            .and_then(|encoded| STANDARD.decode(encoded).ok())
            .filter(|bytes| bytes.len() >= NONCE_BYTES + TAG_BYTES)
            .ok_or_else(damaged)?;
        let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| damaged())?;
        let plain = self
            .cipher
            .decrypt(&Nonce::from(nonce), ciphertext)
            .map_err(|_| damaged())?;
        String::from_utf8(plain).map_err(|_| damaged())
    }
}

fn decode_key(encoded: &str) -> Option<[u8; KEY_BYTES]> {
    STANDARD.decode(encoded.trim()).ok()?.try_into().ok()
}

/// Reads the data directory's key file, creating it first when it is missing.
fn key_file(data_dir: &Path) -> Result<[u8; KEY_BYTES], SyncError> {
    let path = data_dir.join(KEY_FILE);
    let failed = |e: io::Error| {
        SyncError::Invalid(format!("the connectors key file {}: {e}", path.display()))
    };
    match fs::read_to_string(&path) {
        Ok(encoded) => {
            return decode_key(&encoded).ok_or_else(|| {
                SyncError::Invalid(format!(
                    "the connectors key file {} does not hold 32 base64-encoded bytes",
                    path.display()
                ))
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(failed(e)),
    }
    fs::create_dir_all(data_dir).map_err(failed)?;
    let mut key = [0; KEY_BYTES];
    getrandom::fill(&mut key)
        .map_err(|e| SyncError::Invalid(format!("no random source for the key: {e}")))?;
    // Written whole under a temporary name, then linked into place: a concurrent starter
    // either wins or reads the winner's complete key, never a half-written one.
    let mut suffix = [0; 8];
    getrandom::fill(&mut suffix)
        .map_err(|e| SyncError::Invalid(format!("no random source for the key: {e}")))?;
    let temporary = data_dir.join(format!(
        ".{KEY_FILE}.{}.tmp",
        suffix
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    ));
    let written = write_owner_only(&temporary, format!("{}\n", STANDARD.encode(key)).as_bytes())
        .and_then(|()| fs::hard_link(&temporary, &path));
    let _ = fs::remove_file(&temporary);
    match written {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => key_file(data_dir),
        Err(e) => Err(failed(e)),
    }
}

fn write_owner_only(path: &Path, content: &[u8]) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(content)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn invalid<T: std::fmt::Debug>(result: Result<T, SyncError>) -> String {
        match result {
            Err(SyncError::Invalid(message)) => message,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn seals_and_opens_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = SecretBox::load_or_create(dir.path(), None).unwrap();
        let sealed = secrets.seal("s3cr3t/ключ");
        assert!(sealed.starts_with("v1:"), "{sealed}");
        assert!(!sealed.contains("s3cr3t"));
        assert_eq!(secrets.open(&sealed).unwrap(), "s3cr3t/ключ");
        // A fresh nonce each time: the same value never seals the same way twice.
        assert_ne!(secrets.seal("same"), secrets.seal("same"));
        assert_eq!(secrets.open(&secrets.seal("")).unwrap(), "");
    }

    #[test]
    fn another_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = SecretBox::load_or_create(dir.path(), None).unwrap();
        let configured = STANDARD.encode([7u8; 32]);
        let second = SecretBox::load_or_create(dir.path(), Some(&configured)).unwrap();
        let sealed = first.seal("value");
        assert!(invalid(second.open(&sealed)).contains("another connectors key"));
        // The configured key is used as given, the same on every start.
        let again = SecretBox::load_or_create(dir.path(), Some(&configured)).unwrap();
        assert_eq!(again.open(&second.seal("v")).unwrap(), "v");
    }

    #[test]
    fn damaged_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = SecretBox::load_or_create(dir.path(), None).unwrap();
        let sealed = secrets.seal("value");
        let mut bytes = STANDARD.decode(&sealed[3..]).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let flipped = format!("v1:{}", STANDARD.encode(&bytes));
        for damaged in [
            flipped.as_str(),
            &sealed[..sealed.len() - 4],
            &sealed[3..],
            "v2:AAAA",
            "v1:not base64!",
            "v1:AAAA",
            "",
        ] {
            invalid(secrets.open(damaged));
        }
    }

    #[test]
    fn a_bad_configured_key_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        for key in ["", "short", &STANDARD.encode([1u8; 31]), "!!!!"] {
            let message = invalid(SecretBox::load_or_create(dir.path(), Some(key)));
            assert!(message.contains("32 bytes"), "{message}");
        }
        // None of them wrote a key file.
        assert!(!dir.path().join(KEY_FILE).exists());
    }

    #[test]
    fn the_key_file_is_created_owner_only_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data");
        let first = SecretBox::load_or_create(&data_dir, None).unwrap();
        let path = data_dir.join(KEY_FILE);
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        let encoded = fs::read_to_string(&path).unwrap();
        assert_eq!(decode_key(&encoded).map(|k| k.len()), Some(32));
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&data_dir).unwrap().count(), 1);

        let second = SecretBox::load_or_create(&data_dir, None).unwrap();
        assert_eq!(second.open(&first.seal("kept")).unwrap(), "kept");
        assert_eq!(fs::read_to_string(&path).unwrap(), encoded);

        fs::write(&path, "garbage").unwrap();
        let message = invalid(SecretBox::load_or_create(&data_dir, None));
        assert!(message.contains("connectors.key"), "{message}");
    }
}
