#!/usr/bin/env python3
"""Writes the bilevel scan fixtures of quire-parse's OCR tests (run once; the outputs are
committed and the test suite needs none of these tools):

  crates/quire-parse/src/fixtures/scan-ccitt-g4.pdf  a page whose only image is CCITT Group 4
                                                     (CCITTFaxDecode, /K -1), as a document
                                                     scanner or fax server writes it
  crates/quire-parse/src/fixtures/scan-jbig2.pdf     a page whose only image is JBIG2
                                                     (JBIG2Decode, generic region, arithmetic
                                                     coding) with a /JBIG2Globals stream, as
                                                     ocrmypdf's optimisation writes it
  crates/quire-parse/src/fixtures/scan-ccitt-g3.bin  the G4 page's bitmap as a bare CCITT
                                                     Group 3 one-dimensional stream with
                                                     end-of-line codes (/K 0 /EndOfLine true)
  crates/quire-parse/src/fixtures/scan-ccitt-g3-aligned.bin  the same with each row
                                                     byte-aligned (/EncodedByteAlign true)

How: the text is drawn with Pillow in DejaVu Sans at 300 dpi and thresholded to one bit a
pixel. Pillow (through libtiff) writes the CCITT codes as a single-strip TIFF, whose strip is
exactly a CCITTFaxDecode stream. Debian ships no JBIG2 encoder, so the JBIG2 stream is coded
here: a page information segment and an immediate lossless generic region (template 0, the
default adaptive pixels, no typical prediction) through the MQ arithmetic coder of ITU-T T.88
Annex E; the globals hold a symbol dictionary with no symbols, which is enough for a reader to
have to fetch and parse them. The PDFs are written by hand.

  pip install pillow && python3 scripts/make-scan-fixtures.py
"""

import io
import struct
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

OUT = Path(__file__).resolve().parent.parent / "crates/quire-parse/src/fixtures"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
DPI = 300

CCITT_LINES = [
    "Fax from the harbour office:",
    "the crane inspection is due on Monday.",
]
JBIG2_LINES = [
    "Archived scan of the boiler report:",
    "replace the pressure gauge next spring.",
]


