//! Screening processed documents for personal data before they are indexed: a document the
//! [`Policy`] holds waits for an administrator (`pending_review`); after a redact decision its
//! chunks are indexed with each finding replaced by a typed placeholder.

use std::collections::HashSet;

use quire_core::ChunkDraft;
use quire_store::HeldDocument;
use serde_json::json;

use crate::pii::{Detector, Finding, Policy, redact};

/// Characters of text shown on each side of a finding, for the reviewer.
const CONTEXT_CHARS: usize = 60;

/// The detector and the policy that decides what waits for review.
#[derive(Debug, Clone)]
pub struct Review {
    detector: Detector,
    policy: Policy,
}

impl Review {
    /// Screening with `policy` (the gazetteers are loaded here, once).
    pub fn new(policy: Policy) -> Self {
        Self {
            detector: Detector::new(),
            policy,
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The findings of one chunk that the policy counts: its types, at its confidence.
    fn counted(&self, chunk: &ChunkDraft) -> Vec<Finding> {
        let mut findings = self.detector.detect_page(&chunk.content, chunk.page);
        findings.retain(|f| {
            self.policy.types.contains(&f.kind) && f.confidence >= self.policy.min_confidence
        });
        findings
    }

    /// Findings of each chunk that the policy counts (its types, at its confidence), each
    /// once per page (overlapping chunks repeat text), with the chunk they were found in.
    fn findings<'a>(&self, chunks: &'a [ChunkDraft]) -> Vec<(Finding, &'a ChunkDraft)> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for chunk in chunks {
            for finding in self.counted(chunk) {
                if seen.insert((finding.kind, finding.page, finding.text.clone())) {
                    out.push((finding, chunk));
                }
            }
        }
        out
    }

    /// `Some` when the document must wait for review: the types that hold it and the
    /// findings (type, page, text, confidence and the text around it) for the reviewer.
    pub fn screen(&self, chunks: &[ChunkDraft], page_count: u32) -> Option<HeldDocument> {
        let found = self.findings(chunks);
        let findings: Vec<Finding> = found.iter().map(|(f, _)| f.clone()).collect();
        let types = self.policy.holds(&findings)?;
        let listed: Vec<serde_json::Value> = found
            .iter()
            .map(|(f, chunk)| {
                json!({
                    "type": f.kind.as_str(),
                    "page": f.page,
                    "text": f.text,
                    "confidence": f.confidence,
                    "context": context(&chunk.content, f.start, f.end),
                })
            })
            .collect();
        Some(HeldDocument {
            pii_types: types.iter().map(|t| t.as_str().to_owned()).collect(),
            findings: serde_json::Value::Array(listed).to_string(),
            page_count,
        })
    }

    /// Replaces every finding the policy counts with its typed placeholder, chunk by chunk.
    pub fn redact(&self, chunks: &mut [ChunkDraft]) {
        for chunk in chunks {
            let findings = self.counted(chunk);
            if !findings.is_empty() {
                chunk.content = redact(&chunk.content, &findings);
            }
        }
    }
}

/// The text around `start..end` (byte offsets on char boundaries), with the finding kept
/// whole, cut to whole characters.
fn context(text: &str, start: usize, end: usize) -> String {
    let before: String = text[..start]
        .chars()
        .rev()
        .take(CONTEXT_CHARS)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let after: String = text[end..].chars().take(CONTEXT_CHARS).collect();
    format!("{before}{}{after}", &text[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(page: u32, content: &str) -> ChunkDraft {
        ChunkDraft {
            ordinal: 0,
            page,
            section: String::new(),
            content: content.into(),
        }
    }

    const CV: &str = "Curriculum vitae\nJane Doe\nEmail: jane.doe@example.com\nPhone: +44 20 7946 0958\nExperience: ten years of pump maintenance.";

    #[test]
    fn a_cv_is_held_with_its_findings_in_context() {
        let review = Review::new(Policy::default());
        let held = review.screen(&[chunk(1, CV)], 1).expect("a CV is held");
        assert!(held.pii_types.contains(&"email".to_owned()), "{held:?}");
        let findings: serde_json::Value = serde_json::from_str(&held.findings).unwrap();
        let email = findings
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["type"] == "email")
            .unwrap();
        assert_eq!(email["text"], "jane.doe@example.com");
        assert_eq!(email["page"], 1);
        assert!(
            email["context"]
                .as_str()
                .unwrap()
                .contains("Email: jane.doe@example.com")
        );
    }

    #[test]
    fn an_ordinary_text_is_not_held() {
        let review = Review::new(Policy::default());
        let manual = chunk(
            1,
            "Prime the pump before starting it. Replace the seal every two years.",
        );
        assert!(review.screen(&[manual], 1).is_none());
    }

    #[test]
    fn redaction_leaves_placeholders_and_the_rest_of_the_text() {
        let review = Review::new(Policy::default());
        let mut chunks = vec![chunk(1, CV)];
        review.redact(&mut chunks);
        let text = &chunks[0].content;
        assert!(text.contains("[EMAIL]"), "{text}");
        assert!(text.contains("[PHONE]"), "{text}");
        assert!(!text.contains("jane.doe@example.com"), "{text}");
        assert!(text.contains("pump maintenance"), "{text}");
    }

    #[test]
    fn context_keeps_whole_characters() {
        let text = "é".repeat(100) + "x@y.zz" + &"ü".repeat(100);
        let start = text.find("x@").unwrap();
        let shown = context(&text, start, start + 6);
        assert_eq!(shown.chars().count(), 60 + 6 + 60);
    }
}
