//! The built-in extractive answerer: the default when no language model is configured. It
//! does not write; it quotes the few sentences of the retrieved passages that best match the
//! question, each followed by its passage's `[n]` marker, or says plainly that the passages
//! do not answer.
//!
//! The passages are cut into sentences ([`super::sentences`]), every sentence is scored
//! against the question with BM25 over all of them ([`super::relevance`]), weighted by the
//! rank retrieval gave its passage (a strong prior: retrieval saw the whole passage and its
//! meaning) and a little by whether it reads as a finding rather than a method, and the best
//! are taken greedily, one document at a time, skipping any that repeats one already taken
//! and any that matches too little of the question to be an answer (the top-ranked passage
//! needs less).

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;

use super::relevance::{Match, Query, Scorer};
use super::sentences::{is_table_row, split_sentences};
use super::support::{Demands, DocumentWords, Support};
use super::terms::terms;
use super::{GenerateError, Generator, Grounding, Passage, TextStream, Turn};

/// The whole answer when no passage answers the question (or there are none).
pub const NO_ANSWER: &str =
    "The documents available to this key do not appear to answer this question.";

/// How fast the rank weight decays: 1 / (1 + RANK_DECAY × rank), so 1, 0.8, 0.67, 0.57…
const RANK_DECAY: f32 = 0.25;
/// Share of the rank weight that follows the passage's search score relative to the top one.
const SCORE_SHARE: f32 = 0.2;
/// Share of the coverage threshold enough for the best sentence of the top-ranked passage
/// (the one that best matches the question): retrieval, which saw
/// the whole passage (and its meaning, not only its words), vouches for it. It still needs
/// a term of the question, so an unrelated passage set gives no answer.
const TOP_GATE_SHARE: f32 = 0.25;
/// Most sentences quoted from one document while other documents have relevant ones.
const MAX_PER_DOCUMENT: usize = 1;
/// Weight of a sentence that sets out the aim or the method ("Here, we test…").
const SETUP_FACTOR: f32 = 0.8;
/// Weight of a sentence that reports a finding ("… reduced the risk …").
const FINDING_FACTOR: f32 = 1.15;
/// Sentences scoring below this share of the best one are not quoted: a strong answer is
/// not diluted by marginal matches that merely pass the coverage threshold.
const RELATIVE_FLOOR: f32 = 0.25;
/// A sentence sharing more than this (Jaccard) of its terms with one already chosen repeats
/// it (the chunker's overlap, the same paragraph in two versions of a manual).
const MAX_OVERLAP: f32 = 0.6;

/// Settings of [`Extractive`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExtractiveSettings {
    /// Most sentences quoted in one answer (at least 1).
    pub max_sentences: usize,
    /// Share (0–1) of the question's terms, weighted by IDF, that a sentence must contain to
    /// be quoted; half of it is enough when the sentence has a name or code of the question.
    pub min_coverage: f32,
}

impl Default for ExtractiveSettings {
    fn default() -> Self {
        Self {
            max_sentences: 3,
            min_coverage: 0.3,
        }
    }
}

/// Answers by quoting the most relevant sentences of the passages, with their markers.
#[derive(Debug, Clone, Default)]
pub struct Extractive {
    settings: ExtractiveSettings,
}

impl Extractive {
    /// An answerer with these settings (out-of-range values are brought into range).
    pub fn new(settings: ExtractiveSettings) -> Self {
        let min_coverage = if settings.min_coverage.is_nan() {
            ExtractiveSettings::default().min_coverage
        } else {
            settings.min_coverage.clamp(0.0, 1.0)
        };
        Self {
            settings: ExtractiveSettings {
                max_sentences: settings.max_sentences.max(1),
                min_coverage,
            },
        }
    }

    /// The answer as pieces, one quoted sentence with its marker each (every piece after
    /// the first starts with the separating space), or the single piece [`NO_ANSWER`].
    pub fn answer_pieces(&self, grounding: &Grounding) -> Vec<String> {
        let (chosen, also) = self.choose(grounding);
        if chosen.is_empty() {
            return vec![NO_ANSWER.to_owned()];
        }
        let mut pieces: Vec<String> = chosen
            .iter()
            .enumerate()
            .map(|(n, c)| {
                let space = if n == 0 { "" } else { " " };
                let index = grounding.passages[c.passage].index;
                format!("{space}{} [{index}]", c.text)
            })
            .collect();
        if !also.is_empty() {
            let markers: Vec<String> = also
                .iter()
                .map(|&p| format!("[{}]", grounding.passages[p].index))
                .collect();
            pieces.push(format!(" {SEE_ALSO} {}", markers.join(" ")));
        }
        pieces
    }

