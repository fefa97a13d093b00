//! Pictures in DOCX and PPTX: read by OCR where the text around them is little, on the page
//! (slide) that draws them; skipped where OCR could not use them; bounded by `ocr.max_pages`;
//! and named in the reason of a picture-only file without OCR. The tests that recognise text
//! run the real Tesseract; the others use a program that does not exist, so any attempt to
//! read a picture would fail them.

use super::resolve;
use crate::fixtures::{DocxPart, PptxSlide, docx, png, png_claiming, pptx};
use crate::test_support::{has_phrase, ocr_settings, page_text, real_ocr, words};
use crate::{Ocr, ParseError, ParseLimits, ParsedDocument, parse, parse_with_ocr};

const PUMP: &str = "The pump must be primed with clean water before it is started.";
const VALVE: &str = "Close the isolation valve and release the pressure in the line.";
const SEAL: &str = "Replace the mechanical seal every two years or after a leak.";

/// Text enough that a slide's pictures are not read (over `SLIDE_LITTLE_TEXT`).
const BULLETS: &str = "Inspections are monthly in winter and weekly in summer.\n\
     Every finding is written into the plant log the same day.";

fn with_ocr(bytes: &[u8], name: &str, ocr: &Ocr) -> Result<ParsedDocument, ParseError> {
    parse_with_ocr(bytes, name, "", &ParseLimits::default(), Some(ocr))
}

/// OCR that fails if it is ever asked to read a picture.
fn unreachable_ocr(max_pages: u32) -> Ocr {
    let mut settings = ocr_settings("/nonexistent/tesseract".into());
    settings.max_pages = max_pages;
    Ocr::new(settings)
}

/// A 32 × 32 PNG: a real image, too small to hold a line of text.
fn icon() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::GrayImage::from_pixel(32, 32, image::Luma([0]))
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// The start of an EMF (a Windows metafile, which the decoders do not read): its header record.
const EMF: &[u8] = b"\x01\x00\x00\x00\x6c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\
    \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\
    \x00\x00\x00\x00\x20\x45\x4d\x46";

fn picture_slide<'a>(pictures: &'a [&'a str]) -> PptxSlide<'a> {
    PptxSlide {
        pictures,
        ..PptxSlide::default()
    }
}

#[test]
fn a_deck_of_slide_pictures_is_read_slide_by_slide() {
    let (pump, valve) = (png(PUMP), png(VALVE));
    let deck = pptx(
        &[picture_slide(&["pump.png"]), picture_slide(&["valve.png"])],
        &[("pump.png", &pump), ("valve.png", &valve)],
    );
    let doc = with_ocr(&deck, "deck.pptx", &real_ocr()).unwrap();
    assert_eq!(doc.page_count, 2);
    let (one, two) = (page_text(&doc, 1), page_text(&doc, 2));
    assert!(
        has_phrase(&one, PUMP) && !has_phrase(&one, VALVE),
        "{doc:?}"
    );
    assert!(
        has_phrase(&two, VALVE) && !has_phrase(&two, PUMP),
        "{doc:?}"
    );
}

#[test]
fn only_slides_with_little_text_have_their_pictures_read_and_each_picture_once() {
    let (seal, valve, icon) = (png(SEAL), png(VALVE), icon());
    let deck = pptx(
        &[
            PptxSlide {
                title: "Routine",
                text: BULLETS,
                pictures: &["seal.png"],
            },
            PptxSlide {
                title: "Shutdown",
                text: "",
                pictures: &["logo.emf", "valve.png", "icon.png"],
            },
            picture_slide(&["valve.png"]),
        ],
        &[
            ("seal.png", &seal),
            ("valve.png", &valve),
            ("icon.png", &icon),
            ("logo.emf", EMF),
        ],
    );
    // One picture to read: the seal is beside enough text, the EMF and the icon are not
    // images OCR can use, and the valve is the same picture on slides 2 and 3.
    let mut settings = ocr_settings(crate::test_support::tesseract());
    settings.max_pages = 1;
    let doc = with_ocr(&deck, "deck.pptx", &Ocr::new(settings)).unwrap();
    assert_eq!(doc.page_count, 3);
    assert_eq!(page_text(&doc, 1), BULLETS);
    let two: Vec<_> = doc.blocks.iter().filter(|b| b.page == 2).collect();
    assert!(two.iter().all(|b| b.section == "Shutdown"), "{doc:?}");
    assert!(has_phrase(&page_text(&doc, 2), VALVE), "{doc:?}");
    assert!(has_phrase(&page_text(&doc, 3), VALVE), "{doc:?}");
}

#[test]
fn a_docx_of_scans_has_each_read_once_on_its_page() {
    let (pump, valve) = (png(PUMP), png(VALVE));
    let file = docx(
        &[
            DocxPart::Picture("pump.png"),
            DocxPart::PageBreak,
            DocxPart::PictureWithFallback("valve.png"),
        ],
        &[("pump.png", &pump), ("valve.png", &valve)],
    );
    let doc = with_ocr(&file, "letter.docx", &real_ocr()).unwrap();
    assert_eq!(doc.page_count, 2, "{doc:?}");
    assert!(has_phrase(&page_text(&doc, 1), PUMP), "{doc:?}");
    assert!(has_phrase(&page_text(&doc, 2), VALVE), "{doc:?}");
    // The drawing and its VML fallback are one picture.
    let isolation = words(&page_text(&doc, 2))
        .iter()
        .filter(|w| *w == "isolation")
        .count();
    assert_eq!(isolation, 1, "{doc:?}");
}

#[test]
fn a_docx_with_text_keeps_its_pictures_unread() {
    let pump = png(PUMP);
    let text = "The plant runs three pumps in parallel; each is inspected monthly. ".repeat(5);
    let file = docx(
        &[DocxPart::Text(&text), DocxPart::Picture("pump.png")],
        &[("pump.png", &pump)],
    );
    let doc = with_ocr(&file, "report.docx", &unreachable_ocr(50)).unwrap();
    assert_eq!(doc.blocks.len(), 1);
    assert_eq!(doc.blocks[0].text, text.trim());
}

#[test]
fn pictures_ocr_cannot_use_are_skipped_and_oversized_ones_fail() {
    let mut damaged = png(PUMP);
    damaged.truncate(damaged.len() / 2);
    let icon = icon();
    let deck = pptx(
        &[PptxSlide {
            title: "Results",
            text: "",
            pictures: &["logo.emf", "icon.png", "cut.png"],
        }],
        &[
            ("logo.emf", EMF),
            ("icon.png", &icon),
            ("cut.png", &damaged),
        ],
    );
    let doc = with_ocr(&deck, "deck.pptx", &unreachable_ocr(50)).unwrap();
    assert_eq!(page_text(&doc, 1), "Results");

    let bomb = png_claiming(100_000, 100_000);
    let deck = pptx(&[picture_slide(&["bomb.png"])], &[("bomb.png", &bomb)]);
    let err = with_ocr(&deck, "deck.pptx", &unreachable_ocr(50)).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the PNG image claims 100000 × 100000 pixels"),
        "{err}"
    );
    assert!(err.to_string().ends_with("(ppt/media/bomb.png)"), "{err}");
}

