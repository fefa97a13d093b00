//! Passage text cut into quotable sentences.
//!
//! Passages come from the chunker as blocks joined by blank lines; inside a block, lines are
//! list items (`- item`), table rows (`a | b | c`), or the wrapped lines of a paragraph (PDF
//! and plain text keep the original line breaks). So lines are first grouped into units (an
//! item, a row, a paragraph with its wrapped lines joined back), and only paragraphs and
//! items are then split at sentence ends: `. ! ?` followed by white space and something that
//! can start a sentence, unless the dot ends an abbreviation, an initial or an enumerator.
//! No regular expressions: a single pass over the characters is fast and says what it does.

/// Fragments shorter than this (in characters) say too little to be quoted alone.
const MIN_CHARS: usize = 20;
/// Table rows are dense ("Max. head | 42 m"), so a shorter one is still a fact.
const MIN_ROW_CHARS: usize = 12;
/// Longer sentences (run-ons, paragraphs without punctuation) are cut to about this size.
const MAX_CHARS: usize = 400;
/// A long sentence is never cut before this many characters, so the quote keeps its point.
const MIN_CUT: usize = 120;
/// A line of at most this many words without end punctuation, standing alone, is a heading.
const HEADING_WORDS: usize = 10;
/// Below this share of letters and digits among the visible characters, a "sentence" is
/// table debris (rules, separators, references).
const MIN_WORD_SHARE: f32 = 0.6;
/// Below this share of letters it is numbers without words (a row of figures), which
/// quoted alone answers nothing; a row such as "XR-200 | 3.5 m3/h | 6 bar" is kept.
const MIN_LETTER_SHARE: f32 = 0.25;

/// Words that end with a dot which does not end the sentence (lower case, without the dot).
/// "etc." is left out on purpose: followed by a capital, it nearly always ends a sentence.
const ABBREVIATIONS: &[&str] = &[
    "al", "approx", "apr", "art", "aug", "ca", "cf", "ch", "chap", "co", "corp", "dec", "dept",
    "dr", "ed", "eds", "eq", "eqs", "esp", "est", "feb", "fig", "figs", "gen", "gov", "inc", "jan",
    "jr", "jul", "jun", "lt", "ltd", "mr", "mrs", "ms", "mt", "no", "nos", "nov", "nr", "oct",
    "op", "p", "para", "pp", "prof", "ref", "refs", "resp", "rev", "sec", "sect", "sep", "sept",
    "sgt", "sr", "st", "tab", "v", "viz", "vol", "vols", "vs",
];

/// Characters before a dot looked at to tell an abbreviation (enough for two words).
const LOOK_BACK: usize = 80;

/// Lower-case words after which a capital letter and a dot are an initial ("by J. Smith"),
/// where after any other lower-case word they are a sentence end ("with vitamin D. The").
const INITIAL_LEADS: &[&str] = &["and", "by", "from", "of", "to", "with"];

/// The quotable sentences of a passage, in order: trimmed, white space collapsed, list
/// markers removed, debris dropped, long ones cut with "…". A passage that starts in the
/// middle of a sentence (the chunker's overlap) has that first fragment marked with "…".
pub(super) fn split_sentences(text: &str) -> Vec<String> {
    let mut sentences = Vec::new();
    for (n, unit) in units(text).into_iter().enumerate() {
        let pieces = match unit.kind {
            UnitKind::Heading => continue,
            UnitKind::Row => {
                let row = collapse(&strip_references(&unit.text));
                sentences.extend(quotable(row, MIN_ROW_CHARS));
                continue;
            }
            UnitKind::Prose | UnitKind::Item => split_inline(&unit.text),
        };
        for (m, piece) in pieces.into_iter().enumerate() {
            let mut sentence = collapse(&strip_references(strip_marker(&piece)));
            let starts_midway = n == 0
                && m == 0
                && unit.kind == UnitKind::Prose
                && sentence.chars().next().is_some_and(char::is_lowercase);
            if starts_midway {
                sentence.insert(0, '…');
            }
            if let Some(sentence) = quotable(sentence, MIN_CHARS) {
                sentences.push(sentence);
            }
        }
    }
    sentences
}

/// What a group of lines is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnitKind {
    /// A paragraph, its wrapped lines joined.
    Prose,
    /// A list item, marker removed.
    Item,
    /// A table row, one line of ` | `-separated cells.
    Row,
    /// A short line without end punctuation standing alone: a title, not an answer.
    Heading,
}

