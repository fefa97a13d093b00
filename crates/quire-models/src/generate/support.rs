//! Whether a sentence can support an answer at all, whatever its score: the extractive
//! answerer quotes only sentences that pass, and says it does not know when none does.
//!
//! A question that cannot be answered from the documents is usually close to one that can:
//! a name, a number or a negation changed, or a question of a kind the sentence cannot
//! answer. So a sentence supports the question only when
//! - every name and number the question gives is in its document's retrieved text or the
//!   document's name (a name within one letter or two of being spelt right counts: questions
//!   are typed quickly; a name of several words counts by its longest word, "Turing" for
//!   "Alan Turing"), except that a sentence with every product code of the question ("XR-200")
//!   needs no brand name beside it: documents seldom repeat their maker's name;
//! - the question's negation ("not", "never", "n't") has one in the sentence, and the sentence
//!   does not say the opposite of a word of the question ("least" where it asks "most",
//!   "northern" where it asks "western") without also saying that word;
//! - it holds something of the kind asked for that the question does not already say: a
//!   time for "when …" and "what year …" (a date, a number, or a word of time such as "after"
//!   or "every": manuals answer "when" with conditions), a number for "how many …", a name
//!   for "who …".
//!
//! Only questions make demands. A statement to check ("Aspirin lowers the risk of stroke.")
//! is answered with the closest evidence, which may well say the opposite or another number:
//! that is what its reader needs to see.
//!
//! These are rules about what an answer needs, not thresholds: each is measured on SQuAD 2.0
//! in `docs/generate.md`.

use std::collections::HashSet;

use super::terms::{fold, raw_words};

/// What the question asks for, beyond its terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Demands {
    /// Names (the longest word of each, folded) and numbers the question gives.
    specifics: Vec<Specific>,
    /// Numbers the question gives.
    numbers: Vec<Figure>,
    /// The question is negated.
    negated: bool,
    /// The words of the sentence that asks (up to the first "?"), folded: instructions after
    /// it ("If the metric is not useful, say so") neither negate nor oppose.
    asked: HashSet<String>,
    /// The kind of answer asked for.
    kind: Option<AnswerKind>,
    /// The question's own words, folded: an answer must bring something else.
    words: HashSet<String>,
}

/// How a sentence stands to the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Support {
    /// It may answer.
    Supported,
    /// It does not say what the question says: no retrieved document has a name or a number
    /// of the question, or the sentence lacks its negation or says the opposite. When the sentences that match best are such, the question is probably
    /// about something the documents do not hold.
    Contradicted,
    /// The sentence holds no answer of the kind asked for (no time for "when"); another
    /// sentence may.
    Unfit,
}

/// A name or number a supporting document must contain.
#[derive(Debug, Clone, PartialEq)]
struct Specific {
    /// Folded, lower case: one of them must be there (the words of a name of several words;
    /// a number is one word).
    words: Vec<String>,
    /// Numbers and codes are compared exactly; names forgive a typo.
    exact: bool,
    /// A product code: letters and digits together ("XR-200" gives "xr" and "200"). Not
    /// required itself (its number is, and "FY2015" is written "fiscal 2015"), but a
    /// sentence with the question's codes needs no brand name beside them.
    code: bool,
}

/// The kinds of answer a question's opening asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnswerKind {
    /// "When …", "what year …", "in which century …".
    Time,
    /// "How many …", "how much …", "how long …", "how old …".
    Quantity,
    /// "Who …", "whom …".
    Person,
}

/// Words that make a question negated.
const NEGATIONS: &[&str] = &[
    "cannot", "never", "no", "none", "nor", "not", "nothing", "without",
];

/// Month names: a sentence naming one answers "when".
const MONTHS: &[&str] = &[
    "april",
    "august",
    "december",
    "february",
    "january",
    "july",
    "june",
    "march",
    "may",
    "november",
    "october",
    "september",
];

/// Words that place something in time without a date: conditions and frequencies.
const TIME_WORDS: &[&str] = &[
    "after", "ago", "annually", "before", "daily", "during", "earlier", "every", "later",
    "monthly", "since", "sooner", "until", "weekly", "whenever", "yearly",
];

