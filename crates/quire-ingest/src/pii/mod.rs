//! Personal-data (PII) detection: finds names, e-mail addresses, phone numbers, payment card
//! numbers, IBANs, US social security numbers and IP addresses in page text, decides with a
//! [`Policy`] whether a document must wait for review, and [`redact`]s findings.
//!
//! Structured types are found by hand-written scanners with checksums (Luhn, mod-97) and
//! context; names by gazetteers derived from US census and SSA statistics
//! (`scripts/dev/derive-name-lists.py`), capitalisation and cues such as titles and
//! salutations. `docs/pii.md` describes the rules and their measured quality.

mod names;
mod policy;
mod redact;
mod structured;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use policy::Policy;
pub use redact::redact;

use names::Gazetteer;

/// A kind of personal data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiType {
    /// A person's name.
    PersonName,
    /// An e-mail address.
    Email,
    /// A telephone number.
    Phone,
    /// A payment card number (Luhn-valid, known issuer prefix).
    CreditCard,
    /// An international bank account number (mod-97 valid).
    Iban,
    /// A US social security number.
    UsSsn,
    /// An IPv4 or IPv6 address.
    IpAddress,
}

impl PiiType {
    /// Every type, in declaration order.
    pub const ALL: [PiiType; 7] = [
        PiiType::PersonName,
        PiiType::Email,
        PiiType::Phone,
        PiiType::CreditCard,
        PiiType::Iban,
        PiiType::UsSsn,
        PiiType::IpAddress,
    ];

    /// The stable snake_case name, as in JSON and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PiiType::PersonName => "person_name",
            PiiType::Email => "email",
            PiiType::Phone => "phone",
            PiiType::CreditCard => "credit_card",
            PiiType::Iban => "iban",
            PiiType::UsSsn => "us_ssn",
            PiiType::IpAddress => "ip_address",
        }
    }

    /// The text [`redact`] puts in place of a finding.
    pub fn placeholder(self) -> &'static str {
        match self {
            PiiType::PersonName => "[PERSON_NAME]",
            PiiType::Email => "[EMAIL]",
            PiiType::Phone => "[PHONE]",
            PiiType::CreditCard => "[CREDIT_CARD]",
            PiiType::Iban => "[IBAN]",
            PiiType::UsSsn => "[US_SSN]",
            PiiType::IpAddress => "[IP_ADDRESS]",
        }
    }
}

impl fmt::Display for PiiType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`PiiType`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown personal-data type {0:?} (expected one of person_name, email, phone, credit_card, iban, us_ssn, ip_address)"
)]
pub struct UnknownPiiType(pub String);

impl FromStr for PiiType {
    type Err = UnknownPiiType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PiiType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownPiiType(s.to_owned()))
    }
}

/// One piece of personal data found in a page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What was found.
    pub kind: PiiType,
    /// The page it is on (as given to [`Detector::detect`]).
    pub page: u32,
    /// Byte offset of the first byte in the page text (a char boundary).
    pub start: usize,
    /// Byte offset just past the last byte (a char boundary).
    pub end: usize,
    /// The matched text.
    pub text: String,
    /// How sure the detector is, in [0, 1].
    pub confidence: f32,
}

/// The detector: gazetteers loaded once, shared by clones.
#[derive(Clone)]
pub struct Detector {
    gazetteer: Arc<Gazetteer>,
}

impl fmt::Debug for Detector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Detector")
            .field("first_names", &self.gazetteer.first_names())
            .field("last_names", &self.gazetteer.last_names())
            .finish()
    }
}

impl Default for Detector {
    fn default() -> Self {
        Self::new()
    }
}

impl Detector {
    /// Loads the embedded name lists.
    pub fn new() -> Self {
        Detector {
            gazetteer: Arc::new(Gazetteer::embedded()),
        }
    }

    /// Findings in one page's text, ordered by start offset.
    pub fn detect_page(&self, text: &str, page: u32) -> Vec<Finding> {
        let mut spans = structured::scan(text);
        let taken: Vec<(usize, usize)> = spans.iter().map(|s| (s.start, s.end)).collect();
        spans.extend(
            names::scan(text, &self.gazetteer)
                .into_iter()
                .filter(|n| !taken.iter().any(|&(s, e)| n.start < e && s < n.end)),
        );
        spans.sort_by_key(|s| (s.start, s.end));
        spans
            .into_iter()
            .map(|s| Finding {
                kind: s.kind,
                page,
                start: s.start,
                end: s.end,
                text: text[s.start..s.end].to_owned(),
                confidence: s.confidence,
            })
            .collect()
    }

    /// Findings in every page, in page order.
    pub fn detect(&self, pages: &[(u32, &str)]) -> Vec<Finding> {
        pages
            .iter()
            .flat_map(|&(page, text)| self.detect_page(text, page))
            .collect()
    }
}

/// A finding before its text is copied out: what the scanners return.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    kind: PiiType,
    start: usize,
    end: usize,
    confidence: f32,
}

/// Lowercase words near `at` (within `window` bytes before it), for context cues.
fn context_before(text: &str, at: usize, window: usize) -> String {
    let mut from = at.saturating_sub(window);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    text[from..at].to_lowercase()
}
