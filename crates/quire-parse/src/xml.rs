//! A thin streaming view of XML for the Office parsers: element names without their namespace
//! prefix, attribute lookup by local name, and text with entities resolved.

use quick_xml::events::attributes::Attribute;
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

/// One event of the stream.
pub(crate) enum XmlEvent<'a, 'e> {
    /// An opening tag (`<x/>` is reported as a `Start` and an `End`).
    Start {
        name: &'a str,
        element: &'a BytesStart<'e>,
    },
    /// A closing tag.
    End { name: &'a str },
    /// Character data.
    Text(&'a str),
}

/// Calls `handle` for each event of `xml`; the error names what was wrong with it.
pub(crate) fn for_each_event(
    xml: &str,
    mut handle: impl FnMut(XmlEvent<'_, '_>),
) -> Result<(), String> {
    let mut reader = Reader::from_str(xml);
    loop {
        match reader
            .read_event()
            .map_err(|e| format!("invalid XML: {e}"))?
        {
            Event::Start(e) => {
                let name = e.local_name().into_inner();
                handle(XmlEvent::Start { name, element: &e });
            }
            Event::Empty(e) => {
                let name = e.local_name().into_inner();
                handle(XmlEvent::Start { name, element: &e });
                handle(XmlEvent::End { name });
            }
            Event::End(e) => handle(XmlEvent::End {
                name: e.local_name().into_inner(),
            }),
            Event::Text(t) => handle(XmlEvent::Text(&t.xml10_content())),
            Event::CData(t) => handle(XmlEvent::Text(&t.xml10_content())),
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => match r.xml10_content().as_ref() {
                        "amp" => "&".into(),
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        "nbsp" => " ".into(),
                        _ => String::new(),
                    },
                };
                handle(XmlEvent::Text(&resolved));
            }
            Event::Eof => return Ok(()),
            _ => {}
        }
    }
}

/// The value of the attribute whose local name (after any `prefix:`) is `name`.
pub(crate) fn attr(element: &BytesStart<'_>, name: &str) -> Option<String> {
    element.attributes().flatten().find_map(|a| {
        let key: &str = a.key.as_ref();
        let local = key.rsplit(':').next().unwrap_or(key);
        (local == name).then(|| attribute_value(&a)).flatten()
    })
}

/// An attribute's value with entities resolved.
pub(crate) fn attribute_value(attribute: &Attribute<'_>) -> Option<String> {
    attribute
        .normalized_value(XmlVersion::Implicit1_0)
        .ok()
        .map(|v| v.into_owned())
}
