//! `[pii]`: which documents wait for an administrator's review of their personal data.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// `[pii]`: documents are screened for personal data after parsing; those this policy holds
/// wait in `pending_review` (not searchable) for an administrator. The defaults were chosen on
/// measurements (`quire eval pii`, `docs/pii.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PiiConfig {
    /// Screen documents at all.
    pub enabled: bool,
    /// Types that count (`person_name`, `email`, `phone`, `credit_card`, `iban`, `us_ssn`,
    /// `ip_address`); findings of other types are ignored.
    pub types: Vec<String>,
    /// Findings less certain than this (0–1) are ignored.
    pub min_confidence: f32,
    /// Types of which one finding holds a document.
    pub strong: Vec<String>,
    /// Distinct e-mail addresses, phone numbers and IP addresses that hold a document (a
    /// customer list).
    pub min_findings: usize,
    /// Hold when a name appears with both an e-mail address and a phone number (a CV).
    pub name_with_contact: bool,
    /// Distinct names that hold a document by themselves; 0: names alone never do.
    pub min_names: usize,
}

impl Default for PiiConfig {
    fn default() -> Self {
        let p = quire_ingest::pii::Policy::default();
        Self {
            enabled: true,
            types: p.types.iter().map(|t| t.as_str().to_owned()).collect(),
            min_confidence: p.min_confidence,
            strong: p.strong.iter().map(|t| t.as_str().to_owned()).collect(),
            min_findings: p.min_findings,
            name_with_contact: p.name_with_contact,
            min_names: p.min_names.unwrap_or(0),
        }
    }
}

impl PiiConfig {
    /// The policy these settings describe (also the section's validation).
    pub fn policy(&self) -> anyhow::Result<quire_ingest::pii::Policy> {
        let parse =
            |names: &[String], key: &str| -> anyhow::Result<Vec<quire_ingest::pii::PiiType>> {
                names
                    .iter()
                    .map(|n| {
                        n.parse().map_err(|_| {
                            anyhow::anyhow!(
                                "pii.{key}: unknown type {n:?} (person_name, email, phone, \
                             credit_card, iban, us_ssn, ip_address)"
                            )
                        })
                    })
                    .collect()
            };
        if !(0.0..=1.0).contains(&self.min_confidence) {
            bail!("pii.min_confidence must be between 0 and 1");
        }
        Ok(quire_ingest::pii::Policy {
            types: parse(&self.types, "types")?,
            min_confidence: self.min_confidence,
            strong: parse(&self.strong, "strong")?,
            min_findings: self.min_findings,
            name_with_contact: self.name_with_contact,
            min_names: (self.min_names > 0).then_some(self.min_names),
        })
    }
}
