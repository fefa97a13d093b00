//! OCR through each path: image documents (PNG, JPEG, WebP, multi-page TIFF), scanned and
//! mixed PDFs, e-mail picture attachments, and the bounds (pages, time, pixels).

use std::path::PathBuf;

use crate::fixtures::{PdfPage, png, png_claiming, scanned_pdf, text_page_image, tiff};
use crate::test_support::{has_phrase, ocr_settings, page_text, real_ocr};
use crate::{Ocr, ParseError, ParseLimits, ParsedDocument, parse, parse_with_ocr};

const PUMP: &str = "The pump must be primed with clean water before it is started.";
const VALVE: &str = "Close the isolation valve and release the pressure in the line.";
const SEAL: &str = "Replace the mechanical seal every two years or after a leak.";

fn with_ocr(bytes: &[u8], name: &str, ocr: &Ocr) -> Result<ParsedDocument, ParseError> {
    parse_with_ocr(bytes, name, "", &ParseLimits::default(), Some(ocr))
}

/// A stand-in `tesseract` that sleeps: for the time bounds, without depending on how fast the
/// real one is.
fn sleeping_program(dir: &tempfile::TempDir) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.path().join("tesseract");
    std::fs::write(&path, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// OCR whose program does not exist: for bounds that must stop a document before OCR runs.
fn unreachable_ocr() -> Ocr {
    Ocr::new(ocr_settings("/nonexistent/tesseract".into()))
}

#[test]
fn a_png_is_read_by_ocr() {
    let doc = with_ocr(&png(&format!("{PUMP}\n\n{VALVE}")), "scan.png", &real_ocr()).unwrap();
    assert_eq!(doc.page_count, 1);
    let text = page_text(&doc, 1);
    assert!(has_phrase(&text, PUMP), "{text}");
    assert!(has_phrase(&text, VALVE), "{text}");
}

#[test]
fn jpeg_and_webp_are_read_by_ocr() {
    let page = text_page_image(SEAL);
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 85)
        .encode_image(&page)
        .unwrap();
    let mut webp = std::io::Cursor::new(Vec::new());
    page.write_to(&mut webp, image::ImageFormat::WebP).unwrap();
    let ocr = real_ocr();
    for (bytes, name) in [(jpeg, "photo.bin"), (webp.into_inner(), "photo")] {
        let doc = with_ocr(&bytes, name, &ocr).unwrap();
        assert!(has_phrase(&page_text(&doc, 1), SEAL), "{name}: {doc:?}");
    }
}

#[test]
fn each_tiff_page_is_a_page() {
    let doc = with_ocr(&tiff(&[PUMP, VALVE, SEAL]), "fax.tif", &real_ocr()).unwrap();
    assert_eq!(doc.page_count, 3);
    for (page, phrase) in [(1, PUMP), (2, VALVE), (3, SEAL)] {
        assert!(
            has_phrase(&page_text(&doc, page), phrase),
            "page {page}: {doc:?}"
        );
    }
}

#[test]
fn scanned_pdf_pages_are_read_and_text_pages_keep_their_text() {
    let bytes = scanned_pdf(&[
        PdfPage::Text(PUMP),
        PdfPage::Scan(VALVE),
        PdfPage::Text(SEAL),
    ]);
    let doc = with_ocr(&bytes, "mixed.pdf", &real_ocr()).unwrap();
    assert_eq!(doc.page_count, 3);
    assert_eq!(page_text(&doc, 1), PUMP);
    assert!(has_phrase(&page_text(&doc, 2), VALVE), "{doc:?}");
    assert_eq!(page_text(&doc, 3), SEAL);

    let only_scans = scanned_pdf(&[PdfPage::Scan(SEAL), PdfPage::Scan(PUMP)]);
    let doc = with_ocr(&only_scans, "scan.pdf", &real_ocr()).unwrap();
    assert!(has_phrase(&page_text(&doc, 1), SEAL), "{doc:?}");
    assert!(has_phrase(&page_text(&doc, 2), PUMP), "{doc:?}");
}

