//! How well a sentence answers the question: BM25 over the sentences of the retrieved
//! passages, with a bonus for the question's phrases and for passages whose section or
//! document name carries question terms the sentence leaves implicit.
//!
//! The sentences are the whole collection here: a term that occurs in every retrieved
//! sentence ("pump" in a pump manual) tells the sentences apart less than one that occurs in
//! two ("prime"), which is exactly what the inverse document frequency weighs.

use std::collections::HashMap;

use super::Turn;
use super::sentences::split_inline;
use super::terms::{raw_words, term, terms};

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;
/// A question with at most this many terms is read as a follow-up of the previous one.
const FOLLOW_UP_TERMS: usize = 2;
/// Weight of the previous question's terms in a follow-up.
const HISTORY_WEIGHT: f32 = 0.5;
/// Bonus for two consecutive question terms found next to each other, as a share of their
/// mean IDF: "prime the pump" beats a sentence with "pump" and "prime" far apart.
const PHRASE_WEIGHT: f32 = 0.5;
/// Share of a term's weight earned when only the passage's section or document name has it.
const CONTEXT_WEIGHT: f32 = 0.25;

/// One distinct term of the question.
#[derive(Debug, Clone, PartialEq)]
struct QueryTerm {
    term: String,
    /// 1 for the question's own terms, [`HISTORY_WEIGHT`] for the previous question's.
    weight: f32,
    /// A term of the question itself, not borrowed from the conversation. Only these count
    /// towards coverage: the previous subject steers the ranking of a follow-up, but a
    /// sentence about it alone ("Ibuprofen is used for pain") does not answer "and its side
    /// effects?", and a new, unrelated short question is not held to the old subject.
    asked: bool,
    /// The parts of the question the term belongs to, whose coverage is measured: part 0
    /// is the sentence that asks (or a borrowed question), each further part what one of
    /// the question's definitions defines with ("X is defined as: A / B" gives "A / B").
    /// The instructions around them ("Round to two decimals.") steer the ranking, but an
    /// answer need not repeat them.
    parts: Vec<usize>,
    /// Written as a name or a code (capitalised inside the question, all capitals, or with
    /// digits): such a term is specific enough to make a sentence relevant on its own.
    key: bool,
}

/// The question as weighted terms and phrases.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Query {
    terms: Vec<QueryTerm>,
    /// Consecutive terms (indices into `terms`, stopwords skipped) and their weight.
    phrases: Vec<(usize, usize, f32)>,
}

/// The part of a question that asks.
const ASKING: usize = 0;

impl Query {
    /// The terms of `question`; for a follow-up (few terms of its own: "and its side
    /// effects?"), plus the terms of the latest earlier question that has any, at a lower
    /// weight, so the answer stays on the conversation's subject.
    pub(super) fn new(question: &str, history: &[Turn]) -> Self {
        let mut query = Self::default();
        let (before, asking, after) = split_asking(question);
        query.add(asking, 1.0, true, Some(ASKING));
        // A sentence giving one term of a definition ("Total current liabilities 2,213.6")
        // answers part of the question.
        for (n, definition) in definitions(after).into_iter().enumerate() {
            query.add(definition, 1.0, true, Some(n + 1));
        }
        query.add(before, 1.0, true, None);
        query.add(after, 1.0, true, None);
        // "Revenue fell in 2015. Why?": the sentences before it say what is asked.
        if !query.terms.iter().any(|q| q.parts.contains(&ASKING)) {
            query.terms.iter_mut().for_each(|q| q.parts.push(ASKING));
        }
        if query.terms.len() <= FOLLOW_UP_TERMS
            && let Some(previous) = history
                .iter()
                .rev()
                .map(|turn| turn.question.as_str())
                .find(|q| !terms(q).is_empty())
        {
            // With no term of its own ("Why?"), the question is about the previous subject.
            let asked = query.terms.is_empty();
            query.add(previous, HISTORY_WEIGHT, asked, asked.then_some(ASKING));
        }
        query
    }

    /// True when the question borrows terms from the previous one (a follow-up).
    pub(super) fn borrows(&self) -> bool {
        self.terms.iter().any(|q| q.weight < 1.0)
    }

