//! Words as the extractive answerer compares them: Unicode-normalised, lower-cased, English
//! stopwords left out and lightly stemmed, so "Primed", "priming" and "primes" are one term.
//!
//! The stemmer is a handful of suffix rules, not Porter: it only has to map the inflections a
//! question and a passage commonly disagree on (plural, -ing, -ed, -ation) to the same key,
//! and a key never has to be a real word.

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// Function words that say nothing about what a question is about. Question words,
/// auxiliaries and request verbs are in it, since "how do I", "can you explain" would
/// otherwise count as part of the question that the passages fail to answer.
const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as",
    "at", "be", "because", "been", "before", "being", "between", "both", "but", "by", "can",
    "could", "describe", "did", "do", "does", "doing", "done", "during", "each", "either", "else",
    "etc", "ever", "explain", "few", "for", "from", "further", "get", "gets", "got", "had", "has",
    "have", "having", "he", "her", "here", "hers", "him", "his", "how", "however", "i", "if", "in",
    "into", "is", "it", "its", "itself", "just", "know", "let", "many", "me", "might", "more",
    "most", "much", "must", "my", "no", "nor", "not", "of", "off", "often", "ok", "okay", "on",
    "once", "one", "only", "or", "other", "our", "ours", "out", "over", "own", "please", "same",
    "shall", "she", "should", "so", "some", "such", "tell", "than", "thank", "thanks", "that",
    "the", "their", "theirs", "them", "then", "there", "these", "they", "this", "those", "through",
    "to", "too", "under", "until", "up", "us", "very", "via", "want", "was", "we", "were", "what",
    "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with",
    "within", "would", "yes", "yet", "you", "your", "yours",
];

/// The raw words of `text` in order: maximal runs of letters and digits. Apostrophes and
/// hyphens split words, so "pump's" gives "pump" (and a lone "s" that is dropped later) and
/// "side-effects" gives "side", "effects".
pub(super) fn raw_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// The comparison key of one raw word, or `None` for a stopword or a word too short to
/// mean anything (a single letter; single digits are kept, "model 3" is specific).
pub(super) fn term(word: &str) -> Option<String> {
    let folded = fold(word);
    let mut chars = folded.chars();
    let short = match (chars.next(), chars.next()) {
        (None, _) => return None,
        (Some(c), None) => !c.is_ascii_digit(),
        _ => false,
    };
    if short || STOPWORDS.binary_search(&folded.as_str()).is_ok() {
        return None;
    }
    if let Some(year) = fiscal_year(&folded) {
        return Some(year.to_owned());
    }
    if folded.chars().any(|c| c.is_ascii_digit()) {
        // Codes and quantities ("d3", "2019") are compared as written.
        return Some(folded);
    }
    Some(stem(&folded))
}