def text_bitmap(lines):
    """A white page strip with black text, mode "1"."""
    font = ImageFont.truetype(FONT, 42)
    width, line_height, margin = 1100, 64, 40
    image = Image.new("L", (width, 2 * margin + line_height * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((margin, margin + i * line_height), line, font=font, fill=0)
    return image.point(lambda v: 255 if v > 128 else 0).convert("1")


def ccitt_strip(bitmap, compression, t4_options=0):
    """The CCITT codes of `bitmap`: the one strip of a TIFF, 0 bits coded as white."""
    out = io.BytesIO()
    # Photometric 0 (white is zero): Pillow inverts the pixels so black is a 1 bit, the
    # convention of CCITTFaxDecode's default /BlackIs1 false output inverted back.
    info = {262: 0, 278: bitmap.height}
    if t4_options:
        info[292] = t4_options
    bitmap.save(out, "TIFF", compression=compression, tiffinfo=info)
    tiff = Image.open(io.BytesIO(out.getvalue()))
    offsets, counts = tiff.tag_v2[273], tiff.tag_v2[279]
    assert len(offsets) == 1, "one strip"
    return out.getvalue()[offsets[0] : offsets[0] + counts[0]]


# ---- JBIG2: MQ arithmetic coder (T.88 Annex E.2) and a generic region (6.2) ----

QE = [
    (0x5601, 1, 1, 1), (0x3401, 2, 6, 0), (0x1801, 3, 9, 0), (0x0AC1, 4, 12, 0),
    (0x0521, 5, 29, 0), (0x0221, 38, 33, 0), (0x5601, 7, 6, 1), (0x5401, 8, 14, 0),
    (0x4801, 9, 14, 0), (0x3801, 10, 14, 0), (0x3001, 11, 17, 0), (0x2401, 12, 18, 0),
    (0x1C01, 13, 20, 0), (0x1601, 29, 21, 0), (0x5601, 15, 14, 1), (0x5401, 16, 14, 0),
    (0x5101, 17, 15, 0), (0x4801, 18, 16, 0), (0x3801, 19, 17, 0), (0x3401, 20, 18, 0),
    (0x3001, 21, 19, 0), (0x2801, 22, 19, 0), (0x2401, 23, 20, 0), (0x2201, 24, 21, 0),
    (0x1C01, 25, 22, 0), (0x1801, 26, 23, 0), (0x1601, 27, 24, 0), (0x1401, 28, 25, 0),
    (0x1201, 29, 26, 0), (0x1101, 30, 27, 0), (0x0AC1, 31, 28, 0), (0x09C1, 32, 29, 0),
    (0x08A1, 33, 30, 0), (0x0521, 34, 31, 0), (0x0441, 35, 32, 0), (0x02A1, 36, 33, 0),
    (0x0221, 37, 34, 0), (0x0141, 38, 35, 0), (0x0111, 39, 36, 0), (0x0085, 40, 37, 0),
    (0x0049, 41, 38, 0), (0x0025, 42, 39, 0), (0x0015, 43, 40, 0), (0x0009, 44, 41, 0),
    (0x0005, 45, 42, 0), (0x0001, 45, 43, 0), (0x5601, 46, 46, 0),
]


class MqEncoder:
    def __init__(self):
        self.a, self.c, self.ct = 0x8000, 0, 12
        self.out = bytearray([0])  # out[-1] is the byte B being built; out[0] is dropped
        self.index, self.mps = {}, {}

    def encode(self, cx, bit):
        i, mps = self.index.get(cx, 0), self.mps.get(cx, 0)
        qe, nmps, nlps, switch = QE[i]
        self.a -= qe
        if bit == mps:
            if self.a & 0x8000:
                self.c += qe
                return
            if self.a < qe:
                self.a = qe
            else:
                self.c += qe
            self.index[cx] = nmps
        else:
            if self.a < qe:
                self.c += qe
            else:
                self.a = qe
            if switch:
                self.mps[cx] = 1 - mps
            self.index[cx] = nlps
        while True:
            self.a <<= 1
            self.c <<= 1
            self.ct -= 1
            if self.ct == 0:
                self.byte_out()
            if self.a & 0x8000:
                break

    def byte_out(self):
        if self.out[-1] == 0xFF:
            self.emit(20, 0xFFFFF, 7)
        elif self.c < 0x8000000:
            self.emit(19, 0x7FFFF, 8)
        else:
            self.out[-1] += 1
            if self.out[-1] == 0xFF:
                self.c &= 0x7FFFFFF
                self.emit(20, 0xFFFFF, 7)
            else:
                self.emit(19, 0x7FFFF, 8)

    def emit(self, shift, mask, ct):
        self.out.append((self.c >> shift) & 0xFF)
        self.c &= mask
        self.ct = ct

    def flush(self):
        temp = self.c + self.a
        self.c |= 0xFFFF
        if self.c >= temp:
            self.c -= 0x8000
        self.c <<= self.ct
        self.byte_out()
        self.c <<= self.ct
        self.byte_out()
        if self.out[-1] != 0xFF:
            self.out.append(0xFF)
        self.out.append(0xAC)
        return bytes(self.out[1:])


# Template 0's neighbours (dx, dy), with the default adaptive pixels; the order of the bits
# in a context does not change the code, only which pixels make it up.
TEMPLATE0 = [(-1, -2), (0, -2), (1, -2), (2, -2), (-2, -2),
             (-2, -1), (-1, -1), (0, -1), (1, -1), (2, -1), (3, -1), (-3, -1),
             (-4, 0), (-3, 0), (-2, 0), (-1, 0)]


def generic_region(pixels, width, height):
    """Arithmetic codes of a bitmap (`pixels[y][x]`, 1 black) as a template-0 generic region."""
    coder = MqEncoder()

    def at(x, y):
        return pixels[y][x] if 0 <= x < width and 0 <= y < height else 0

    for y in range(height):
        for x in range(width):
            cx = 0
            for dx, dy in TEMPLATE0:
                cx = (cx << 1) | at(x + dx, y + dy)
            coder.encode(cx, pixels[y][x])
    return coder.flush()


def segment(number, kind, page, data):
    # number, flags (type; one-byte page association), no referred segments, page, length
    return struct.pack(">IBBBI", number, kind, 0, page, len(data)) + data


def jbig2_streams(bitmap):
    """(page stream, globals stream) in JBIG2's embedded organisation."""
    width, height = bitmap.size
    raw = bitmap.load()
    pixels = [[0 if raw[x, y] else 1 for x in range(width)] for y in range(height)]
    page_info = struct.pack(">IIIIBH", width, height, 11811, 11811, 0x01, 0)  # px per metre
    region = struct.pack(">IIIIB", width, height, 0, 0, 0)
    flags = bytes([0])  # arithmetic coding, template 0, no typical prediction
    adaptive = struct.pack(">8b", 3, -1, -3, -1, 2, -2, -2, -2)
    coded = generic_region(pixels, width, height)
    page = segment(1, 48, 1, page_info) + segment(2, 38, 1, region + flags + adaptive + coded)
    empty = MqEncoder().flush()
    dictionary = struct.pack(">H8bII", 0, 3, -1, -3, -1, 2, -2, -2, -2, 0, 0) + empty
    return page, segment(0, 0, 0, dictionary)


# ---- PDF ----


def pdf(image_dict, image_data, width, height, extra=()):
    """A one-page PDF showing one image at 300 dpi; `extra` are more stream objects
    (dictionary, data), numbered from 6."""
    w_pt, h_pt = width * 72 / DPI, height * 72 / DPI
    content = f"q {w_pt:.2f} 0 0 {h_pt:.2f} 36 {700 - h_pt:.2f} cm /Im0 Do Q".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /XObject << /Im0 4 0 R >> >> /Contents 5 0 R >>",
        stream(image_dict, image_data),
        stream(b"", content),
        *(stream(d, data) for d, data in extra),
    ]
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def stream(dictionary, data):
    return b"<< " + dictionary + f" /Length {len(data)} >>\nstream\n".encode() + data + (
        b"\nendstream"
    )


def main():
    ccitt = text_bitmap(CCITT_LINES)
    w, h = ccitt.size
    g4 = ccitt_strip(ccitt, "group4")
    image = (
        f"/Type /XObject /Subtype /Image /Width {w} /Height {h} /ColorSpace /DeviceGray "
        f"/BitsPerComponent 1 /Filter /CCITTFaxDecode "
        f"/DecodeParms << /K -1 /Columns {w} /Rows {h} /BlackIs1 false >>"
    ).encode()
    (OUT / "scan-ccitt-g4.pdf").write_bytes(pdf(image, g4, w, h))
    (OUT / "scan-ccitt-g3.bin").write_bytes(ccitt_strip(ccitt, "group3"))
    # T4Options 4: fill bits before each end-of-line, so every row starts on a byte boundary.
    (OUT / "scan-ccitt-g3-aligned.bin").write_bytes(ccitt_strip(ccitt, "group3", 4))

    jbig2 = text_bitmap(JBIG2_LINES)
    w, h = jbig2.size
    page, globals_ = jbig2_streams(jbig2)
    image = (
        f"/Type /XObject /Subtype /Image /Width {w} /Height {h} /ColorSpace /DeviceGray "
        f"/BitsPerComponent 1 /Filter /JBIG2Decode /DecodeParms << /JBIG2Globals 6 0 R >>"
    ).encode()
    (OUT / "scan-jbig2.pdf").write_bytes(pdf(image, page, w, h, extra=[(b"", globals_)]))
    print(f"CCITT {ccitt.size}: G4 {len(g4)} bytes; JBIG2 {jbig2.size}: {len(page)} bytes")


if __name__ == "__main__":
    main()
