//! The seeds of `quire bench fuzz`: the files below `--corpus` and small built-in files, one
//! or more per format, grouped by the format Quire detects. Each input draws a format first,
//! then a seed of it, so every parser gets its share however many files of one kind the
//! corpus holds.

use std::collections::BTreeMap;
use std::io::{Cursor, Write};
use std::path::Path;

use anyhow::Context;
use quire_parse::detect_format;
use rand::Rng;

use crate::eval::collect;

/// One seed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seed {
    /// The name the parser is given (format detection reads its extension).
    pub(crate) name: String,
    /// The format Quire detects, as its description.
    pub(crate) format: String,
    /// Where it came from: a path, or `built-in`.
    pub(crate) origin: String,
    pub(crate) bytes: Vec<u8>,
}

impl Seed {
    fn new(name: &str, origin: String, bytes: Vec<u8>) -> Self {
        let format = detect_format(&bytes, name, "").describe().to_owned();
        Self {
            name: name.to_owned(),
            format,
            origin,
            bytes,
        }
    }
}

/// The seeds, by format in name order, each format's seeds in path order: the same corpus
/// gives the same order, which `--replay` relies on.
#[derive(Debug)]
pub(crate) struct Seeds {
    groups: Vec<(String, Vec<Seed>)>,
    from_corpus: usize,
    too_large: usize,
}

impl Seeds {
    /// The built-in seeds and the files below `corpus` (hidden ones and those over
    /// `max_bytes` left out).
    pub(crate) fn load(corpus: Option<&Path>, max_bytes: u64) -> anyhow::Result<Self> {
        let mut all = built_in();
        let mut too_large = 0;
        let mut from_corpus = 0;
        if let Some(dir) = corpus {
            let mut paths = Vec::new();
            collect(dir, &mut paths)
                .with_context(|| format!("could not read {}", dir.display()))?;
            paths.sort();
            for path in paths {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if name.starts_with('.') {
                    continue;
                }
                let size = std::fs::metadata(&path)
                    .with_context(|| format!("could not read {}", path.display()))?
                    .len();
                if size > max_bytes {
                    too_large += 1;
                    continue;
                }
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("could not read {}", path.display()))?;
                all.push(Seed::new(&name, path.display().to_string(), bytes));
                from_corpus += 1;
            }
        }
        let mut groups: BTreeMap<String, Vec<Seed>> = BTreeMap::new();
        for seed in all {
            groups.entry(seed.format.clone()).or_default().push(seed);
        }
        Ok(Self {
            groups: groups.into_iter().collect(),
            from_corpus,
            too_large,
        })
    }

    /// One line on what the run starts from.
    pub(crate) fn describe(&self) -> String {
        let seeds: usize = self.groups.iter().map(|(_, g)| g.len()).sum();
        format!(
            "seeds                   {seeds} in {} formats ({} from the corpus, {} built in; {} \
             files over --max-seed-kib left out)",
            self.groups.len(),
            self.from_corpus,
            seeds - self.from_corpus,
            self.too_large
        )
    }

    /// A format, then a seed of it and a donor of the same format to splice from.
    pub(crate) fn pick(&self, rng: &mut impl Rng) -> (&Seed, &Seed) {
        let (_, group) = &self.groups[rng.random_range(0..self.groups.len())];
        let seed = &group[rng.random_range(0..group.len())];
        let donor = &group[rng.random_range(0..group.len())];
        (seed, donor)
    }
}