    /// The sentences to quote, in the order they are given, and the other passages (by
    /// position) that hold a sentence on the question, to be named after them.
    fn choose(&self, grounding: &Grounding) -> (Vec<Candidate>, Vec<usize>) {
        let query = Query::new(&grounding.question, &grounding.history);
        if query.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let candidates = candidates(&grounding.passages);
        let texts: HashMap<(usize, usize), String> = candidates
            .iter()
            .map(|c| ((c.passage, c.order), c.text.clone()))
            .collect();
        let scorer = Scorer::new(&query, candidates.iter().map(|c| c.terms.as_slice()));
        let contexts: Vec<Vec<String>> = grounding.passages.iter().map(context_terms).collect();
        // A follow-up was searched together with the previous question, so the passages'
        // order mixes the two subjects: there the sentence match alone decides.
        let priors = if query.borrows() {
            vec![1.0; grounding.passages.len()]
        } else {
            priors(&grounding.passages)
        };
        let found: Vec<Match> = candidates
            .iter()
            .map(|c| scorer.score(&c.terms, &contexts[c.passage]))
            .collect();
        let demands = Demands::of(&grounding.question);
        let documents = document_words(&grounding.passages);
        let retrieved = DocumentWords::of(
            grounding
                .passages
                .iter()
                .flat_map(|p| [p.document_name.as_str(), p.content.as_str()]),
        );
        let supported: Vec<Support> = candidates
            .iter()
            .map(|c| {
                let passage = &grounding.passages[c.passage];
                demands.support(
                    &c.text,
                    frame(passage, &c.text),
                    &documents[passage.document_name.as_str()],
                    &retrieved,
                )
            })
            .collect();
        // Passages with a sentence on the question that the question's names and numbers
        // support: the further sources an answer names after its quotes.
        let mut on_question: Vec<Vec<Candidate>> = vec![Vec::new(); grounding.passages.len()];
        // The sentences of each passage, to tell a page that repeats a quote.
        let mut sentences: Vec<Vec<Candidate>> = vec![Vec::new(); grounding.passages.len()];
        for (n, c) in candidates.iter().enumerate() {
            if supported[n] == Support::Supported && self.is_on_question(found[n]) {
                on_question[c.passage].push(c.clone());
            }
            sentences[c.passage].push(c.clone());
        }
        // Passages that speak of the question: two of its terms in the heading and text, or
        // a name of it in the heading (a statement's page is headed by the company's name;
        // its text, figures, may hold no other word of the question). A name in the text
        // alone is not enough: every page of a company's filing names it somewhere.
        let speaks: Vec<bool> = grounding
            .passages
            .iter()
            .map(|p| {
                let heading = p.section.as_deref().map(terms).unwrap_or_default();
                let mut words = terms(&p.content);
                words.extend_from_slice(&heading);
                query.holds(&words) >= 2 || query.names(&heading)
            })
            .collect();
        // The best sentence of the top-ranked passage needs less of the question's words.
        let top = (0..candidates.len())
            .filter(|&n| candidates[n].passage == 0)
            .max_by(|&a, &b| found[a].score.total_cmp(&found[b].score).then(b.cmp(&a)));
        let mut scored: Vec<(f32, Candidate, Support)> = candidates
            .into_iter()
            .zip(found)
            .enumerate()
            .filter_map(|(n, (c, found))| {
                self.is_relevant(found, Some(n) == top).then(|| {
                    (
                        found.score * priors[c.passage] * tone(&c.text),
                        c,
                        supported[n],
                    )
                })
            })
            .collect();
        // Best first; ties go to the earlier passage and sentence, so the output is stable.
        scored.sort_by(|(a, x, _), (b, y, _)| {
            b.total_cmp(a)
                .then(x.passage.cmp(&y.passage))
                .then(x.order.cmp(&y.order))
        });
        // The floor is set by the best match, supported or not: when the sentences that match
        // the question best cannot answer it, a weak match that can is a coincidence.
        let best = scored.first().map_or(0.0, |(score, _, _)| *score);
        let document = |c: &Candidate| grounding.passages[c.passage].document_name.as_str();
        let mut chosen: Vec<Candidate> = Vec::new();
        // Sentences of a document already quoted, kept for when no other document has any.
        let mut held: Vec<Candidate> = Vec::new();
        for (score, candidate, supported) in scored {
            if chosen.len() == self.settings.max_sentences || score < RELATIVE_FLOOR * best {
                break;
            }
            match supported {
                Support::Supported => {}
                // The best match's document does not say what the question says: the
                // question is about something else, and weaker matches are coincidences.
                Support::Contradicted if chosen.is_empty() && held.is_empty() => break,
                Support::Contradicted | Support::Unfit => continue,
            }
            if chosen.iter().all(|c| overlap(c, &candidate) <= MAX_OVERLAP) {
                let quoted = chosen
                    .iter()
                    .filter(|c| document(c) == document(&candidate))
                    .count();
                if quoted >= MAX_PER_DOCUMENT {
                    held.push(candidate);
                } else {
                    chosen.push(candidate);
                }
            }
        }
        // One document gives more sentences only when no other fills the answer: the chunks
        // of one document say one thing, and the next document is the likelier second source.
        for candidate in held {
            if chosen.len() == self.settings.max_sentences {
                break;
            }
            if chosen.iter().all(|c| overlap(c, &candidate) <= MAX_OVERLAP) {
                chosen.push(candidate);
            }
        }
        // A quote goes on into the next sentence when that one refers back to it ("His
        // orders were …") or speaks of the question too: the sentence that matches a
        // question best often restates it, and the answer follows. A table's row is a fact
        // of its own, and the next row another.
        let quoted: HashSet<(usize, usize)> = chosen.iter().map(|c| (c.passage, c.order)).collect();
        for quote in &mut chosen {
            if is_table_row(&quote.text) {
                continue;
            }
            if let Some(next) = texts.get(&(quote.passage, quote.order + 1))
                && !quoted.contains(&(quote.passage, quote.order + 1))
                && (refers_back(next) || query.shares_a_term(&terms(next)))
            {
                quote.text = format!("{} {next}", quote.text);
            }
        }
        // Relevance order, best first (one quote per document, then the held ones): the reader
        // (often an agent) takes the first quote as the answer, and grouping by passage in
        // document order would open with whatever precedes it ("The pump is not
        // self-priming." before the priming steps).
        let also = if chosen.is_empty() {
            Vec::new()
        } else {
            further_sources(
                &grounding.passages,
                &chosen,
                &Further {
                    on_question: &on_question,
                    speaks: &speaks,
                    sentences: &sentences,
                },
            )
        };
        (chosen, also)
    }