/// A paragraph, list item, table row or heading.
#[derive(Debug)]
struct Unit {
    kind: UnitKind,
    text: String,
    lines: usize,
}

/// Groups lines: a blank line, a list marker or a table row always starts a new unit; a
/// line starting in lower case continues the previous one (a wrapped line); a line after a
/// short one without end punctuation starts anew (that short one was a heading).
fn units(text: &str) -> Vec<Unit> {
    let mut units: Vec<Unit> = Vec::new();
    let mut open = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            open = false;
            continue;
        }
        if is_table_row(line) {
            units.push(Unit {
                kind: UnitKind::Row,
                text: line.to_owned(),
                lines: 1,
            });
            open = false;
            continue;
        }
        let item = list_item(line);
        match units.last_mut() {
            Some(unit) if open && item.is_none() && continues(unit, line) => {
                join_line(&mut unit.text, line);
                unit.lines += 1;
            }
            _ => units.push(Unit {
                kind: if item.is_some() {
                    UnitKind::Item
                } else {
                    UnitKind::Prose
                },
                text: item.unwrap_or(line).to_owned(),
                lines: 1,
            }),
        }
        open = true;
    }
    for unit in &mut units {
        if unit.kind == UnitKind::Prose && unit.lines == 1 && is_heading(&unit.text) {
            unit.kind = UnitKind::Heading;
        }
    }
    units
}

/// Whether `line` goes on the sentence of `unit` rather than starting a new unit.
fn continues(unit: &Unit, line: &str) -> bool {
    let Some(first) = line.chars().next() else {
        return false;
    };
    if first.is_lowercase() {
        return true;
    }
    if unit.kind != UnitKind::Prose || unit.text.ends_with(':') {
        return false;
    }
    // A capital after a finished sentence is split again by `split_inline`; after an
    // unfinished one it is a wrapped line, unless the unit so far is a lone short line.
    ends_sentence(&unit.text) || !(unit.lines == 1 && is_heading(&unit.text))
}

/// Appends a wrapped line, undoing a hyphenation break ("pri-" + "ming").
fn join_line(text: &mut String, line: &str) {
    let hyphenated = text.ends_with('-')
        && text[..text.len() - 1]
            .chars()
            .next_back()
            .is_some_and(char::is_alphabetic)
        && line.chars().next().is_some_and(char::is_lowercase);
    if hyphenated {
        text.pop();
    } else {
        text.push(' ');
    }
    text.push_str(line);
}

fn is_heading(text: &str) -> bool {
    !ends_sentence(text) && text.split_whitespace().count() <= HEADING_WORDS
}

fn ends_sentence(text: &str) -> bool {
    text.trim_end_matches(is_closing)
        .ends_with(['.', '!', '?', ':', ';', '…'])
}

/// A table row as the parsers write it (` | ` between cells), a tab-separated line, or a
/// line of a PDF's table ([`is_figure_row`]); also whether a quotable sentence is such a row.
pub(super) fn is_table_row(line: &str) -> bool {
    line.contains(" | ") || line.starts_with('|') || line.contains('\t') || is_figure_row(line)
}

/// Fewest figures ending a line of a PDF's table: the columns of a statement ("2022 2021").
/// A line of prose seldom ends with two numbers in a row.
const MIN_ROW_FIGURES: usize = 2;

/// Whether `line` reads as a row of a table whose cells lost their borders (a PDF's
/// statement): a label with letters, then at least [`MIN_ROW_FIGURES`] figures ("Income tax
/// (expense)/benefit (31) 743 2,535", "Accounts payable $ 1,174 $ 1,587", "Total — 12.5%").
/// Each such line is a fact of its own, where joined to the next it would be a run-on.
fn is_figure_row(line: &str) -> bool {
    let mut figures = 0;
    for token in line.split_whitespace().rev() {
        if is_figure(token) {
            figures += 1;
        } else if !matches!(token, "$" | "€" | "£" | "%") {
            return figures >= MIN_ROW_FIGURES && token.chars().any(char::is_alphabetic);
        }
    }
    false
}

