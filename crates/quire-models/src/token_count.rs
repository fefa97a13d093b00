//! A local model's own token counts, read from the `tokenizer.json` it ships (the Hugging
//! Face `tokenizers` format, loaded with that crate), so ingestion can cut chunks that fit the
//! model's window exactly.

use std::path::Path;

use quire_core::embed::TokenCount;
use tokenizers::Tokenizer;

use crate::ModelError;

/// Token counts of one model: its `tokenizer.json` and its window.
#[derive(Debug)]
pub struct ModelTokens {
    tokenizer: Tokenizer,
    window: usize,
    special: usize,
}

impl ModelTokens {
    /// Reads `dir/tokenizer.json`, for a model that reads at most `window` tokens of a
    /// sequence; `None` when the model ships none. The file's own truncation and padding
    /// settings are dropped: they would hide how long a text really is.
    pub fn load(dir: &Path, window: usize) -> Result<Option<Self>, ModelError> {
        let path = dir.join("tokenizer.json");
        if !path.exists() {
            return Ok(None);
        }
        let tokenizer = Tokenizer::from_file(&path)
            .map_err(|e| ModelError::Config(format!("{}: {e}", path.display())))?;
        Self::from_tokenizer(tokenizer, window)
            .map(Some)
            .map_err(|e| ModelError::Config(format!("{}: {e}", path.display())))
    }

    /// Counts with `tokenizer` (a model's, already read), for a window of `window` tokens.
    pub(crate) fn from_tokenizer(
        mut tokenizer: Tokenizer,
        window: usize,
    ) -> Result<Self, tokenizers::Error> {
        tokenizer.with_truncation(None)?;
        tokenizer.with_padding(None);
        // What the post-processor adds around an empty sequence is what it adds around any.
        let special = tokenizer.encode("", true)?.len();
        Ok(Self {
            tokenizer,
            window,
            special,
        })
    }
}

impl TokenCount for ModelTokens {
    fn count(&self, text: &str) -> usize {
        match self.tokenizer.encode(text, false) {
            Ok(encoding) => encoding.len(),
            // The tokenizers in use do not fail on text; if one ever did, a generous estimate
            // (about a token per 2 bytes) keeps chunks within the window.
            Err(_) => text.len().div_ceil(2),
        }
    }

    fn window(&self) -> usize {
        self.window
    }

    fn special_tokens(&self) -> usize {
        self.special
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A WordPiece `tokenizer.json` over a tiny vocabulary, with truncation at 4 and padding
    /// (which counting must ignore), `[CLS] … [SEP]` around every sequence.
    pub(crate) fn tiny_tokenizer(dir: &Path) {
        let vocab = serde_json::json!({
            "[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3,
            "pump": 4, "valve": 5, "##s": 6, "the": 7, ".": 8
        });
        let json = serde_json::json!({
            "version": "1.0",
            "truncation": {"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 0},
            "padding": {"strategy": {"Fixed": 16}, "direction": "Right", "pad_to_multiple_of": null,
                        "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
            "added_tokens": [],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                           "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                   "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
            "decoder": null,
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab}
        });
        std::fs::write(dir.join("tokenizer.json"), json.to_string()).unwrap();
    }

    #[test]
    fn counts_the_models_own_tokens_without_truncation_or_padding() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ModelTokens::load(dir.path(), 8).unwrap().is_none());
        tiny_tokenizer(dir.path());
        let tokens = ModelTokens::load(dir.path(), 8).unwrap().unwrap();
        assert_eq!(tokens.special_tokens(), 2);
        assert_eq!(tokens.window(), 8);
        // "pumps" is two word pieces, "." is a token of its own, unknown words one each.
        assert_eq!(tokens.count("The pumps."), 4);
        assert_eq!(tokens.count("valve valve valve valve valve valve"), 6);
        assert_eq!(tokens.count("zzz"), 1);
        assert_eq!(tokens.count(""), 0);
    }
}
