//! The tools. Each one takes the caller's key from the request, checks its permission (and,
//! for `search` and `ask`, counts the call against the key's rate limit, as the REST endpoints
//! do), calls one use case of `quire-app` and returns the result as JSON. A refusal is a tool
//! result with `isError` and a message the model can act on (see `error.rs`).

use std::convert::Infallible;

use base64::Engine as _;
use futures_util::StreamExt;
use quire_app::answers::{AnswerEvent, AskRequest, ask};
use quire_app::documents::{MAX_PAGES_PER_READ, read_pages};
use quire_app::records::{Created, RateBucket};
use quire_app::scope::requested_scope;
use quire_app::uploads;
use quire_app::{Actor, AppError};
use quire_core::{
    ApiKeyRecord, DocumentCursor, DocumentId, PageSize, Permission, SearchLimit, SearchQuery,
    SourceId,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use serde_json::{Value, json};

use crate::QuireMcp;
use crate::auth::caller;
use crate::error::tool_error;
use crate::wire::{DocumentOut, SourceOut};

/// The name of the one tool that writes (hidden from read-only keys).
pub(crate) const UPLOAD_TOOL: &str = "upload_document";

/// Pages `get_document` returns when the call does not say.
const DEFAULT_PAGES: u32 = 10;

/// `search`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SearchArgs {
    /// What to look for: a question or keywords, in the documents' language (1 to 4000
    /// characters).
    query: String,
    /// Only these data sources (ids from `list_sources`); omit to search every source this
    /// key may read.
    source_ids: Option<Vec<String>>,
    /// How many passages to return, 1 to 100 (default 10).
    limit: Option<i64>,
    /// Only documents whose metadata match, in Pinecone's and Chroma's filter language:
    /// `{"department": "hr", "year": {"$gte": 2024}}` (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`,
    /// `$lte`, `$in`, `$nin`, `$exists`, `$and`, `$or`; also `documentId` and `createdAt`).
    filter: Option<serde_json::Map<String, Value>>,
}

/// `ask`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AskArgs {
    /// The question, in a sentence (1 to 4000 characters).
    question: String,
    /// Only these data sources (ids from `list_sources`); omit to draw on every source this
    /// key may read.
    source_ids: Option<Vec<String>>,
    /// Continue this conversation (the `conversationId` an earlier `ask` returned), so the
    /// question can refer to earlier ones; omit to start a new one.
    conversation_id: Option<String>,
    /// Draw only on documents whose metadata match (the filter language of `search`).
    filter: Option<serde_json::Map<String, Value>>,
}

/// `list_documents`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ListDocumentsArgs {
    /// The data source (an id from `list_sources`).
    source_id: String,
    /// Documents per page, 1 to 1000. Without it, every document at once.
    limit: Option<u32>,
    /// Where the page starts: the `nextCursor` of the previous page (with `limit`).
    cursor: Option<String>,
    /// Only the document with this external id (your own key for it, given at upload).
    external_id: Option<String>,
}

/// `get_document`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct GetDocumentArgs {
    /// The document's data source (an id from `list_sources`).
    source_id: String,
    /// The document (an id from `list_documents` or a search result).
    document_id: String,
    /// First page to return, from 1 (default 1); use `nextPage` from the previous call to go
    /// on.
    page: Option<u32>,
    /// How many pages to return, 1 to 50 (default 10).
    pages: Option<u32>,
}

/// `upload_document`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UploadArgs {
    /// The data source to add the document to (an id from `list_sources`).
    source_id: String,
    /// The file name, with its extension (`report.pdf`, `notes.md`): it decides how the
    /// content is read.
    name: String,
    /// The file's bytes in base64 (for binary formats such as PDF or DOCX). Give this or
    /// `text`, not both.
    content_base64: Option<String>,
    /// The file's content as text (for text formats such as Markdown, HTML or plain text).
    /// Give this or `contentBase64`, not both.
    text: Option<String>,
    /// The media type (`application/pdf`), when the extension does not say it.
    content_type: Option<String>,
    /// What the document is, as a flat JSON object: keys of letters, digits, `_`, `-` and
    /// `.` (at most 64 characters), values a string, a number, a boolean or an array of
    /// strings (`{"department": "legal", "year": 2024}`). For a new version, leaving it out
    /// keeps the document's metadata.
    metadata: Option<serde_json::Map<String, Value>>,
    /// Your own key for the document (a path, URL or CMS id; 1 to 512 characters), unique in
    /// the source: uploading again with the same `externalId` makes the content a new version
    /// of the same document, which replaces the old one once it is processed.
    external_id: Option<String>,
}