    /// Whether `terms` (a sentence's) hold a term of the question itself.
    pub(super) fn shares_a_term(&self, terms: &[String]) -> bool {
        self.asked_in(terms).next().is_some()
    }

    /// How many distinct terms of the question itself `terms` hold.
    pub(super) fn holds(&self, terms: &[String]) -> usize {
        self.asked_in(terms).count()
    }

    /// Whether `terms` hold a name or code of the question itself.
    pub(super) fn names(&self, terms: &[String]) -> bool {
        self.asked_in(terms).any(|q| q.key)
    }

    /// The terms of the question itself that `terms` hold.
    fn asked_in<'a>(&'a self, terms: &'a [String]) -> impl Iterator<Item = &'a QueryTerm> {
        self.terms
            .iter()
            .filter(move |q| q.asked && terms.contains(&q.term))
    }

    /// True when the question has no content term at all ("what is it?").
    pub(super) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Adds the terms of `text` (a term already present keeps its higher weight), `asked`
    /// when `text` is the question itself, in `part` when its terms count towards that
    /// part's coverage.
    fn add(&mut self, text: &str, weight: f32, asked: bool, part: Option<usize>) {
        let words: Vec<&str> = raw_words(text).collect();
        let capitalised = words
            .iter()
            .filter(|w| w.starts_with(char::is_uppercase))
            .count();
        // In a Question Written In Title Case every word looks like a name.
        let title_case = words.len() > 2 && capitalised * 2 > words.len();
        let mut previous = None;
        for (position, word) in words.into_iter().enumerate() {
            let Some(term) = term(word) else {
                continue;
            };
            let key = asked && is_key_word(word, position > 0 && !title_case);
            let id = match self.terms.iter().position(|q| q.term == term) {
                Some(id) => {
                    self.terms[id].key |= key;
                    if let Some(part) = part
                        && !self.terms[id].parts.contains(&part)
                    {
                        self.terms[id].parts.push(part);
                    }
                    id
                }
                None => {
                    self.terms.push(QueryTerm {
                        term,
                        weight,
                        asked,
                        parts: part.into_iter().collect(),
                        key,
                    });
                    self.terms.len() - 1
                }
            };
            if let Some(before) = previous
                && before != id
                && !self.phrases.iter().any(|&(a, b, _)| (a, b) == (before, id))
            {
                self.phrases.push((before, id, weight));
            }
            previous = Some(id);
        }
    }
}

/// Openings after which a question's sentence says what its quantity is made of, and the
/// words that end the name being defined ("X is defined as: A / B", "Define X as A + B",
/// "Calculate X using A and B").
const DEFINING: &[&str] = &[
    "defined as",
    "calculated as",
    "computed as",
    " as ",
    " using ",
];

/// What the definitions in `text` (the sentences after the question) define with: the text
/// after "defined as" and the like in each sentence that defines or calculates.
fn definitions(text: &str) -> Vec<&str> {
    text.split_inclusive(['.', ';', '?', '!'])
        .filter_map(|sentence| {
            let lower = sentence.to_ascii_lowercase();
            if !["defin", "calculat", "comput"]
                .iter()
                .any(|stem| lower.contains(stem))
            {
                return None;
            }
            DEFINING
                .iter()
                .find_map(|marker| lower.find(marker).map(|at| &sentence[at + marker.len()..]))
                .map(|defined| defined.trim_start_matches(|c: char| c == ':' || c.is_whitespace()))
        })
        .collect()
}

/// `question` as the text before the sentence that asks, that sentence, and the text after
/// it. The sentence that asks ends at the first "?" and begins after the sentence before it
/// (abbreviations and initials do not end one) or after a colon ("…cash flow statement.
/// Here's the question: what is …?"); a text with no "?" is all asking.
fn split_asking(question: &str) -> (&str, &str, &str) {
    let Some(end) = question.find('?') else {
        return ("", question, "");
    };
    let through = &question[..=end];
    let last = split_inline(through).pop().unwrap_or_default();
    let mut start = through.len() - last.len().min(through.len());
    if let Some(colon) = through[start..].rfind(": ") {
        start += colon + 1;
    }
    (
        &question[..start],
        question[start..=end].trim_start(),
        &question[end + 1..],
    )
}

