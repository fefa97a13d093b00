//! Images as documents (PNG, JPEG, TIFF with its pages, WebP), decoded into greyscale pages
//! for OCR under explicit limits: the size an image claims is checked before a pixel is
//! decoded, and the decoders get the same bounds, so a decompression bomb (a small PNG that
//! claims 100,000 × 100,000 pixels) fails that document instead of taking the worker's memory.

use std::borrow::Cow;
use std::io::Cursor;

use image::{DynamicImage, GrayImage, ImageFormat, ImageReader, Limits};

use crate::blocks::BlockBuilder;
use crate::ocr::Ocr;
use crate::{Extracted, ParseError, ParseLimits};

/// Most pixels one page image may have: a letter page at 1,200 dpi, or A3 at 600 dpi, fits; a
/// decoded page is then at most 4 bytes a pixel (RGBA) plus its greyscale copy.
pub(crate) const MAX_PIXELS: u64 = 140_000_000;
/// Longest side of a page image, in pixels.
const MAX_SIDE: u32 = 30_000;
/// Most bytes a decoder may allocate for one image (RGBA at [`MAX_PIXELS`] and headroom).
const MAX_DECODER_ALLOC: u64 = 4 * MAX_PIXELS + 64 * 1024 * 1024;

/// An image format Quire reads as a document, by OCR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// TIFF, every page of it.
    Tiff,
    /// WebP.
    WebP,
}

impl ImageKind {
    /// The kind whose magic bytes `head` starts with.
    pub(crate) fn sniff(head: &[u8]) -> Option<Self> {
        if head.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if head.starts_with(b"\xFF\xD8\xFF") {
            Some(Self::Jpeg)
        } else if head.starts_with(b"II*\x00") || head.starts_with(b"MM\x00*") {
            Some(Self::Tiff)
        } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
            Some(Self::WebP)
        } else {
            None
        }
    }

    /// A name for people, used in errors.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Png => "PNG image",
            Self::Jpeg => "JPEG image",
            Self::Tiff => "TIFF image",
            Self::WebP => "WebP image",
        }
    }

    fn format(self) -> ImageFormat {
        match self {
            Self::Png => ImageFormat::Png,
            Self::Jpeg => ImageFormat::Jpeg,
            Self::Tiff => ImageFormat::Tiff,
            Self::WebP => ImageFormat::WebP,
        }
    }
}

/// Reads an image document by OCR: one page per image (per TIFF page). Without OCR it fails
/// with a reason that says how to turn OCR on.
pub(crate) fn parse(
    bytes: &[u8],
    kind: ImageKind,
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
) -> Result<Extracted, ParseError> {
    let Some(ocr) = ocr else {
        return Err(ParseError::NeedsOcr(kind.describe().to_owned()));
    };
    let mut out = BlockBuilder::new();
    let mut page_count = 0;
    let total = if kind == ImageKind::Tiff {
        let pages = tiff_pages(bytes)?;
        limits.check_pages("the TIFF image", pages, "pages")?;
        ocr.check_pages("the TIFF image", pages)?;
        pages as u32
    } else {
        1
    };
    let mut read_page = |index: u32, image: GrayImage| -> Result<(), ParseError> {
        let page = index + 1;
        let text = ocr.recognize(&image, None, page)?;
        out.force_page(page);
        push_text(&mut out, &text);
        page_count = page;
        crate::progress::page_done(page, total);
        Ok(())
    };
    if kind == ImageKind::Tiff {
        for_each_tiff_page(bytes, &mut read_page)?;
    } else {
        read_page(0, decode(bytes, kind)?)?;
    }
    let (blocks, _) = out.finish();
    Ok(Extracted { blocks, page_count })
}

/// Adds OCR text: paragraphs at blank lines, lines joined within them.
pub(crate) fn push_text(out: &mut BlockBuilder, text: &str) {
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            out.end_block();
        } else {
            out.push_line(line);
        }
    }
    out.end_block();
}

/// Fails when an image of `width` × `height` is over the limits.
pub(crate) fn check_size(what: &str, width: u32, height: u32) -> Result<(), ParseError> {
    if width == 0 || height == 0 {
        return Err(damaged(what, "the image has no pixels"));
    }
    if width > MAX_SIDE || height > MAX_SIDE || u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(ParseError::LimitExceeded(format!(
            "the {what} claims {width} × {height} pixels, more than the limit of {} megapixels \
             for OCR",
            MAX_PIXELS / 1_000_000
        )));
    }
    Ok(())
}