/// Turns a use case's outcome into a tool result: JSON on success, a refusal otherwise.
fn reply<T: Serialize>(outcome: Result<T, AppError>) -> Result<CallToolResult, ErrorData> {
    Ok(match outcome.and_then(|value| to_json(&value)) {
        Ok(value) => CallToolResult::structured(value),
        Err(refused) => tool_error(refused),
    })
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, AppError> {
    serde_json::to_value(value).map_err(|e| AppError::internal(&e))
}

/// The caller's key, if it has permission `level`.
fn key_with(
    context: &RequestContext<RoleServer>,
    level: Permission,
) -> Result<ApiKeyRecord, AppError> {
    let key = caller(context)?;
    quire_app::auth::require(&key, level)?;
    Ok(key)
}

fn parse_id<T: std::str::FromStr>(field: &str, raw: &str) -> Result<T, AppError> {
    raw.parse()
        .map_err(|_| AppError::Invalid(format!("`{field}` is not a UUID: {raw:?}")))
}

#[tool_router(router = tools, vis = "pub(crate)")]
impl QuireMcp {
    /// Keyword and semantic search over the passages the key may read.
    #[tool(
        description = "Search the documents for passages relevant to a query. Returns up to \
        `limit` passages, best first, each with its text (`content`), relevance `score`, \
        `document` {id, name}, `dataSource` {id, name} and `metadata` {page, section}. Cite \
        a passage by document name and page. Use this to find facts; use `ask` for a \
        written answer."
    )]
    async fn search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(self.run_search(args, &context).await)
    }

    /// A written, cited answer, streamed as progress notifications.
    #[tool(
        description = "Answer a question from the documents, with numbered citations. \
        Returns `answer` (text with markers like [1]), `citations` (for each marker: \
        documentId, documentName, dataSourceId, page, section and the cited passage) and \
        `conversationId` (pass it back to ask a follow-up question). When the request \
        carries a progress token, the answer's text is sent as progress notifications while \
        it is written."
    )]
    async fn ask(
        &self,
        Parameters(args): Parameters<AskArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(self.run_ask(args, &context).await)
    }

    /// The sources the key may read.
    #[tool(
        description = "List the data sources (collections of documents) this key may read: \
        id, name, description, type (`network`: filled by uploads; `folder`, `s3`, `web`: kept \
        in sync with an origin, with `sync.lastRun` and `sync.nextRunAt`) and documentCount. \
        Source ids narrow `search` and `ask`, and name where `list_documents` looks."
    )]
    async fn list_sources(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(self.run_list_sources(&context).await)
    }

    /// The documents of one source.
    #[tool(
        description = "List the documents of one data source, newest first: id, name, status \
        (only `ready` documents are searchable), pageCount, size, contentType, externalId, \
        version and the document's resource `uri`. With `limit`, one page and `nextCursor` \
        (pass it as `cursor` for the next page) while more follow; with `externalId`, only \
        that document."
    )]
    async fn list_documents(
        &self,
        Parameters(args): Parameters<ListDocumentsArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(self.run_list_documents(args, &context).await)
    }

    /// A document's text, a few pages at a time.
    #[tool(
        description = "Read a document's text page by page. Returns the `document` \
        (name, status, pageCount), `pages` [{page, text}] from `page` on (at most `pages` of \
        them, up to 50) and `nextPage` when the document goes on (call again with \
        page=nextPage)."
    )]
    async fn get_document(
        &self,
        Parameters(args): Parameters<GetDocumentArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(self.run_get_document(args, &context).await)
    }

    /// Adds a document (read-write keys only).
    #[tool(
        description = "Add a document to a data source (needs a read-write key). Give the \
        file `name` with its extension and its content, either as `text` or base64 in \
        `contentBase64`. Supported: PDF, DOCX, XLSX, PPTX, ODT, HTML, Markdown, plain text, \
        CSV, e-mail (.eml) and more. The document is processed in the background: `status` \
        is `accepted` (queued; poll list_documents until it is `ready`) or `duplicate` (the \
        source already holds these exact bytes; the existing document is returned)."
    )]
    async fn upload_document(
        &self,
        Parameters(args): Parameters<UploadArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(self.run_upload(args, &context).await)
    }
}

