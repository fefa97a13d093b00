//! Bilevel scans in PDFs: image streams coded as CCITT fax (`CCITTFaxDecode`, Group 3 and 4)
//! or JBIG2 (`JBIG2Decode`, with its `/JBIG2Globals`), what document scanners, fax servers and
//! archival tools write. pdf_oxide decodes JBIG2 only with its renderer, so these streams are
//! read here, from the image's own dictionary, by `hayro-ccitt` and `hayro-jbig2` (pure Rust,
//! no unsafe code; see `docs/parsing.md`).
//!
//! The size a stream declares is checked against [`crate::raster`]'s limits before a pixel is
//! decoded, and both decoders run under [`super::guarded`], so a damaged stream costs its image
//! with a reason, never the worker.

use std::collections::{HashMap, HashSet};

use image::{GrayImage, Luma};
use pdf_oxide::object::{Object, ObjectRef};
use pdf_oxide::{PdfDocument, PdfFilter, PdfImageHandle};

use crate::ParseError;

type Dict = HashMap<String, Object>;

/// How deep forms drawn inside forms are searched for the image (pdf_oxide stops at 100; real
/// scans put the image on the page or one form down).
const MAX_FORM_DEPTH: usize = 8;

/// True when `handle`'s image is coded by a filter read here (the last of its chain).
pub(super) fn is_bilevel(handle: &PdfImageHandle<'_>) -> bool {
    matches!(
        handle.filter_chain.last(),
        Some(PdfFilter::CCITTFaxDecode | PdfFilter::JBIG2Decode)
    )
}

/// A bilevel image stream, read from its dictionary but not decoded yet.
#[derive(Debug)]
pub(super) struct Bilevel {
    /// The coded data, with any filters before the bilevel one already undone.
    data: Vec<u8>,
    codec: Codec,
    /// `/Decode [1 0]`: the samples are shown inverted.
    inverted: bool,
    /// The height the dictionary gives: a fax's rows when its parameters do not say.
    height: u32,
}

#[derive(Debug)]
enum Codec {
    Ccitt(CcittParams),
    Jbig2 { globals: Option<Vec<u8>> },
}

/// The `CCITTFaxDecode` parameters (ISO 32000-1, table 11), with the PDF defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CcittParams {
    /// `/K`: below 0 Group 4, 0 Group 3 one-dimensional, above 0 Group 3 two-dimensional.
    k: i64,
    columns: u32,
    /// `/Rows`; 0 when the dictionary does not say (the image's height then).
    rows: u32,
    black_is_1: bool,
    encoded_byte_align: bool,
    end_of_line: bool,
    end_of_block: bool,
}

impl CcittParams {
    fn from_dict(parms: Option<&Dict>) -> Result<Self, String> {
        let int = |key: &str| parms.and_then(|p| p.get(key)).and_then(Object::as_integer);
        let flag = |key: &str, default: bool| {
            parms
                .and_then(|p| p.get(key))
                .and_then(Object::as_bool)
                .unwrap_or(default)
        };
        let size = |key: &str, default: i64| {
            u32::try_from(int(key).unwrap_or(default))
                .map_err(|_| format!("its /{key} of {} is not a size", int(key).unwrap_or(0)))
        };
        Ok(Self {
            k: int("K").unwrap_or(0),
            columns: size("Columns", 1728)?,
            rows: size("Rows", 0)?,
            black_is_1: flag("BlackIs1", false),
            encoded_byte_align: flag("EncodedByteAlign", false),
            end_of_line: flag("EndOfLine", false),
            end_of_block: flag("EndOfBlock", true),
        })
    }
}