/// Words of time and quantity that are not written with digits.
const NUMBER_WORDS: &[&str] = &[
    "billion",
    "both",
    "century",
    "decade",
    "dozen",
    "dozens",
    "eight",
    "eighteen",
    "eighty",
    "eleven",
    "few",
    "fifteen",
    "fifty",
    "five",
    "forty",
    "four",
    "half",
    "hundred",
    "hundreds",
    "majority",
    "million",
    "millions",
    "minority",
    "nine",
    "ninety",
    "no",
    "none",
    "once",
    "percent",
    "seven",
    "seventy",
    "several",
    "single",
    "six",
    "sixty",
    "ten",
    "thirty",
    "thousand",
    "thousands",
    "three",
    "twelve",
    "twenty",
    "twice",
    "two",
    "year",
    "years",
];

impl Demands {
    /// What `question` demands of a supporting sentence; nothing when it is not a question.
    pub(super) fn of(question: &str) -> Self {
        if !is_question(question) {
            return Self::default();
        }
        // Names and numbers come from the sentence that asks (up to the first "?"): what
        // follows is instructions ("DPO is defined as: 365 * …"), not facts to find.
        let asking = question.find('?').map_or(question, |end| &question[..=end]);
        let words: Vec<&str> = raw_words(asking).collect();
        let folded: Vec<String> = words.iter().map(|w| fold(w)).collect();
        let capitalised = words
            .iter()
            .filter(|w| w.starts_with(char::is_uppercase))
            .count();
        // In a Question Written In Title Case every word looks like a name.
        let title_case = words.len() > 2 && capitalised * 2 > words.len();
        let mut specifics = Vec::new();
        let mut name: Vec<&str> = Vec::new();
        let flush = |name: &mut Vec<&str>, specifics: &mut Vec<Specific>| {
            // Abbreviations ("UK", "Jr") are often written out in the documents.
            let words: Vec<String> = name
                .iter()
                .filter(|w| w.chars().count() >= 3 && !w.chars().all(char::is_uppercase))
                .map(|w| fold(w))
                .collect();
            if !words.is_empty() {
                specifics.push(Specific {
                    words,
                    exact: false,
                    code: false,
                });
            }
            name.clear();
        };
        let codes = codes(asking);
        for (position, word) in words.iter().enumerate() {
            if codes.contains(&folded[position]) {
                flush(&mut name, &mut specifics);
                specifics.push(Specific {
                    words: vec![folded[position].clone()],
                    exact: true,
                    code: true,
                });
                continue;
            }
            if word.chars().any(|c| c.is_ascii_digit()) {
                // Numbers are checked whole, below.
                flush(&mut name, &mut specifics);
                continue;
            }
            let is_name = word.starts_with(char::is_uppercase)
                && ((!opens_sentence(asking, word) && !title_case)
                    || word.chars().skip(1).any(char::is_uppercase))
                && !is_function_word(&folded[position]);
            if is_name {
                name.push(word);
            } else {
                flush(&mut name, &mut specifics);
            }
        }
        flush(&mut name, &mut specifics);
        // "Whether or not", "may or may not" weigh both sides: no negation.
        let lower = asking.to_lowercase();
        let negated = is_negated(&lower.replace("or not", "").replace("may not", ""));
        Self {
            specifics,
            numbers: figures(asking)
                .into_iter()
                .filter(|n| n.value.len() >= 2)
                .collect(),
            negated,
            kind: kind(&folded),
            words: raw_words(question).map(fold).collect(),
            asked: folded.into_iter().collect(),
        }
    }

    /// How `sentence` stands to the question: `frame` is the text that qualifies it (its
    /// passage's heading; for a table row, the whole table, whose header names the columns),
    /// `document` the retrieved text and name of its document, `retrieved` those of every
    /// document retrieved.
    pub(super) fn support(
        &self,
        sentence: &str,
        frame: &str,
        document: &DocumentWords,
        retrieved: &DocumentWords,
    ) -> Support {
        let says = |words: &DocumentWords| self.says(sentence, words);
        if !says(document) {
            // Another document may say it: this one is about something else.
            return if says(retrieved) {
                Support::Unfit
            } else {
                Support::Contradicted
            };
        }
        // The sentence's words and negation, read once for the checks below.
        let said: HashSet<String> = raw_words(sentence).map(fold).collect();
        let negated = is_negated(sentence);
        if self.negated && !negated || self.opposes(&said) || self.loses_a_prefix(&said, negated) {
            return Support::Contradicted;
        }
        // A year or amount of the question that the document gives only elsewhere belongs
        // to another of its facts ("in 1979" against a sentence about 1974).
        if self.states_other_numbers(sentence, &said, frame) {
            return Support::Unfit;
        }
        match self.kind {
            Some(kind) if !self.brings(kind, sentence) => Support::Unfit,
            _ => Support::Supported,
        }
    }