/// Small files of each format Quire reads without OCR, so a run without a corpus still
/// reaches every text and container parser.
fn built_in() -> Vec<Seed> {
    let seed = |name: &str, bytes: Vec<u8>| Seed::new(name, "built-in".into(), bytes);
    vec![
        seed(
            "guide.md",
            b"# Pumps\n\nPrime the **pump** before [starting](http://x) it.\n\n## Parts\n\n\
              - seal\n- valve\n  1. inner\n\n| part | count |\n|---|---|\n| seal | 2 |\n\n\
              ```\ncode\n```\n\n> quoted\n"
                .to_vec(),
        ),
        seed(
            "parts.csv",
            b"part,count,note\nseal,2,\"a, quoted\"\"field\"\nvalve,1,\n".to_vec(),
        ),
        seed("parts.tsv", b"part\tcount\nseal\t2\nvalve\t1\n".to_vec()),
        seed(
            "notes.txt",
            "Prime the pump.\n\x0cSecond page: caf\u{e9} na\u{ef}ve.\n"
                .as_bytes()
                .to_vec(),
        ),
        seed(
            "page.html",
            b"<!DOCTYPE html><html><head><title>Pumps</title><style>p{}</style></head><body>\
              <h1>Pumps</h1><p>Prime &amp; start.</p><h2>Parts</h2><table><tr><th>part</th>\
              <td colspan=\"2\">seal</td></tr></table><ul><li>one<li>two</ul>\
              <script>var x = 1;</script></body></html>"
                .to_vec(),
        ),
        seed("message.eml", email()),
        seed(
            "memo.rtf",
            b"{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Times;}}{\\*\\generator x;}\\pard\\b Pumps\\b0\
              \\par Prime the pump \\u233? caf\\'e9.\\par{\\field{\\*\\fldinst HYPERLINK \"x\"}\
              {\\fldrslt link}}\\page Second page.\\par}"
                .to_vec(),
        ),
        seed("report.pdf", pdf()),
        seed("letter.docx", docx()),
        seed(
            "notes.odt",
            package(&[
                ("mimetype", "application/vnd.oasis.opendocument.text".into()),
                ("content.xml", open_document("text", ODT_BODY)),
            ]),
        ),
        seed(
            "slides.odp",
            package(&[
                (
                    "mimetype",
                    "application/vnd.oasis.opendocument.presentation".into(),
                ),
                ("content.xml", open_document("presentation", ODP_BODY)),
            ]),
        ),
        seed(
            "sheet.ods",
            package(&[
                (
                    "mimetype",
                    "application/vnd.oasis.opendocument.spreadsheet".into(),
                ),
                ("content.xml", open_document("spreadsheet", ODS_BODY)),
                // The spreadsheet reader looks for encryption in the manifest.
                (
                    "META-INF/manifest.xml",
                    "<manifest:manifest xmlns:manifest=\"urn:oasis:names:tc:opendocument:xmlns:\
                     manifest:1.0\"><manifest:file-entry manifest:full-path=\"/\" \
                     manifest:media-type=\"application/vnd.oasis.opendocument.spreadsheet\"/>\
                     </manifest:manifest>"
                        .into(),
                ),
            ]),
        ),
        seed("book.epub", epub()),
    ]
}

/// A multipart message with an HTML alternative and a CSV attachment.
fn email() -> Vec<u8> {
    b"From: Ann <ann@example.com>\r\nTo: bob@example.com\r\nSubject: =?utf-8?Q?Pump_caf=C3=A9?=\r\n\
      Date: Mon, 2 Jan 2023 10:00:00 +0000\r\nMIME-Version: 1.0\r\n\
      Content-Type: multipart/mixed; boundary=\"outer\"\r\n\r\n--outer\r\n\
      Content-Type: multipart/alternative; boundary=\"inner\"\r\n\r\n--inner\r\n\
      Content-Type: text/plain; charset=utf-8\r\n\r\nPrime the pump.\r\n--inner\r\n\
      Content-Type: text/html; charset=utf-8\r\n\r\n<p>Prime the <b>pump</b>.</p>\r\n--inner--\r\n\
      --outer\r\nContent-Type: text/csv; name=\"parts.csv\"\r\n\
      Content-Disposition: attachment; filename=\"parts.csv\"\r\n\
      Content-Transfer-Encoding: base64\r\n\r\ncGFydCxjb3VudApzZWFsLDIK\r\n--outer--\r\n"
        .to_vec()
}

