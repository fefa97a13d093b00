//! Person names: capitalised word runs scored by the gazetteers (first names, surnames,
//! common words that are also names) and by cues around them (titles, salutations, "my name
//! is").

use std::collections::HashSet;

use super::{PiiType, Span, context_before};

const FIRST_NAMES: &str = include_str!("../../data/pii/first_names.txt");
const LAST_NAMES: &str = include_str!("../../data/pii/last_names.txt");
const COMMON_WORDS: &str = include_str!("../../data/pii/common_words.txt");

/// Words before a name that make it one: the name after them counts even when the
/// gazetteers do not know it.
const STRONG_CUES: &[&str] = &[
    "dear",
    "my name is",
    "name is",
    "name:",
    "signed",
    "signed by",
    "sincerely,",
    "regards,",
    "attn:",
    "attention:",
    "hi",
    "hello",
];

/// Words before a name that make it likelier.
const WEAK_CUES: &[&str] = &[
    "by", "with", "and", "contact", "ask", "told", "under", "from:", "to:", "cc:", "author:",
    "thanks,",
];

/// Titles and honorifics; the capitalised words after one are a name.
const TITLES: &[&str] = &[
    "mr",
    "mrs",
    "ms",
    "miss",
    "mx",
    "dr",
    "prof",
    "professor",
    "sir",
    "dame",
    "rev",
    "lady",
    "lord",
    "madam",
    "mister",
    "herr",
    "frau",
    "mme",
    "mlle",
    "monsieur",
    "sr",
    "sra",
];

/// Function words that end a run of capitalised words ("Smith And Sons", "May The").
const STOP_WORDS: &[&str] = &[
    "the",
    "a",
    "an",
    "and",
    "or",
    "of",
    "in",
    "on",
    "at",
    "to",
    "for",
    "with",
    "by",
    "from",
    "is",
    "was",
    "are",
    "were",
    "be",
    "has",
    "had",
    "have",
    "said",
    "says",
    "this",
    "that",
    "these",
    "those",
    "it",
    "its",
    "we",
    "our",
    "you",
    "your",
    "they",
    "their",
    "he",
    "she",
    "his",
    "her",
    "i",
    "my",
    "but",
    "if",
    "as",
    "not",
    "no",
    "so",
    "than",
    "then",
    "there",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "street",
    "road",
    "avenue",
    "inc",
    "ltd",
    "llc",
    "university",
    "institute",
    "department",
    "college",
    "school",
    "hospital",
    "company",
    "corporation",
    "mon",
    "tue",
    "wed",
    "thu",
    "fri",
    "sat",
    "sun",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "someone",
    "everyone",
    "anyone",
    "team",
    "all",
    "customer",
    "customers",
    "user",
    "users",
    "friend",
    "friends",
    "colleague",
    "colleagues",
    "sir",
    "madam",
    "there",
    "here",
    "what",
    "when",
    "where",
    "which",
    "who",
    "how",
    "why",
];

/// Name particles that may sit between a first name and a surname.
const PARTICLES: &[&str] = &[
    "van", "von", "de", "der", "den", "da", "di", "del", "della", "du", "le", "la", "dos", "das",
    "bin", "ibn", "ter", "ten",
];

/// At most this many words form one name.
const MAX_NAME_WORDS: usize = 4;

/// The embedded name lists.
pub(super) struct Gazetteer {
    first: HashSet<&'static str>,
    last: HashSet<&'static str>,
    common: HashSet<&'static str>,
}

impl Gazetteer {
    pub(super) fn embedded() -> Self {
        let words = |list: &'static str| -> HashSet<&'static str> {
            list.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .collect()
        };
        Gazetteer {
            first: words(FIRST_NAMES),
            last: words(LAST_NAMES),
            common: words(COMMON_WORDS),
        }
    }

    pub(super) fn first_names(&self) -> usize {
        self.first.len()
    }