    /// Whether `words` hold every number and name of the question (a sentence, `sentence`,
    /// with the question's product codes needs no brand name beside them).
    fn says(&self, sentence: &str, words: &DocumentWords) -> bool {
        if !self
            .numbers
            .iter()
            .all(|n| words.numbers.contains(&n.value))
        {
            return false;
        }
        let has = |words: &DocumentWords, s: &Specific| {
            s.words.iter().any(|w| words.contains(w, s.exact))
        };
        // The sentence's own words are read only for a question with a product code.
        let has_codes = self.specifics.iter().any(|s| s.code) && {
            let sentence_words = DocumentWords::of([sentence]);
            self.specifics
                .iter()
                .filter(|s| s.code)
                .all(|s| has(&sentence_words, s))
        };
        self.specifics
            .iter()
            .all(|s| s.code || has(words, s) || (has_codes && !s.exact))
    }

    /// Whether `sentence` may be quoted at all.
    #[cfg(test)]
    fn met_by(&self, sentence: &str, _passage: &str, document: &DocumentWords) -> bool {
        self.support(sentence, "", document, document) == Support::Supported
    }

    /// Whether `sentence` (its words `said`, read under `frame`) gives, in place of a number
    /// of the question,
    /// another of its kind: "in 1974" where the question asks about 1979, "November 7" for
    /// "December 25th". Numbers of one [`Figure::kind`] stand in for each other. A sentence
    /// with no such number says nothing against the question: a line of a table or a page is
    /// qualified by its column header or running head.
    fn states_other_numbers(&self, sentence: &str, said: &HashSet<String>, frame: &str) -> bool {
        let mut here = figures(sentence);
        here.extend(figures(frame));
        // Of several asked figures of one kind ("in FY2021, FY2022 and FY2023") one is
        // enough: each sentence tells of one of them.
        let other_figure = self.numbers.iter().any(|asked| {
            let kind = asked.kind();
            here.iter().any(|n| n.kind() == kind)
                && !self
                    .numbers
                    .iter()
                    .any(|a| a.kind() == kind && here.iter().any(|n| n.value == a.value))
        });
        // The same for numbers in words: "a fourth source" against "a third source".
        let other_word = [CARDINALS, ORDINALS].iter().any(|kind| {
            let asked: Vec<&&str> = kind.iter().filter(|w| self.asked.contains(**w)).collect();
            !asked.is_empty()
                && !asked.iter().any(|w| said.contains(**w))
                && kind.iter().any(|w| said.contains(*w))
        });
        other_figure || other_word
    }

    /// Whether the question asks with a word negated by its prefix ("disapproved",
    /// "unnatural") where the sentence (its words `said`) has the word without it and no
    /// negation of its own (`negated`: it may say "not approved").
    fn loses_a_prefix(&self, said: &HashSet<String>, negated: bool) -> bool {
        if negated {
            return false;
        }
        self.asked.iter().any(|word| {
            NEGATING_PREFIXES.iter().any(|prefix| {
                word.strip_prefix(prefix).is_some_and(|rest| {
                    rest.chars().count() >= 4 && said.contains(rest) && !said.contains(word)
                })
            })
        })
    }

    /// Whether a sentence (its words `said`) says the opposite of a word of the question
    /// without saying the word.
    fn opposes(&self, said: &HashSet<String>) -> bool {
        OPPOSITES.iter().any(|group| {
            group
                .iter()
                .any(|w| self.asked.contains(*w) && !said.contains(*w))
                && group
                    .iter()
                    .any(|w| !self.words.contains(*w) && said.contains(*w))
        })
    }

    /// Whether `sentence` holds an answer of `kind` the question does not already give.
    fn brings(&self, kind: AnswerKind, sentence: &str) -> bool {
        raw_words(sentence).enumerate().any(|(position, word)| {
            let folded = fold(word);
            if self.words.contains(&folded) {
                return false;
            }
            let numeric = word.chars().any(|c| c.is_ascii_digit())
                || NUMBER_WORDS.binary_search(&folded.as_str()).is_ok();
            match kind {
                AnswerKind::Time => {
                    numeric
                        || MONTHS.binary_search(&folded.as_str()).is_ok()
                        || TIME_WORDS.binary_search(&folded.as_str()).is_ok()
                }
                AnswerKind::Quantity => numeric,
                AnswerKind::Person => {
                    word.starts_with(char::is_uppercase)
                        && !(position == 0 && is_function_word(&folded))
                        && !is_function_word(&folded)
                }
            }
        })
    }
}

