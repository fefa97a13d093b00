//! Legacy Office and Outlook files from the shared evaluation set (`../shared/eval/docs`, kept
//! outside the repository and never committed), read in place. `QUIRE_EVAL_DOCS` overrides
//! the directory. A clone without the set (it is not redistributable with the code) says so on
//! stderr and checks nothing here; the same formats are tested on files the unit tests build
//! themselves, which need nothing outside the repository.

use std::path::PathBuf;

use quire_parse::{Format, ParseLimits, ParsedDocument, parse};

/// The evaluation documents: `QUIRE_EVAL_DOCS`, else `shared/eval/docs` beside the clone;
/// `None` when the set is not there.
fn eval_docs() -> Option<PathBuf> {
    let dir = std::env::var_os("QUIRE_EVAL_DOCS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/eval/docs")
        });
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "the evaluation documents are not at {} (set QUIRE_EVAL_DOCS): nothing checked",
            dir.display()
        );
        None
    }
}

fn parse_file(relative: &str) -> ParsedDocument {
    let path = eval_docs()
        .expect("checked by the test first")
        .join(relative);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse(&bytes, relative, "", &ParseLimits::default())
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn text(doc: &ParsedDocument) -> String {
    doc.blocks
        .iter()
        .map(|b| format!("[{} {}] {}", b.page, b.section, b.text))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn word_97_documents_keep_their_paragraphs_and_tables() {
    if eval_docs().is_none() {
        return;
    }
    let doc = parse_file("other/unstructured__fake-doc-emphasized-text.doc");
    assert_eq!(doc.format, Format::Doc);
    assert_eq!(
        text(&doc),
        "[1 ] Header Col 1 | Header Col 2\n\
         [1 ] A bold italic bold-italic example | A Link example\n\
         [1 ] I am a bold italic bold-italic text.\n\
         [1 ] I am a normal text."
    );
    // Paragraphs in Word's heading styles become sections.
    let doc = parse_file("other/unstructured__duplicate-paragraphs.doc");
    assert_eq!(doc.blocks.len(), 6);
    assert!(
        doc.blocks
            .iter()
            .all(|b| b.section == "This document contains duplicates" && b.text == "some text"),
        "{}",
        text(&doc)
    );
    assert_eq!(
        parse_file("other/unstructured__fake.doc").blocks[0].text,
        "Lorem ipsum dolor sit amet."
    );
    let simple = text(&parse_file("other/unstructured__simple.doc"));
    assert!(
        simple.contains("[1 These are a few of my favorite things:] This is my first thought. This is my second thought."),
        "{simple}"
    );
    assert!(
        simple.contains("[1 These are a few of my favorite things:] DOYLESTOWN, PA 18901"),
        "{simple}"
    );
    // A DOCX saved under a .doc name is read as what its bytes are.
    assert_eq!(
        parse_file("other/unstructured__eng_spa_mult.doc").format,
        Format::Docx
    );
}

#[test]
fn excel_97_sheets_are_pages_named_after_the_sheet() {
    if eval_docs().is_none() {
        return;
    }
    let doc = parse_file("other/unstructured__tests-example.xls");
    assert_eq!(doc.format, Format::Xls);
    assert_eq!(doc.page_count, 3);
    let sections: Vec<(u32, &str)> = doc
        .blocks
        .iter()
        .map(|b| (b.page, b.section.as_str()))
        .collect();
    assert_eq!(sections.first(), Some(&(1, "Example Test")));
    assert_eq!(sections.last(), Some(&(3, "Readme")));
    assert!(
        doc.blocks
            .iter()
            .any(|b| b.page == 2 && b.text.ends_with("MC; column 2: Multiple Choice")),
        "{}",
        text(&doc)
    );
    assert!(
        doc.blocks
            .iter()
            .any(|b| b.text.contains("4: λ; correct: Λ"))
    );
}

#[test]
fn outlook_messages_have_headers_and_body() {
    if eval_docs().is_none() {
        return;
    }
    let doc = parse_file("eml/unstructured__fake-email-with-cc-and-bcc.msg");
    assert_eq!(doc.format, Format::Msg);
    assert_eq!(
        text(&doc),
        "[1 ] From: John <johnjennings702@gmail.com>\n\
         To: John Jennings <john-ctr@unstructured.io>\n\
         Cc: steve@unstructured.io\n\
         Subject: Fake email with cc and bcc recipients\n\
         Date: 2024-07-29T20:38:11Z\n\
         [1 ] This is a test email. Please ignore.\n\
         [1 ] All the best,\nJohn"
    );
    // The blind copy stays blind.
    assert!(!text(&doc).contains("hello@unstructured.io"));
}

#[test]
fn a_ppt_name_on_a_pptx_is_read_as_pptx() {
    if eval_docs().is_none() {
        return;
    }
    let doc = parse_file("other/unstructured__eng_spa_mult.ppt");
    assert_eq!(doc.format, Format::Pptx);
    assert_eq!(doc.page_count, 6);
    assert_eq!(doc.blocks[0].section, "Testing multiple languages");
}