    /// Whether a sentence matching as `found` is on the question, enough to name its passage
    /// as a further source: the gate of the top-ranked passage's best sentence.
    fn is_on_question(&self, found: Match) -> bool {
        found.score > 0.0
            && (found.terms >= 2 || found.key)
            && found.coverage >= self.settings.min_coverage * TOP_GATE_SHARE
    }

    /// Whether the sentence matching as `found` may be quoted; `vouched` for the best
    /// sentence of the top-ranked passage.
    fn is_relevant(&self, found: Match, vouched: bool) -> bool {
        let needed = self.settings.min_coverage;
        let strict = found.coverage >= needed || (found.key && found.coverage >= needed / 2.0);
        // Retrieval's vouching still needs two of the question's terms (or a name): one shared
        // word ("weekly") is a coincidence, not a topic.
        let relaxed =
            vouched && (found.terms >= 2 || found.key) && found.coverage >= needed * TOP_GATE_SHARE;
        found.score > 0.0 && (strict || relaxed)
    }
}

/// The words that introduce the further sources after the quotes.
pub const SEE_ALSO: &str = "See also";

/// What tells a passage worth naming after the quotes, by position.
struct Further<'a> {
    /// Its sentences on the question that the question's names and numbers support.
    on_question: &'a [Vec<Candidate>],
    /// Whether its heading and text hold two terms of the question, or its heading a name.
    speaks: &'a [bool],
    /// All its sentences.
    sentences: &'a [Vec<Candidate>],
}

