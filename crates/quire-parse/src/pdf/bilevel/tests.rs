//! The decode step alone, without OCR, on the committed scan fixtures (made by
//! `scripts/make-scan-fixtures.py`): sizes, polarity, the CCITT parameters, damage and limits.

use image::GrayImage;
use pdf_oxide::PdfDocument;

use super::{Bilevel, CcittParams, Codec, decode, is_bilevel, read};
use crate::ParseError;

const G4_PDF: &[u8] = include_bytes!("../../fixtures/scan-ccitt-g4.pdf");
const JBIG2_PDF: &[u8] = include_bytes!("../../fixtures/scan-jbig2.pdf");
/// The G4 fixture's bitmap as a bare Group 3 one-dimensional stream with end-of-line codes.
const G3_STREAM: &[u8] = include_bytes!("../../fixtures/scan-ccitt-g3.bin");
/// The same with every row starting on a byte boundary.
const G3_ALIGNED: &[u8] = include_bytes!("../../fixtures/scan-ccitt-g3-aligned.bin");
/// The fixtures' bitmap size.
const WIDTH: u32 = 1100;
const HEIGHT: u32 = 208;
const WHAT: &str = "image on page 1 of the PDF document";

/// The one image of page 1 of `pdf`, read from its dictionary.
fn page_image(pdf: &[u8]) -> Bilevel {
    let doc = PdfDocument::from_bytes(pdf.to_vec()).unwrap();
    let handles = doc.page_image_handles(0).unwrap();
    assert_eq!(handles.len(), 1);
    assert!(is_bilevel(&handles[0]));
    read(&doc, 0, &handles[0]).unwrap()
}

fn decoded(image: &Bilevel) -> Result<GrayImage, String> {
    decode(image, WHAT).unwrap()
}

/// Why `image` cannot be decoded (without printing a whole page when it can).
fn why_not(image: &Bilevel) -> String {
    match decoded(image) {
        Ok(_) => panic!("the damaged stream decoded"),
        Err(reason) => reason,
    }
}

/// Share of the image's pixels that are dark.
fn dark_share(image: &GrayImage) -> f64 {
    let dark = image.pixels().filter(|p| p.0[0] < 128).count();
    dark as f64 / (u64::from(image.width()) * u64::from(image.height())) as f64
}

/// A white page with black text: a few percent of the pixels dark, the margins white.
fn assert_text_page(image: &GrayImage) {
    assert_eq!(image.dimensions(), (WIDTH, HEIGHT));
    let dark = dark_share(image);
    assert!((0.01..0.2).contains(&dark), "{dark} of the pixels are dark");
    assert!(
        (0..WIDTH).all(|x| image.get_pixel(x, 0).0[0] == 255),
        "top margin"
    );
    assert!(
        image.pixels().all(|p| p.0[0] == 0 || p.0[0] == 255),
        "bilevel"
    );
}

fn g3(params: impl FnOnce(&mut CcittParams)) -> Bilevel {
    let mut ccitt = CcittParams {
        k: 0,
        columns: WIDTH,
        rows: HEIGHT,
        black_is_1: false,
        encoded_byte_align: false,
        end_of_line: true,
        end_of_block: true,
    };
    params(&mut ccitt);
    Bilevel {
        data: G3_STREAM.to_vec(),
        codec: Codec::Ccitt(ccitt),
        inverted: false,
        height: HEIGHT,
    }
}

#[test]
fn a_ccitt_group_4_image_decodes_to_black_text_on_white() {
    let image = page_image(G4_PDF);
    let Codec::Ccitt(params) = image.codec else {
        panic!("{:?}", image.codec)
    };
    assert_eq!((params.k, params.columns, params.rows), (-1, WIDTH, HEIGHT));
    assert_text_page(&decoded(&image).unwrap());
}

#[test]
fn a_jbig2_image_with_globals_decodes_to_black_text_on_white() {
    let image = page_image(JBIG2_PDF);
    assert!(
        matches!(&image.codec, Codec::Jbig2 { globals: Some(g) } if !g.is_empty()),
        "{:?}",
        image.codec
    );
    assert_text_page(&decoded(&image).unwrap());
}

#[test]
fn group_3_plain_and_byte_aligned_decodes_to_the_same_pixels_as_group_4() {
    let g4 = decoded(&page_image(G4_PDF)).unwrap();
    assert_eq!(decoded(&g3(|_| {})).unwrap(), g4);
    // Without /Rows the image's height bounds the rows.
    assert_eq!(decoded(&g3(|p| p.rows = 0)).unwrap(), g4);
    let mut aligned = g3(|p| p.encoded_byte_align = true);
    aligned.data = G3_ALIGNED.to_vec();
    assert_eq!(decoded(&aligned).unwrap(), g4);
}