/// Limits for reading an image's header: no side limits, the allocation cap kept.
fn header_limits() -> Limits {
    let mut limits = Limits::no_limits();
    limits.max_alloc = Some(MAX_DECODER_ALLOC);
    limits
}

fn decoder_limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODER_ALLOC);
    limits
}

/// A reader of `bytes` as a `kind` image, under `limits`.
fn reader(bytes: &[u8], kind: ImageKind, limits: Limits) -> ImageReader<Cursor<&[u8]>> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), kind.format());
    reader.limits(limits);
    reader
}

/// The width and height an image of `kind` claims in its header, read without decoding it.
pub(crate) fn dimensions(bytes: &[u8], kind: ImageKind) -> Result<(u32, u32), ParseError> {
    // The header is read without the side limits: the decoder would otherwise refuse an
    // oversized image with a bare "limits exceeded" before `check_size` can name its size.
    // Reading a header allocates little, so only the allocation cap stays.
    reader(bytes, kind, header_limits())
        .into_dimensions()
        .map_err(|e| image_error(kind.describe(), &e))
}

/// Decodes one image of `kind` into greyscale, its claimed size checked first.
pub(crate) fn decode(bytes: &[u8], kind: ImageKind) -> Result<GrayImage, ParseError> {
    let what = kind.describe();
    let (width, height) = dimensions(bytes, kind)?;
    check_size(what, width, height)?;
    let image = reader(bytes, kind, decoder_limits())
        .decode()
        .map_err(|e| image_error(what, &e))?;
    Ok(to_gray(image))
}

/// Greyscale, with transparent parts on white paper (black text on a transparent background
/// would otherwise be black on black).
pub(crate) fn to_gray(image: DynamicImage) -> GrayImage {
    if !image.color().has_alpha() {
        return image.into_luma8();
    }
    let with_alpha = image.into_luma_alpha8();
    GrayImage::from_fn(with_alpha.width(), with_alpha.height(), |x, y| {
        let [l, a] = with_alpha.get_pixel(x, y).0;
        let (l, a) = (u32::from(l), u32::from(a));
        image::Luma([((l * a + 255 * (255 - a)) / 255) as u8])
    })
}

/// `image` scaled from `source_dpi` to `target_dpi` when they differ by more than a quarter
/// (and the result stays within the pixel limit); unchanged when the source is unknown.
pub(crate) fn to_dpi(
    image: &GrayImage,
    source_dpi: Option<f32>,
    target_dpi: u32,
) -> Cow<'_, GrayImage> {
    let Some(source) = source_dpi.filter(|d| d.is_finite() && *d > 1.0) else {
        return Cow::Borrowed(image);
    };
    let mut factor = target_dpi as f32 / source;
    if (0.8..=1.25).contains(&factor) {
        return Cow::Borrowed(image);
    }
    let pixels = image.width() as f32 * image.height() as f32;
    let most = (MAX_PIXELS as f32 / (pixels * factor * factor)).sqrt();
    if most < 1.0 {
        factor *= most;
    }
    let width = ((image.width() as f32 * factor).round() as u32).max(1);
    let height = ((image.height() as f32 * factor).round() as u32).max(1);
    Cow::Owned(image::imageops::resize(
        image,
        width,
        height,
        image::imageops::FilterType::Triangle,
    ))
}

fn tiff_limits() -> tiff::decoder::Limits {
    let mut limits = tiff::decoder::Limits::default();
    limits.decoding_buffer_size = MAX_DECODER_ALLOC as usize;
    limits.intermediate_buffer_size = MAX_DECODER_ALLOC as usize;
    limits
}

fn tiff_decoder(bytes: &[u8]) -> Result<tiff::decoder::Decoder<Cursor<&[u8]>>, ParseError> {
    Ok(tiff::decoder::Decoder::new(Cursor::new(bytes))
        .map_err(|e| damaged("TIFF image", &e.to_string()))?
        .with_limits(tiff_limits()))
}

/// How many pages a TIFF has, counted without decoding any (a loop of pages ends at the limit).
fn tiff_pages(bytes: &[u8]) -> Result<usize, ParseError> {
    let mut decoder = tiff_decoder(bytes)?;
    let mut pages = 1;
    while decoder.more_images() && pages <= MAX_TIFF_PAGES {
        decoder
            .next_image()
            .map_err(|e| damaged("TIFF image", &e.to_string()))?;
        pages += 1;
    }
    Ok(pages)
}