/// A page image no decoder reads costs its page only: the document keeps its text pages and
/// its other scans; with nothing else to read, it fails with the image's reason.
#[test]
fn an_undecodable_page_image_costs_its_page_not_the_document() {
    let bytes = scanned_pdf(&[
        PdfPage::Text(PUMP),
        PdfPage::BrokenScan,
        PdfPage::Scan(VALVE),
    ]);
    let doc = with_ocr(&bytes, "report.pdf", &real_ocr()).unwrap();
    assert_eq!(doc.page_count, 3);
    assert_eq!(page_text(&doc, 1), PUMP);
    assert_eq!(page_text(&doc, 2), "");
    assert!(has_phrase(&page_text(&doc, 3), VALVE), "{doc:?}");

    let broken = scanned_pdf(&[PdfPage::BrokenScan]);
    let error = with_ocr(&broken, "broken.pdf", &real_ocr())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the image on page 1 of the PDF document could not be decoded for OCR"),
        "{error}"
    );
}

/// A one-page scan whose image is CCITT Group 4, and one whose image is JBIG2 with globals
/// (`scripts/make-scan-fixtures.py`).
const CCITT_SCAN: &[u8] = include_bytes!("../fixtures/scan-ccitt-g4.pdf");
const JBIG2_SCAN: &[u8] = include_bytes!("../fixtures/scan-jbig2.pdf");

#[test]
fn ccitt_group_4_and_jbig2_scans_are_read_by_ocr() {
    let ocr = real_ocr();
    for (pdf, phrases) in [
        (
            CCITT_SCAN,
            ["harbour office", "the crane inspection is due on Monday"],
        ),
        (
            JBIG2_SCAN,
            ["boiler report", "replace the pressure gauge next spring"],
        ),
    ] {
        let doc = with_ocr(pdf, "scan.pdf", &ocr).unwrap();
        assert_eq!(doc.page_count, 1);
        let text = page_text(&doc, 1);
        for phrase in phrases {
            assert!(has_phrase(&text, phrase), "{phrase:?} in {text:?}");
        }
    }
}

/// `pdf` with the bytes of its image stream (object 4) replaced by `fill`, lengths kept.
fn with_damaged_image(pdf: &[u8], fill: u8) -> Vec<u8> {
    let find = |needle: &[u8], from: usize| {
        from + pdf[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap()
    };
    let start = find(b"stream\n", find(b"4 0 obj", 0)) + b"stream\n".len();
    let end = find(b"\nendstream", start);
    let mut damaged = pdf.to_vec();
    damaged[start..end].fill(fill);
    damaged
}

#[test]
fn a_damaged_ccitt_or_jbig2_stream_fails_with_a_reason() {
    let ocr = real_ocr();
    for (pdf, fill, reason) in [
        (CCITT_SCAN, 0x00, "the CCITT fax data is damaged"),
        (JBIG2_SCAN, 0xFF, "the JBIG2 data is damaged"),
    ] {
        let error = with_ocr(&with_damaged_image(pdf, fill), "scan.pdf", &ocr)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("the image on page 1 of the PDF document could not be decoded for OCR")
                && error.contains(reason),
            "{error}"
        );
    }
}

#[test]
fn an_e_mail_that_is_only_a_photo_is_read() {
    use std::fmt::Write;
    let picture = png(VALVE);
    let mut encoded = String::new();
    for chunk in picture.chunks(57) {
        let _ = writeln!(encoded, "{}", base64(chunk));
    }
    let mail = format!(
        "From: a@example.com\r\nTo: b@example.com\r\nSubject: scan\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\n\
         Content-Type: text/plain\r\n\r\nSee attached.\r\n--b\r\n\
         Content-Type: image/png\r\nContent-Disposition: attachment; filename=\"scan.png\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{encoded}--b--\r\n"
    );
    let doc = with_ocr(mail.as_bytes(), "scan.eml", &real_ocr()).unwrap();
    let attachment: Vec<_> = doc
        .blocks
        .iter()
        .filter(|b| b.section == "Attachment: scan.png")
        .map(|b| b.text.as_str())
        .collect();
    assert!(has_phrase(&attachment.join("\n"), VALVE), "{doc:?}");
}

/// Standard base64, for the e-mail fixture.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            *group.get(1).unwrap_or(&0),
            *group.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn without_ocr_scans_and_images_say_how_to_turn_it_on() {
    let err = parse(&png(PUMP), "a.png", "", &ParseLimits::default()).unwrap_err();
    assert_eq!(err, ParseError::NeedsOcr("PNG image".into()));
    assert!(err.to_string().contains("ocr.enabled"), "{err}");
    let scan = scanned_pdf(&[PdfPage::Scan(PUMP)]);
    let err = parse(&scan, "a.pdf", "", &ParseLimits::default()).unwrap_err();
    assert_eq!(err, ParseError::Scanned);
    assert!(
        err.to_string().contains("apt-get install tesseract-ocr"),
        "{err}"
    );
}

