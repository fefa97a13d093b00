//! Replacing findings with placeholders.

use super::Finding;

/// `text` with every finding's span replaced by its type's placeholder. Overlapping or
/// touching findings become one placeholder (the most confident finding's); findings that do
/// not fit `text` (out of range, not on char boundaries) are skipped.
pub fn redact(text: &str, findings: &[Finding]) -> String {
    let mut spans: Vec<&Finding> = findings
        .iter()
        .filter(|f| {
            f.start < f.end
                && f.end <= text.len()
                && text.is_char_boundary(f.start)
                && text.is_char_boundary(f.end)
        })
        .collect();
    spans.sort_by_key(|f| (f.start, f.end));
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < spans.len() {
        let start = spans[i].start;
        let mut end = spans[i].end;
        let mut best = spans[i];
        i += 1;
        while i < spans.len() && spans[i].start < end {
            end = end.max(spans[i].end);
            if spans[i].confidence > best.confidence {
                best = spans[i];
            }
            i += 1;
        }
        out.push_str(&text[copied..start]);
        out.push_str(best.kind.placeholder());
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}