/// Two pages of text with an outline entry, its cross-reference table at the right offsets.
fn pdf() -> Vec<u8> {
    let page = |text: &str| format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET");
    let (one, two) = (page("Prime the pump."), page("Close the valve."));
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R /Outlines 9 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [4 0 R 6 0 R] /Count 2 >>".into(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R \
         >> >> /Contents 5 0 R >>"
            .into(),
        format!("<< /Length {} >>\nstream\n{one}\nendstream", one.len()),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R \
         >> >> /Contents 7 0 R >>"
            .into(),
        format!("<< /Length {} >>\nstream\n{two}\nendstream", two.len()),
        "<< /Title (Valves) /Parent 9 0 R /Dest [6 0 R /Fit] >>".into(),
        "<< /Type /Outlines /First 8 0 R /Last 8 0 R /Count 1 >>".into(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

const WORD: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

fn docx() -> Vec<u8> {
    package(&[
        (
            "[Content_Types].xml",
            "<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/\
             content-types\"><Override PartName=\"/word/document.xml\" ContentType=\"application/\
             vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>"
                .into(),
        ),
        (
            "word/document.xml",
            format!(
                "<?xml version=\"1.0\"?><w:document {WORD}><w:body>\
                 <w:p><w:pPr><w:pStyle w:val=\"Heading1\"/></w:pPr><w:r><w:t>Pumps</w:t></w:r></w:p>\
                 <w:p><w:r><w:t xml:space=\"preserve\">Prime the </w:t></w:r><w:r><w:rPr><w:b/>\
                 </w:rPr><w:t>pump</w:t></w:r></w:p><w:p><w:r><w:br w:type=\"page\"/></w:r></w:p>\
                 <w:tbl><w:tr><w:tc><w:p><w:r><w:t>seal</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r>\
                 <w:t>2</w:t></w:r></w:p></w:tc></w:tr></w:tbl></w:body></w:document>"
            ),
        ),
        (
            "word/styles.xml",
            format!(
                "<?xml version=\"1.0\"?><w:styles {WORD}><w:style w:type=\"paragraph\" \
                 w:styleId=\"Heading1\"><w:name w:val=\"heading 1\"/></w:style></w:styles>"
            ),
        ),
    ])
}

const OPEN_DOCUMENT_NS: &str = "xmlns:office=\"urn:oasis:names:tc:opendocument:xmlns:office:1.0\" \
     xmlns:text=\"urn:oasis:names:tc:opendocument:xmlns:text:1.0\" \
     xmlns:table=\"urn:oasis:names:tc:opendocument:xmlns:table:1.0\" \
     xmlns:draw=\"urn:oasis:names:tc:opendocument:xmlns:drawing:1.0\" \
     xmlns:presentation=\"urn:oasis:names:tc:opendocument:xmlns:presentation:1.0\"";

const ODT_BODY: &str = "<text:h text:outline-level=\"1\">Pumps</text:h><text:p>Prime<text:s/>it.\
     </text:p><text:p><text:soft-page-break/>Second page.</text:p><table:table><table:table-row>\
     <table:table-cell><text:p>seal</text:p></table:table-cell></table:table-row></table:table>";

const ODP_BODY: &str = "<draw:page draw:name=\"a\"><draw:frame presentation:class=\"title\">\
     <draw:text-box><text:p>Roadmap</text:p></draw:text-box></draw:frame></draw:page>\
     <draw:page draw:name=\"b\"><draw:frame><draw:text-box><text:p>Risks</text:p></draw:text-box>\
     </draw:frame></draw:page>";

const ODS_BODY: &str = "<table:table table:name=\"Parts\"><table:table-row><table:table-cell \
     office:value-type=\"string\"><text:p>seal</text:p></table:table-cell><table:table-cell \
     office:value-type=\"float\" office:value=\"2\"><text:p>2</text:p></table:table-cell>\
     </table:table-row></table:table>";

/// An OpenDocument `content.xml` whose body is of `kind` (text, presentation, spreadsheet).
fn open_document(kind: &str, body: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?><office:document-content {OPEN_DOCUMENT_NS} office:version=\"1.2\">\
         <office:body><office:{kind}>{body}</office:{kind}></office:body></office:document-content>"
    )
}

fn epub() -> Vec<u8> {
    package(&[
        ("mimetype", "application/epub+zip".into()),
        (
            "META-INF/container.xml",
            "<container><rootfiles><rootfile full-path=\"OEBPS/book.opf\"/></rootfiles></container>"
                .into(),
        ),
        (
            "OEBPS/book.opf",
            "<package><manifest><item id=\"a\" href=\"one.xhtml\"/><item id=\"b\" \
             href=\"two.xhtml\"/></manifest><spine><itemref idref=\"a\"/><itemref idref=\"b\"/>\
             </spine></package>"
                .into(),
        ),
        (
            "OEBPS/one.xhtml",
            "<html><body><h1>Pumps</h1><p>Prime it.</p></body></html>".into(),
        ),
        (
            "OEBPS/two.xhtml",
            "<html><body><h1>Valves</h1><p>Close it.</p></body></html>".into(),
        ),
    ])
}

/// A ZIP container of `(path, content)` entries, the first stored (as OpenDocument and EPUB
/// want their `mimetype`), the rest deflated.
fn package(entries: &[(&str, String)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (i, (path, content)) in entries.iter().enumerate() {
        let method = if i == 0 {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let options = zip::write::SimpleFileOptions::default().compression_method(method);
        // Writing to memory fails only on a broken invariant of the writer.
        zip.start_file(*path, options)
            .and_then(|()| zip.write_all(content.as_bytes()).map_err(Into::into))
            .expect("a built-in seed is written to memory");
    }
    zip.finish()
        .expect("a built-in seed is written to memory")
        .into_inner()
}

#[cfg(test)]
mod tests {
    use quire_parse::ParseLimits;

    use super::*;

    #[test]
    fn every_built_in_seed_parses_as_its_format() {
        let seeds = built_in();
        let formats: Vec<&str> = seeds.iter().map(|s| s.format.as_str()).collect();
        assert_eq!(
            formats,
            [
                "Markdown document",
                "CSV file",
                "TSV file",
                "text file",
                "HTML page",
                "e-mail message",
                "RTF document",
                "PDF document",
                "DOCX document",
                "ODT document",
                "ODP presentation",
                "ODS spreadsheet",
                "EPUB book"
            ]
        );
        for seed in &seeds {
            let doc = quire_parse::parse(&seed.bytes, &seed.name, "", &ParseLimits::default())
                .unwrap_or_else(|e| panic!("{}: {e}", seed.name));
            assert!(!doc.blocks.is_empty(), "{}", seed.name);
        }
    }

    #[test]
    fn seeds_are_grouped_by_format_and_large_files_left_out() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.csv"), "x,y\n1,2\n").unwrap();
        std::fs::write(dir.path().join("b.md"), "# B").unwrap();
        std::fs::write(dir.path().join("big.md"), "#".repeat(2000)).unwrap();
        std::fs::write(dir.path().join(".hidden.md"), "# H").unwrap();
        let seeds = Seeds::load(Some(dir.path()), 1000).unwrap();
        assert_eq!(seeds.from_corpus, 2);
        assert_eq!(seeds.too_large, 1);
        let csv = &seeds
            .groups
            .iter()
            .find(|(f, _)| f == "CSV file")
            .unwrap()
            .1;
        assert_eq!(csv.len(), 2, "the built-in CSV and a.csv");
        assert!(seeds.describe().contains("2 from the corpus"));
    }
}
