//! Chunking: packs blocks into passages of about `target_tokens`, never across a page or a
//! section, splitting oversized blocks at sentence and then word boundaries, and repeating the
//! last `overlap_tokens` of a passage at the start of the next one in the same page and section
//! so a sentence cut by a boundary is still found whole.
//!
//! Tokens are estimated by default: [`estimate_tokens`] is a word count scaled by 4/3, close to
//! what WordPiece and BPE tokenizers give for English prose. When a local model with its
//! tokenizer embeds the chunks, [`cut_to_window`] counts the model's own tokens instead, so a
//! section that fits the model's window is one chunk.

use quire_core::ChunkDraft;
use quire_core::embed::TokenCount;
use serde::{Deserialize, Serialize};

use quire_parse::Block;

/// Chunk size settings (`[chunking]` in the config file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkingParams {
    /// Aim for passages of about this many tokens.
    pub target_tokens: usize,
    /// Tokens repeated from the end of one passage at the start of the next.
    pub overlap_tokens: usize,
    /// How tokens are counted.
    #[serde(default)]
    pub count: TokenCounting,
    /// A document of one page and one section up to this many tokens is one chunk, even past
    /// `target_tokens` (0: off). Cutting a short document leaves a tail that carries little
    /// of it and ranks alone; kept whole, it ranks as the one passage it is. Only
    /// single-passage documents: a short section of a long filing kept whole ranked its
    /// evidence page worse (`docs/retrieval.md`, "Chunk size").
    #[serde(default = "default_whole_document_tokens")]
    pub whole_document_tokens: usize,
}

/// [`ChunkingParams::whole_document_tokens`] unless configured: twice the default target.
/// Measured on SciFact train, hybrid nDCG@10 0.7328 with 5,499 chunks, against 0.7245 and
/// 8,000 cutting every abstract at 256 and 0.7322 and 5,995 keeping up to 384 whole; long
/// filings are never one page and one section, so FinanceBench is unchanged
/// (`docs/retrieval.md`, "Chunk size").
const fn default_whole_document_tokens() -> usize {
    512
}

/// How chunk sizes are counted (`chunking.count`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenCounting {
    /// Words × 4/3 (the default; measured on SciFact to make fewer chunks than `model`, see
    /// `docs/performance.md`).
    #[default]
    Estimate,
    /// The local model's own tokens, read with its `tokenizer.json`: every chunk fits the
    /// model's window, heading included, so nothing of a chunk goes unembedded. Falls back to
    /// the estimate without a local model that ships one.
    Model,
}

impl Default for ChunkingParams {
    fn default() -> Self {
        Self {
            target_tokens: 256,
            overlap_tokens: 32,
            count: TokenCounting::Estimate,
            whole_document_tokens: default_whole_document_tokens(),
        }
    }
}

/// Estimated tokens in `text`: words × 4/3, rounded up.
pub fn estimate_tokens(text: &str) -> usize {
    words_to_tokens(text.split_whitespace().count())
}

fn words_to_tokens(words: usize) -> usize {
    (words * 4).div_ceil(3)
}

fn tokens_to_words(tokens: usize) -> usize {
    (tokens * 3 / 4).max(1)
}

/// Cuts `blocks` into chunks, numbered from 0 in reading order.
pub fn chunk_blocks(blocks: &[Block], params: ChunkingParams) -> Vec<ChunkDraft> {
    let target_tokens = if is_short_document(blocks, params.whole_document_tokens) {
        params.whole_document_tokens
    } else {
        params.target_tokens
    };
    let target_words = tokens_to_words(target_tokens.max(8));
    let overlap_words = tokens_to_words(params.overlap_tokens).min(target_words / 2);
    let overlap_words = if params.overlap_tokens == 0 {
        0
    } else {
        overlap_words
    };
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < blocks.len() {
        let (page, section) = (blocks[start].page, &blocks[start].section);
        let end = blocks[start..]
            .iter()
            .position(|b| b.page != page || &b.section != section)
            .map_or(blocks.len(), |n| start + n);
        let texts: Vec<&str> = blocks[start..end].iter().map(|b| b.text.as_str()).collect();
        let texts = pack(&texts, target_words, overlap_words, &word_count);
        chunks.extend(texts.into_iter().map(|content| ChunkDraft {
            ordinal: 0,
            page,
            section: section.clone(),
            content,
        }));
        start = end;
    }
    for (i, chunk) in chunks.iter_mut().enumerate() {
        chunk.ordinal = u32::try_from(i).unwrap_or(u32::MAX);
    }
    chunks
}

