//! The MCP server handler: what it tells the client at start, which tools a key is shown, and
//! the dispatch of tool calls and resource reads.

use quire_app::Services;
use quire_core::Permission;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::auth::caller;
use crate::error::rpc_error;
use crate::resources;
use crate::tools::UPLOAD_TOOL;

/// What the model is told about the server when a client connects.
const INSTRUCTIONS: &str = "Quire is a knowledge base of documents (PDF, Office, HTML, e-mail, \
text) grouped in data sources. This key sees only some sources. To answer from the documents: \
`search` finds passages (cite them by document name and page); `ask` writes an answer with \
numbered citations; `list_sources` and `list_documents` show what exists; `get_document` reads \
a document's text page by page. Documents are also resources at \
quire://sources/{sourceId}/documents/{documentId}.";

/// One MCP server instance; the SDK makes one per HTTP request (the server is stateless), so
/// it only holds the shared services and the tool table.
#[derive(Clone)]
pub struct QuireMcp {
    pub(crate) services: Services,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for QuireMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuireMcp").finish_non_exhaustive()
    }
}

impl QuireMcp {
    /// A server over `services`.
    pub fn new(services: Services) -> Self {
        Self {
            services,
            tool_router: Self::tools(),
        }
    }

    /// Every tool, for every permission (what [`ServerHandler::list_tools`] filters).
    pub fn all_tools(&self) -> Vec<Tool> {
        self.tool_router.list_all()
    }
}

impl ServerHandler for QuireMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("quire", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let key = caller(&context).map_err(rpc_error)?;
        // A read-only key is not offered the upload tool (calling it anyway is refused).
        let may_write = key.permission.allows(Permission::ReadWrite);
        let tools = self
            .tool_router
            .list_all()
            .into_iter()
            .filter(|tool| may_write || tool.name != UPLOAD_TOOL)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router.get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.tool_router
            .call(ToolCallContext::new(self, request, context))
            .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let key = caller(&context).map_err(rpc_error)?;
        resources::list(&self.services, &key)
            .await
            .map(ListResourcesResult::with_all_items)
            .map_err(rpc_error)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            resources::template(),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let key = caller(&context).map_err(rpc_error)?;
        resources::read(&self.services, &key, &request.uri)
            .await
            .map(Into::into)
            .map_err(rpc_error)
    }
}