/// Names and codes: "Ibuprofen" inside a question (when `capital_is_name`), "NASA", "XR",
/// "200", "D3".
fn is_key_word(word: &str, capital_is_name: bool) -> bool {
    let mut chars = word.chars();
    let first_upper = chars.next().is_some_and(char::is_uppercase);
    (first_upper && (capital_is_name || chars.any(char::is_uppercase)))
        || (word.chars().count() >= 2 && word.chars().any(|c| c.is_ascii_digit()))
}

/// How one sentence matches the question.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Match {
    /// BM25 plus phrase and context bonuses; 0 when no term of the question itself is in
    /// the sentence.
    pub score: f32,
    /// Share of the question's own IDF-weighted terms the sentence contains, 0 to 1.
    pub coverage: f32,
    /// Whether the sentence contains a key term of the question (a name or a code).
    pub key: bool,
    /// How many distinct terms of the question itself the sentence contains.
    pub terms: usize,
}

/// Scores sentences against a query, with IDF and average length taken from the sentences
/// given to [`Scorer::new`].
#[derive(Debug)]
pub(super) struct Scorer<'q> {
    query: &'q Query,
    ids: HashMap<&'q str, usize>,
    /// IDF of each query term, in the order of `query.terms`.
    idf: Vec<f32>,
    /// Sum of IDF over the terms of each part of the question: what its full coverage earns.
    totals: Vec<f32>,
    average_len: f32,
}

