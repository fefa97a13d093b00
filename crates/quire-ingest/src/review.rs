//! Screening processed documents for personal data before they are indexed: a document the
//! [`Policy`] holds waits for an administrator (`pending_review`); after a redact decision its
//! chunks are indexed with each finding replaced by a typed placeholder.
//!
//! Everything that is indexed, embedded or returned is screened: each chunk's text, its
//! section path (headings, sheet names, attachment names) and the document's name. Findings
//! are recorded with where they were found (`in`: `text`, `section` or `name`). Once an
//! administrator decides, [`reduce_findings`] replaces the recorded findings with their types,
//! counts and masked excerpts, so the found text is no longer kept.

use std::collections::{HashMap, HashSet};

use quire_core::ChunkDraft;
use quire_store::{DecidedReview, HeldDocument, ReviewDecision, ReviewRecord};
use serde_json::{Value, json};

use crate::pii::{Detector, Finding, PiiType, Policy, redact};

/// Characters of text shown on each side of a finding, for the reviewer.
const CONTEXT_CHARS: usize = 60;

/// Longest file-name extension kept apart from the screened stem (`.xlsx`, `.jpeg`, `.eml`).
const MAX_EXTENSION_CHARS: usize = 5;

/// Where a finding was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A chunk's text.
    Text,
    /// A chunk's section path (headings, sheet and attachment names).
    Section,
    /// The document's name.
    Name,
}

impl Place {
    fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Section => "section",
            Self::Name => "name",
        }
    }
}

/// One counted finding with the text it was found in (for the context).
struct Found<'a> {
    finding: Finding,
    place: Place,
    within: &'a str,
}

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

    /// The findings in `text` (on `page`) that the policy counts: its types, at its
    /// confidence.
    fn counted(&self, text: &str, page: u32) -> Vec<Finding> {
        let mut findings = self.detector.detect_page(text, page);
        findings.retain(|f| {
            self.policy.types.contains(&f.kind) && f.confidence >= self.policy.min_confidence
        });
        findings
    }

    /// Findings the policy counts in each chunk's section path and text, and in the document's
    /// name (on page 1, where a CV's findings are), each once per page (overlapping chunks
    /// repeat text, and every chunk repeats its section path).
    fn findings<'a>(&self, chunks: &'a [ChunkDraft], name: &'a str) -> Vec<Found<'a>> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut keep = |finding: Finding, place: Place, within: &'a str| {
            if seen.insert((finding.kind, finding.page, finding.text.clone())) {
                out.push(Found {
                    finding,
                    place,
                    within,
                });
            }
        };
        let (stem, _) = split_extension(name);
        for finding in self.counted(stem, 1) {
            keep(finding, Place::Name, name);
        }
        let mut sections_seen = HashSet::new();
        for chunk in chunks {
            if !chunk.section.is_empty() && sections_seen.insert((chunk.page, &chunk.section)) {
                for finding in self.counted(&chunk.section, chunk.page) {
                    keep(finding, Place::Section, &chunk.section);
                }
            }
            for finding in self.counted(&chunk.content, chunk.page) {
                keep(finding, Place::Text, &chunk.content);
            }
        }
        out
    }

    /// `Some` when the document named `name` must wait for review: the types that hold it and
    /// the findings (type, where, page, text, confidence and the text around it) for the
    /// reviewer.
    ///
    /// The policy judges every finding together. On top of it, a finding in the name other
    /// than a person's name holds the document by itself: the name is shown in every listing,
    /// search hit and webhook payload, and the policy's allowance for contacts (papers list
    /// their authors' addresses) does not apply to a file name. A person's name in the name
    /// only counts with the rest (`Smith 2020 survey.pdf` is ordinary).
    pub fn screen(
        &self,
        chunks: &[ChunkDraft],
        page_count: u32,
        name: &str,
    ) -> Option<HeldDocument> {
        let found = self.findings(chunks, name);
        let findings: Vec<Finding> = found.iter().map(|f| f.finding.clone()).collect();
        let mut types = self.policy.holds(&findings).unwrap_or_default();
        for f in found.iter().filter(|f| f.place == Place::Name) {
            if f.finding.kind != PiiType::PersonName && !types.contains(&f.finding.kind) {
                types.push(f.finding.kind);
            }
        }
        if types.is_empty() {
            return None;
        }
        types.sort();
        let listed: Vec<Value> = found
            .iter()
            .map(|f| {
                let finding = &f.finding;
                json!({
                    "type": finding.kind.as_str(),
                    "in": f.place.as_str(),
                    "page": (f.place != Place::Name).then_some(finding.page),
                    "text": finding.text,
                    "confidence": finding.confidence,
                    "context": context(f.within, finding.start, finding.end),
                })
            })
            .collect();
        Some(HeldDocument {
            pii_types: types.iter().map(|t| t.as_str().to_owned()).collect(),
            findings: Value::Array(listed).to_string(),
            page_count,
            // Until an administrator decides, the name shown everywhere is the redacted one.
            shown_name: self.redact_name(name),
        })
    }

    /// Replaces every finding the policy counts with its typed placeholder, in each chunk's
    /// text and section path.
    pub fn redact(&self, chunks: &mut [ChunkDraft]) {
        let mut sections: HashMap<(u32, String), String> = HashMap::new();
        for chunk in chunks {
            let findings = self.counted(&chunk.content, chunk.page);
            if !findings.is_empty() {
                chunk.content = redact(&chunk.content, &findings);
            }
            if !chunk.section.is_empty() {
                let key = (chunk.page, std::mem::take(&mut chunk.section));
                let redacted = sections.entry(key.clone()).or_insert_with(|| {
                    let findings = self.counted(&key.1, key.0);
                    redact(&key.1, &findings)
                });
                chunk.section = redacted.clone();
            }
        }
    }

    /// The document name `name` with every finding the policy counts replaced by its
    /// placeholder (the extension kept), or `None` when it has none.
    pub fn redact_name(&self, name: &str) -> Option<String> {
        let (stem, extension) = split_extension(name);
        let findings = self.counted(stem, 1);
        (!findings.is_empty()).then(|| format!("{}{extension}", redact(stem, &findings)))
    }

    /// What the store keeps of `review` once `decision` is taken: the findings reduced to
    /// types, counts and masked excerpts, and the name: the real one again after an approval
    /// (a held document shows a masked name while it waits), the one without its findings
    /// after a redaction.
    pub fn decided(&self, review: &ReviewRecord, decision: ReviewDecision) -> DecidedReview {
        let real_name = review.held_name.as_deref();
        DecidedReview {
            decision,
            findings: reduce_findings(&review.findings),
            name: match decision {
                ReviewDecision::Approve => real_name.map(str::to_owned),
                ReviewDecision::Redact => {
                    self.redact_name(real_name.unwrap_or(&review.document.name))
                }
            },
        }
    }
}