/// The year of a fiscal year written as a code ("fy2022" → "2022"): filings write "fiscal
/// 2022" or a column headed "2022", never the code.
fn fiscal_year(folded: &str) -> Option<&str> {
    folded
        .strip_prefix("fy")
        .filter(|year| year.len() == 4 && year.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `folded` (lower case, folded) is a stopword.
pub(super) fn is_stopword(folded: &str) -> bool {
    STOPWORDS.binary_search(&folded).is_ok()
}

/// The terms of `text`, in order, repeats kept (for term frequencies and phrase matches).
pub(super) fn terms(text: &str) -> Vec<String> {
    raw_words(text).filter_map(term).collect()
}

/// Compatibility decomposition (so PDF ligatures such as "ﬁ" become "fi"), accents dropped,
/// lower case: what the crate's tokenizer does, plus NFKD for text extracted from PDFs.
pub(super) fn fold(word: &str) -> String {
    word.nfkd()
        .filter(|c| get_general_category(*c) != GeneralCategory::NonspacingMark)
        .flat_map(char::to_lowercase)
        .collect()
}

/// Strips inflections: plural first ("primes" → "prime"), then one verb suffix
/// ("-ing", "-ed", "-ation"), then a final silent "e", so every form of a verb meets its
/// bare form ("prime", "primed", "priming" → "prim").
fn stem(word: &str) -> String {
    let mut w = plural(word);
    if let Some(base) = w.strip_suffix("ied").filter(|b| b.chars().count() >= 3) {
        w = format!("{base}y");
    } else if let Some(base) = w.strip_suffix("ing") {
        w = verb_base(base, &w);
    } else if let Some(base) = w.strip_suffix("ed").filter(|_| !w.ends_with("eed")) {
        w = verb_base(base, &w);
    } else if let Some(base) = w.strip_suffix("ation").filter(|b| b.chars().count() >= 4) {
        w = base.to_owned();
    }
    if w.chars().count() > 3 && w.ends_with('e') && !w.ends_with("ee") {
        w.pop();
    }
    w
}

/// The singular of a plural noun or the base of a third-person verb, or `word` itself.
fn plural(word: &str) -> String {
    if word.chars().count() <= 3 {
        return word.to_owned();
    }
    if let Some(base) = word.strip_suffix("ies").filter(|b| b.chars().count() >= 3) {
        // "batteries" → "battery", "studies" → "study" (but "ties" → "tie", below).
        return format!("{base}y");
    }
    for suffix in ["sses", "xes", "ches", "shes", "zes"] {
        if word.ends_with(suffix) {
            return word[..word.len() - 2].to_owned();
        }
    }
    if word.ends_with('s')
        && !(word.ends_with("ss") || word.ends_with("us") || word.ends_with("is"))
    {
        return word[..word.len() - 1].to_owned();
    }
    word.to_owned()
}

/// What is left of a verb once "-ing" or "-ed" is cut: a doubled final consonant undone
/// ("stopped" → "stop"), and a stem too short to stand alone given back its "e"
/// ("using" → "use") or, when even that is too short, the word unchanged.
fn verb_base(base: &str, word: &str) -> String {
    let len = base.chars().count();
    if len < 2 || !base.chars().any(is_vowel) {
        return word.to_owned();
    }
    if len == 2 {
        return format!("{base}e");
    }
    let mut tail = base.chars().rev();
    if let (Some(last), Some(before)) = (tail.next(), tail.next())
        && last == before
        && !is_vowel(last)
        && !matches!(last, 'l' | 's' | 'z')
    {
        return base[..base.len() - last.len_utf8()].to_owned();
    }
    base.to_owned()
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u' | 'y')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stopword_list_is_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn inflections_meet_their_base_form() {
        for group in [
            &["prime", "primed", "priming", "primes", "Priming"][..],
            &["pump", "pumps", "pumping", "pumped"],
            &["stop", "stopped", "stopping", "stops"],
            &["use", "used", "using", "uses"],
            &["reduce", "reduces", "reduced", "reducing"],
            &[
                "supplement",
                "supplements",
                "supplemented",
                "supplementation",
            ],
            &["study", "studies", "studied"],
            &["battery", "batteries"],
            &["box", "boxes"],
            &["fill", "filled", "filling"],
            &["filter", "ﬁlter", "filters"],
            &["effect", "effects"],
            &["café", "cafe"],
        ] {
            let stems: Vec<_> = group.iter().map(|w| term(w).unwrap()).collect();
            assert!(
                stems.iter().all(|s| *s == stems[0]),
                "{group:?} → {stems:?}"
            );
        }
    }

    #[test]
    fn words_ending_in_s_that_are_not_plurals_stay_whole() {
        assert_eq!(term("analysis").unwrap(), "analysis");
        assert_eq!(term("virus").unwrap(), "virus");
        assert_eq!(term("glass").unwrap(), "glass");
        assert_ne!(term("need"), term("ne"));
        assert_eq!(term("bring").unwrap(), term("brings").unwrap());
    }

    #[test]
    fn stopwords_letters_and_punctuation_are_dropped() {
        assert_eq!(
            terms("How do I prime the pump's casing (D3, model 3)?"),
            ["prim", "pump", "cas", "d3", "model", "3"]
        );
        assert!(terms("What is it about?").is_empty());
    }

    #[test]
    fn a_fiscal_year_code_is_its_year() {
        assert_eq!(terms("FY2022 revenue"), terms("2022 revenue"));
        // Only the four-digit year: other codes stay as written.
        assert_eq!(term("FY22").as_deref(), Some("fy22"));
        assert_eq!(term("FYI2022").as_deref(), Some("fyi2022"));
    }
}