    pub(super) fn last_names(&self) -> usize {
        self.last.len()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `Smith`, `McDonald`, `Jean-Luc`.
    Capitalised,
    /// `GitHub`, `NetworkAuthor`: product names and glued words, never a name here.
    Mixed,
    /// One capital letter (`A` in `John A. Smith`).
    Initial,
    /// `SMITH`: headings and acronyms, never a name here.
    AllCaps,
    /// Anything else.
    Lower,
}

#[derive(Debug, Clone)]
struct Token {
    start: usize,
    end: usize,
    shape: Shape,
    lower: String,
}

/// What the gazetteers say about one token.
#[derive(Debug, Clone, Copy, Default)]
struct Known {
    first: bool,
    last: bool,
    common: bool,
    stop: bool,
    particle: bool,
}

fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if !c.is_alphabetic() {
            continue;
        }
        let mut end = start + c.len_utf8();
        while let Some(&(at, next)) = chars.peek() {
            if next.is_alphabetic() {
                end = at + next.len_utf8();
                chars.next();
            } else if matches!(next, '\'' | '’' | '-')
                && text[at + next.len_utf8()..]
                    .chars()
                    .next()
                    .is_some_and(char::is_alphabetic)
            {
                chars.next();
            } else {
                break;
            }
        }
        let mut word = &text[start..end];
        for possessive in ["'s", "’s"] {
            if let Some(stem) = word.strip_suffix(possessive) {
                word = stem;
            }
        }
        let end = start + word.len();
        let mut letters = word.chars();
        let first = letters.next().unwrap_or(' ');
        let rest_lower = word.chars().skip(1).any(char::is_lowercase);
        let shape = if !first.is_uppercase() {
            Shape::Lower
        } else if word.chars().count() == 1 {
            Shape::Initial
        } else if !rest_lower {
            Shape::AllCaps
        } else if inner_capital(word) {
            Shape::Mixed
        } else {
            Shape::Capitalised
        };
        let lower = if shape == Shape::Lower {
            String::new()
        } else {
            word.to_lowercase()
        };
        out.push(Token {
            start,
            end,
            shape,
            lower,
        });
    }
    out
}

/// Whether a capitalised word has a capital inside it that no name prefix (`Mc`, `Mac`, `De`,
/// `Le`, `O'`) or hyphen explains.
fn inner_capital(word: &str) -> bool {
    let mut prev = ' ';
    for (at, c) in word.char_indices().skip(1) {
        if c.is_uppercase() && !matches!(prev, '-' | '\'' | '’') {
            let prefix = &word[..at];
            if ![
                "Mc", "Mac", "De", "Di", "Da", "Du", "Le", "La", "Van", "Von",
            ]
            .contains(&prefix)
            {
                return true;
            }
        }
        prev = c;
    }
    false
}

/// Person names in `text`.
pub(super) fn scan(text: &str, gazetteer: &Gazetteer) -> Vec<Span> {
    let tokens = tokens(text);
    let known: Vec<Known> = tokens
        .iter()
        .map(|t| {
            if t.shape == Shape::Lower {
                return Known {
                    particle: PARTICLES.contains(&&text[t.start..t.end]),
                    ..Known::default()
                };
            }
            let w = t.lower.as_str();
            Known {
                first: gazetteer.first.contains(w),
                last: gazetteer.last.contains(w),
                common: gazetteer.common.contains(w),
                stop: STOP_WORDS.contains(&w),
                particle: false,
            }
        })
        .collect();
    let scanner = Scanner {
        text,
        tokens: &tokens,
        known: &known,
    };
    let mut out = Vec::new();
    let mut j = 0;
    while j < tokens.len() {
        match scanner.name_at(j) {
            Ok((end_token, span)) => {
                out.push(span);
                j = end_token;
            }
            // A capitalised run that is not a name ("Los Angeles Times") is skipped whole, unless
            // its first word may just start a sentence ("Yesterday John Smith …").
            Err(run_end) if !scanner.sentence_initial(j) && !scanner.is_title(j) => {
                j = run_end.max(j + 1);
            }
            Err(_) => j += 1,
        }
    }
    out
}

struct Scanner<'a> {
    text: &'a str,
    tokens: &'a [Token],
    known: &'a [Known],
}

