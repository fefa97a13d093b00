//! Compressed RTF ([MS-OXRTFCP], "LZFu"), the form Outlook keeps a rich-text body in. The
//! output is bounded by the size the header declares, which must itself be within the limits.

use crate::ole::u32_at;
use crate::{ParseError, ParseLimits};

/// The dictionary's initial contents, fixed by the specification.
const PREBUF: &[u8] = b"{\\rtf1\\ansi\\mac\\deff0\\deftab720{\\fonttbl;}{\\f0\\fnil \\froman \\fswiss \\fmodern \\fscript \\fdecor MS Sans SerifSymbolArialTimes New RomanCourier{\\colortbl\\red0\\green0\\blue0\r\n\\par \\pard\\plain\\f0\\fs20\\b\\i\\u\\tab\\tx";
/// `LZFu`: compressed; `MELA`: stored as is.
const COMPRESSED: u32 = 0x7546_5A4C;
const UNCOMPRESSED: u32 = 0x414C_454D;

/// The RTF text of a compressed RTF stream.
pub(crate) fn decompress(bytes: &[u8], limits: &ParseLimits) -> Result<Vec<u8>, ParseError> {
    let damaged = |detail: &str| ParseError::Malformed {
        format: "compressed RTF body".into(),
        detail: detail.into(),
    };
    let (Some(raw_size), Some(kind)) = (u32_at(bytes, 4), u32_at(bytes, 8)) else {
        return Err(damaged("the header is truncated"));
    };
    let raw_size = raw_size as usize;
    if raw_size as u64 > limits.max_unpacked_bytes {
        return Err(ParseError::LimitExceeded(format!(
            "the RTF body unpacks to {raw_size} bytes, more than the limit of {}",
            limits.max_unpacked_bytes
        )));
    }
    let input = &bytes[16.min(bytes.len())..];
    if kind == UNCOMPRESSED {
        return Ok(input[..raw_size.min(input.len())].to_vec());
    }
    if kind != COMPRESSED {
        return Err(damaged("unknown compression type"));
    }
    let mut dictionary = [0u8; 4096];
    dictionary[..PREBUF.len()].copy_from_slice(PREBUF);
    let mut write = PREBUF.len();
    // Each input byte yields at most 17 output bytes: never reserve more than that.
    let mut out = Vec::with_capacity(raw_size.min(input.len().saturating_mul(17)));
    let mut at = 0;
    while at < input.len() && out.len() < raw_size {
        let control = input[at];
        at += 1;
        for bit in 0..8 {
            if at >= input.len() || out.len() >= raw_size {
                break;
            }
            if control & (1 << bit) == 0 {
                let byte = input[at];
                at += 1;
                out.push(byte);
                dictionary[write] = byte;
                write = (write + 1) % 4096;
                continue;
            }
            let Some(pair) = input.get(at..at + 2) else {
                return Err(damaged("a reference is truncated"));
            };
            at += 2;
            let reference = u16::from_be_bytes([pair[0], pair[1]]) as usize;
            let (offset, length) = (reference >> 4, (reference & 0xF) + 2);
            // A reference to the write position marks the end.
            if offset == write {
                return Ok(out);
            }
            for i in 0..length {
                let byte = dictionary[(offset + i) % 4096];
                out.push(byte);
                dictionary[write] = byte;
                write = (write + 1) % 4096;
            }
        }
    }
    out.truncate(raw_size);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specification_example_decompresses() {
        // [MS-OXRTFCP] 3.1.1: "{\rtf1\ansi\ansicpg1252\pard hello world}\r\n".
        let bytes: &[u8] = &[
            0x2d, 0x00, 0x00, 0x00, 0x2b, 0x00, 0x00, 0x00, 0x4c, 0x5a, 0x46, 0x75, 0xf1, 0xc5,
            0xc7, 0xa7, 0x03, 0x00, 0x0a, 0x00, 0x72, 0x63, 0x70, 0x67, 0x31, 0x32, 0x35, 0x42,
            0x32, 0x0a, 0xf3, 0x20, 0x68, 0x65, 0x6c, 0x09, 0x00, 0x20, 0x62, 0x77, 0x05, 0xb0,
            0x6c, 0x64, 0x7d, 0x0a, 0x80, 0x0f, 0xa0,
        ];
        assert_eq!(PREBUF.len(), 207);
        let rtf = decompress(bytes, &ParseLimits::default()).unwrap();
        assert_eq!(
            String::from_utf8(rtf).unwrap(),
            "{\\rtf1\\ansi\\ansicpg1252\\pard hello world}\r\n"
        );
    }

    #[test]
    fn truncated_and_oversized_bodies_fail() {
        assert!(decompress(&[1, 2, 3], &ParseLimits::default()).is_err());
        let mut huge = vec![0u8; 16];
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        huge[8..12].copy_from_slice(&COMPRESSED.to_le_bytes());
        assert!(matches!(
            decompress(&huge, &ParseLimits::default()),
            Err(ParseError::LimitExceeded(_))
        ));
    }
}