/// The passages (by position, in rank order) that no quote cites or repeats, where the
/// reader checks what the quotes leave out (a filing's other statements, the other pages of
/// a manual): those with a sentence on the question, and the other pages of a quoted
/// document that speak of the question (its balance sheet, when the quote is from its cash
/// flow statement: retrieval found them, and the quote vouches for the document). A page is
/// named once. Only a repeat within the quote's own document is left out (the chunker's
/// overlap, a manual saying it twice): the same words in another document (next year's
/// filing) are another source.
fn further_sources(passages: &[Passage], chosen: &[Candidate], further: &Further) -> Vec<usize> {
    let place = |p: usize| (passages[p].document_name.as_str(), passages[p].page);
    let document = |p: usize| passages[p].document_name.as_str();
    let new = |p: usize, s: &Candidate| {
        chosen
            .iter()
            .all(|c| document(c.passage) != document(p) || overlap(c, s) <= MAX_OVERLAP)
    };
    let quoted: HashSet<&str> = chosen.iter().map(|c| document(c.passage)).collect();
    let mut named: HashSet<(&str, Option<u32>)> = chosen.iter().map(|c| place(c.passage)).collect();
    (0..passages.len())
        .filter(|&p| {
            let on_question = further.on_question[p].iter().any(|s| new(p, s));
            let sentences = &further.sentences[p];
            let of_a_quoted_document = further.speaks[p]
                && quoted.contains(document(p))
                && (sentences.is_empty() || sentences.iter().any(|s| new(p, s)));
            (on_question || of_a_quoted_document) && named.insert(place(p))
        })
        .collect()
}

/// Openings of a sentence that goes on about the one before it.
const REFERRING_OPENINGS: &[&str] = &[
    "he", "her", "his", "it", "its", "she", "such", "that", "their", "these", "they", "this",
    "those",
];

/// Whether `sentence` opens by referring back to the sentence before it.
fn refers_back(sentence: &str) -> bool {
    super::terms::raw_words(sentence).next().is_some_and(|w| {
        REFERRING_OPENINGS
            .binary_search(&w.to_lowercase().as_str())
            .is_ok()
    })
}

/// A sentence that may be quoted.
#[derive(Debug, Clone)]
struct Candidate {
    /// Position of its passage in the grounding (the rank), not the marker number.
    passage: usize,
    /// Position in its passage.
    order: usize,
    text: String,
    terms: Vec<String>,
}

fn candidates(passages: &[Passage]) -> Vec<Candidate> {
    let mut candidates = Vec::new();
    for (passage, p) in passages.iter().enumerate() {
        for (order, text) in split_sentences(&p.content).into_iter().enumerate() {
            let terms = terms(&text);
            if !terms.is_empty() {
                candidates.push(Candidate {
                    passage,
                    order,
                    text,
                    terms,
                });
            }
        }
    }
    candidates
}

/// The words of each document's retrieved passages and of its name, by document name: where
/// a question's names and numbers are looked for.
fn document_words(passages: &[Passage]) -> HashMap<&str, DocumentWords> {
    let mut texts: HashMap<&str, Vec<&str>> = HashMap::new();
    for passage in passages {
        texts
            .entry(passage.document_name.as_str())
            .or_insert_with(|| vec![passage.document_name.as_str()])
            .push(passage.content.as_str());
    }
    texts
        .into_iter()
        .map(|(name, texts)| (name, DocumentWords::of(texts)))
        .collect()
}

/// What qualifies `sentence` of `passage` beside the sentence itself: a table row (cells
/// joined by ` | `, or a PDF's line of figures) is read under its table, whose header names
/// the columns; a sentence under its section heading.
fn frame<'p>(passage: &'p Passage, sentence: &str) -> &'p str {
    if is_table_row(sentence) {
        &passage.content
    } else {
        passage.section.as_deref().unwrap_or_default()
    }
}

/// Terms of the passage's section and document name (without extension), which often name
/// the subject its sentences leave implicit ("Priming", "ibuprofen-leaflet.pdf").
fn context_terms(passage: &Passage) -> Vec<String> {
    let name = passage
        .document_name
        .rsplit_once('.')
        .map_or(passage.document_name.as_str(), |(stem, _)| stem);
    let mut context = terms(name);
    context.extend(passage.section.as_deref().map(terms).unwrap_or_default());
    context
}