impl Scanner<'_> {
    /// The text between token `j - 1` and token `j`.
    fn gap(&self, j: usize) -> &str {
        &self.text[self.tokens[j - 1].end..self.tokens[j].start]
    }

    /// Whether token `j` continues the name that token `j - 1` is part of.
    fn linked(&self, j: usize) -> bool {
        let gap = self.gap(j);
        gap == " "
            || gap == "\u{a0}"
            || (self.tokens[j - 1].shape == Shape::Initial && (gap == ". " || gap == "."))
    }

    fn is_name_word(&self, j: usize) -> bool {
        self.tokens[j].shape == Shape::Capitalised && !self.known[j].stop
    }

    /// Token `j` starts a sentence, a line or a cell.
    fn sentence_initial(&self, j: usize) -> bool {
        let before = self.text[..self.tokens[j].start].trim_end_matches([' ', '\t', '"', '“', '(']);
        before.is_empty() || before.ends_with(['.', '!', '?', '\n', ':', ';', '•', '*', '|'])
    }

    /// The end (exclusive token index) of the run of name words from `j`: capitalised words,
    /// initials and particles followed by a capitalised word.
    fn run_end(&self, j: usize) -> usize {
        let mut k = j + 1;
        let mut words = 1;
        while k < self.tokens.len() && words < MAX_NAME_WORDS && self.linked(k) {
            let continues = self.is_name_word(k)
                || self.tokens[k].shape == Shape::Initial
                || (self.known[k].particle
                    && k + 1 < self.tokens.len()
                    && self.linked(k + 1)
                    && self.is_name_word(k + 1));
            if !continues {
                break;
            }
            words += 1;
            k += 1;
        }
        // A name ends on a capitalised word, not an initial or particle.
        while k > j + 1 && !self.is_name_word(k - 1) {
            k -= 1;
        }
        k
    }

    /// The cue before token `j`: 2 for a strong one, 1 for a weak one, 0 for none.
    fn cue(&self, j: usize) -> u8 {
        let before = context_before(self.text, self.tokens[j].start, 24);
        let before = before.trim_end();
        let ends_with_word = |cue: &str| {
            before.ends_with(cue)
                && !before[..before.len() - cue.len()]
                    .chars()
                    .next_back()
                    .is_some_and(char::is_alphanumeric)
        };
        if STRONG_CUES.iter().any(|c| ends_with_word(c)) {
            2
        } else if WEAK_CUES.iter().any(|c| ends_with_word(c)) {
            1
        } else {
            0
        }
    }

    fn is_title(&self, j: usize) -> bool {
        let t = &self.tokens[j];
        matches!(t.shape, Shape::Capitalised | Shape::AllCaps) && TITLES.contains(&t.lower.as_str())
    }

    /// A name starting at token `j`, with the token index after it; or, when there is none,
    /// the end of the run of capitalised words at `j`.
    fn name_at(&self, j: usize) -> Result<(usize, Span), usize> {
        let (tokens, known) = (self.tokens, self.known);
        // After a title, any capitalised run is a name: "Dr. Jane Smith", "Mr. Manning".
        if self.is_title(j) && j + 1 < tokens.len() && self.is_name_word(j + 1) {
            let gap = self.gap(j + 1);
            if gap == " " || gap == ". " {
                let end = self.run_end(j + 1);
                return Ok((end, self.span(j + 1, end, 0.9)));
            }
        }
        let initial_start = tokens[j].shape == Shape::Initial
            && self.text[tokens[j].end..].starts_with('.')
            && j + 1 < tokens.len()
            && self.linked(j + 1);
        if !(self.is_name_word(j) || initial_start) {
            return Err(j + 1);
        }
        let end = self.run_end(j);
        let words: Vec<usize> = (j..end).filter(|&k| self.is_name_word(k)).collect();
        let (Some(&first), Some(&last)) = (words.first(), words.last()) else {
            return Err(end);
        };
        let cue = self.cue(j);
        let surname = |k: usize| known[k].last && !known[k].common;
        let name_like = |k: usize| (known[k].first || known[k].last) && !known[k].common;
        let given = known[first].first;
        // Three or more words are a name only when every word after the first is one
        // ("Maria José García López"), not a title-case phrase ("Clean Miles Standard").
        if words.len() >= 3 && !words[1..].iter().all(|&k| name_like(k)) {
            return Err(end);
        }
        let (confidence, boost): (f32, bool) = if initial_start {
            // "J. Smith": initials and a known surname.
            if words.len() == 1 && surname(last) {
                (0.75, true)
            } else {
                return Err(end);
            }
        } else if words.len() >= 2 {
            if given && !known[first].common {
                (if surname(last) { 0.9 } else { 0.75 }, true)
            } else if given && known[first].common {
                // "Will Smith", not "May The" or "Mark Twain Museum".
                if surname(last) && words.len() == 2 {
                    (0.7, true)
                } else {
                    return Err(end);
                }
            } else if cue == 2 && !known[first].common && !known[first].stop {
                (0.7, false)
            } else if surname(last) && !known[first].common {
                // An unknown word before a surname: often a place or an organisation.
                (0.4, false)
            } else {
                return Err(end);
            }
        } else if given && !known[first].common {
            if cue == 2 {
                (0.75, false)
            } else if self.sentence_initial(j) {
                (0.35, true)
            } else {
                (0.45, true)
            }
        } else if cue == 2 && !known[first].common && !known[first].stop {
            (0.55, false)
        } else {
            return Err(end);
        };
        let confidence = if boost && cue > 0 && confidence < 0.9 {
            confidence + 0.1
        } else {
            confidence
        };
        Ok((end, self.span(j, end, confidence.min(0.95))))
    }

    fn span(&self, from: usize, to: usize, confidence: f32) -> Span {
        Span {
            kind: PiiType::PersonName,
            start: self.tokens[from].start,
            end: self.tokens[to - 1].end,
            confidence,
        }
    }
}