/// Finds the stream behind `handle` (an image XObject on page `index`, 0-based, or in a form
/// the page draws) and reads its dictionary. `Err` holds why it cannot be decoded.
pub(super) fn read(
    doc: &PdfDocument,
    index: usize,
    handle: &PdfImageHandle<'_>,
) -> Result<Bilevel, String> {
    if handle.is_inline {
        return Err("an inline CCITT or JBIG2 image is not read".into());
    }
    let raw = handle
        .raw_compressed_bytes()
        .map_err(|e| format!("its data could not be read: {e}"))?;
    let page = doc
        .get_page(index)
        .map_err(|e| format!("its page could not be read: {e}"))?;
    let mut seen = HashSet::new();
    let (dict, data) = page
        .as_dict()
        .and_then(|page| find_image(doc, page, &raw, 0, &mut seen))
        .ok_or("its image object could not be found on the page")?;
    from_stream(doc, &dict, data)
}

/// The image stream whose data is `raw` among the XObjects of `owner`'s resources and of the
/// forms among them: its dictionary and data.
fn find_image(
    doc: &PdfDocument,
    owner: &Dict,
    raw: &[u8],
    depth: usize,
    seen: &mut HashSet<ObjectRef>,
) -> Option<(Dict, Vec<u8>)> {
    let resources = resolve(doc, owner.get("Resources")?)?;
    let xobjects = resolve(doc, resources.as_dict()?.get("XObject")?)?;
    for entry in xobjects.as_dict()?.values() {
        if let Some(r) = entry.as_reference()
            && !seen.insert(r)
        {
            continue;
        }
        let Some(Object::Stream { dict, data }) = resolve(doc, entry) else {
            continue;
        };
        match dict.get("Subtype").and_then(Object::as_name) {
            Some("Image") if data.as_ref() == raw => return Some((dict, data.to_vec())),
            Some("Form") if depth < MAX_FORM_DEPTH => {
                if let Some(found) = find_image(doc, &dict, raw, depth + 1, seen) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

fn resolve(doc: &PdfDocument, object: &Object) -> Option<Object> {
    doc.resolve_object(object).ok()
}

/// Reads a bilevel image's dictionary: its codec and parameters, with the filters before the
/// bilevel one undone.
fn from_stream(doc: &PdfDocument, dict: &Dict, data: Vec<u8>) -> Result<Bilevel, String> {
    let filters: Vec<String> = match dict.get("Filter").and_then(|f| resolve(doc, f)) {
        Some(Object::Name(name)) => vec![name],
        Some(Object::Array(names)) => names
            .iter()
            .filter_map(|n| n.as_name().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let parms: Vec<Option<Dict>> = match dict.get("DecodeParms").and_then(|p| resolve(doc, p)) {
        Some(Object::Array(items)) => items
            .iter()
            .map(|p| resolve(doc, p).and_then(|p| p.as_dict().cloned()))
            .collect(),
        Some(Object::Dictionary(parms)) => vec![Some(parms)],
        _ => Vec::new(),
    };
    let last = filters.len().checked_sub(1).ok_or("it names no filter")?;
    let own_parms = parms.get(last).cloned().flatten();
    let data = if last == 0 {
        data
    } else {
        // Undo the filters before the bilevel one (a Flate-compressed fax, say).
        let mut outer = dict.clone();
        outer.insert(
            "Filter".into(),
            Object::Array(filters[..last].iter().cloned().map(Object::Name).collect()),
        );
        outer.remove("DecodeParms");
        if parms.len() == filters.len() {
            let before = parms[..last]
                .iter()
                .map(|p| p.clone().map_or(Object::Null, Object::Dictionary));
            outer.insert("DecodeParms".into(), Object::Array(before.collect()));
        }
        Object::Stream {
            dict: outer,
            data: data.into(),
        }
        .decode_stream_data()
        .map_err(|e| format!("the filters before {} failed: {e}", filters[last]))?
    };
    let codec = match filters[last].as_str() {
        "CCITTFaxDecode" | "CCF" => Codec::Ccitt(CcittParams::from_dict(own_parms.as_ref())?),
        "JBIG2Decode" => {
            let globals = own_parms
                .as_ref()
                .and_then(|p| p.get("JBIG2Globals"))
                .map(|g| match resolve(doc, g) {
                    Some(globals @ Object::Stream { .. }) => globals
                        .decode_stream_data()
                        .map_err(|e| format!("its JBIG2 globals could not be read: {e}")),
                    _ => Err("its /JBIG2Globals is not a stream".to_owned()),
                })
                .transpose()?;
            Codec::Jbig2 { globals }
        }
        other => return Err(format!("{other} is not a bilevel filter")),
    };
    let number = |key: &str| {
        dict.get(key)
            .and_then(|o| resolve(doc, o))
            .and_then(|o| o.as_integer())
    };
    let size = |key: &str| number(key).and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let inverted = dict
        .get("Decode")
        .and_then(|d| resolve(doc, d))
        .and_then(|d| d.as_array().and_then(|a| a.first().cloned()))
        .and_then(|first| first.as_real().or(first.as_integer().map(|i| i as f64)))
        .is_some_and(|first| first >= 0.5);
    Ok(Bilevel {
        data,
        codec,
        inverted,
        height: size("Height"),
    })
}

/// Decodes `image` to greyscale, black text on white. The outer `Err` is a limit the size
/// the stream declares is over (it fails the document); the inner one why this image cannot
/// be decoded (it costs the image).
pub(super) fn decode(image: &Bilevel, what: &str) -> Result<Result<GrayImage, String>, ParseError> {
    match &image.codec {
        Codec::Ccitt(params) => decode_ccitt(image, params, what),
        Codec::Jbig2 { globals } => decode_jbig2(image, globals.as_deref(), what),
    }
}

/// A page being filled row by row, every pixel white until painted: what both decoders write
/// into, so a stream that ends early leaves the rest of the page blank.
struct Canvas {
    image: GrayImage,
    /// Pixels whose coded value is "black" are painted dark when this is false, light when
    /// true (`/BlackIs1` and `/Decode [1 0]` each flip it).
    flipped: bool,
    x: u32,
    y: u32,
}

impl Canvas {
    fn new(width: u32, height: u32, flipped: bool) -> Self {
        let background = if flipped { 0 } else { 255 };
        Self {
            image: GrayImage::from_pixel(width, height, Luma([background])),
            flipped,
            x: 0,
            y: 0,
        }
    }

    /// Paints `count` pixels of the current row from the current position on.
    fn run(&mut self, black: bool, count: u32) {
        let value = if black != self.flipped { 0 } else { 255 };
        let end = self.x.saturating_add(count).min(self.image.width());
        if self.y < self.image.height() {
            for x in self.x..end {
                self.image.put_pixel(x, self.y, Luma([value]));
            }
        }
        self.x = self.x.saturating_add(count);
    }

    fn next_row(&mut self) {
        self.x = 0;
        self.y = self.y.saturating_add(1);
    }
}

impl hayro_ccitt::Decoder for Canvas {
    fn push_row(&mut self, changes: &[u32]) {
        // A row starts white; each change flips the colour, the pixels from an even-indexed
        // change to the next are black.
        for pair in changes.chunks(2) {
            let start = pair[0];
            let end = pair.get(1).copied().unwrap_or(self.image.width());
            self.x = start;
            self.run(true, end.saturating_sub(start));
        }
        self.next_row();
    }
}

impl hayro_jbig2::Decoder for Canvas {
    fn push_pixel(&mut self, black: bool) {
        self.run(black, 1);
    }

    fn push_pixel_chunk(&mut self, black: bool, chunk_count: u32) {
        self.run(black, chunk_count.saturating_mul(8));
    }

    fn next_line(&mut self) {
        self.next_row();
    }
}

fn decode_ccitt(
    image: &Bilevel,
    params: &CcittParams,
    what: &str,
) -> Result<Result<GrayImage, String>, ParseError> {
    let rows = match params.rows {
        0 => image.height,
        rows => rows,
    };
    crate::raster::check_size(what, params.columns, rows)?;
    let settings = hayro_ccitt::DecodeSettings {
        columns: params.columns,
        rows,
        end_of_block: params.end_of_block,
        end_of_line: params.end_of_line,
        rows_are_byte_aligned: params.encoded_byte_align,
        encoding: match params.k {
            k if k < 0 => hayro_ccitt::EncodingMode::Group4,
            0 => hayro_ccitt::EncodingMode::Group3_1D,
            _ => hayro_ccitt::EncodingMode::Group3_2D,
        },
        strict: false,
    };
    let flipped = params.black_is_1 != image.inverted;
    let decoded = super::guarded(|| {
        let mut canvas = Canvas::new(params.columns, rows, flipped);
        let mut context = hayro_ccitt::DecoderContext::new(settings);
        let result = hayro_ccitt::decode(&image.data, &mut canvas, &mut context);
        (result, canvas)
    });
    Ok(match decoded {
        None => Err("the CCITT fax decoder stopped on damage it did not anticipate".into()),
        // Rows decoded before damage are kept: the top of a page whose end is garbled still
        // has text to read.
        Some((Err(e), canvas)) if canvas.y == 0 => {
            Err(format!("the CCITT fax data is damaged ({e})"))
        }
        Some((_, canvas)) => Ok(canvas.image),
    })
}

fn decode_jbig2(
    image: &Bilevel,
    globals: Option<&[u8]>,
    what: &str,
) -> Result<Result<GrayImage, String>, ParseError> {
    let strict = decode_jbig2_as(image, globals, what, true)?;
    let Err(reason) = strict else {
        return Ok(strict);
    };
    // Producers bend the rules; a lenient decode is kept when it shows something, and a
    // damaged stream it turns into a blank page keeps the strict reason.
    Ok(match decode_jbig2_as(image, globals, what, false)? {
        Ok(lenient) if !is_blank(&lenient) => Ok(lenient),
        _ => Err(reason),
    })
}

fn decode_jbig2_as(
    image: &Bilevel,
    globals: Option<&[u8]>,
    what: &str,
    strict: bool,
) -> Result<Result<GrayImage, String>, ParseError> {
    let settings = hayro_jbig2::DecodeSettings { strict };
    let parsed = super::guarded(|| {
        let globals = globals
            .map(|g| hayro_jbig2::Globals::new(g, &settings))
            .transpose()
            .map_err(|e| format!("its JBIG2 globals are damaged ({e})"))?;
        let page = hayro_jbig2::Page::new_embedded(&image.data, None, &settings)
            .map_err(|e| format!("the JBIG2 data is damaged ({e})"))?;
        Ok::<_, String>((globals, page.width(), page.height()))
    });
    let (globals, width, height) = match parsed {
        None => return Ok(Err(JBIG2_PANIC.into())),
        Some(Err(reason)) => return Ok(Err(reason)),
        Some(Ok(parsed)) => parsed,
    };
    // The page size the stream declares, checked before its bitmap is allocated.
    crate::raster::check_size(what, width, height)?;
    let decoded = super::guarded(|| {
        let page = hayro_jbig2::Page::new_embedded(&image.data, globals.as_ref(), &settings)?;
        let mut canvas = Canvas::new(width, height, image.inverted);
        page.decode(&mut canvas)?;
        Ok::<_, hayro_jbig2::DecodeError>(canvas.image)
    });
    Ok(match decoded {
        None => Err(JBIG2_PANIC.into()),
        Some(Err(e)) => Err(format!("the JBIG2 data is damaged ({e})")),
        Some(Ok(image)) => Ok(image),
    })
}

const JBIG2_PANIC: &str = "the JBIG2 decoder stopped on damage it did not anticipate";

/// True when every pixel of `image` has the same value.
fn is_blank(image: &GrayImage) -> bool {
    let mut pixels = image.pixels();
    let first = pixels.next();
    pixels.all(|p| Some(p) == first)
}

#[cfg(test)]
mod tests;