#[test]
fn black_is_1_and_an_inverted_decode_array_each_flip_the_page() {
    let plain = decoded(&g3(|_| {})).unwrap();
    let flipped = decoded(&g3(|p| p.black_is_1 = true)).unwrap();
    assert!(dark_share(&flipped) > 0.8, "{}", dark_share(&flipped));
    let mut both = g3(|p| p.black_is_1 = true);
    both.inverted = true;
    assert_eq!(decoded(&both).unwrap(), plain);

    let mut jbig2 = page_image(JBIG2_PDF);
    jbig2.inverted = true;
    assert!(dark_share(&decoded(&jbig2).unwrap()) > 0.8);
}

#[test]
fn damaged_streams_give_a_reason() {
    let mut ccitt = g3(|p| p.k = -1);
    ccitt.data = vec![0; 64];
    let reason = why_not(&ccitt);
    assert!(reason.contains("CCITT fax data is damaged"), "{reason}");

    let mut jbig2 = page_image(JBIG2_PDF);
    // Cut inside the generic region's header, after the page information.
    jbig2.data.truncate(50);
    let reason = why_not(&jbig2);
    assert!(reason.contains("JBIG2 data is damaged"), "{reason}");

    // Globals the page does not draw on cost it nothing, damaged or not: the strict reading
    // fails, the lenient one still shows the text.
    let mut jbig2 = page_image(JBIG2_PDF);
    jbig2.codec = Codec::Jbig2 {
        globals: Some(vec![0xFF; 40]),
    };
    assert_text_page(&decoded(&jbig2).unwrap());
}

#[test]
fn a_stream_cut_short_keeps_the_rows_it_has() {
    let g4 = page_image(G4_PDF);
    let whole = decoded(&g4).unwrap();
    let mut cut = page_image(G4_PDF);
    cut.data.truncate(g4.data.len() / 2);
    let part = decoded(&cut).unwrap();
    assert_eq!(part.dimensions(), whole.dimensions());
    assert!(dark_share(&part) > 0.0 && dark_share(&part) < dark_share(&whole));
}

#[test]
fn the_declared_size_is_checked_before_decoding() {
    // A fax without /Rows whose image claims 29,000 × 29,000 pixels.
    let mut fax = g3(|p| {
        p.columns = 29_000;
        p.rows = 0;
    });
    fax.height = 29_000;
    assert!(matches!(
        decode(&fax, WHAT),
        Err(ParseError::LimitExceeded(_))
    ));

    // A JBIG2 page whose page information claims the same: width and height follow the
    // segment's 11-byte header.
    let mut jbig2 = page_image(JBIG2_PDF);
    jbig2.data[11..19].copy_from_slice(&[0, 0, 0x71, 0x48, 0, 0, 0x71, 0x48]);
    assert!(matches!(
        decode(&jbig2, WHAT),
        Err(ParseError::LimitExceeded(_))
    ));
}

/// `data` as a zlib stream of one stored (uncompressed) deflate block.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let len = u16::try_from(data.len()).unwrap();
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    let mut out = vec![0x78, 0x01, 0x01];
    out.extend(len.to_le_bytes());
    out.extend((!len).to_le_bytes());
    out.extend(data);
    out.extend(((b << 16) | a).to_be_bytes());
    out
}

#[test]
fn a_fax_behind_another_filter_is_unpacked_first() {
    use pdf_oxide::object::Object;
    let g4 = page_image(G4_PDF);
    let doc = PdfDocument::from_bytes(G4_PDF.to_vec()).unwrap();
    let name = |n: &str| Object::Name(n.into());
    let fax_parms = [
        ("K", Object::Integer(-1)),
        ("Columns", Object::Integer(WIDTH.into())),
        ("Rows", Object::Integer(HEIGHT.into())),
    ];
    let dict = [
        ("Subtype", name("Image")),
        ("Height", Object::Integer(HEIGHT.into())),
        (
            "Filter",
            Object::Array(vec![name("FlateDecode"), name("CCITTFaxDecode")]),
        ),
        (
            "DecodeParms",
            Object::Array(vec![
                Object::Null,
                Object::Dictionary(fax_parms.map(|(k, v)| (k.to_owned(), v)).into()),
            ]),
        ),
    ]
    .map(|(k, v)| (k.to_owned(), v))
    .into();
    let packed = super::from_stream(&doc, &dict, zlib_stored(&g4.data)).unwrap();
    assert_eq!(packed.data, g4.data);
    assert_eq!(decoded(&packed).unwrap(), decoded(&g4).unwrap());
}