/// A cell of figures: "2,535", "(31)", "$55,893", "($4,935)", "23.5%", or a dash for none.
fn is_figure(token: &str) -> bool {
    if matches!(token, "—" | "–" | "-") {
        return true;
    }
    let core = token
        .trim_start_matches(['(', '$', '€', '£'])
        .trim_end_matches([')', '%', ',', ';']);
    // "2021." ends a sentence of prose.
    !core.ends_with('.')
        && core.starts_with(|c: char| c.is_ascii_digit())
        && core
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ',' | '.'))
}

/// The text of a list item without its marker (`-`, `*`, `•`, `1.`, `2)`, `a)`), or `None`
/// when the line is not a list item.
fn list_item(line: &str) -> Option<&str> {
    let stripped = strip_marker(line);
    (stripped.len() < line.len()).then_some(stripped)
}

/// `line` without a leading list marker followed by white space.
fn strip_marker(line: &str) -> &str {
    let rest = &line[marker_len(line)..];
    if rest.len() < line.len() && rest.starts_with(char::is_whitespace) {
        rest.trim_start()
    } else {
        line
    }
}

/// Bytes of a list marker at the start of `line`: a bullet, `1.`, `12)`, `a)`; else 0.
fn marker_len(line: &str) -> usize {
    let Some(first) = line.chars().next() else {
        return 0;
    };
    if matches!(first, '-' | '*' | '•' | '◦' | '▪' | '‣' | '–' | '—') {
        return first.len_utf8();
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    match (digits, line.as_bytes().get(digits.max(1))) {
        (1 | 2, Some(b'.' | b')')) => digits + 1,
        // "a)" but not "e.g.": a letter label only with a parenthesis.
        (0, Some(b')')) if first.is_ascii_lowercase() => 2,
        _ => 0,
    }
}

/// Splits a paragraph at sentence ends; the last piece is the text's own end.
pub(super) fn split_inline(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut pieces = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < chars.len() {
        if !matches!(chars[i], '.' | '!' | '?') {
            i += 1;
            continue;
        }
        let mut end = i + 1;
        while end < chars.len() && matches!(chars[end], '.' | '!' | '?') {
            end += 1;
        }
        let lone_dot = chars[i] == '.' && end == i + 1;
        while end < chars.len() && is_closing(chars[end]) {
            end += 1;
        }
        let mut next = end;
        while next < chars.len() && chars[next].is_whitespace() {
            next += 1;
        }
        let is_end = next > end
            && next < chars.len()
            && opens_sentence(chars[next])
            && !(lone_dot && dot_is_not_an_end(&chars[start.max(i.saturating_sub(LOOK_BACK))..i]));
        if is_end {
            pieces.push(chars[start..end].iter().collect());
            start = next;
        }
        i = next.max(end);
    }
    if start < chars.len() {
        pieces.push(chars[start..].iter().collect());
    }
    pieces
}

/// Whether the dot right after `before` (the sentence so far) belongs to an abbreviation,
/// an initial or an enumerator rather than ending the sentence.
fn dot_is_not_an_end(before: &[char]) -> bool {
    let text: String = before.iter().collect();
    let mut words = text
        .rsplit(char::is_whitespace)
        .filter(|w| !w.is_empty())
        .map(|w| w.trim_start_matches(['(', '[', '"', '“', '‘', '\'']));
    let Some(word) = words.next() else {
        return false;
    };
    let previous = words.next();
    let lower = word.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return true;
    }
    // Dotted abbreviations: "e.g", "i.e", "U.S", "Ph.D".
    if lower.contains('.')
        && lower
            .split('.')
            .all(|part| (1..=2).contains(&part.len()) && part.chars().all(char::is_alphabetic))
    {
        return true;
    }
    let mut chars = word.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_uppercase() => is_initial(previous),
        // "Steps: 1. Open the valve": an enumerator after a colon or at the start.
        _ if (1..=2).contains(&word.len()) && word.bytes().all(|b| b.is_ascii_digit()) => {
            previous.is_none_or(|p| p.ends_with([':', ';']))
        }
        _ => false,
    }
}

/// Whether a capital letter after `previous` is an initial: after nothing, a capitalised
/// word, another initial or abbreviation, a comma, or a word that introduces a name.
fn is_initial(previous: Option<&str>) -> bool {
    let Some(previous) = previous else {
        return true;
    };
    previous.starts_with(char::is_uppercase)
        || previous.ends_with(['.', ','])
        || INITIAL_LEADS.contains(&previous.to_lowercase().as_str())
}