/// `name` split before a short extension (`report.pdf` → `report`, `.pdf`), so that an
/// address at the end of a name is not read as `…@example.com.pdf` and a redacted name keeps
/// its extension.
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(dot)
            if dot > 0
                && name[dot + 1..].chars().count() <= MAX_EXTENSION_CHARS
                && !name[dot + 1..].is_empty()
                && name[dot + 1..].chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            name.split_at(dot)
        }
        _ => (name, ""),
    }
}

/// The findings of a review (a JSON array as [`Review::screen`] records them) reduced to one
/// entry per type: `type`, `count`, `in` (where they were found) and `excerpt`, the first
/// finding's text masked by [`mask`]. Entries already reduced are kept as they are, so the
/// reduction may run twice.
pub fn reduce_findings(findings: &str) -> String {
    let listed: Vec<Value> = serde_json::from_str(findings).unwrap_or_default();
    let mut reduced: Vec<(String, u64, Vec<String>, String)> = Vec::new();
    for finding in &listed {
        let kind = finding["type"].as_str().unwrap_or("unknown").to_owned();
        let count = finding["count"].as_u64().unwrap_or(1);
        let places: Vec<String> = match &finding["in"] {
            Value::String(place) => vec![place.clone()],
            Value::Array(places) => places
                .iter()
                .filter_map(|p| p.as_str().map(str::to_owned))
                .collect(),
            _ => vec![Place::Text.as_str().to_owned()],
        };
        let excerpt = match finding["excerpt"].as_str() {
            Some(masked) => masked.to_owned(),
            None => mask(finding["text"].as_str().unwrap_or("")),
        };
        match reduced.iter_mut().find(|(k, ..)| *k == kind) {
            Some((_, n, seen, _)) => {
                *n += count;
                for place in places {
                    if !seen.contains(&place) {
                        seen.push(place);
                    }
                }
            }
            None => reduced.push((kind, count, places, excerpt)),
        }
    }
    let entries: Vec<Value> = reduced
        .into_iter()
        .map(|(kind, count, places, excerpt)| {
            json!({ "type": kind, "count": count, "in": places, "excerpt": excerpt })
        })
        .collect();
    Value::Array(entries).to_string()
}