impl<'q> Scorer<'q> {
    /// Counts, for each query term, the sentences (given as their terms) that contain it.
    pub(super) fn new<'s>(query: &'q Query, sentences: impl Iterator<Item = &'s [String]>) -> Self {
        let ids: HashMap<&str, usize> = query
            .terms
            .iter()
            .enumerate()
            .map(|(id, q)| (q.term.as_str(), id))
            .collect();
        let mut df = vec![0usize; query.terms.len()];
        let mut seen = vec![usize::MAX; query.terms.len()];
        let (mut count, mut lengths) = (0usize, 0usize);
        for (n, sentence) in sentences.enumerate() {
            count += 1;
            lengths += sentence.len();
            for word in sentence {
                if let Some(&id) = ids.get(word.as_str())
                    && seen[id] != n
                {
                    seen[id] = n;
                    df[id] += 1;
                }
            }
        }
        let n = count as f32;
        // The smoothed BM25 IDF, always positive. A term no sentence has counts as if one
        // had it: its weight still says the passages miss part of the question, but an
        // unanswerable word ("interval" in "what interval applies?") does not outweigh the rest.
        let idf: Vec<f32> = df
            .iter()
            .map(|&df| {
                let df = df.max(1) as f32;
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let parts = query
            .terms
            .iter()
            .flat_map(|q| q.parts.iter().copied())
            .max()
            .map_or(0, |last| last + 1);
        let mut totals = vec![0.0; parts];
        for (q, idf) in query.terms.iter().zip(&idf) {
            if q.asked {
                q.parts.iter().for_each(|&part| totals[part] += idf);
            }
        }
        Self {
            query,
            ids,
            idf,
            totals,
            average_len: (lengths as f32 / count.max(1) as f32).max(1.0),
        }
    }

    /// How the sentence with terms `sentence` matches, in a passage whose section and
    /// document name have the terms `context`.
    pub(super) fn score(&self, sentence: &[String], context: &[String]) -> Match {
        let ids: Vec<Option<usize>> = sentence
            .iter()
            .map(|w| self.ids.get(w.as_str()).copied())
            .collect();
        let mut tf = vec![0u32; self.idf.len()];
        for id in ids.iter().flatten() {
            tf[*id] += 1;
        }
        // Sentences shorter than average are not boosted: BM25 would otherwise prefer a
        // terse fragment ("The pump is not self-priming.") to the sentence that explains.
        let len = (sentence.len() as f32).max(self.average_len);
        let norm = K1 * (1.0 - B + B * len / self.average_len);
        let (mut score, mut key, mut count) = (0.0, false, 0);
        let mut matched = vec![0.0; self.totals.len()];
        for (id, q) in self.query.terms.iter().enumerate() {
            if tf[id] == 0 {
                continue;
            }
            let tf = tf[id] as f32;
            score += q.weight * self.idf[id] * tf * (K1 + 1.0) / (tf + norm);
            if q.asked {
                q.parts
                    .iter()
                    .for_each(|&part| matched[part] += self.idf[id]);
                key |= q.key;
                count += 1;
            }
        }
        if count == 0 {
            return Match {
                score: 0.0,
                coverage: 0.0,
                key: false,
                terms: 0,
            };
        }
        for &(a, b, weight) in &self.query.phrases {
            if ids.windows(2).any(|w| w[0] == Some(a) && w[1] == Some(b)) {
                score += PHRASE_WEIGHT * weight * (self.idf[a] + self.idf[b]) / 2.0;
            }
        }
        for (id, q) in self.query.terms.iter().enumerate() {
            if tf[id] == 0 && context.contains(&q.term) {
                score += CONTEXT_WEIGHT * q.weight * self.idf[id];
            }
        }
        Match {
            score,
            coverage: matched
                .iter()
                .zip(&self.totals)
                .filter(|(_, total)| **total > 0.0)
                .map(|(matched, total)| matched / total)
                .fold(0.0, f32::max),
            key,
            terms: count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(question: &str) -> Turn {
        Turn {
            question: question.into(),
            answer: "…".into(),
        }
    }

    #[test]
    fn a_follow_up_borrows_the_previous_question_at_half_weight() {
        let query = Query::new(
            "and what about its side effects?",
            &[turn("What is ibuprofen used for?"), turn("thanks!")],
        );
        let weights: Vec<_> = query
            .terms
            .iter()
            .map(|q| (q.term.as_str(), q.weight))
            .collect();
        assert_eq!(
            weights,
            [
                ("sid", 1.0),
                ("effect", 1.0),
                ("ibuprofen", 0.5),
                ("use", 0.5)
            ]
        );
        let full = Query::new(
            "What are the side effects of ibuprofen?",
            &[turn("Dosage?")],
        );
        assert_eq!(full.terms.len(), 3);
    }

    #[test]
    fn names_and_codes_are_key_terms() {
        let query = Query::new("What flow does the XR-200 reach with Ibuprofen pumps?", &[]);
        let keys: Vec<_> = query
            .terms
            .iter()
            .filter(|q| q.key)
            .map(|q| q.term.as_str())
            .collect();
        assert_eq!(keys, ["xr", "200", "ibuprofen"]);
        let title = Query::new("How Do I Prime The XR-200 Pump?", &[]);
        let keys: Vec<_> = title
            .terms
            .iter()
            .filter(|q| q.key)
            .map(|q| q.term.as_str())
            .collect();
        assert_eq!(keys, ["xr", "200"]);
    }

    #[test]
    fn rare_terms_phrases_and_length_decide() {
        let sentences: Vec<Vec<String>> = [
            "The pump is not self-priming.",
            "Prime the pump by filling the casing with water through the priming plug.",
            "The pump housing is made of cast iron.",
            "Check the pump seal every month.",
        ]
        .iter()
        .map(|s| terms(s))
        .collect();
        let query = Query::new("How do I prime the pump?", &[]);
        let scorer = Scorer::new(&query, sentences.iter().map(Vec::as_slice));
        let scores: Vec<Match> = sentences.iter().map(|s| scorer.score(s, &[])).collect();
        assert!(scores[1].score > scores[0].score, "{scores:?}");
        assert!(scores[0].score > scores[2].score, "{scores:?}");
        assert_eq!(scores[1].coverage, 1.0);
        assert!(scores[2].coverage < 0.3, "{scores:?}");
        let context = terms("Priming");
        assert!(scorer.score(&sentences[3], &context).score > scores[3].score);
    }

    #[test]
    fn a_term_no_sentence_has_weighs_like_the_rarest_one() {
        let sentences = [
            terms("Replace the filter cartridge every six months."),
            terms("The cartridge is sold by all dealers."),
            terms("Flush the filter housing with water."),
        ];
        // "interval" and "applies" are nowhere: at full IDF they would leave the answer
        // below any sensible coverage threshold.
        let query = Query::new("What interval applies to replacing the cartridge?", &[]);
        let scorer = Scorer::new(&query, sentences.iter().map(Vec::as_slice));
        let found = scorer.score(&sentences[0], &[]);
        assert!(found.coverage > 0.4 && found.coverage < 0.5, "{found:?}");
    }

    #[test]
    fn borrowed_terms_rank_but_do_not_make_a_sentence_relevant() {
        let history = [turn("What is ibuprofen used for?")];
        let query = Query::new("and its side effects?", &history);
        let sentences = [
            terms("Ibuprofen is used to relieve pain."),
            terms("Side effects of ibuprofen include nausea."),
            terms("Side effects of paracetamol are rare."),
        ];
        let scorer = Scorer::new(&query, sentences.iter().map(Vec::as_slice));
        let [borrowed, both, other] = [0, 1, 2].map(|n| scorer.score(&sentences[n], &[]));
        assert_eq!(borrowed.score, 0.0);
        assert!(both.score > other.score, "{both:?} {other:?}");
        assert_eq!(both.coverage, 1.0);
        assert_eq!(other.coverage, 1.0);

        let why = Query::new("Why?", &history);
        assert!(!why.is_empty());
        let scorer = Scorer::new(&why, sentences.iter().map(Vec::as_slice));
        assert!(scorer.score(&sentences[0], &[]).coverage > 0.99);
    }

    #[test]
    fn the_question_s_phrase_outranks_the_same_words_apart() {
        let sentences = [
            terms("Prime the pump with water from the tank before use."),
            terms("Pump water from the tank to prime it before use."),
        ];
        let query = Query::new("How do I prime the pump?", &[]);
        let scorer = Scorer::new(&query, sentences.iter().map(Vec::as_slice));
        let [together, apart] = [0, 1].map(|n| scorer.score(&sentences[n], &[]).score);
        assert!(together > apart * 1.2, "{together} {apart}");
    }

    #[test]
    fn the_sentence_that_asks_and_its_definitions_are_what_is_covered() {
        let question = "You are an analyst. Here's the question: what is the operating cash \
                        flow ratio for Acme? It is defined as: cash from operations / total \
                        current liabilities. Round your answer to two decimal places.";
        let (before, asking, after) = split_asking(question);
        assert_eq!(before, "You are an analyst. Here's the question:");
        assert_eq!(asking, "what is the operating cash flow ratio for Acme?");
        assert_eq!(
            definitions(after),
            ["cash from operations / total current liabilities."]
        );
        let query = Query::new(question, &[]);
        let sentences: Vec<Vec<String>> = [
            "Total current liabilities 2,213.6 1,900.1",
            "Round the figures to two decimal places.",
            "The operating cash flow ratio of Acme rose.",
            "Revenue grew in every region.",
        ]
        .iter()
        .map(|s| terms(s))
        .collect();
        let scorer = Scorer::new(&query, sentences.iter().map(Vec::as_slice));
        let found: Vec<Match> = sentences.iter().map(|s| scorer.score(s, &[])).collect();
        // A term of the definition is part of the question: its row covers that part.
        assert!(found[0].coverage >= 0.5, "{:?}", found[0]);
        // Instructions rank a sentence but are not what is asked.
        assert!(
            found[1].score > 0.0 && found[1].coverage == 0.0,
            "{:?}",
            found[1]
        );
        assert!(found[2].coverage >= 0.9, "{:?}", found[2]);
        assert_eq!(found[3].score, 0.0);
        // Abbreviations and initials do not end the sentence that asks.
        assert_eq!(
            split_asking("What did Dr. Smith and the U.S. Army find? Say briefly."),
            (
                "",
                "What did Dr. Smith and the U.S. Army find?",
                " Say briefly."
            )
        );
        // Without a "?", the whole text asks.
        assert_eq!(split_asking("prime the pump"), ("", "prime the pump", ""));
    }
}