/// The words of a document's retrieved passages and its name, folded, for the question's
/// names and numbers to be looked up in.
#[derive(Debug, Clone, Default)]
pub(super) struct DocumentWords {
    words: HashSet<String>,
    numbers: HashSet<String>,
}

impl DocumentWords {
    /// The words of `texts`.
    pub(super) fn of<'t>(texts: impl IntoIterator<Item = &'t str>) -> Self {
        let (mut words, mut all_numbers) = (HashSet::new(), HashSet::new());
        for text in texts {
            words.extend(raw_words(text).map(fold));
            all_numbers.extend(numbers(text));
        }
        Self {
            words,
            numbers: all_numbers,
        }
    }

    /// Whether `word` (folded) is among them; a name also when a word is within one edit of
    /// it (two for names of eight letters or more), or begins with it ("Christian" in
    /// "Christianity").
    fn contains(&self, word: &str, exact: bool) -> bool {
        if self.words.contains(word) {
            return true;
        }
        let length = word.chars().count();
        if exact || length < 4 {
            return false;
        }
        let allowed = if length >= 8 { 2 } else { 1 };
        self.words.iter().any(|candidate| {
            same_root(candidate, word)
                || (candidate.chars().count().abs_diff(length) <= allowed
                    && strsim::levenshtein(candidate, word) <= allowed)
        })
    }
}

/// A number as written.
#[derive(Debug, Clone, Default, PartialEq)]
struct Figure {
    /// Its digits and decimal point, thousands separators dropped ("$38,000" → "38000").
    value: String,
    /// Written with thousands separators: an amount ("1,283"), never a year.
    grouped: bool,
}

impl Figure {
    /// What makes two figures of one kind, so that one stands in for the other: the count
    /// of digits, a decimal point, and grouping ("1979" and "1974" are; "2017" and "1,283"
    /// are not).
    fn kind(&self) -> (usize, bool, bool) {
        (
            self.value.chars().filter(char::is_ascii_digit).count(),
            self.value.contains('.'),
            self.grouped,
        )
    }
}

/// The numbers written in `text`, thousands separators dropped ("$38,000" → "38000",
/// "1.5" stays); "1000's" gives "1000".
fn numbers(text: &str) -> Vec<String> {
    figures(text).into_iter().map(|f| f.value).collect()
}

/// The numbers written in `text`, as [`Figure`]s.
fn figures(text: &str) -> Vec<Figure> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut current = Figure::default();
    for (i, &c) in chars.iter().enumerate() {
        let joins = matches!(c, ',' | '.')
            && !current.value.is_empty()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() {
            current.value.push(c);
        } else if joins {
            if c == '.' {
                current.value.push(c);
            } else {
                current.grouped = true;
            }
        } else if !current.value.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.value.is_empty() {
        out.push(current);
    }
    out
}

/// Numbers written as words, by kind ("one" is left out: it is as often a pronoun).
const CARDINALS: &[&str] = &[
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
];
const ORDINALS: &[&str] = &[
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth",
];

/// Prefixes that turn a word into its negation ("unknown", "disapprove", "non-violent");
/// "in-" and "im-" are left out, too many words only begin with them ("inform", "impress").
const NEGATING_PREFIXES: &[&str] = &["un", "dis", "non"];

/// Groups of words that exclude each other: a sentence with one of them does not answer a
/// question that asks with another.
const OPPOSITES: &[&[&str]] = &[
    &["north", "south", "east", "west"],
    &["northern", "southern", "eastern", "western"],
    &["most", "least"],
    &["more", "less", "fewer"],
    &["largest", "smallest"],
    &["biggest", "smallest"],
    &["highest", "lowest"],
    &["higher", "lower"],
    &["greatest", "least"],
    &["first", "last"],
    &["earliest", "latest"],
    &["oldest", "newest", "youngest"],
    &["older", "younger"],
    &["longest", "shortest"],
    &["past", "future"],
    &["increase", "decrease"],
    &["increased", "decreased"],
    &["rise", "fall"],
    &["rose", "fell"],
    &["maximum", "minimum"],
    &["best", "worst"],
    &["better", "worse"],
    &["major", "minor"],
    &["positive", "negative"],
    &["internal", "external"],
    &["inner", "outer"],
    &["import", "export"],
    &["imports", "exports"],
    &["won", "lost"],
    &["win", "lose"],
    &["success", "failure"],
    &["legal", "illegal"],
    &["possible", "impossible"],
    &["accepted", "rejected"],
    &["supported", "opposed"],
    &["private", "public"],
    &["domestic", "foreign"],
    &["male", "female"],
    &["men", "women"],
    &["strongest", "weakest"],
    &["strong", "weak"],
    &["new", "old"],
    &["before", "after"],
    &["earlier", "later"],
    &["inside", "outside"],
    &["large", "small"],
    &["high", "low"],
    &["begin", "end"],
    &["began", "ended"],
    &["beginning", "end"],
    &["start", "end"],
    &["started", "ended"],
    &["born", "died"],
    &["summer", "winter"],
];

