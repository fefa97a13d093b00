//! The mutator of `quire bench fuzz`: damages a seed file in ways parsers get wrong (flipped
//! bits, boundary integers, truncation, duplicated or spliced ranges, format tokens, deep
//! nesting) and, for ZIP containers, damages one inner entry and packs the container again so
//! the damage passes the container's CRC checks and reaches the XML parsers behind it.
//!
//! Each input is built from a generator seeded by the run's seed and the input's number
//! alone, so any input of a run can be built again, whatever the number of workers.

use std::io::{Cursor, Read, Write};

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::SeedableRng;

/// Largest range one step copies, inserts or overwrites: inputs stay small enough to parse
/// many per second.
const MAX_RANGE: usize = 64 * 1024;

/// Most bytes a container may unpack to before the mutator packs it again; past it the seed
/// is damaged as plain bytes (a seed is trusted to be a real file, not to be small).
const MAX_UNPACKED: u64 = 64 * 1024 * 1024;

/// Most entries of a container the mutator packs again.
const MAX_ENTRIES: usize = 20_000;

/// Most copies of one token a nesting step writes: deep enough to find recursion without
/// a stack limit, small enough to stay a quick input.
const MAX_REPEAT: usize = 20_000;

/// Byte values at the edges of signed and unsigned ranges.
const BYTES: [u8; 7] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, 0x20];

/// Integers at the edges of 16- and 32-bit ranges, written little- or big-endian over a length
/// or an offset field.
const WORDS: [u32; 10] = [
    0,
    1,
    0x7f,
    0xff,
    0x7fff,
    0xffff,
    0x0001_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
];

/// Pieces of the formats' syntax: markup, PDF objects, RTF control words, MIME headers, CSV
/// and Markdown punctuation, numbers that overflow, and encodings' awkward bytes.
const TOKENS: &[&[u8]] = &[
    b"<",
    b">",
    b"</",
    b"/>",
    b"&",
    b"&amp;",
    b"&#0;",
    b"&#xFFFF;",
    b"&#1114112;",
    b"<![CDATA[",
    b"]]>",
    b"<!DOCTYPE a [<!ENTITY e \"&e;&e;\">]>",
    b"\"",
    b"'",
    b"=",
    b"\0",
    b"\r\n",
    b"\n\n",
    b"\t",
    b"obj",
    b"endobj",
    b"stream\n",
    b"endstream",
    b"xref",
    b"trailer",
    b"startxref",
    b"<<",
    b">>",
    b"/Length 999999999",
    b"/Count 2147483647",
    b"/Kids [1 0 R]",
    b" 0 R",
    b"[",
    b"]",
    b"(",
    b")",
    b"\\",
    b"{\\rtf1",
    b"\\bin99999",
    b"\\uc0\\u-1 ",
    b"\\'ff",
    b"{",
    b"}",
    b"=?utf-8?B?",
    b"=?x?Q?=FF?=",
    b"Content-Type: multipart/mixed; boundary=\"b\"\r\n",
    b"--b\r\n",
    b"Content-Transfer-Encoding: base64\r\n",
    b",",
    b";",
    b"\"\"",
    b"|",
    b"# ",
    b"```",
    b"<table>",
    b"<td colspan=\"999999\" rowspan=\"65535\">",
    b"<!--",
    b"-->",
    b"-1",
    b"4294967296",
    b"99999999999999999999",
    b"NaN",
    b"1e308",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xc3",
    b"\xed\xa0\x80",
];

/// Tokens that open a level of nesting, repeated to find parsers that recurse without a limit.
const OPENERS: &[&[u8]] = &[
    b"<a>",
    b"<w:tbl><w:tr><w:tc>",
    b"<div>",
    b"<table><tr><td>",
    b"[",
    b"<<",
    b"{",
    b"{\\*",
    b"(",
    b"> ",
];