/// Whether `blocks` are one page and one section of at most `limit` estimated tokens.
fn is_short_document(blocks: &[Block], limit: usize) -> bool {
    let Some(first) = blocks.first() else {
        return false;
    };
    let one_passage = blocks
        .iter()
        .all(|b| b.page == first.page && b.section == first.section);
    one_passage && words_to_tokens(blocks.iter().map(|b| word_count(&b.text)).sum()) <= limit
}

/// Chunking settings that make the parse worker return each page and section whole (blocks
/// joined by blank lines, no overlap), for [`cut_to_window`] to cut by the model's tokens.
pub const WHOLE_SECTIONS: ChunkingParams = ChunkingParams {
    target_tokens: usize::MAX / 4,
    overlap_tokens: 0,
    count: TokenCounting::Estimate,
    whole_document_tokens: 0,
};

/// Cuts page-and-section chunks (as chunked with [`WHOLE_SECTIONS`]) into chunks that fit the
/// model's window counted in its own tokens, heading path included: a section that fits is one
/// chunk, with no overlap; a longer one is packed from its blocks as [`chunk_blocks`] does,
/// counting tokens instead of estimating them, each passage after the first repeating the
/// previous one's last `overlap_tokens`. `target_tokens` still caps a chunk when it is smaller
/// than the window.
pub fn cut_to_window(
    sections: Vec<ChunkDraft>,
    tokens: &dyn TokenCount,
    params: ChunkingParams,
) -> Vec<ChunkDraft> {
    let size = |text: &str| tokens.count(text);
    let mut chunks = Vec::with_capacity(sections.len());
    for section in sections {
        let heading = if section.section.is_empty() {
            0
        } else {
            tokens.count(&section.section)
        };
        let budget = tokens
            .window()
            .saturating_sub(tokens.special_tokens() + heading)
            .min(params.target_tokens)
            .max(MIN_BUDGET);
        if tokens.count(&section.content) <= budget {
            chunks.push(section);
            continue;
        }
        let overlap = params.overlap_tokens.min(budget / 2);
        let blocks: Vec<&str> = section
            .content
            .split("\n\n")
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .collect();
        chunks.extend(
            pack(&blocks, budget - overlap, overlap, &size)
                .into_iter()
                .map(|content| ChunkDraft {
                    ordinal: 0,
                    page: section.page,
                    section: section.section.clone(),
                    content,
                }),
        );
    }
    for (i, chunk) in chunks.iter_mut().enumerate() {
        chunk.ordinal = u32::try_from(i).unwrap_or(u32::MAX);
    }
    chunks
}

/// The smallest passage [`cut_to_window`] aims for, in tokens, however long a heading is.
const MIN_BUDGET: usize = 8;

/// Words of `text`: the size of a text when tokens are estimated.
fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Packs the blocks of one page and section into passages of at most `budget` units as
/// `size` measures them (words, or a model's tokens), then adds the overlap.
fn pack(
    blocks: &[&str],
    budget: usize,
    overlap: usize,
    size: &dyn Fn(&str) -> usize,
) -> Vec<String> {
    // Each passage, and whether it continues a table (it starts with the table's header row
    // again, so it takes no overlap: no row is cut, and the header says what the cells are).
    let mut passages: Vec<(String, bool)> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut current_size = 0;
    let flush =
        |current: &mut Vec<&str>, current_size: &mut usize, passages: &mut Vec<(String, bool)>| {
            if !current.is_empty() {
                passages.push((current.join("\n\n"), false));
                current.clear();
                *current_size = 0;
            }
        };
    for block in blocks {
        let n = size(block);
        if n > budget {
            flush(&mut current, &mut current_size, &mut passages);
            if is_table(block) {
                let pieces = split_table(block, budget, size);
                passages.extend(pieces.into_iter().enumerate().map(|(i, p)| (p, i > 0)));
            } else {
                passages.extend(
                    split_long(block, budget, size)
                        .into_iter()
                        .map(|p| (p, false)),
                );
            }
        } else {
            if current_size + n > budget {
                flush(&mut current, &mut current_size, &mut passages);
            }
            current.push(block);
            current_size += n;
        }
    }
    flush(&mut current, &mut current_size, &mut passages);
    add_overlap(passages, overlap, size)
}

/// A block the parsers wrote as a table (`table.rs` in quire-parse): two or more lines, most
/// of them rows of cells joined by [`quire_parse::CELL_SEPARATOR`].
fn is_table(text: &str) -> bool {
    let lines = text.lines().count();
    let rows = text
        .lines()
        .filter(|l| l.contains(quire_parse::CELL_SEPARATOR))
        .count();
    lines >= 2 && rows * 5 >= lines * 4
}

