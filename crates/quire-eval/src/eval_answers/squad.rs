//! SQuAD 2.0 for `quire eval answers`: its questions and paragraphs, and how an answer is
//! scored. An answerable question is answered when the answer contains one of its gold
//! answers (compared as SQuAD's own evaluation normalises text: lower case, no punctuation,
//! no articles, single spaces) and cites its paragraph; an unanswerable one is abstained on
//! when the answer cites nothing.

use std::path::Path;

use anyhow::Context as _;
use quire_app::answers::CollectedAnswer;

use crate::bench::read_jsonl;

/// A paragraph questions are asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// `context_id` ("Normans#0").
    pub id: String,
    /// Its text.
    pub text: String,
}

/// A question about one paragraph.
#[derive(Debug, Clone, PartialEq)]
pub struct SquadQuestion {
    /// SQuAD's id.
    pub id: String,
    /// What is asked.
    pub text: String,
    /// The paragraph it is about.
    pub context_id: String,
    /// Its gold answers; empty for a question the paragraph does not answer.
    pub answers: Vec<String>,
}

impl SquadQuestion {
    /// Whether the paragraph answers it.
    pub fn answerable(&self) -> bool {
        !self.answers.is_empty()
    }
}

/// The paragraphs of a `contexts.jsonl`.
pub fn read_contexts(path: &Path) -> anyhow::Result<Vec<Context>> {
    let mut out = Vec::new();
    for (n, line) in read_jsonl(&path.to_path_buf(), usize::MAX)?
        .iter()
        .enumerate()
    {
        out.push(Context {
            id: string(line, "context_id")
                .with_context(|| format!("{}: context {}", path.display(), n + 1))?,
            text: string(line, "text")
                .with_context(|| format!("{}: context {}", path.display(), n + 1))?,
        });
    }
    anyhow::ensure!(!out.is_empty(), "{} holds no contexts", path.display());
    Ok(out)
}

/// The questions of a flattened SQuAD 2.0 `questions.jsonl`.
pub fn read_squad_questions(path: &Path) -> anyhow::Result<Vec<SquadQuestion>> {
    let mut out = Vec::new();
    for (n, line) in read_jsonl(&path.to_path_buf(), usize::MAX)?
        .iter()
        .enumerate()
    {
        let question = (|| {
            let impossible = line["is_impossible"].as_bool().unwrap_or(false);
            let answers = if impossible {
                Vec::new()
            } else {
                let answers: Vec<String> = line["answers"]
                    .as_array()
                    .context("no `answers` array")?
                    .iter()
                    .filter_map(|a| a["text"].as_str().map(str::to_owned))
                    .collect();
                anyhow::ensure!(
                    !answers.is_empty(),
                    "an answerable question without answers"
                );
                answers
            };
            Ok(SquadQuestion {
                id: string(line, "id")?,
                text: string(line, "question")?,
                context_id: string(line, "context_id")?,
                answers,
            })
        })()
        .with_context(|| format!("{}: question {}", path.display(), n + 1))?;
        out.push(question);
    }
    anyhow::ensure!(!out.is_empty(), "{} holds no questions", path.display());
    Ok(out)
}

fn string(line: &serde_json::Value, field: &str) -> anyhow::Result<String> {
    line[field]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no string `{field}`"))
}

/// The document a paragraph is ingested as: its id made a file name ("Normans#0" →
/// "Normans-0.txt").
pub fn document_name(context_id: &str) -> String {
    let stem: String = context_id
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{stem}.txt")
}

