//! Turning the bytes of a text file into a string: byte-order marks first, then UTF-16 without
//! a BOM (ASCII-range UTF-16 is also valid UTF-8, full of NULs), then UTF-8, then a statistical
//! guess among legacy encodings (chardetng, the detector Firefox uses).

use encoding_rs::{Encoding, UTF_16BE, UTF_16LE};

/// Decoded text and the encoding it was read as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The text.
    pub text: String,
    /// The encoding's name, such as `UTF-8` or `windows-1252`.
    pub encoding: &'static str,
}

/// Decodes `bytes` as text, detecting the encoding.
pub fn decode_text(bytes: &[u8]) -> Decoded {
    if let Some((encoding, bom)) = Encoding::for_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom..]);
        return Decoded {
            text: text.into_owned(),
            encoding: encoding.name(),
        };
    }
    if let Some(encoding) = utf16_without_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(bytes);
        return Decoded {
            text: text.into_owned(),
            encoding: encoding.name(),
        };
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Decoded {
            text: text.to_owned(),
            encoding: "UTF-8",
        };
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    detector.feed(bytes, true);
    let encoding = detector.guess(None, chardetng::Utf8Detection::Allow);
    let (text, _, _) = encoding.decode(bytes);
    Decoded {
        text: text.into_owned(),
        encoding: encoding.name(),
    }
}

/// UTF-16 text without a BOM shows as a NUL in every other byte.
pub(crate) fn utf16_without_bom(bytes: &[u8]) -> Option<&'static Encoding> {
    let sample = &bytes[..bytes.len().min(4096) & !1];
    if sample.len() < 8 {
        return None;
    }
    let pairs = sample.len() / 2;
    let even_nuls = sample.iter().step_by(2).filter(|&&b| b == 0).count();
    let odd_nuls = sample
        .iter()
        .skip(1)
        .step_by(2)
        .filter(|&&b| b == 0)
        .count();
    if odd_nuls * 10 > pairs * 7 && even_nuls * 10 < pairs {
        Some(UTF_16LE)
    } else if even_nuls * 10 > pairs * 7 && odd_nuls * 10 < pairs {
        Some(UTF_16BE)
    } else {
        None
    }
}

/// True when `bytes` look like binary data rather than text in some encoding.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    let sample = &bytes[..bytes.len().min(8192)];
    if Encoding::for_bom(sample).is_some() || utf16_without_bom(sample).is_some() {
        return false;
    }
    let control = sample
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x0c | 0x1b))
        .count();
    sample.contains(&0) || control * 100 > sample.len().max(1) * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_common_encodings() {
        assert_eq!(decode_text("héllo".as_bytes()).encoding, "UTF-8");
        let latin1 = b"Le caf\xE9 est cr\xE8me, d\xE9j\xE0 servi \xE0 la fen\xEAtre de l'h\xF4tel.";
        let decoded = decode_text(latin1);
        assert_eq!(decoded.encoding, "windows-1252");
        assert!(decoded.text.contains("café") && decoded.text.contains("hôtel"));
        let utf16: Vec<u8> = "plain words here"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert_eq!(decode_text(&utf16).text, "plain words here");
        let mut with_bom = vec![0xFE, 0xFF];
        with_bom.extend("hi".encode_utf16().flat_map(u16::to_be_bytes));
        assert_eq!(decode_text(&with_bom).text, "hi");
    }

    #[test]
    fn binary_is_not_text() {
        assert!(looks_binary(b"\x00\x01\x02binary"));
        assert!(!looks_binary("texte accentué\n\tok".as_bytes()));
        let utf16: Vec<u8> = "text"
            .repeat(10)
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert!(!looks_binary(&utf16));
    }
}