#[test]
fn scans_over_ocr_max_pages_fail_before_any_page_is_read() {
    let mut settings = ocr_settings("/nonexistent/tesseract".into());
    settings.max_pages = 2;
    let ocr = Ocr::new(settings);
    let pages = [
        PdfPage::Scan("one"),
        PdfPage::Scan("two"),
        PdfPage::Scan("three"),
    ];
    let err = with_ocr(&scanned_pdf(&pages), "big.pdf", &ocr).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the PDF document has 3 pages that need OCR, more than the limit of 2 (ocr.max_pages)"
    );
    let err = with_ocr(&tiff(&["one", "two", "three"]), "big.tif", &ocr).unwrap_err();
    assert!(
        err.to_string()
            .contains("the TIFF image has 3 pages that need OCR"),
        "{err}"
    );
}

#[test]
fn a_page_over_its_time_is_stopped_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = ocr_settings(sleeping_program(&dir));
    settings.page_timeout_seconds = 1;
    let started = std::time::Instant::now();
    let err = with_ocr(&png(PUMP), "a.png", &Ocr::new(settings.clone())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "OCR of page 1 took longer than the 1-second limit per page (ocr.page_timeout_seconds)"
    );
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());

    settings.page_timeout_seconds = 60;
    settings.document_timeout_seconds = 1;
    let err = with_ocr(&png(PUMP), "a.png", &Ocr::new(settings)).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("OCR ran out of the document's time budget at page 1"),
        "{err}"
    );
}

#[test]
fn decompression_bombs_and_corrupt_images_fail_without_decoding() {
    let ocr = unreachable_ocr();
    let err = with_ocr(&png_claiming(100_000, 100_000), "bomb.png", &ocr).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the PNG image claims 100000 × 100000 pixels"),
        "{err}"
    );
    // Within the limit but holding nothing: the decoder reports the damage.
    let err = with_ocr(&png_claiming(2000, 2000), "thin.png", &ocr).unwrap_err();
    assert!(matches!(err, ParseError::Malformed { .. }), "{err:?}");
    let whole = png(PUMP);
    let err = with_ocr(&whole[..whole.len() / 2], "cut.png", &ocr).unwrap_err();
    assert!(matches!(err, ParseError::Malformed { .. }), "{err:?}");
    let err = with_ocr(b"II*\x00garbage", "bad.tif", &ocr).unwrap_err();
    assert!(matches!(err, ParseError::Malformed { .. }), "{err:?}");
}

#[test]
fn a_missing_program_fails_the_document_with_a_reason() {
    let err = with_ocr(&png(PUMP), "a.png", &unreachable_ocr()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("OCR of page 1 failed: could not start /nonexistent/tesseract"),
        "{err}"
    );
}

#[test]
fn probing_finds_the_version_and_missing_languages() {
    let program = crate::test_support::tesseract();
    let found = crate::probe(&program, None, &["eng".into()]).unwrap();
    assert!(found.version.starts_with("tesseract 5"), "{found:?}");
    assert!(found.languages.contains(&"eng".to_owned()));
    let err = crate::probe(&program, None, &["xyz".into()]).unwrap_err();
    assert!(err.contains("no data for the language(s) xyz"), "{err}");
    assert!(crate::probe("/nonexistent/tesseract".as_ref(), None, &[]).is_err());
}

/// Known text of the kind people scan: prose, numbers, names, punctuation.
const LETTER: &str = "Dear Ms Alvarez,

Thank you for your letter of 14 March 2024 about the service contract for the two cooling
towers at the Riverside plant. We have checked the invoices you sent and agree that the
charge of 1,250.00 EUR for the inspection in February was made twice.

A credit note for that amount will follow within ten working days. The next inspection is
planned for the week of 3 June; our engineer, Mr Okafor, will call you beforehand to agree
on a time that suits the shift plan.

Please quote reference SC-2024-0117 in any reply.

Yours sincerely,
Helen Brooks, Customer Service";

#[test]
fn rendered_pages_are_read_with_a_token_f1_over_0_9() {
    use crate::test_support::token_f1;
    let doc = with_ocr(&png(LETTER), "letter.png", &real_ocr()).unwrap();
    let f1 = token_f1(&page_text(&doc, 1), LETTER);
    println!("token F1 of OCR against the rendered text: {f1:.3}");
    assert!(f1 >= 0.9, "F1 {f1:.3}: {doc:?}");
}
