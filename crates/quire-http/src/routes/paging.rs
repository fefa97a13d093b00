//! `?limit=&cursor=` on document lists and the RFC 8288 `Link: <…>; rel="next"` header that
//! carries the next page's cursor.

use axum::http::{HeaderName, HeaderValue, header};
use quire_app::records::DocumentPage;
use quire_core::{DocumentCursor, PageSize};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::ApiError;

/// `?limit=` and `?cursor=`: without `limit`, every document in one answer.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct PageQuery {
    /// Documents per page, 1 to 1000. With it, the answer holds one page and, when more
    /// follow, a `Link: <…>; rel="next"` header whose URL asks for the next one.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// Where the page starts: the opaque value of the `Link` header's next URL; only with
    /// `limit`.
    cursor: Option<String>,
}

/// A page request: its size and where it starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct PageRequest {
    pub(super) size: PageSize,
    pub(super) after: Option<DocumentCursor>,
}

impl PageQuery {
    /// The page asked for, `None` for the whole list; 400 for a malformed `limit` or
    /// `cursor`, or a `cursor` without `limit`.
    pub(super) fn parse(&self) -> Result<Option<PageRequest>, ApiError> {
        let invalid = |e: quire_core::InputError| ApiError::BadRequest(e.0);
        match (&self.limit, &self.cursor) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(ApiError::BadRequest(
                "`cursor` goes with `limit`; use the `Link` header's next URL".into(),
            )),
            (Some(limit), cursor) => Ok(Some(PageRequest {
                size: PageSize::parse(limit).map_err(invalid)?,
                after: cursor
                    .as_deref()
                    .map(DocumentCursor::parse)
                    .transpose()
                    .map_err(invalid)?,
            })),
        }
    }
}

/// The `Link` header of a page whose next page is at `path` (the list's own path), when one
/// follows.
pub(super) fn next_link(
    path: &str,
    request: PageRequest,
    page: &DocumentPage,
) -> Option<(HeaderName, HeaderValue)> {
    let next = page.next?;
    let value = format!(
        "<{path}?limit={}&cursor={}>; rel=\"next\"",
        request.size.get(),
        next.encode()
    );
    HeaderValue::from_str(&value)
        .ok()
        .map(|v| (header::LINK, v))
}