/// Characters that can start a sentence after an end: a capital (or a letter of a script
/// without case), a digit, an opening quote or bracket, a bullet.
fn opens_sentence(c: char) -> bool {
    (c.is_alphabetic() && !c.is_lowercase())
        || c.is_ascii_digit()
        || matches!(
            c,
            '"' | '“' | '‘' | '\'' | '(' | '[' | '«' | '¿' | '¡' | '•'
        )
}

fn is_closing(c: char) -> bool {
    matches!(c, '"' | '”' | '’' | '\'' | ')' | ']' | '»')
}

/// `text` without bracketed numeric references ("[12]", "[3, 4]", "[5–7]") and the space
/// before them: quoted in an answer they would read as Quire's own `[n]` markers and cite
/// the wrong passage.
fn strip_references(text: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let inside = &rest[open + 1..];
        match inside.find(']') {
            Some(close) if is_reference(&inside[..close]) => {
                kept.push_str(rest[..open].trim_end());
                rest = &inside[close + 1..];
            }
            _ => {
                kept.push_str(&rest[..=open]);
                rest = inside;
            }
        }
    }
    kept.push_str(rest);
    kept
}

fn is_reference(inside: &str) -> bool {
    inside.bytes().any(|b| b.is_ascii_digit())
        && inside
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ',' | ' ' | '-' | '–'))
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `sentence` cut to size, or `None` when it is shorter than `min_chars` or mostly not
/// words.
fn quotable(sentence: String, min_chars: usize) -> Option<String> {
    let visible = sentence.chars().filter(|c| !c.is_whitespace()).count() as f32;
    let letters = sentence.chars().filter(|c| c.is_alphabetic()).count() as f32;
    let words = sentence.chars().filter(|c| c.is_alphanumeric()).count() as f32;
    if sentence.chars().count() < min_chars
        || letters < MIN_LETTER_SHARE * visible
        || words < MIN_WORD_SHARE * visible
    {
        return None;
    }
    Some(cap(sentence))
}