#[test]
fn pictures_over_ocr_max_pages_fail_before_any_is_read() {
    let (pump, valve) = (png(PUMP), png(VALVE));
    let media = [("pump.png", &pump[..]), ("valve.png", &valve[..])];
    let deck = pptx(
        &[picture_slide(&["pump.png"]), picture_slide(&["valve.png"])],
        &media,
    );
    let err = with_ocr(&deck, "deck.pptx", &unreachable_ocr(1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the PPTX presentation has 2 pictures that need OCR, more than the limit of 1 \
         (ocr.max_pages)"
    );
    let file = docx(
        &[
            DocxPart::Picture("pump.png"),
            DocxPart::Picture("valve.png"),
        ],
        &media,
    );
    let err = with_ocr(&file, "scan.docx", &unreachable_ocr(1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the DOCX document has 2 pictures that need OCR, more than the limit of 1 \
         (ocr.max_pages)"
    );
}

#[test]
fn without_ocr_picture_only_files_say_how_to_turn_it_on() {
    let pump = png(PUMP);
    let deck = pptx(&[picture_slide(&["pump.png"])], &[("pump.png", &pump)]);
    let err = parse(&deck, "deck.pptx", "", &ParseLimits::default()).unwrap_err();
    assert_eq!(err, ParseError::PicturesOnly("PPTX presentation".into()));
    assert!(
        err.to_string()
            .starts_with("the PPTX presentation holds only pictures and OCR is not enabled; OCR would read it: install Tesseract"),
        "{err}"
    );
    assert!(
        err.to_string().contains("ocr.enabled = auto or true"),
        "{err}"
    );
    let file = docx(&[DocxPart::Picture("pump.png")], &[("pump.png", &pump)]);
    let err = parse(&file, "scan.docx", "", &ParseLimits::default()).unwrap_err();
    assert_eq!(err, ParseError::PicturesOnly("DOCX document".into()));

    // Pictures OCR could not read leave a file simply empty; text beside them is kept.
    let icon = icon();
    let deck = pptx(&[picture_slide(&["icon.png"])], &[("icon.png", &icon)]);
    let err = parse(&deck, "deck.pptx", "", &ParseLimits::default()).unwrap_err();
    assert_eq!(err, ParseError::Empty);
    let deck = pptx(
        &[PptxSlide {
            title: "Pump",
            text: "",
            pictures: &["pump.png"],
        }],
        &[("pump.png", &pump)],
    );
    let doc = parse(&deck, "deck.pptx", "", &ParseLimits::default()).unwrap();
    assert_eq!(page_text(&doc, 1), "Pump");
}

#[test]
fn relationship_targets_resolve_against_their_part() {
    assert_eq!(
        resolve("ppt/slides", "../media/image1.png"),
        "ppt/media/image1.png"
    );
    assert_eq!(resolve("word", "media/image1.png"), "word/media/image1.png");
    assert_eq!(resolve("ppt/slides", "/ppt/media/a.png"), "ppt/media/a.png");
    assert_eq!(resolve("ppt/slides", "./../../x.png"), "x.png");
}
