//! Scanners for the structured types: e-mail, phone, payment card, IBAN, US SSN and IP
//! address. They walk the bytes once; every span starts and ends on an ASCII byte, so on a
//! char boundary.

use super::{PiiType, Span, context_before};

/// Every structured finding in `text`, by start offset; e-mail addresses win overlaps.
pub(super) fn scan(text: &str) -> Vec<Span> {
    let mut emails = Vec::new();
    scan_emails(text, &mut emails);
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if starts_token(b, i) {
            let found = if c.is_ascii_alphabetic() {
                iban(text, i).or_else(|| ipv6(text, i))
            } else if c.is_ascii_digit() {
                ipv6(text, i)
                    .or_else(|| ssn(text, i))
                    .or_else(|| card(text, i))
                    .or_else(|| ipv4(text, i))
                    .or_else(|| phone(text, i))
            } else if c == b'+' || c == b'(' {
                phone(text, i)
            } else if c == b':' {
                ipv6(text, i)
            } else {
                None
            };
            if let Some(span) = found {
                i = span.end;
                out.push(span);
                continue;
            }
        }
        if is_word_byte(c) {
            while i < b.len() && is_word_byte(b[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out.retain(|s| !emails.iter().any(|e| s.start < e.end && e.start < s.end));
    out.extend(emails);
    out.sort_by_key(|s| s.start);
    out
}

/// Letters, digits, `_` and any byte of a non-ASCII character.
fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// Whether a number or code may start at `i`: not inside a word, a path, an address or a
/// dotted number (`10.1234`, `2-3`).
fn starts_token(b: &[u8], i: usize) -> bool {
    let Some(&prev) = i.checked_sub(1).and_then(|p| b.get(p)) else {
        return true;
    };
    if is_word_byte(prev) || matches!(prev, b'/' | b'@' | b'\\' | b'=' | b'#' | b'$') {
        return false;
    }
    if matches!(prev, b'.' | b'-' | b',' | b':') && i >= 2 && (b[i - 2].is_ascii_alphanumeric()) {
        return false;
    }
    true
}

/// Whether a match ending at `end` is not glued to more of the same (`…1234a`, `…12.5`).
fn ends_token(b: &[u8], end: usize) -> bool {
    match b.get(end) {
        None => true,
        Some(&c) if is_word_byte(c) => false,
        Some(b'.' | b',' | b'-' | b'/' | b':') => {
            !b.get(end + 1).is_some_and(|n| n.is_ascii_alphanumeric())
        }
        Some(&c) => c != b'%' && c != b'@',
    }
}

fn span(kind: PiiType, start: usize, end: usize, confidence: f32) -> Span {
    Span {
        kind,
        start,
        end,
        confidence,
    }
}

fn scan_emails(text: &str, out: &mut Vec<Span>) {
    let b = text.as_bytes();
    let local_byte = |c: u8| c.is_ascii_alphanumeric() || b"._%+-'".contains(&c);
    let domain_byte = |c: u8| c.is_ascii_alphanumeric() || c == b'.' || c == b'-';
    let mut last_end = 0;
    for (at, _) in text.match_indices('@') {
        if at < last_end {
            continue;
        }
        let mut start = at;
        while start > 0 && local_byte(b[start - 1]) {
            start -= 1;
        }
        while start < at && matches!(b[start], b'.' | b'\'' | b'-') {
            start += 1;
        }
        let mut end = at + 1;
        while end < b.len() && domain_byte(b[end]) {
            end += 1;
        }
        while end > at + 1 && matches!(b[end - 1], b'.' | b'-') {
            end -= 1;
        }
        let domain = &text[at + 1..end];
        let tld = domain.rsplit('.').next().unwrap_or("");
        let valid = start < at
            && domain.contains('.')
            && !domain.contains("..")
            && !domain.starts_with(['.', '-'])
            && tld.len() >= 2
            && tld.bytes().all(|c| c.is_ascii_alphabetic())
            && !(start > 0 && b[start - 1] >= 0x80);
        if valid {
            out.push(span(PiiType::Email, start, end, 0.95));
            last_end = end;
        }
    }
}

/// `AAA-GG-SSSS` with a valid area (not 000, 666 or 9xx), group (not 00) and serial (not
/// 0000); spaces or no separators only with an SSN cue before.
fn ssn(text: &str, i: usize) -> Option<Span> {
    let b = text.as_bytes();
    let digits = |from: usize, n: usize| {
        b.get(from..from + n)
            .filter(|s| s.iter().all(u8::is_ascii_digit))
            .map(|s| s.iter().fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0')))
    };
    let cue = || {
        let before = context_before(text, i, 40);
        before.contains("ssn") || before.contains("social security")
    };
    let (area, group, serial, end, confidence) = match b.get(i + 3) {
        Some(&sep @ (b'-' | b' ')) if b.get(i + 6) == Some(&sep) => {
            let confidence = match (sep, cue()) {
                (_, true) => 0.95,
                (b'-', false) => 0.8,
                _ => return None,
            };
            (
                digits(i, 3)?,
                digits(i + 4, 2)?,
                digits(i + 7, 4)?,
                i + 11,
                confidence,
            )
        }
        _ if cue() => (
            digits(i, 3)?,
            digits(i + 3, 2)?,
            digits(i + 5, 4)?,
            i + 9,
            0.8,
        ),
        _ => return None,
    };
    let valid = area != 0 && area != 666 && area < 900 && group != 0 && serial != 0;
    (valid && ends_token(b, end)).then(|| span(PiiType::UsSsn, i, end, confidence))
}

/// 12–19 digits in groups of at least three, separated by single spaces or dashes, with a
/// known issuer prefix and a valid Luhn check digit.
fn card(text: &str, i: usize) -> Option<Span> {
    let b = text.as_bytes();
    let mut digits = Vec::with_capacity(19);
    let mut separator = None;
    let mut group = 0;
    let mut end = i;
    while end < b.len() {
        let c = b[end];
        if c.is_ascii_digit() {
            digits.push(c - b'0');
            group += 1;
            end += 1;
            if digits.len() > 19 {
                return None;
            }
        } else if (c == b' ' || c == b'-')
            && b.get(end + 1).is_some_and(u8::is_ascii_digit)
            && separator.is_none_or(|s| s == c)
            && group >= 3
        {
            separator = Some(c);
            group = 0;
            end += 1;
        } else {
            break;
        }
    }
    if separator.is_some() && group < 3 {
        return None;
    }
    if !(12..=19).contains(&digits.len()) || !ends_token(b, end) || !luhn(&digits) {
        return None;
    }
    let prefix = |n: usize| digits[..n].iter().fold(0u32, |a, &d| a * 10 + u32::from(d));
    let known = match digits[0] {
        4 => true,
        5 => matches!(prefix(2), 50..=55) || matches!(prefix(2), 56..=59),
        2 => matches!(prefix(4), 2221..=2720) || prefix(4) == 2131,
        // JCB issues 3528–3589; test generators (Faker) use the whole 35 range.
        3 => {
            matches!(prefix(2), 34..=39)
                || matches!(prefix(3), 300..=305 | 309)
                || matches!(prefix(4), 3528..=3589)
        }
        6 => true,
        1 => prefix(4) == 1800,
        // Maestro's `0604`.
        0 => prefix(4) == 604,
        _ => false,
    };
    if !known {
        return None;
    }
    let confidence = if digits.len() == 12 { 0.6 } else { 0.9 };
    Some(span(PiiType::CreditCard, i, end, confidence))
}

fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(k, &d)| {
            let d = u32::from(d);
            if k % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// IBAN lengths by country (ISO 13616 registry).
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NL", 18),
    ("NO", 15),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("SA", 24),
    ("SC", 31),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
];

/// Country code, check digits and the country's length of letters and digits, optionally in
/// groups separated by single spaces, passing the mod-97 check.
fn iban(text: &str, i: usize) -> Option<Span> {
    let b = text.as_bytes();
    let head = b.get(i..i + 4)?;
    if !(head[0].is_ascii_alphabetic()
        && head[1].is_ascii_alphabetic()
        && head[0].is_ascii_uppercase() == head[1].is_ascii_uppercase()
        && head[2].is_ascii_digit()
        && head[3].is_ascii_digit())
    {
        return None;
    }
    let country = [head[0].to_ascii_uppercase(), head[1].to_ascii_uppercase()];
    let length = IBAN_LENGTHS
        .iter()
        .find(|(code, _)| code.as_bytes() == country)?
        .1;
    let lowercase = head[0].is_ascii_lowercase();
    let mut chars = Vec::with_capacity(length);
    let mut end = i;
    while chars.len() < length {
        let c = *b.get(end)?;
        if c.is_ascii_digit() || (c.is_ascii_alphabetic() && c.is_ascii_lowercase() == lowercase) {
            chars.push(c.to_ascii_uppercase());
            end += 1;
        } else if c == b' ' && end > i && b[end - 1] != b' ' && chars.len() >= 4 {
            end += 1;
        } else {
            return None;
        }
    }
    if !ends_token(b, end) {
        return None;
    }
    let mut remainder = 0u32;
    for &c in chars[4..].iter().chain(&chars[..4]) {
        let value = if c.is_ascii_digit() {
            u32::from(c - b'0')
        } else {
            u32::from(c - b'A') + 10
        };
        remainder = if value >= 10 {
            (remainder * 100 + value) % 97
        } else {
            (remainder * 10 + value) % 97
        };
    }
    (remainder == 1).then(|| span(PiiType::Iban, i, end, 0.95))
}

/// Words that say a dotted number is a version or a section, not an address.
const VERSION_CUES: &[&str] = &["version", "ver.", "release", "firmware", "build", "v."];

/// Words that say a number is an address on a network.
const NETWORK_CUES: &[&str] = &[
    "ip", "address", "host", "server", "dns", "gateway", "subnet",
];

/// Four dotted octets (0–255, no leading zeros), not a version number or section number.
fn ipv4(text: &str, i: usize) -> Option<Span> {
    let b = text.as_bytes();
    let mut end = i;
    let mut octets = [0u32; 4];
    for (k, octet) in octets.iter_mut().enumerate() {
        if k > 0 {
            if b.get(end) != Some(&b'.') {
                return None;
            }
            end += 1;
        }
        let from = end;
        while end < b.len() && b[end].is_ascii_digit() && end - from < 4 {
            end += 1;
        }
        let part = &text[from..end];
        if part.is_empty() || part.len() > 3 || (part.len() > 1 && part.starts_with('0')) {
            return None;
        }
        *octet = part.parse().ok()?;
        if *octet > 255 {
            return None;
        }
    }
    if !ends_token(b, end)
        || b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit)
    {
        return None;
    }
    let before = context_before(text, i, 24);
    if VERSION_CUES.iter().any(|cue| before.contains(cue)) {
        return None;
    }
    if octets.iter().all(|&o| o < 10) {
        let wider = context_before(text, i, 48);
        if !NETWORK_CUES.iter().any(|cue| wider.contains(cue)) {
            return None;
        }
    }
    Some(span(PiiType::IpAddress, i, end, 0.85))
}

/// Eight groups of one to four hex digits, or fewer with one `::`.
fn ipv6(text: &str, i: usize) -> Option<Span> {
    let b = text.as_bytes();
    let mut end = i;
    while end < b.len() && (b[end].is_ascii_hexdigit() || b[end] == b':') && end - i < 45 {
        end += 1;
    }
    while end > i && b[end - 1] == b':' && !(end >= i + 2 && b[end - 2] == b':') {
        end -= 1;
    }
    let candidate = &text[i..end];
    if !candidate.contains(':') || !ends_token(b, end) {
        return None;
    }
    let compressed = candidate.matches("::").count();
    if compressed > 1 || candidate.contains(":::") {
        return None;
    }
    let groups: Vec<&str> = candidate.split(':').filter(|g| !g.is_empty()).collect();
    if groups.iter().any(|g| g.len() > 4) {
        return None;
    }
    let full = compressed == 0 && groups.len() == 8 && !candidate.starts_with(':');
    let short = compressed == 1
        && groups.len() <= 7
        && candidate.bytes().any(|c| c.is_ascii_digit())
        && (groups.len() >= 3 || candidate.starts_with("::") || candidate.starts_with("fe80"));
    if full {
        Some(span(PiiType::IpAddress, i, end, 0.9))
    } else if short {
        Some(span(PiiType::IpAddress, i, end, 0.7))
    } else {
        None
    }
}

/// Words before a number that say it is a phone number.
const PHONE_CUES: &[&str] = &[
    "phone", "tel", "mobile", "cell", "fax", "call", "contact", "dial", "whatsapp", "sms", "reach",
];

/// Words before a number that say it is something else.
const NOT_PHONE_CUES: &[&str] = &[
    "isbn",
    "issn",
    "doi",
    "arxiv",
    "pmid",
    "page",
    "pp.",
    "vol",
    "fig",
    "table",
    "invoice",
    "serial",
    "patent",
    "file no",
    "file number",
];

/// International (`+CC …`) and common national formats; short or ambiguous shapes only with a
/// phone cue before them.
fn phone(text: &str, i: usize) -> Option<Span> {
    let b = text.as_bytes();
    let plus = b[i] == b'+';
    let mut end = if plus { i + 1 } else { i };
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut separators = Vec::new();
    let mut open_paren = false;
    let mut last_was_space = false;
    while end < b.len() {
        let c = b[end];
        if c.is_ascii_digit() {
            let from = end;
            while end < b.len() && b[end].is_ascii_digit() {
                end += 1;
            }
            groups.push((from, end));
            last_was_space = false;
        } else if c == b'(' && !open_paren && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
            open_paren = true;
            end += 1;
        } else if c == b')' && open_paren {
            open_paren = false;
            end += 1;
        } else if (c == b' ' && !last_was_space) || c == b'-' || c == b'.' {
            // A separator must be followed by more of the number.
            let next = b.get(end + 1).copied().unwrap_or(0);
            if !(next.is_ascii_digit() || next == b'(' || (c != b' ' && next == b' ')) {
                break;
            }
            separators.push(c);
            last_was_space = c == b' ';
            end += 1;
        } else {
            break;
        }
    }
    while end > i && !b[end - 1].is_ascii_digit() && b[end - 1] != b')' {
        end -= 1;
    }
    if open_paren || groups.is_empty() {
        return None;
    }
    // An extension: `x123`, ` ext. 123`.
    let rest = &text[end..];
    for marker in ["x", " x", " ext. ", " ext ", " ext.", " ext"] {
        if let Some(tail) = rest.strip_prefix(marker) {
            let n = tail.bytes().take_while(u8::is_ascii_digit).count();
            if (1..=5).contains(&n) {
                end += marker.len() + n;
                break;
            }
        }
    }
    // `082 490 1693-Office`: a label glued on with a dash still ends the number.
    let labelled = b.get(end) == Some(&b'-') && b.get(end + 1).is_some_and(u8::is_ascii_alphabetic);
    if !(ends_token(b, end) || labelled) {
        return None;
    }
    let main_groups: Vec<(usize, usize)> =
        groups.iter().copied().filter(|&(s, _)| s < end).collect();
    let lengths: Vec<usize> = main_groups.iter().map(|(s, e)| e - s).collect();
    let digits: usize = lengths.iter().sum();
    if !(7..=15).contains(&digits) {
        return None;
    }
    let span_text = &text[i..end];
    if span_text.contains('/') {
        return None;
    }
    if NOT_PHONE_CUES
        .iter()
        .any(|cue| context_before(text, i, 16).contains(cue))
    {
        return None;
    }
    let cue = PHONE_CUES
        .iter()
        .any(|cue| context_before(text, i, 40).contains(cue));
    if plus && text[i + 1..].starts_with('0') {
        // `+0000`: a time-zone offset, not a country code.
        return None;
    }
    // Rows of small numbers in tables (`0 1 0 0 2 4 6`) are not phone numbers.
    // `+46 (0)8 928 571 38` has two one-digit groups.
    let tiny = lengths.iter().skip(1).filter(|&&l| l < 2).count();
    if tiny > usize::from(plus) + 1 || (!plus && lengths.len() > 6) {
        return None;
    }
    let dotted = separators.contains(&b'.');
    if dotted && separators.iter().any(|&s| s != b'.') && !plus {
        return None;
    }
    if looks_like_date_or_range(&text[i..end], &lengths) {
        return None;
    }
    let first = &text[main_groups[0].0..main_groups[0].1];
    let area_ok = |g: &str| g.len() == 3 && !g.starts_with(['0', '1']);
    let nanp = digits == 10 && lengths == [3, 3, 4] && area_ok(first)
        || digits == 11 && lengths == [1, 3, 3, 4] && first == "1";
    let spaced = separators.iter().all(|&s| s == b' ') && !span_text.contains('(');
    let french = dotted && lengths.len() >= 4 && lengths.iter().all(|&l| l == 2);
    if dotted && !(plus || nanp || french) {
        // `010.004.179`, `3.14159`: dotted numbers are phone numbers only in these shapes.
        return None;
    }
    let confidence = if plus && digits >= 8 && lengths.len() >= 2 || plus && digits >= 10 {
        0.9
    } else if nanp && spaced {
        // `734 901 1185` is as often three numbers in a table.
        if cue { 0.8 } else { 0.45 }
    } else if nanp {
        0.85
    } else if first.starts_with("00") && lengths.len() >= 3 && digits >= 10 {
        0.8
    } else if first.starts_with('0') && lengths.len() >= 2 && digits >= 9 || french {
        0.7
    } else if cue && !(lengths.len() == 1 && digits < 9) {
        0.6
    } else {
        return None;
    };
    let confidence: f32 = if cue { confidence + 0.05 } else { confidence };
    Some(span(PiiType::Phone, i, end, confidence.min(0.95)))
}

/// Dates (`2020-01-15`, `15.01.2020`), year ranges (`1990-2020`) and ISBN-13s.
fn looks_like_date_or_range(candidate: &str, lengths: &[usize]) -> bool {
    let year = |g: &str| g.len() == 4 && (g.starts_with("19") || g.starts_with("20"));
    let groups: Vec<&str> = candidate
        .split(|c: char| !c.is_ascii_digit())
        .filter(|g| !g.is_empty())
        .collect();
    match groups.as_slice() {
        [a, b] if year(a) && year(b) => true,
        [a, _, _] if year(a) && lengths[1] <= 2 && lengths[2] <= 2 => true,
        [_, _, c] if year(c) && lengths[0] <= 2 && lengths[1] <= 2 => true,
        _ => {
            let digits: String = groups.concat();
            digits.len() == 13 && (digits.starts_with("978") || digits.starts_with("979"))
        }
    }
}