/// Cuts a sentence longer than [`MAX_CHARS`] at its last clause boundary (comma,
/// semicolon, colon, dash) within the limit, else at its last space, and marks the cut "…".
fn cap(sentence: String) -> String {
    let chars: Vec<char> = sentence.chars().collect();
    if chars.len() <= MAX_CHARS {
        return sentence;
    }
    let boundary = (MIN_CUT..MAX_CHARS).rev().find(|&k| {
        matches!(chars[k], ',' | ';' | ':' | '—' | '–' | '-')
            && chars[k + 1] == ' '
            && (chars[k] != '-' || chars[k - 1] == ' ')
    });
    let cut = boundary
        .or_else(|| (MIN_CUT..MAX_CHARS).rev().find(|&k| chars[k] == ' '))
        .unwrap_or(MAX_CHARS);
    let kept: String = chars[..cut].iter().collect();
    format!("{}…", kept.trim_end_matches([' ', '-', '–', '—']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviations_decimals_initials_and_lists_do_not_break_sentences() {
        let text = "Output rose 3.5 percent in 2023, according to Dr. Jones of the \
            Institute. Earlier work (e.g. Smith et al. 2019) found less, see Fig. 2 and \
            No. 7 of the series. The method was proposed by J. R. Smith vs. the older \
            one, i.e. the sieve. Open the drain, e.g. the valve at the bottom, before you \
            start! Is it 2.5 bar? Yes.\n\
            - Remove the filter cover and clean the mesh.\n\
            - Refit the cover and tighten the screws by hand\n\
            1. Switch the pump on and check for leaks.";
        assert_eq!(
            split_sentences(text),
            [
                "Output rose 3.5 percent in 2023, according to Dr. Jones of the Institute.",
                "Earlier work (e.g. Smith et al. 2019) found less, see Fig. 2 and No. 7 of \
                 the series.",
                "The method was proposed by J. R. Smith vs. the older one, i.e. the sieve.",
                "Open the drain, e.g. the valve at the bottom, before you start!",
                "Remove the filter cover and clean the mesh.",
                "Refit the cover and tighten the screws by hand",
                "Switch the pump on and check for leaks.",
            ]
        );
    }

    #[test]
    fn a_capital_letter_after_a_common_word_ends_the_sentence() {
        assert_eq!(
            split_sentences(
                "Patients were given vitamin D. Fracture rates fell over five years. \
                 The study was led by A. Kumar and colleagues in Pune."
            ),
            [
                "Patients were given vitamin D.",
                "Fracture rates fell over five years.",
                "The study was led by A. Kumar and colleagues in Pune.",
            ]
        );
    }

    #[test]
    fn wrapped_lines_are_joined_and_headings_dropped() {
        let text = "Priming the pump\n\
            Before the first start the casing must be filled with water through\n\
            the priming plug. Use clean water only; dirty water wears the seal and the\n\
            impel-\nler quickly.\n\nSteps: 1. Open the valve. 2. Close the drain plug firmly.";
        assert_eq!(
            split_sentences(text),
            [
                "Before the first start the casing must be filled with water through the \
                 priming plug.",
                "Use clean water only; dirty water wears the seal and the impeller quickly.",
                "Steps: 1. Open the valve.",
                "Close the drain plug firmly.",
            ]
        );
    }

    #[test]
    fn table_rows_are_kept_and_debris_dropped() {
        let text = "Model | Flow | Pressure\n|---|---|---|\nXR-200 | 3.5 m3/h | 6.0 bar\n\
            Max. head | 42 m\n\
            Maximum water temperature | 35 °C | continuous duty\n12.5 | 13.0 | 14.2 | 15.9";
        assert_eq!(
            split_sentences(text),
            [
                "Model | Flow | Pressure",
                "XR-200 | 3.5 m3/h | 6.0 bar",
                "Max. head | 42 m",
                "Maximum water temperature | 35 °C | continuous duty",
            ]
        );
    }

    #[test]
    fn a_passage_starting_mid_sentence_is_marked() {
        let sentences =
            split_sentences("filling the casing with clean water. Close the plug before starting.");
        assert_eq!(
            sentences,
            [
                "…filling the casing with clean water.",
                "Close the plug before starting."
            ]
        );
    }

    #[test]
    fn long_sentences_are_cut_at_a_clause_boundary() {
        let clauses: String = (1..=9)
            .map(|n| format!("clause {n} of the warranty covers the pump body and the motor, "))
            .collect();
        let sentences = split_sentences(&format!("In short, {clauses}and nothing else."));
        assert_eq!(sentences.len(), 1);
        let cut = &sentences[0];
        assert!(cut.ends_with("the motor…"), "{cut}");
        assert!((MIN_CUT..=MAX_CHARS + 1).contains(&cut.chars().count()));

        let words = "word ".repeat(120);
        let cut = &split_sentences(&format!("Many {words}end."))[0];
        assert!(cut.ends_with("word…"), "{cut}");
    }

    #[test]
    fn reference_numbers_that_would_pass_for_markers_are_removed() {
        assert_eq!(
            split_sentences(
                "Dry running destroys the seal within seconds [12]. Earlier reports [3, 4] \
                 and a review [5–7] agree [sic] on this."
            ),
            [
                "Dry running destroys the seal within seconds.",
                "Earlier reports and a review agree [sic] on this.",
            ]
        );
    }

    #[test]
    fn each_line_of_a_pdf_statement_is_a_row_of_its_own() {
        let statement = "Consolidated Statements of Operations\n\
                         Years ended December 31, 2022 2021\n\
                         Income tax (expense)/benefit (31) 743\n\
                         Accounts payable $ 1,174 $ 1,587\n\
                         Net loss attributable to shareholders ($4,935) ($4,202)";
        assert_eq!(
            split_sentences(statement),
            [
                "Years ended December 31, 2022 2021",
                "Income tax (expense)/benefit (31) 743",
                "Accounts payable $ 1,174 $ 1,587",
                "Net loss attributable to shareholders ($4,935) ($4,202)",
            ]
        );
        assert!(is_figure_row("Total — 12.5% 10.1%"));
        // Prose ending with a year or one figure, and figures without a label, are not rows.
        for line in [
            "Sales rose in 2021 and 2020.",
            "Sales rose to 1,500",
            "2,133 1,836",
            "Revenue was $5 in 2021.",
        ] {
            assert!(!is_figure_row(line), "{line}");
        }
        // A wrapped line of prose that happens to end with a figure stays joined.
        assert_eq!(
            split_sentences(
                "Across all regions the company's sales in the year rose to 1,500\n\
                 units, the most since the plant opened."
            ),
            [
                "Across all regions the company's sales in the year rose to 1,500 units, the \
                 most since the plant opened."
            ]
        );
    }
}