/// Splits an oversized table between rows, each piece after the first starting with the
/// header row again (unless the header alone takes half a passage); a row longer than a
/// passage is cut between words.
fn split_table(text: &str, budget: usize, size: &dyn Fn(&str) -> usize) -> Vec<String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    let header_size = size(header);
    let repeat = header_size * 2 <= budget;
    let mut passages = Vec::new();
    // The first passage holds the header as its own first row; the later ones repeat it.
    let (mut current, mut current_size, mut repeated) = (vec![header], header_size, 0);
    for row in lines {
        let n = size(row);
        if current_size + n > budget && current.len() > repeated {
            passages.push(current.join("\n"));
            (current, current_size, repeated) = if repeat {
                (vec![header], header_size, 1)
            } else {
                (Vec::new(), 0, 0)
            };
        }
        if current_size + n > budget {
            // A row longer than a passage.
            passages.extend(split_words(row, budget, size));
            continue;
        }
        current.push(row);
        current_size += n;
    }
    if current.len() > repeated {
        passages.push(current.join("\n"));
    }
    passages
}

/// Splits one oversized block at sentence ends, and a sentence longer than a passage at words.
fn split_long(text: &str, budget: usize, size: &dyn Fn(&str) -> usize) -> Vec<String> {
    let mut passages = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut current_size = 0;
    for sentence in sentences(text) {
        let n = size(sentence);
        if current_size + n > budget && !current.is_empty() {
            passages.push(current.join(" "));
            current.clear();
            current_size = 0;
        }
        if n > budget {
            passages.extend(split_words(sentence, budget, size));
        } else {
            current.extend(sentence.split_whitespace());
            current_size += n;
        }
    }
    if !current.is_empty() {
        passages.push(current.join(" "));
    }
    passages
}

/// Cuts a sentence longer than a passage between words (a single word longer than a passage
/// is a passage of its own).
fn split_words(sentence: &str, budget: usize, size: &dyn Fn(&str) -> usize) -> Vec<String> {
    let mut passages = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut current_size = 0;
    for word in sentence.split_whitespace() {
        let n = size(word);
        if current_size + n > budget && !current.is_empty() {
            passages.push(current.join(" "));
            current.clear();
            current_size = 0;
        }
        current.push(word);
        current_size += n;
    }
    if !current.is_empty() {
        passages.push(current.join(" "));
    }
    passages
}