/// The parts of the question's product codes, folded: the words of a run of letters and
/// digits joined by hyphens or slashes that has both ("XR-200" → "xr", "200"; "A4" → "a4").
fn codes(question: &str) -> HashSet<String> {
    question
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '/'))
        .filter(|run| {
            run.chars().any(|c| c.is_ascii_digit())
                && run.chars().any(char::is_alphabetic)
                && !is_ordinal(run)
        })
        .flat_map(raw_words)
        .map(fold)
        .collect()
}

/// Whether `word`, a slice of `text`, opens one of its sentences (or the text): a capital
/// there says nothing of a name.
fn opens_sentence(text: &str, word: &str) -> bool {
    let offset = (word.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    text.get(..offset).is_none_or(|before| {
        before
            .trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | '“'))
            .chars()
            .next_back()
            .is_none_or(|c| matches!(c, '.' | '?' | '!' | ':' | ';'))
    })
}

/// "1st", "22nd", "3rd", "10th": numbers the documents may write as words.
fn is_ordinal(run: &str) -> bool {
    let lower = run.to_lowercase();
    ["st", "nd", "rd", "th"].iter().any(|suffix| {
        lower
            .strip_suffix(suffix)
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    })
}

/// The kind of answer the question's opening asks for.
fn kind(words: &[String]) -> Option<AnswerKind> {
    let first = words.first()?.as_str();
    let second = words.get(1).map_or("", String::as_str);
    let asks_otherwise = |from: usize| {
        words.iter().skip(from).any(|w| {
            matches!(
                w.as_str(),
                "what" | "which" | "who" | "whom" | "how" | "where" | "why"
            )
        })
    };
    match (first, second) {
        // "When a pathogen is eaten, what does it become?" asks the later question.
        ("when", _) if !asks_otherwise(1) => Some(AnswerKind::Time),
        ("what" | "which" | "in", "year" | "century" | "decade" | "month" | "date") => {
            Some(AnswerKind::Time)
        }
        ("in", "what" | "which")
            if matches!(
                words.get(2).map(String::as_str),
                Some("year" | "century" | "decade" | "month")
            ) =>
        {
            Some(AnswerKind::Time)
        }
        ("how", "many" | "much" | "long" | "old") => Some(AnswerKind::Quantity),
        ("who" | "whom", _) => Some(AnswerKind::Person),
        _ => None,
    }
}

/// Words a question opens with.
const QUESTION_OPENINGS: &[&str] = &[
    "are", "can", "could", "did", "do", "does", "had", "has", "have", "how", "is", "should", "was",
    "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "would",
];

/// Whether `text` asks something: it has a question mark or opens with a question word
/// ("Who founded Yuan", typed without one); a statement does not.
fn is_question(text: &str) -> bool {
    text.contains('?')
        || raw_words(text)
            .next()
            .is_some_and(|w| QUESTION_OPENINGS.binary_search(&fold(w).as_str()).is_ok())
}

/// Whether two words share a beginning of four letters or more that is most of the shorter
/// one: "Italian" and "Italy", "Palestine" and "Palestinian", "Sept" and "September" (not
/// "Austria" and "Australia").
fn same_root(a: &str, b: &str) -> bool {
    let shared = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let shorter = a.chars().count().min(b.chars().count());
    shared >= 4 && shared * 5 >= shorter * 4
}

/// Whether `text` says "not", "never", "no", "n't" or the like.
fn is_negated(text: &str) -> bool {
    text.contains("n't")
        || text.contains("n’t")
        || raw_words(text).any(|w| NEGATIONS.binary_search(&fold(w).as_str()).is_ok())
}

/// Words written with a capital for their place in a sentence, not because they name
/// something.
fn is_function_word(folded: &str) -> bool {
    super::terms::is_stopword(folded)
}

#[cfg(test)]
#[path = "support_tests.rs"]
mod tests;