/// The multiplier of each passage's sentence scores: a weight that decays clearly with the
/// rank, times a smaller factor for the search score relative to the top passage's.
/// Multiplying (not adding) keeps a passage's rank from lifting a sentence that matches
/// nothing.
fn priors(passages: &[Passage]) -> Vec<f32> {
    let top = passages.first().map_or(0.0, |p| p.score);
    passages
        .iter()
        .enumerate()
        .map(|(rank, p)| {
            let relative = if top > 0.0 && p.score.is_finite() {
                (p.score / top).clamp(0.0, 1.0)
            } else {
                1.0
            };
            (1.0 - SCORE_SHARE + SCORE_SHARE * relative) / (1.0 + RANK_DECAY * rank as f32)
        })
        .collect()
}

/// Openings of sentences that set out the question or the method rather than an answer.
const SETUP_OPENINGS: &[&str] = &[
    "here we",
    "here, we",
    "we hypothes",
    "to test",
    "to investigate",
    "to determine",
    "to examine",
    "to assess",
    "to evaluate",
    "to explore",
    "to address",
    "in this study",
    "in the present study",
    "in this paper",
    "in this work",
    "in this review",
    "we investigated",
    "we examined",
    "we studied",
    "we sought",
    "we aimed",
    "we performed",
    "we conducted",
    "we used",
    "we analy",
    "we measured",
    "we tested",
    "the aim",
    "the purpose",
    "the objective",
    "the goal",
    "methods",
    "method",
    "background",
    "objective",
    "objectives",
    "aims",
    "aim",
    "purpose",
    "design",
    "setting",
    "participants",
    "context",
    "importance",
    "introduction",
];
/// Words that report a finding.
const FINDING_WORDS: &[&str] = &[
    "associated with",
    "reduced",
    "reduces",
    "increased",
    "increases",
    "decreased",
    "decreases",
    "significantly",
    "significant",
    "showed",
    "shows",
    "we found",
    "we show",
    "we demonstrate",
    "demonstrated",
    "conclusion",
    "results",
    "resulted in",
    "led to",
    "improved",
    "higher",
    "lower",
    "inhibit",
    "induce",
    "required",
    "correlated",
];

/// How much a sentence reads as a finding: below 1 for set-up sentences, above 1 for
/// sentences that report a result.
fn tone(text: &str) -> f32 {
    let lower = text.trim_start().to_lowercase();
    // A one-word opening is a heading ("Methods:", "Background"), so a whole word; the
    // longer ones may end in a stem ("We hypothesized").
    let setup = SETUP_OPENINGS.iter().any(|o| {
        lower.starts_with(o)
            && (o.contains(' ') || !lower[o.len()..].starts_with(char::is_alphanumeric))
    });
    let finding = FINDING_WORDS.iter().any(|w| lower.contains(w));
    let mut tone = 1.0;
    if setup {
        tone *= SETUP_FACTOR;
    }
    if finding {
        tone *= FINDING_FACTOR;
    }
    tone
}

/// Jaccard similarity of the two sentences' term sets.
fn overlap(a: &Candidate, b: &Candidate) -> f32 {
    let a: HashSet<&str> = a.terms.iter().map(String::as_str).collect();
    let b: HashSet<&str> = b.terms.iter().map(String::as_str).collect();
    let shared = a.intersection(&b).count();
    shared as f32 / (a.len() + b.len() - shared).max(1) as f32
}

#[async_trait]
impl Generator for Extractive {
    fn name(&self) -> String {
        "extractive".into()
    }

    fn is_extractive(&self) -> bool {
        true
    }

    async fn condense(&self, _: &[Turn], _: &str) -> Result<Option<String>, GenerateError> {
        Ok(None)
    }

    async fn answer(&self, grounding: &Grounding) -> Result<TextStream, GenerateError> {
        let pieces = self.answer_pieces(grounding);
        Ok(Box::pin(futures_util::stream::iter(
            pieces.into_iter().map(Ok),
        )))
    }
}

#[cfg(test)]
#[path = "extractive_tests.rs"]
mod tests;
