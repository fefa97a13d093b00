//! The names of the financial statements as analysts and filings write them. A question asks
//! for "the balance sheet" or "the P&L"; Boeing's filing prints "Consolidated Statements of
//! Financial Position" and PepsiCo's "Consolidated Statement of Income". When a query names a
//! statement, every name of that statement is also searched as a phrase, so the page that
//! holds it ranks for any of them. Measured on FinanceBench in `docs/retrieval.md`
//! ("Statement names").
//!
//! Phrases, not words: "financial" and "position" alone are on most pages of a filing.

/// Each statement's names; a query holding one searches them all.
const STATEMENTS: &[&[&str]] = &[
    &[
        "balance sheet",
        "statement of financial position",
        "statement of financial condition",
    ],
    &[
        "income statement",
        "statement of income",
        "statement of operations",
        "statement of earnings",
        "profit and loss",
        "p&l",
    ],
    &["cash flow statement", "statement of cash flows"],
];

/// Each statement's names as `analyse` turns them into token sequences: made once by the
/// index (the analyser never changes), not at every query.
pub(super) fn analysed_statements(
    analyse: &mut dyn FnMut(&str) -> Vec<String>,
) -> Vec<Vec<Vec<String>>> {
    STATEMENTS
        .iter()
        .map(|names| names.iter().map(|name| analyse(name)).collect())
        .collect()
}

/// The names (as analysed token sequences, from [`analysed_statements`]) of every statement
/// that `tokens`, an analysed query, names.
pub(super) fn statement_phrases<'a>(
    tokens: &[String],
    statements: &'a [Vec<Vec<String>>],
) -> Vec<&'a [String]> {
    statements
        .iter()
        .filter(|forms| forms.iter().any(|form| contains(tokens, form)))
        .flatten()
        .map(Vec::as_slice)
        .collect()
}

fn contains(tokens: &[String], phrase: &[String]) -> bool {
    !phrase.is_empty() && tokens.windows(phrase.len()).any(|w| w == phrase)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    }

    #[test]
    fn a_named_statement_brings_all_its_names_and_only_those() {
        let statements = analysed_statements(&mut words);
        let phrases = statement_phrases(&words("Boeing's balance sheet in 2018"), &statements);
        assert_eq!(phrases.len(), 3);
        assert!(phrases.contains(&words("statement of financial position").as_slice()));
        let phrases = statement_phrases(&words("net income per the P&L"), &statements);
        assert!(phrases.contains(&words("statement of operations").as_slice()));
        assert_eq!(phrases.len(), 6);
        // Words of a name that do not stand together name nothing.
        assert!(statement_phrases(&words("cash and balance of the sheet"), &statements).is_empty());
        assert!(statement_phrases(&words("income taxes"), &statements).is_empty());
    }
}