/// A generator for input number `index` of the run seeded with `seed`. Its state is four
/// SplitMix64 outputs chained from the two numbers: xoshiro's first outputs from a sparse state
/// (the raw numbers) would be nearly the same for every input.
pub(crate) fn generator(seed: u64, index: u64) -> Xoshiro256PlusPlus {
    let first = splitmix64(seed);
    let second = splitmix64(first ^ index);
    let third = splitmix64(second);
    let fourth = splitmix64(third);
    let mut bytes = [0_u8; 32];
    for (chunk, word) in bytes.chunks_mut(8).zip([first, second, third, fourth]) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    Xoshiro256PlusPlus::from_seed(bytes)
}

/// One step of SplitMix64, the generator xoshiro's authors recommend for seeding it.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A damaged input and the steps that made it, for the findings' notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mutant {
    pub(crate) bytes: Vec<u8>,
    pub(crate) steps: Vec<String>,
}

/// Damages `seed`; `donor` (another seed of the same format, or the seed itself) gives
/// ranges to splice in.
pub(crate) fn mutate(seed: &[u8], donor: &[u8], rng: &mut impl Rng) -> Mutant {
    if is_zip(seed)
        && rng.random_ratio(3, 4)
        && let Some(mutant) = mutate_zip_entry(seed, rng)
    {
        return mutant;
    }
    let mut bytes = seed.to_vec();
    let steps = damage(&mut bytes, donor, rng);
    Mutant { bytes, steps }
}

fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04")
}

/// One to eight steps, fewer more often: most inputs stay close to a real file, so they get
/// past the first checks.
fn damage(bytes: &mut Vec<u8>, donor: &[u8], rng: &mut impl Rng) -> Vec<String> {
    let mut count = 1;
    while count < 8 && rng.random_ratio(1, 2) {
        count += 1;
    }
    (0..count).map(|_| step(bytes, donor, rng)).collect()
}

/// One damaging step on `bytes`, described.
fn step(bytes: &mut Vec<u8>, donor: &[u8], rng: &mut impl Rng) -> String {
    let len = bytes.len();
    if len == 0 {
        let token = pick(TOKENS, rng);
        bytes.extend_from_slice(token);
        return format!("insert {} at 0", show(token));
    }
    match rng.random_range(0..10) {
        0 => {
            let at = rng.random_range(0..len);
            let bit = rng.random_range(0..8);
            bytes[at] ^= 1 << bit;
            format!("flip bit {bit} of byte {at}")
        }
        1 => {
            let at = rng.random_range(0..len);
            let value = *pick(&BYTES, rng);
            bytes[at] = value;
            format!("set byte {at} to {value:#04x}")
        }
        2 => {
            let value = *pick(&WORDS, rng);
            let width = if rng.random_bool(0.5) { 2 } else { 4 };
            let big = rng.random_bool(0.5);
            let all = if big {
                value.to_be_bytes()
            } else {
                value.to_le_bytes()
            };
            let word = if big {
                &all[4 - width..]
            } else {
                &all[..width]
            };
            let at = rng.random_range(0..len);
            let end = (at + width).min(len);
            bytes[at..end].copy_from_slice(&word[..end - at]);
            let order = if big { "big" } else { "little" };
            format!("write {value:#x} as {width} bytes {order}-endian at {at}")
        }
        3 => {
            let (at, n) = range(len, rng);
            rng.fill(&mut bytes[at..at + n]);
            format!("randomise {n} bytes at {at}")
        }
        4 => {
            let keep = rng.random_range(0..len);
            bytes.truncate(keep);
            format!("truncate to {keep} bytes")
        }
        5 => {
            let (from, n) = range(len, rng);
            let copy = bytes[from..from + n].to_vec();
            let at = rng.random_range(0..=len);
            bytes.splice(at..at, copy);
            format!("copy {n} bytes from {from} to {at}")
        }
        6 => {
            let (from, n) = range(len, rng);
            bytes.drain(from..from + n);
            format!("delete {n} bytes at {from}")
        }
        7 if !donor.is_empty() => {
            let (from, n) = range(donor.len(), rng);
            let at = rng.random_range(0..=len);
            // Either replace the tail from `at` (the donor's structure goes on from there) or
            // insert the range.
            if rng.random_bool(0.5) {
                bytes.truncate(at);
                bytes.extend_from_slice(&donor[from..from + n]);
                format!("splice the donor's {n} bytes at {from} over the tail from {at}")
            } else {
                bytes.splice(at..at, donor[from..from + n].iter().copied());
                format!("insert the donor's {n} bytes at {from} at {at}")
            }
        }
        8 => {
            let opener = pick(OPENERS, rng);
            let times = rng.random_range(1..=MAX_REPEAT);
            let at = rng.random_range(0..=len);
            let nested = opener.repeat(times);
            bytes.splice(at..at, nested);
            format!("nest {} {times} times at {at}", show(opener))
        }
        _ => {
            let token = pick(TOKENS, rng);
            let at = rng.random_range(0..=len);
            if rng.random_bool(0.5) {
                bytes.splice(at..at, token.iter().copied());
                format!("insert {} at {at}", show(token))
            } else {
                let end = (at + token.len()).min(len);
                bytes.splice(at..end, token.iter().copied());
                format!("overwrite at {at} with {}", show(token))
            }
        }
    }
}