/// `text` with its letters and digits starred out but for the first and, in texts of eight
/// or more, the last two: enough to recognise the shape (`4*** **** **** **11`,
/// `j***.***@*******.**om`), too little to recover the value. Other characters are kept.
pub fn mask(text: &str) -> String {
    let total = text.chars().filter(|c| c.is_alphanumeric()).count();
    let shown_at_end = if total >= 8 { 2 } else { 0 };
    let mut seen = 0;
    text.chars()
        .map(|c| {
            if !c.is_alphanumeric() {
                return c;
            }
            seen += 1;
            if seen == 1 || seen > total - shown_at_end {
                c
            } else {
                '*'
            }
        })
        .collect()
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
        let held = review
            .screen(&[chunk(1, CV)], 1, "cv.pdf")
            .expect("a CV is held");
        assert!(held.pii_types.contains(&"email".to_owned()), "{held:?}");
        let findings: serde_json::Value = serde_json::from_str(&held.findings).unwrap();
        let email = findings
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["type"] == "email")
            .unwrap();
        assert_eq!(email["text"], "jane.doe@example.com");
        assert_eq!(email["in"], "text");
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
        assert!(review.screen(&[manual], 1, "manual.pdf").is_none());
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

    fn test_document() -> quire_core::DocumentRecord {
        let id = quire_core::DocumentId::new();
        quire_core::DocumentRecord {
            id,
            source_id: quire_core::SourceId::new(),
            name: "upload".into(),
            status: quire_core::DocumentStatus::PendingReview,
            error: None,
            chunk_count: 0,
            page_count: 1,
            size: 1,
            content_type: "text/plain".into(),
            sha256: String::new(),
            metadata: Default::default(),
            external_id: None,
            version: 1,
            index_id: id,
            previous_index_id: None,
            next_version: None,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    fn sectioned(page: u32, section: &str, content: &str) -> ChunkDraft {
        ChunkDraft {
            section: section.into(),
            ..chunk(page, content)
        }
    }

    const PLAIN: &str = "Prime the pump before starting it. Replace the seal every two years.";

    fn listed(held: &HeldDocument) -> Vec<Value> {
        serde_json::from_str(&held.findings).unwrap()
    }

    #[test]
    fn personal_data_in_a_heading_holds_the_document() {
        let review = Review::new(Policy::default());
        let heading = "Card 4111 1111 1111 1111 and SSN 123-45-6789";
        let chunks = [
            sectioned(1, heading, PLAIN),
            sectioned(1, &format!("{heading} > Seals"), PLAIN),
        ];
        let held = review.screen(&chunks, 1, "pumps.md").expect("held");
        assert_eq!(held.pii_types, ["credit_card", "us_ssn"]);
        let findings = listed(&held);
        assert_eq!(findings.len(), 2, "each finding once: {findings:?}");
        assert!(
            findings
                .iter()
                .all(|f| f["in"] == "section" && f["page"] == 1)
        );
        assert_eq!(findings[0]["text"], "4111 1111 1111 1111");
    }

    #[test]
    fn redaction_reaches_section_paths() {
        let review = Review::new(Policy::default());
        let mut chunks = vec![
            sectioned(1, "Card 4111 1111 1111 1111 > Seals", PLAIN),
            sectioned(2, "Sheet of jane.doe@example.com", PLAIN),
        ];
        review.redact(&mut chunks);
        assert_eq!(chunks[0].section, "Card [CREDIT_CARD] > Seals");
        assert_eq!(chunks[1].section, "Sheet of [EMAIL]");
        assert_eq!(chunks[0].content, PLAIN);
    }

    #[test]
    fn a_contact_or_number_in_the_name_holds_the_document_by_itself() {
        let review = Review::new(Policy::default());
        for (name, kind) in [
            ("statement 4111-1111-1111-1111.pdf", "credit_card"),
            ("notes for jane.doe@example.com.txt", "email"),
        ] {
            let held = review
                .screen(&[chunk(1, PLAIN)], 1, name)
                .unwrap_or_else(|| panic!("{name} is held"));
            assert_eq!(held.pii_types, [kind], "{name}");
            let findings = listed(&held);
            assert_eq!(findings[0]["in"], "name", "{name}");
            assert_eq!(findings[0]["page"], Value::Null, "{name}");
            assert_eq!(findings[0]["context"], name, "{name}");
        }
        // A person's name in a file name only counts with the rest, like one in the text.
        assert!(
            review
                .screen(&[chunk(1, PLAIN)], 1, "Maria Garcia survey.pdf")
                .is_none()
        );
        assert!(review.screen(&[chunk(1, PLAIN)], 1, "report.pdf").is_none());
    }

    #[test]
    fn names_are_redacted_with_their_extension_kept() {
        let review = Review::new(Policy::default());
        assert_eq!(
            review
                .redact_name("notes for jane.doe@example.com.txt")
                .as_deref(),
            Some("notes for [EMAIL].txt")
        );
        assert_eq!(
            review.redact_name("4111 1111 1111 1111").as_deref(),
            Some("[CREDIT_CARD]")
        );
        assert_eq!(review.redact_name("pump manual.pdf"), None);
        assert_eq!(split_extension("a.tar.gz"), ("a.tar", ".gz"));
        assert_eq!(split_extension(".profile"), (".profile", ""));
        assert_eq!(split_extension("v1.2 notes"), ("v1.2 notes", ""));
    }

    #[test]
    fn masks_keep_the_shape_and_little_else() {
        assert_eq!(mask("4111 1111 1111 1111"), "4*** **** **** **11");
        assert_eq!(mask("jane.doe@example.com"), "j***.***@*******.*om");
        assert_eq!(mask("123-45-6789"), "1**-**-**89");
        assert_eq!(mask("Jane Doe"), "J*** ***");
        assert_eq!(mask("Zoë"), "Z**");
        assert_eq!(mask(""), "");
    }

    #[test]
    fn reduced_findings_keep_type_count_place_and_a_masked_excerpt() {
        let review = Review::new(Policy::default());
        let name = "cv jane.doe@example.com.pdf";
        let held = review.screen(&[chunk(1, CV)], 1, name).expect("held");
        let reduced = reduce_findings(&held.findings);
        for raw in ["jane.doe@example.com", "7946 0958", "Jane Doe", "Email:"] {
            assert!(!reduced.contains(raw), "{raw} in {reduced}");
        }
        let entries: Vec<Value> = serde_json::from_str(&reduced).unwrap();
        let email = entries.iter().find(|e| e["type"] == "email").unwrap();
        assert_eq!(
            email["count"], 1,
            "the same address in name and text: {entries:?}"
        );
        assert_eq!(email["in"], json!(["name"]));
        assert_eq!(email["excerpt"], "j***.***@*******.*om");
        assert!(
            entries
                .iter()
                .any(|e| e["type"] == "phone" && e["count"] == 1)
        );
        // Reducing again changes nothing.
        assert_eq!(reduce_findings(&reduced), reduced);
    }

    #[test]
    fn a_decision_reduces_the_findings_and_redact_renames() {
        let review = Review::new(Policy::default());
        let name = "cv jane.doe@example.com.pdf";
        let held = review.screen(&[chunk(1, CV)], 1, name).expect("held");
        // While it waits, the document shows its name redacted; the store keeps the real one.
        assert_eq!(held.shown_name.as_deref(), Some("cv [EMAIL].pdf"));
        let record = ReviewRecord {
            document: quire_core::DocumentRecord {
                name: held.shown_name.clone().unwrap(),
                ..test_document()
            },
            pii_types: held.pii_types,
            findings: held.findings,
            held_at: chrono::Utc::now(),
            decision: None,
            decided_at: None,
            held_name: Some(name.into()),
        };
        let approved = review.decided(&record, ReviewDecision::Approve);
        assert_eq!(approved.name.as_deref(), Some(name), "approval restores it");
        assert!(!approved.findings.contains("jane.doe@example.com"));
        let redacted = review.decided(&record, ReviewDecision::Redact);
        assert_eq!(redacted.name.as_deref(), Some("cv [EMAIL].pdf"));
        assert_eq!(redacted.findings, approved.findings);
    }

    #[test]
    fn a_name_without_findings_is_shown_as_it_is() {
        let review = Review::new(Policy::default());
        let held = review.screen(&[chunk(1, CV)], 1, "cv.pdf").expect("held");
        assert_eq!(held.shown_name, None);
    }

    #[test]
    fn context_keeps_whole_characters() {
        let text = "é".repeat(100) + "x@y.zz" + &"ü".repeat(100);
        let start = text.find("x@").unwrap();
        let shown = context(&text, start, start + 6);
        assert_eq!(shown.chars().count(), 60 + 6 + 60);
    }
}
