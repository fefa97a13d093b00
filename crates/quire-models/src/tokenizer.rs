//! The BERT WordPiece tokenizer of uncased BERT models (all-MiniLM-L6-v2 among them), as the
//! Hugging Face `BertNormalizer`, `BertPreTokenizer` and `WordPiece` models define it: clean
//! control characters, space out CJK ideographs, strip accents (NFD, drop non-spacing marks),
//! lower-case, split on whitespace and punctuation, then greedy longest-match word pieces with
//! the `##` continuation prefix, wrapped in `[CLS] … [SEP]` and truncated to the model's window.
//! The local embedder uses a model's own `tokenizer.json` (with the `tokenizers` crate) when
//! the directory has one; this tokenizer serves directories with only `vocab.txt`.

use std::collections::HashMap;

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// Words longer than this many characters become `[UNK]` (as in BERT).
const MAX_CHARS_PER_WORD: usize = 100;

/// A WordPiece vocabulary with its special tokens.
#[derive(Debug, Clone)]
pub struct WordPiece {
    ids: HashMap<String, u32>,
    unknown: u32,
    start: u32,
    end: u32,
}

/// Why a vocabulary could not be used.
#[derive(Debug, thiserror::Error)]
#[error("the vocabulary lacks the special token {0}")]
pub struct MissingToken(&'static str);

impl WordPiece {
    /// Builds the tokenizer from `vocab.txt` (one token per line; the line number is its id).
    pub fn from_vocab(vocab: &str) -> Result<Self, MissingToken> {
        let ids: HashMap<String, u32> = vocab
            .lines()
            .enumerate()
            .map(|(id, token)| (token.to_owned(), id as u32))
            .collect();
        let id = |token: &'static str| ids.get(token).copied().ok_or(MissingToken(token));
        Ok(Self {
            unknown: id("[UNK]")?,
            start: id("[CLS]")?,
            end: id("[SEP]")?,
            ids,
        })
    }

    /// Token ids of `text`: `[CLS]`, at most `max_len - 2` word pieces, `[SEP]`.
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let budget = max_len.saturating_sub(2);
        let mut out = vec![self.start];
        'words: for word in pre_tokenize(&normalize(text)) {
            for piece in self.word_pieces(&word) {
                if out.len() > budget {
                    break 'words;
                }
                out.push(piece);
            }
        }
        out.push(self.end);
        out
    }

    /// Greedy longest-match-first split of one word; the whole word is `[UNK]` when some part
    /// of it matches nothing.
    fn word_pieces(&self, word: &str) -> Vec<u32> {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > MAX_CHARS_PER_WORD {
            return vec![self.unknown];
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                let mut candidate: String = chars[start..end].iter().collect();
                if start > 0 {
                    candidate.insert_str(0, "##");
                }
                if let Some(&id) = self.ids.get(&candidate) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => pieces.push(id),
                None => return vec![self.unknown],
            }
            start = end;
        }
        pieces
    }
}

/// `BertNormalizer` with `clean_text`, `handle_chinese_chars`, `strip_accents` and `lowercase`.
fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_whitespace(c) {
            cleaned.push(' ');
        } else if is_cjk(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    cleaned
        .nfd()
        .filter(|c| get_general_category(*c) != GeneralCategory::NonspacingMark)
        .flat_map(char::to_lowercase)
        .collect()
}

/// `BertPreTokenizer`: split on whitespace, and every punctuation character on its own.
fn pre_tokenize(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in text.split(is_whitespace) {
        let mut current = String::new();
        for c in chunk.chars() {
            if is_punctuation(c) {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                words.push(c.to_string());
            } else {
                current.push(c);
            }
        }
        if !current.is_empty() {
            words.push(current);
        }
    }
    words
}

fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r') || c.is_whitespace()
}

/// Control, format, private-use and unassigned characters (tab and line breaks are whitespace).
fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
    )
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            get_general_category(c),
            GeneralCategory::ConnectorPunctuation
                | GeneralCategory::DashPunctuation
                | GeneralCategory::OpenPunctuation
                | GeneralCategory::ClosePunctuation
                | GeneralCategory::InitialPunctuation
                | GeneralCategory::FinalPunctuation
                | GeneralCategory::OtherPunctuation
        )
}

/// The CJK ideograph blocks BERT spaces out (Hangul and kana are not among them).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> WordPiece {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\npump\nprim\n##ed\n,\n.\ncafe\n!\n";
        WordPiece::from_vocab(vocab).unwrap()
    }

    #[test]
    fn word_pieces_accents_case_and_punctuation() {
        let t = tokenizer();
        assert_eq!(
            t.encode("The PUMP, primed.", 256),
            vec![2, 4, 5, 8, 6, 7, 9, 3]
        );
        assert_eq!(t.encode("Café!", 256), vec![2, 10, 11, 3]);
        assert_eq!(t.encode("zebra", 256), vec![2, 1, 3]);
    }

    #[test]
    fn long_input_is_cut_to_the_window() {
        let t = tokenizer();
        let ids = t.encode(&"the ".repeat(50), 8);
        assert_eq!(ids, vec![2, 4, 4, 4, 4, 4, 4, 3]);
    }

    #[test]
    fn normalization_spaces_cjk_and_drops_controls() {
        assert_eq!(normalize("A\u{200b}b\u{7}c日本"), "abc 日  本 ");
        assert_eq!(pre_tokenize("a,b  c"), vec!["a", ",", "b", "c"]);
    }

    #[test]
    fn a_vocabulary_without_special_tokens_is_refused() {
        assert!(WordPiece::from_vocab("a\nb\n").is_err());
    }
}