/// A start and a length within `len` bytes (`len` > 0), short ranges more often.
fn range(len: usize, rng: &mut impl Rng) -> (usize, usize) {
    let at = rng.random_range(0..len);
    let room = (len - at).min(MAX_RANGE);
    let cap = match rng.random_range(0..3) {
        0 => room.min(8),
        1 => room.min(256),
        _ => room,
    };
    (at, rng.random_range(1..=cap.max(1)))
}

fn pick<'a, T>(items: &'a [T], rng: &mut impl Rng) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

/// A token for a step's description: its text when printable, else its bytes.
fn show(token: &[u8]) -> String {
    match std::str::from_utf8(token) {
        Ok(text) if !text.chars().any(char::is_control) => format!("{text:?}"),
        _ => format!("{token:02x?}"),
    }
}

/// One entry of a container, unpacked.
struct Entry {
    name: String,
    method: zip::CompressionMethod,
    bytes: Vec<u8>,
    is_dir: bool,
}

/// Damages one entry of the container (an XML part more often than not) and packs every entry
/// again with fresh checksums; `None` when the container cannot be unpacked within the
/// mutator's bounds.
fn mutate_zip_entry(seed: &[u8], rng: &mut impl Rng) -> Option<Mutant> {
    let mut entries = unpack(seed)?;
    let files: Vec<usize> = (0..entries.len()).filter(|&i| !entries[i].is_dir).collect();
    if files.is_empty() {
        return None;
    }
    let markup: Vec<usize> = files
        .iter()
        .copied()
        .filter(|&i| is_markup(&entries[i].name))
        .collect();
    let chosen = if !markup.is_empty() && rng.random_ratio(4, 5) {
        *pick(&markup, rng)
    } else {
        *pick(&files, rng)
    };
    let entry = &mut entries[chosen];
    // Splicing within the entry keeps the donor's syntax the same as the entry's.
    let donor = entry.bytes.clone();
    let inner = damage(&mut entry.bytes, &donor, rng);
    let name = entry.name.clone();
    let bytes = pack(&entries).ok()?;
    Some(Mutant {
        bytes,
        steps: vec![format!("in entry {name}: {}", inner.join("; "))],
    })
}

fn is_markup(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".xml", ".rels", ".opf", ".ncx", ".xhtml", ".html", ".htm"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

/// Every entry of the container, or `None` when it is not one the mutator can read whole
/// within its bounds.
fn unpack(bytes: &[u8]) -> Option<Vec<Entry>> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).ok()?;
    if zip.len() > MAX_ENTRIES {
        return None;
    }
    let mut entries = Vec::with_capacity(zip.len());
    let mut unpacked = 0_u64;
    for i in 0..zip.len() {
        let file = zip.by_index(i).ok()?;
        let name = file.name().ok()?.into_owned();
        let method = match file.compression() {
            zip::CompressionMethod::Stored => zip::CompressionMethod::Stored,
            _ => zip::CompressionMethod::Deflated,
        };
        let is_dir = file.is_dir();
        let mut content = Vec::new();
        file.take(MAX_UNPACKED - unpacked + 1)
            .read_to_end(&mut content)
            .ok()?;
        unpacked += content.len() as u64;
        if unpacked > MAX_UNPACKED {
            return None;
        }
        entries.push(Entry {
            name,
            method,
            bytes: content,
            is_dir,
        });
    }
    Some(entries)
}