impl QuireMcp {
    async fn run_search(
        &self,
        args: SearchArgs,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, AppError> {
        let services = &self.services;
        let key = key_with(context, Permission::Read)?;
        quire_app::rate_limit::admit(services.limiter(), &key, RateBucket::Search).await?;
        let query = SearchQuery::parse(&args.query).map_err(|e| AppError::Invalid(e.0))?;
        let limit = args
            .limit
            .map(SearchLimit::parse)
            .transpose()
            .map_err(|e| AppError::Invalid(e.0))?
            .unwrap_or_default();
        let filter = args
            .filter
            .map(|object| quire_core::Filter::parse(&Value::Object(object)))
            .transpose()
            .map_err(|e| AppError::Invalid(e.0))?;
        let scope = requested_scope(services, &key.scope, args.source_ids.as_deref()).await?;
        let outcome =
            quire_app::search::find(services, &scope, &query, limit, filter.as_ref()).await?;
        Ok(json!({ "results": outcome.results }))
    }

    async fn run_ask(
        &self,
        args: AskArgs,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, AppError> {
        let services = &self.services;
        let key = key_with(context, Permission::Read)?;
        quire_app::rate_limit::admit(services.limiter(), &key, RateBucket::Generate).await?;
        let request = AskRequest {
            query: args.question,
            source_ids: args.source_ids,
            conversation_id: args.conversation_id,
            filter: args.filter.map(Value::Object),
        };
        let mut events = std::pin::pin!(ask(services, key.id, &key.scope, request).await?);
        let mut progress = Progress::new(context);
        let mut answer = String::new();
        while let Some(event) = events.next().await {
            match event {
                AnswerEvent::Queued { position } => {
                    progress
                        .send(format!("waiting for the generator: {position} in line"))
                        .await;
                }
                AnswerEvent::Delta { text } => {
                    answer.push_str(&text);
                    progress.send(text).await;
                }
                AnswerEvent::Done {
                    conversation_id,
                    message_id,
                    citations,
                    extractive,
                    generator,
                } => {
                    return Ok(json!({
                        "answer": answer,
                        "citations": citations,
                        "conversationId": conversation_id.to_string(),
                        "messageId": message_id.to_string(),
                        "extractive": extractive,
                        "generator": generator,
                    }));
                }
                AnswerEvent::Error { message } => {
                    tracing::warn!(%message, "an MCP ask failed");
                    return Err(AppError::Conflict(format!(
                        "the answer could not be completed: {message}"
                    )));
                }
            }
        }
        tracing::error!("an answer's events ended without done or error");
        Err(AppError::Internal)
    }

    async fn run_list_sources(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, AppError> {
        let key = key_with(context, Permission::Read)?;
        let sources = quire_app::sources::list(&self.services, &key.scope).await?;
        let mut out = Vec::with_capacity(sources.len());
        for source in &sources {
            let sync = quire_app::syncs::view_of(&self.services, source).await?;
            out.push(SourceOut::from(source).with_sync(sync.as_ref()));
        }
        let sources = out;
        Ok(json!({ "sources": sources }))
    }

    async fn run_list_documents(
        &self,
        args: ListDocumentsArgs,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, AppError> {
        let key = key_with(context, Permission::Read)?;
        let source: SourceId = parse_id("sourceId", &args.source_id)?;
        if let Some(raw) = &args.external_id {
            let external_id = quire_core::ExternalId::parse(raw)
                .map_err(|e| AppError::Invalid(format!("`externalId`: {}", e.0)))?;
            let found = quire_app::documents::find_by_external_id(
                &self.services,
                &key.scope,
                source,
                &external_id,
            )
            .await?;
            let documents: Vec<DocumentOut> = found.iter().map(DocumentOut::from).collect();
            return Ok(json!({ "documents": documents }));
        }
        let Some(limit) = args.limit else {
            if args.cursor.is_some() {
                return Err(AppError::Invalid("`cursor` goes with `limit`".into()));
            }
            let documents = quire_app::documents::list(&self.services, &key.scope, source).await?;
            let documents: Vec<DocumentOut> = documents.iter().map(DocumentOut::from).collect();
            return Ok(json!({ "documents": documents }));
        };
        let size = PageSize::parse(&limit.to_string()).map_err(|e| AppError::Invalid(e.0))?;
        let after = args
            .cursor
            .as_deref()
            .map(DocumentCursor::parse)
            .transpose()
            .map_err(|e| AppError::Invalid(e.0))?;
        let page = quire_app::documents::list_page(&self.services, &key.scope, source, after, size)
            .await?;
        let documents: Vec<DocumentOut> = page.documents.iter().map(DocumentOut::from).collect();
        Ok(json!({
            "documents": documents,
            "nextCursor": page.next.map(|c| c.encode()),
        }))
    }

    async fn run_get_document(
        &self,
        args: GetDocumentArgs,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, AppError> {
        let key = key_with(context, Permission::Read)?;
        let source: SourceId = parse_id("sourceId", &args.source_id)?;
        let document: DocumentId = parse_id("documentId", &args.document_id)?;
        let first = args.page.unwrap_or(1);
        let count = args.pages.unwrap_or(DEFAULT_PAGES.min(MAX_PAGES_PER_READ));
        let read = read_pages(&self.services, &key.scope, source, document, first, count).await?;
        Ok(json!({
            "document": DocumentOut::from(&read.document),
            "pages": read.pages,
            "nextPage": read.next_page,
        }))
    }

    async fn run_upload(
        &self,
        args: UploadArgs,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, AppError> {
        let services = &self.services;
        let key = key_with(context, Permission::ReadWrite)?;
        let source: SourceId = parse_id("sourceId", &args.source_id)?;
        let bytes = match (args.content_base64, args.text) {
            (Some(encoded), None) => base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|e| {
                    AppError::Invalid(format!("`contentBase64` is not valid base64: {e}"))
                })?,
            (None, Some(text)) => text.into_bytes(),
            _ => {
                return Err(AppError::Invalid(
                    "give the content in exactly one of `contentBase64` and `text`".into(),
                ));
            }
        };
        if args.name.trim().is_empty() {
            return Err(AppError::Invalid(
                "`name` must be a file name with its extension, such as report.pdf".into(),
            ));
        }
        let metadata = match &args.metadata {
            Some(object) => Some(
                quire_core::Metadata::from_json(&Value::Object(object.clone()))
                    .map_err(|e| AppError::Invalid(e.0))?,
            ),
            None => None,
        };
        let external_id = args
            .external_id
            .as_deref()
            .map(quire_core::ExternalId::parse)
            .transpose()
            .map_err(|e| AppError::Invalid(format!("`externalId`: {}", e.0)))?;
        uploads::check_source(services, &key.scope, source).await?;
        let chunks = futures_util::stream::iter([Ok::<_, Infallible>(bytes)]);
        let mut upload =
            uploads::receive_part(services, Some(&args.name), args.content_type, chunks)
                .await
                .map_err(|refused| match refused.into_app() {
                    Ok(refused) => refused,
                    Err(never) => match never {},
                })?;
        upload.metadata = metadata;
        upload.external_id = external_id;
        let created = uploads::accept(services, &Actor::key(&key), source, upload).await?;
        let status = match created {
            Created::New(_) => "accepted",
            Created::Version(_) => "new_version",
            Created::Existing(_) => "duplicate",
        };
        Ok(json!({
            "status": status,
            "document": DocumentOut::from(created.document()),
        }))
    }
}

/// Progress notifications for the current call, when its client asked for them by giving a
/// progress token; otherwise nothing is sent.
struct Progress<'a> {
    context: &'a RequestContext<RoleServer>,
    token: Option<rmcp::model::ProgressToken>,
    sent: u32,
}

impl<'a> Progress<'a> {
    fn new(context: &'a RequestContext<RoleServer>) -> Self {
        Self {
            context,
            token: context.meta.get_progress_token(),
            sent: 0,
        }
    }

    /// Sends `message` as the next step (the count of notifications so far, as MCP wants a
    /// progress value that only grows).
    async fn send(&mut self, message: String) {
        let Some(token) = &self.token else {
            return;
        };
        self.sent += 1;
        let notification = ProgressNotificationParam::new(token.clone(), f64::from(self.sent))
            .with_message(message);
        if let Err(e) = self.context.peer.notify_progress(notification).await {
            // The client went away; the answer goes on and is stored like a REST one.
            tracing::debug!(error = %e, "could not send an MCP progress notification");
        }
    }
}