/// Sentences of `text`: split after `.`, `!` or `?` followed by whitespace.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for window in chars.windows(2) {
        let ((_, c), (next_at, next)) = (window[0], window[1]);
        if matches!(c, '.' | '!' | '?') && next.is_whitespace() {
            out.push(&text[start..next_at]);
            start = next_at;
        }
    }
    out.push(&text[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Prefixes each passage after the first with the words at the end of the one before that
/// measure at most `overlap`.
fn add_overlap(
    passages: Vec<(String, bool)>,
    overlap: usize,
    size: &dyn Fn(&str) -> usize,
) -> Vec<String> {
    if overlap == 0 || passages.len() < 2 {
        return passages.into_iter().map(|(p, _)| p).collect();
    }
    let mut out = Vec::with_capacity(passages.len());
    let mut previous: Option<String> = None;
    for (passage, continues_table) in passages {
        match &previous {
            Some(_) if continues_table => out.push(passage.clone()),
            Some(prev) => {
                let words: Vec<&str> = prev.split_whitespace().collect();
                let mut taken = 0;
                let mut used = 0;
                for word in words.iter().rev() {
                    let n = size(word);
                    if used + n > overlap {
                        break;
                    }
                    used += n;
                    taken += 1;
                }
                let tail = words[words.len() - taken..].join(" ");
                out.push(format!("{tail} {passage}"));
            }
            None => out.push(passage.clone()),
        }
        previous = Some(passage);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(page: u32, section: &str, text: &str) -> Block {
        Block {
            page,
            section: section.into(),
            text: text.into(),
        }
    }

    fn words(n: usize, prefix: &str) -> String {
        (0..n)
            .map(|i| format!("{prefix}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_long_table_is_cut_between_rows_and_each_piece_repeats_its_header() {
        let header = "Region | Net sales | Units sold";
        let rows: Vec<String> = (0..30)
            .map(|i| format!("Region {i} | {} | {}", 1000 + i, 70 + i))
            .collect();
        let table = format!("{header}\n{}", rows.join("\n"));
        let params = ChunkingParams {
            target_tokens: 60,
            overlap_tokens: 16,
            count: TokenCounting::Estimate,
            whole_document_tokens: 0,
        };
        let chunks = chunk_blocks(&[block(3, "Sales", &table)], params);
        assert!(chunks.len() > 2, "{chunks:?}");
        let mut seen = Vec::new();
        for chunk in &chunks {
            let lines: Vec<&str> = chunk.content.lines().collect();
            // The header first, then whole rows only: no overlap words, no cut row.
            assert_eq!(lines[0], header, "{chunk:?}");
            for line in &lines[1..] {
                assert!(rows.iter().any(|r| r == line), "cut row {line:?}");
                seen.push(line.to_string());
            }
        }
        assert_eq!(seen, rows, "every row once, in order");
    }

    #[test]
    fn a_short_document_of_one_passage_stays_whole_past_the_target() {
        // 360 words: 480 estimated tokens, past the 256 target, within the 512 limit.
        let (first, second) = (words(200, "a"), words(160, "b"));
        let text = format!("{first}. {second}.");
        let params = ChunkingParams::default();
        let whole = chunk_blocks(&[block(1, "Title", &text)], params);
        assert_eq!(whole.len(), 1, "{whole:?}");
        assert_eq!(whole[0].content, text);

        // The same words in two sections, or over two pages, are cut as before.
        for blocks in [
            [block(1, "Title", &first), block(1, "Other", &second)],
            [block(1, "Title", &first), block(2, "Title", &second)],
        ] {
            let cut = chunk_blocks(&blocks, params);
            assert!(cut.len() >= 2, "{cut:?}");
        }

        // Off, or past the limit (390 words: 520 tokens), the target cuts it.
        let off = ChunkingParams {
            whole_document_tokens: 0,
            ..params
        };
        let longer = format!("{text} {}", words(30, "c"));
        for (text, params) in [(&text, off), (&longer, params)] {
            let cut = chunk_blocks(&[block(1, "Title", text)], params);
            assert!(cut.len() >= 2, "{cut:?}");
            assert!(cut.iter().all(|c| estimate_tokens(&c.content) <= 256 + 32));
        }
    }

    #[test]
    fn prose_with_a_bar_is_not_a_table() {
        assert!(is_table("A | B\n1 | 2\n3 | 4"));
        assert!(!is_table(
            "Pipes | and more\nThis line is prose.\nSo is this one."
        ));
        assert!(!is_table("One row | only"));
    }

    #[test]
    fn never_straddles_pages_or_sections() {
        let blocks = [
            block(1, "A", "alpha one."),
            block(1, "A", "alpha two."),
            block(2, "A", "beta."),
            block(2, "B", "gamma."),
        ];
        let chunks = chunk_blocks(&blocks, ChunkingParams::default());
        let shape: Vec<_> = chunks
            .iter()
            .map(|c| (c.ordinal, c.page, c.section.as_str(), c.content.as_str()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (0, 1, "A", "alpha one.\n\nalpha two."),
                (1, 2, "A", "beta."),
                (2, 2, "B", "gamma."),
            ]
        );
    }

    #[test]
    fn long_blocks_split_near_the_target_with_overlap() {
        let text = (0..40)
            .map(|i| format!("{}.", words(10, &format!("s{i}w"))))
            .collect::<Vec<_>>()
            .join(" ");
        let params = ChunkingParams {
            target_tokens: 100,
            overlap_tokens: 12,
            ..Default::default()
        };
        let chunks = chunk_blocks(&[block(1, "", &text)], params);
        assert!(chunks.len() >= 5, "{} chunks", chunks.len());
        for chunk in &chunks {
            let n = chunk.content.split_whitespace().count();
            assert!(n <= 75 + 9, "chunk of {n} words");
        }
        // Every word of the original appears, in order, across the chunks.
        let joined: Vec<String> = chunks.iter().map(|c| c.content.clone()).collect();
        assert!(joined.concat().contains("s39w9."));
        // The overlap repeats the previous chunk's tail.
        let first_tail = chunks[0].content.split_whitespace().last().unwrap();
        assert!(
            chunks[1]
                .content
                .split_whitespace()
                .take(9)
                .any(|w| w == first_tail)
        );
    }

    #[test]
    fn a_sentence_longer_than_a_chunk_is_cut_at_words() {
        let text = words(500, "w");
        let chunks = chunk_blocks(
            &[block(1, "", &text)],
            ChunkingParams {
                target_tokens: 100,
                overlap_tokens: 0,
                ..Default::default()
            },
        );
        assert_eq!(chunks.len(), 7);
        assert!(
            chunks
                .iter()
                .all(|c| c.content.split_whitespace().count() <= 75)
        );
    }

    /// A model whose words are a token per 4 letters, with a window of `window` tokens and
    /// 2 special tokens.
    #[derive(Debug)]
    struct FourLetters {
        window: usize,
    }

    impl TokenCount for FourLetters {
        fn count(&self, text: &str) -> usize {
            text.split_whitespace().map(|w| w.len().div_ceil(4)).sum()
        }
        fn window(&self) -> usize {
            self.window
        }
        fn special_tokens(&self) -> usize {
            2
        }
    }

    fn sections(blocks: &[Block]) -> Vec<ChunkDraft> {
        chunk_blocks(blocks, WHOLE_SECTIONS)
    }

    #[test]
    fn a_section_that_fits_the_window_is_one_chunk_without_overlap() {
        let model = FourLetters { window: 64 };
        // 60 tokens of text under a 1-token heading: 60 + 1 + 2 special tokens fit in 64.
        let (first, second) = (words(15, "abcde"), words(15, "fghij"));
        assert_eq!(model.count(&first) + model.count(&second), 60);
        let blocks = [block(1, "Pump", &first), block(1, "Pump", &second)];
        let whole = sections(&blocks);
        assert_eq!(whole.len(), 1);
        let params = ChunkingParams::default();
        let chunks = cut_to_window(whole.clone(), &model, params);
        assert_eq!(chunks, whole);
        // Two tokens more and it no longer fits: it is split, every piece within the window.
        let longer = [
            block(1, "Pump", &first),
            block(1, "Pump", &format!("{second} extra")),
        ];
        let chunks = cut_to_window(sections(&longer), &model, params);
        assert!(chunks.len() > 1, "{chunks:?}");
        assert!(chunks.iter().all(|c| model.count(&c.content) + 1 + 2 <= 64));
    }

    #[test]
    fn a_longer_section_is_cut_within_the_window_with_overlap_and_renumbered() {
        let model = FourLetters { window: 40 };
        let sentences: Vec<String> = (0..12)
            .map(|i| format!("{}.", words(5, &format!("s{i}w"))))
            .collect();
        let blocks = [
            block(1, "", "Short first section."),
            block(2, "Long", &sentences[..6].join(" ")),
            block(2, "Long", &sentences[6..].join(" ")),
            block(2, "Long", &words(30, "unbroken")),
        ];
        let params = ChunkingParams {
            target_tokens: 256,
            overlap_tokens: 6,
            count: TokenCounting::Model,
            ..ChunkingParams::default()
        };
        let chunks = cut_to_window(sections(&blocks), &model, params);
        assert_eq!(chunks[0].content, "Short first section.");
        assert!(chunks.len() >= 4, "{chunks:?}");
        for (i, chunk) in chunks.iter().enumerate() {
            assert_eq!(chunk.ordinal as usize, i);
            let used = model.count(&chunk.section) + model.count(&chunk.content) + 2;
            assert!(used <= 40, "chunk {i} needs {used} tokens: {chunk:?}");
        }
        // Every chunk of the long section after its first starts with the previous one's tail.
        for pair in chunks[1..].windows(2) {
            let tail = pair[0].content.split_whitespace().last().unwrap();
            let head: Vec<&str> = pair[1].content.split_whitespace().take(6).collect();
            assert!(head.contains(&tail), "{pair:?}");
        }
        // Nothing is lost: the last words of each block are there.
        let all: String = chunks.iter().map(|c| c.content.as_str()).collect();
        for end in ["s5w4.", "s11w4.", "unbroken29"] {
            assert!(all.contains(end), "{end} missing");
        }
    }

    #[test]
    fn a_smaller_target_still_caps_chunks() {
        let model = FourLetters { window: 512 };
        let params = ChunkingParams {
            target_tokens: 20,
            overlap_tokens: 0,
            count: TokenCounting::Model,
            ..ChunkingParams::default()
        };
        let chunks = cut_to_window(sections(&[block(1, "", &words(40, "ab"))]), &model, params);
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(|c| model.count(&c.content) <= 20));
    }

    #[test]
    fn token_estimate_scales_words() {
        assert_eq!(estimate_tokens("one two three"), 4);
        assert_eq!(estimate_tokens(""), 0);
    }
}