/// The entries as a container, in their order and with their compression.
fn pack(entries: &[Entry]) -> zip::result::ZipResult<Vec<u8>> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for entry in entries {
        let options = zip::write::SimpleFileOptions::default().compression_method(entry.method);
        if entry.is_dir {
            zip.add_directory(entry.name.as_str(), options)?;
        } else {
            zip.start_file(entry.name.as_str(), options)?;
            zip.write_all(&entry.bytes)?;
        }
    }
    Ok(zip.finish()?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let entries: Vec<Entry> = entries
            .iter()
            .map(|(name, bytes)| Entry {
                name: (*name).to_owned(),
                method: zip::CompressionMethod::Deflated,
                bytes: bytes.to_vec(),
                is_dir: false,
            })
            .collect();
        pack(&entries).unwrap()
    }

    #[test]
    fn the_same_seed_and_number_build_the_same_input_and_others_differ() {
        let seed = b"# Pump\n\nPrime the pump before starting it.\n".repeat(20);
        let build = |run: u64, index: u64| mutate(&seed, &seed, &mut generator(run, index));
        assert_eq!(build(7, 3), build(7, 3));
        let distinct: std::collections::HashSet<Vec<u8>> =
            (0..50).map(|index| build(7, index).bytes).collect();
        assert!(distinct.len() > 45, "{} distinct of 50", distinct.len());
        assert_ne!(build(7, 3), build(8, 3));
    }

    #[test]
    fn neighbouring_inputs_draw_independently() {
        // The first draw of each input picks its format: consecutive inputs must spread over
        // all of them.
        let mut seen = [0_u32; 13];
        for index in 0..1300 {
            seen[generator(3, index).random_range(0..13)] += 1;
        }
        assert!(seen.iter().all(|&n| (60..=140).contains(&n)), "{seen:?}");
    }

    #[test]
    fn every_input_differs_from_its_seed_and_says_how() {
        let seed: Vec<u8> = (0..4096_u32).map(|i| (i % 251) as u8).collect();
        let mut rng = generator(1, 0);
        for _ in 0..500 {
            let mutant = mutate(&seed, b"donor bytes", &mut rng);
            assert!(!mutant.steps.is_empty());
            // A step can undo another (a bit flipped twice), never all of them always.
            if mutant.steps.len() == 1 {
                assert_ne!(mutant.bytes, seed, "{:?}", mutant.steps);
            }
        }
        // An empty seed still becomes an input.
        let mutant = mutate(b"", b"", &mut rng);
        assert!(!mutant.bytes.is_empty());
    }

    #[test]
    fn a_damaged_entry_is_packed_again_into_a_valid_container() {
        let document = b"<?xml version=\"1.0\"?><w:document><w:body><w:p><w:r><w:t>Prime the \
                         pump.</w:t></w:r></w:p></w:body></w:document>";
        let seed = package(&[
            ("[Content_Types].xml", b"<Types/>"),
            ("word/document.xml", document),
            ("media/logo.bin", &[1, 2, 3, 4]),
        ]);
        let mut repacked = 0;
        for index in 0..100 {
            let mutant = mutate(&seed, &seed, &mut generator(5, index));
            if !mutant.steps[0].starts_with("in entry ") {
                continue;
            }
            repacked += 1;
            // Every entry reads back whole: the checksums are the new content's.
            let mut zip = zip::ZipArchive::new(Cursor::new(&mutant.bytes)).unwrap();
            assert_eq!(zip.len(), 3);
            let mut contents = Vec::new();
            for i in 0..zip.len() {
                let mut file = zip.by_index(i).unwrap();
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).unwrap();
                contents.push(bytes);
            }
            let untouched: [&[u8]; 3] = [b"<Types/>", document, &[1, 2, 3, 4]];
            let changed = (0..3).filter(|&i| contents[i] != untouched[i]).count();
            assert!(changed <= 1, "{:?}", mutant.steps);
            assert!(is_zip(&mutant.bytes), "a repacked container is a container");
        }
        assert!(
            repacked > 50,
            "{repacked} of 100 went through the container"
        );
    }
}
