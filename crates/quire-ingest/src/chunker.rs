//! Chunking: packs blocks into passages of about `target_tokens`, never across a page or a
//! section, splitting oversized blocks at sentence and then word boundaries, and repeating the
//! last `overlap_tokens` of a passage at the start of the next one in the same page and section
//! so a sentence cut by a boundary is still found whole.
//!
//! Tokens are estimated, not counted with a model's tokenizer: [`estimate_tokens`] is a word
//! count scaled by 4/3, close to what WordPiece and BPE tokenizers give for English prose.

use quire_core::ChunkDraft;
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
}

impl Default for ChunkingParams {
    fn default() -> Self {
        Self {
            target_tokens: 256,
            overlap_tokens: 32,
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
    let target_words = tokens_to_words(params.target_tokens.max(8));
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
        let texts = pack(&blocks[start..end], target_words, overlap_words);
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

/// Packs the blocks of one page and section into passages.
fn pack(blocks: &[Block], target_words: usize, overlap_words: usize) -> Vec<String> {
    let mut passages: Vec<String> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut current_words = 0;
    let flush =
        |current: &mut Vec<String>, current_words: &mut usize, passages: &mut Vec<String>| {
            if !current.is_empty() {
                passages.push(current.join("\n\n"));
                current.clear();
                *current_words = 0;
            }
        };
    for block in blocks {
        let words = block.text.split_whitespace().count();
        if words > target_words {
            flush(&mut current, &mut current_words, &mut passages);
            passages.extend(split_long(&block.text, target_words));
        } else {
            if current_words + words > target_words {
                flush(&mut current, &mut current_words, &mut passages);
            }
            current.push(block.text.clone());
            current_words += words;
        }
    }
    flush(&mut current, &mut current_words, &mut passages);
    add_overlap(passages, overlap_words)
}

/// Splits one oversized block at sentence ends, and a sentence longer than a passage at words.
fn split_long(text: &str, target_words: usize) -> Vec<String> {
    let mut passages = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for sentence in sentences(text) {
        let words: Vec<&str> = sentence.split_whitespace().collect();
        if current.len() + words.len() > target_words && !current.is_empty() {
            passages.push(current.join(" "));
            current.clear();
        }
        if words.len() > target_words {
            for piece in words.chunks(target_words) {
                passages.push(piece.join(" "));
            }
        } else {
            current.extend(words);
        }
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

/// Prefixes each passage after the first with the last `overlap_words` words of the one before.
fn add_overlap(passages: Vec<String>, overlap_words: usize) -> Vec<String> {
    if overlap_words == 0 || passages.len() < 2 {
        return passages;
    }
    let mut out = Vec::with_capacity(passages.len());
    let mut previous: Option<String> = None;
    for passage in passages {
        match &previous {
            Some(prev) => {
                let words: Vec<&str> = prev.split_whitespace().collect();
                let tail = words[words.len().saturating_sub(overlap_words)..].join(" ");
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
            },
        );
        assert_eq!(chunks.len(), 7);
        assert!(
            chunks
                .iter()
                .all(|c| c.content.split_whitespace().count() <= 75)
        );
    }

    #[test]
    fn token_estimate_scales_words() {
        assert_eq!(estimate_tokens("one two three"), 4);
        assert_eq!(estimate_tokens(""), 0);
    }
}