/// SQuAD's normalisation: lower case, punctuation removed, the articles a/an/the dropped,
/// whitespace collapsed. Unlike SQuAD's (ASCII punctuation deleted), every character that is
/// neither a letter nor a digit separates words, so "Dyrrachium—one" holds "Dyrrachium":
/// containment is judged on words, where SQuAD compares whole spans.
pub fn normalize(text: &str) -> String {
    let lower = text.to_lowercase();
    let no_punctuation: String = lower
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    no_punctuation
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The answer's text without its `[n]` markers (a marker's number must not count as an
/// answer "1").
fn without_markers(answer: &str) -> String {
    let mut out = String::with_capacity(answer.len());
    let mut rest = answer;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(']') {
            Some(close) if close > 0 && after[..close].chars().all(|c| c.is_ascii_digit()) => {
                rest = &after[close + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether `answer` contains one of `gold`, word for word after normalising both.
pub fn contains_gold(answer: &str, gold: &[String]) -> bool {
    let answer = format!(" {} ", normalize(&without_markers(answer)));
    gold.iter().any(|g| {
        let g = normalize(g);
        !g.is_empty() && answer.contains(&format!(" {g} "))
    })
}

/// How one question was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The question's id.
    pub id: String,
    /// Whether the paragraph answers it.
    pub answerable: bool,
    /// The answer cites nothing.
    pub abstained: bool,
    /// The answer contains a gold answer.
    pub contains_gold: bool,
    /// Among the cited passages is the question's paragraph.
    pub cites_paragraph: bool,
    /// The answer, for examples.
    pub text: String,
}

impl Outcome {
    /// Scores `answer` to `question`, whose paragraph was ingested as `document`.
    pub fn of(question: &SquadQuestion, document: &str, answer: &CollectedAnswer) -> Self {
        Self {
            id: question.id.clone(),
            answerable: question.answerable(),
            abstained: answer.citations.is_empty(),
            contains_gold: contains_gold(&answer.text, &question.answers),
            cites_paragraph: answer.citations.iter().any(|c| c.document_name == document),
            text: answer.text.clone(),
        }
    }

    /// Answered as it should be: a gold answer, citing its paragraph.
    pub fn answered(&self) -> bool {
        self.contains_gold && self.cites_paragraph
    }
}

/// One line of `--dump`: the question, its gold answers, the answer, what it cites and how it
/// was scored.
pub fn dump_line(
    question: &SquadQuestion,
    answer: &CollectedAnswer,
    outcome: &Outcome,
) -> serde_json::Value {
    serde_json::json!({
        "id": question.id,
        "question": question.text,
        "contextId": question.context_id,
        "gold": question.answers,
        "answer": answer.text,
        "citations": answer.citations.iter().map(|c| serde_json::json!({
            "index": c.index,
            "document": c.document_name,
            "content": c.content,
            "score": c.score,
        })).collect::<Vec<_>>(),
        "answerable": outcome.answerable,
        "abstained": outcome.abstained,
        "containsGold": outcome.contains_gold,
        "citesParagraph": outcome.cites_paragraph,
    })
}

/// Tells whether an outcome is one kind of miss.
type MissKind = fn(&Outcome) -> bool;

/// The shares the report gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// Answerable questions asked.
    pub answerable: usize,
    /// Of them, answered with a gold answer citing the paragraph.
    pub answered: usize,
    /// Of them, citing the paragraph (whatever the text).
    pub cited: usize,
    /// Of them, containing a gold answer (cited or not: a model may write no markers).
    pub containing: usize,
    /// Of them, abstained on.
    pub wrongly_abstained: usize,
    /// Unanswerable questions asked.
    pub unanswerable: usize,
    /// Of them, abstained on.
    pub abstained: usize,
}

impl Report {
    /// Counts `outcomes`.
    pub fn of(outcomes: &[Outcome]) -> Self {
        let answerable: Vec<&Outcome> = outcomes.iter().filter(|o| o.answerable).collect();
        let unanswerable: Vec<&Outcome> = outcomes.iter().filter(|o| !o.answerable).collect();
        Self {
            answerable: answerable.len(),
            answered: answerable.iter().filter(|o| o.answered()).count(),
            cited: answerable.iter().filter(|o| o.cites_paragraph).count(),
            containing: answerable.iter().filter(|o| o.contains_gold).count(),
            wrongly_abstained: answerable.iter().filter(|o| o.abstained).count(),
            unanswerable: unanswerable.len(),
            abstained: unanswerable.iter().filter(|o| o.abstained).count(),
        }
    }

    /// Prints the shares and up to `examples` questions of each kind of miss.
    pub fn print(
        &self,
        generator: &str,
        questions: &[&SquadQuestion],
        outcomes: &[Outcome],
        examples: usize,
    ) {
        let share = |n: usize, of: usize| n as f64 / of.max(1) as f64;
        println!(
            "\nanswers ({generator}): {} questions\n\
             answerable   {:>5}: answered with a gold answer citing its paragraph {:.3} ({}), \
             citing its paragraph {:.3}, containing a gold answer (cited or not) {:.3}, \
             abstained {:.3}\n\
             unanswerable {:>5}: abstained {:.3} ({})",
            questions.len(),
            self.answerable,
            share(self.answered, self.answerable),
            self.answered,
            share(self.cited, self.answerable),
            share(self.containing, self.answerable),
            share(self.wrongly_abstained, self.answerable),
            self.unanswerable,
            share(self.abstained, self.unanswerable),
            self.abstained,
        );
        if examples == 0 {
            return;
        }
        let kinds: [(&str, MissKind); 3] = [
            ("answerable, abstained", |o| o.answerable && o.abstained),
            ("answerable, answered without a gold answer", |o| {
                o.answerable && !o.abstained && !o.answered()
            }),
            ("unanswerable, answered", |o| !o.answerable && !o.abstained),
        ];
        for (kind, is) in kinds {
            println!("\n{kind}:");
            for (q, o) in questions
                .iter()
                .zip(outcomes)
                .filter(|(_, o)| is(o))
                .take(examples)
            {
                println!(
                    "- {} ({})\n  gold {:?}\n  got  {}",
                    q.text, q.id, q.answers, o.text
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gold_answers_are_found_as_squad_normalises_them() {
        let gold = vec!["the 10th and 11th centuries".to_owned()];
        assert!(contains_gold(
            "The Normans were in Normandy in the 10th and 11th Centuries. [1]",
            &gold
        ));
        assert!(!contains_gold("In the 10th century. [1]", &gold));
        // Whole words only, and a marker is not an answer.
        assert!(!contains_gold("France. [1]", &["1".to_owned()]));
        assert!(!contains_gold("Frances [1]", &["France".to_owned()]));
        assert!(contains_gold("in 1066 [2]", &["1066".to_owned()]));
        assert!(contains_gold(
            "Dyrrachium\u{2014}one of the naval bases [1]",
            &["Dyrrachium".to_owned()]
        ));
        assert!(!contains_gold("anything", &[]));
    }

    #[test]
    fn markers_are_removed_but_other_brackets_stay() {
        assert_eq!(without_markers("a [1] b [12]"), "a  b ");
        assert_eq!(without_markers("[x] and [] [3"), "[x] and [] [3");
    }

    #[test]
    fn context_ids_become_file_names() {
        assert_eq!(document_name("Normans#0"), "Normans-0.txt");
        assert_eq!(document_name("Super_Bowl_50#12"), "Super_Bowl_50-12.txt");
    }

    #[test]
    fn a_report_counts_each_kind() {
        let outcome = |answerable, abstained, contains_gold, cites_paragraph| Outcome {
            id: String::new(),
            answerable,
            abstained,
            contains_gold,
            cites_paragraph,
            text: String::new(),
        };
        let report = Report::of(&[
            outcome(true, false, true, true),
            outcome(true, false, true, false),
            outcome(true, true, false, false),
            outcome(false, true, false, false),
            outcome(false, false, false, true),
        ]);
        assert_eq!(
            report,
            Report {
                answerable: 3,
                answered: 1,
                cited: 1,
                containing: 2,
                wrongly_abstained: 1,
                unanswerable: 2,
                abstained: 1,
            }
        );
    }
}