/// Pages counted at most in a TIFF: past any page limit, and a bound on a looping IFD chain.
const MAX_TIFF_PAGES: usize = 100_000;

/// Decodes the TIFF's pages one at a time (so only one is in memory) and hands each on.
fn for_each_tiff_page(
    bytes: &[u8],
    each: &mut dyn FnMut(u32, GrayImage) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    let what = "TIFF image";
    let mut decoder = tiff_decoder(bytes)?;
    let mut index = 0;
    loop {
        let (width, height) = decoder
            .dimensions()
            .map_err(|e| damaged(what, &e.to_string()))?;
        check_size(what, width, height)?;
        let color = decoder
            .colortype()
            .map_err(|e| damaged(what, &e.to_string()))?;
        let data = decoder
            .read_image()
            .map_err(|e| damaged(what, &e.to_string()))?;
        each(index, tiff_to_gray(width, height, color, data)?)?;
        if !decoder.more_images() {
            return Ok(());
        }
        decoder
            .next_image()
            .map_err(|e| damaged(what, &e.to_string()))?;
        index += 1;
    }
}

/// The colour layouts scanners write: bilevel, grey, RGB(A), at 8 or 16 bits.
fn tiff_to_gray(
    width: u32,
    height: u32,
    color: tiff::ColorType,
    data: tiff::decoder::DecodingResult,
) -> Result<GrayImage, ParseError> {
    use tiff::ColorType;
    use tiff::decoder::DecodingResult;
    let unsupported = || {
        ParseError::Unsupported(format!(
            "TIFF image with {color:?} pixels (bilevel, grey, RGB and RGBA are read)"
        ))
    };
    let (w, h) = (width as usize, height as usize);
    let samples: Vec<u8> = match data {
        DecodingResult::U8(v) => v,
        // 16-bit samples keep their high byte: plenty for text on paper.
        DecodingResult::U16(v) => v.into_iter().map(|s| (s >> 8) as u8).collect(),
        _ => return Err(unsupported()),
    };
    let gray = match color {
        ColorType::Gray(1) => {
            // Rows are packed 8 pixels a byte; after the decoder's WhiteIsZero correction a set
            // bit is white.
            let stride = w.div_ceil(8);
            GrayImage::from_fn(width, height, |x, y| {
                let byte = samples
                    .get(y as usize * stride + x as usize / 8)
                    .copied()
                    .unwrap_or(0xFF);
                let bit = (byte >> (7 - (x % 8))) & 1;
                image::Luma([if bit == 1 { 255 } else { 0 }])
            })
        }
        ColorType::Gray(8 | 16) => GrayImage::from_raw(width, height, samples)
            .ok_or_else(|| damaged("TIFF image", "the page holds fewer pixels than it claims"))?,
        ColorType::RGB(8 | 16) | ColorType::RGBA(8 | 16) => {
            let channels = if matches!(color, ColorType::RGB(_)) {
                3
            } else {
                4
            };
            if samples.len() < w * h * channels {
                return Err(damaged(
                    "TIFF image",
                    "the page holds fewer pixels than it claims",
                ));
            }
            let dynamic = if channels == 3 {
                image::RgbImage::from_raw(width, height, samples).map(DynamicImage::ImageRgb8)
            } else {
                image::RgbaImage::from_raw(width, height, samples).map(DynamicImage::ImageRgba8)
            };
            to_gray(dynamic.ok_or_else(unsupported)?)
        }
        _ => return Err(unsupported()),
    };
    Ok(gray)
}

fn image_error(what: &str, error: &image::ImageError) -> ParseError {
    match error {
        image::ImageError::Limits(_) => ParseError::LimitExceeded(format!(
            "the {what} is larger than the limit of {} megapixels for OCR",
            MAX_PIXELS / 1_000_000
        )),
        image::ImageError::Unsupported(e) => ParseError::Unsupported(format!("{what} ({e})")),
        other => damaged(what, &other.to_string()),
    }
}

fn damaged(what: &str, detail: &str) -> ParseError {
    ParseError::Malformed {
        format: what.to_owned(),
        detail: detail.to_owned(),
    }
}
