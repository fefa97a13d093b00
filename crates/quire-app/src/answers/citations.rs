//! From the markers an answer actually contains to the citations of its `done` event.

use serde::Serialize;

use crate::search::SearchResult;

/// One cited passage, as the `done` event lists it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Citation {
    /// The marker number in the answer (`[index]`).
    pub index: usize,
    /// The document.
    pub document_id: String,
    /// Its name.
    pub document_name: String,
    /// Its source.
    pub data_source_id: String,
    /// The source's name.
    pub data_source_name: String,
    /// Page of the passage, from 1.
    pub page: u32,
    /// Heading path of the passage (empty when there is none).
    pub section: String,
    /// The cited passage.
    pub content: String,
    /// Its search score (see `docs/api.md`).
    pub score: f32,
}

impl Citation {
    /// The citation of `passage`, numbered `index`.
    pub fn of(index: usize, passage: &SearchResult) -> Self {
        Self {
            index,
            document_id: passage.document.id.clone(),
            document_name: passage.document.name.clone(),
            data_source_id: passage.data_source.id.clone(),
            data_source_name: passage.data_source.name.clone(),
            page: passage.metadata.page,
            section: passage.metadata.section.clone(),
            content: passage.content.clone(),
            score: passage.score,
        }
    }
}

/// The marker numbers in `answer` between 1 and `passages`, each once, in order of first
/// appearance. Understands `[2]`, `[2][3]`, `[2, 3]` and `[2-4]`; numbers of passages that do
/// not exist (a model inventing `[9]` with 8 passages) are ignored, and so is bracketed text
/// that is not a list of numbers (`[sic]`, `[0]`).
pub fn cited_markers(answer: &str, passages: usize) -> Vec<usize> {
    let mut cited = Vec::new();
    let mut rest = answer;
    // Each `]` closes the nearest `[` before it, so `[[1]]` and `[x][2]` still read.
    while let Some(close) = rest.find(']') {
        if let Some(open) = rest[..close].rfind('[') {
            let inside = &rest[open + 1..close];
            // A marker is short; anything long in brackets is prose.
            if inside.len() <= 24
                && let Some(numbers) = marker_numbers(inside)
            {
                for n in numbers {
                    if (1..=passages).contains(&n) && !cited.contains(&n) {
                        cited.push(n);
                    }
                }
            }
        }
        rest = &rest[close + 1..];
    }
    cited
}

/// `2`, `2, 3`, `2,3`, `2-4` → the numbers; anything else → None.
fn marker_numbers(inside: &str) -> Option<Vec<usize>> {
    let mut numbers = Vec::new();
    for part in inside.split(',') {
        let part = part.trim();
        if let Some((from, to)) = part.split_once(['-', '–']) {
            let (from, to) = (number(from)?, number(to)?);
            if to < from || to - from > 20 {
                return None;
            }
            numbers.extend(from..=to);
        } else {
            numbers.push(number(part)?);
        }
    }
    Some(numbers)
}

fn number(text: &str) -> Option<usize> {
    let text = text.trim();
    if text.is_empty() || text.len() > 3 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::cited_markers;

    #[test]
    fn markers_in_their_usual_shapes() {
        assert_eq!(
            cited_markers("Prime it first [2]. Then start [1][3].", 8),
            [2, 1, 3]
        );
        assert_eq!(cited_markers("Both [1, 2] and [2,3] say so.", 8), [1, 2, 3]);
        assert_eq!(cited_markers("See [2-4].", 8), [2, 3, 4]);
        assert_eq!(cited_markers("Again [1] and again [1].", 8), [1]);
    }

    #[test]
    fn invented_or_non_numeric_brackets_are_ignored() {
        assert_eq!(
            cited_markers("Out of range [9] and [0].", 8),
            Vec::<usize>::new()
        );
        assert_eq!(
            cited_markers("A quote [sic] and [a long aside, 3 words].", 8),
            Vec::<usize>::new()
        );
        assert_eq!(cited_markers("Unclosed [2", 8), Vec::<usize>::new());
        assert_eq!(cited_markers("Nested [[1]] works [x][2]", 8), [1, 2]);
        assert_eq!(cited_markers("No passages [1]", 0), Vec::<usize>::new());
    }
}
