//! When a document must wait for review. The defaults were chosen by measurement
//! (`quire eval pii`, see `docs/pii.md`): a paper's author list or bibliography must not hold
//! it, a CV or a customer list must.

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use super::{Finding, PiiType};

/// Which findings hold a document for review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Types that count; findings of other types are ignored.
    pub types: Vec<PiiType>,
    /// Findings less certain than this are ignored.
    pub min_confidence: f32,
    /// Types of which one finding is enough (payment cards, IBANs, SSNs).
    pub strong: Vec<PiiType>,
    /// Distinct contact findings (every counted type that is neither strong nor a name: e-mail,
    /// phone, IP address) that hold a document by themselves, as in a customer list.
    pub min_findings: usize,
    /// Hold a short document in which a name appears together with an e-mail address and a
    /// phone number, as a CV. Short: no counted finding past page
    /// [`Policy::PROFILE_MAX_PAGE`]; papers and reports carry author or contact blocks too,
    /// but also names and numbers on later pages.
    pub name_with_contact: bool,
    /// Distinct names that hold a document by themselves; `None`: names alone never do (a
    /// paper's bibliography has hundreds).
    pub min_names: Option<usize>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            types: PiiType::ALL.to_vec(),
            min_confidence: 0.5,
            strong: vec![PiiType::CreditCard, PiiType::Iban, PiiType::UsSsn],
            min_findings: 10,
            name_with_contact: true,
            min_names: None,
        }
    }
}

impl Policy {
    /// The last page on which findings may be for [`Policy::name_with_contact`] to hold a
    /// document: CVs run to one to three pages (see `docs/pii.md` for the measurement).
    pub const PROFILE_MAX_PAGE: u32 = 3;

    /// The types that hold the document, or `None` when it needs no review.
    pub fn holds(&self, findings: &[Finding]) -> Option<Vec<PiiType>> {
        self.holds_with_profile_pages(findings, Self::PROFILE_MAX_PAGE)
    }

    /// [`Policy::holds`] with another page limit for the name-with-contact rule (how
    /// `quire eval pii` compares limits).
    pub fn holds_with_profile_pages(
        &self,
        findings: &[Finding],
        profile_max_page: u32,
    ) -> Option<Vec<PiiType>> {
        let counted: Vec<&Finding> = findings
            .iter()
            .filter(|f| self.types.contains(&f.kind) && f.confidence >= self.min_confidence)
            .collect();
        let mut triggers = BTreeSet::new();
        let mut contacts = HashSet::new();
        let mut names = HashSet::new();
        let mut contact_types = BTreeSet::new();
        for f in &counted {
            if self.strong.contains(&f.kind) {
                triggers.insert(f.kind);
            } else if f.kind == PiiType::PersonName {
                names.insert(f.text.to_lowercase());
            } else {
                contacts.insert((f.kind, normalise(&f.text)));
                contact_types.insert(f.kind);
            }
        }
        if contacts.len() >= self.min_findings.max(1) {
            triggers.extend(contact_types.iter().copied());
        }
        let last_page = counted.iter().map(|f| f.page).max().unwrap_or(0);
        if self.name_with_contact
            && last_page <= profile_max_page
            && !names.is_empty()
            && contact_types.contains(&PiiType::Email)
            && contact_types.contains(&PiiType::Phone)
        {
            triggers.extend([PiiType::PersonName, PiiType::Email, PiiType::Phone]);
        }
        if self.min_names.is_some_and(|n| names.len() >= n.max(1)) {
            triggers.insert(PiiType::PersonName);
        }
        (!triggers.is_empty()).then(|| triggers.into_iter().collect())
    }
}

/// The same address or number written differently counts once.
fn normalise(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '@' | '.' | '+' | ':'))
        .flat_map(char::to_lowercase)
        .collect()
}
