"""A real MCP peer for Quire's MCP server: the official Python SDK's Streamable HTTP client.

Run by the API test `mcp::a_real_client_uses_every_tool_within_its_key` (crates/quire/tests/api/
mcp.rs) with the interpreter from `scripts/mcp-client`. Its one argument is a JSON object with
the server's MCP URL, the keys, sources and documents the test prepared (see the test). Every
check is an assertion: the script exits non-zero at the first one that fails. Halfway through
it prints `revoke` and waits for a line on standard input, while the test revokes a key, to
check that a key revoked during a session is refused at its next call.
"""

import asyncio
import base64
import contextlib
import json
import sys

from mcp.client.session import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

ALL_TOOLS = {"search", "ask", "list_sources", "list_documents", "get_document", "upload_document"}


@contextlib.asynccontextmanager
async def Session(url, key):
    """One MCP session with one key (or none)."""
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                yield session


def refused(result, code):
    """The tool result is a refusal with this code; returns its message."""
    assert result.is_error, f"expected a refusal ({code}), got {result}"
    error = result.structured_content["error"]
    assert error["code"] == code, f"expected {code}, got {error}"
    assert result.content[0].text.startswith(code), result.content
    return error["message"]


def data(result):
    assert not result.is_error, f"the call was refused: {result.content}"
    return result.structured_content


async def expect_rpc_error(call, *needles):
    try:
        await call
    except MCPError as e:
        for needle in needles:
            assert needle in e.message, f"{needle!r} not in {e.message!r}"
        return e
    raise AssertionError(f"expected a JSON-RPC error mentioning {needles}")


async def tools_and_schemas(c):
    async with Session(c["url"], c["readWrite"]) as s:
        init = await s.initialize()
        assert init.server_info.name == "quire"
        assert "search" in (init.instructions or "")
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == ALL_TOOLS, set(tools)
        for tool in tools.values():
            assert len(tool.description) > 80, tool.name
            assert tool.input_schema["type"] == "object", tool.name
        search = tools["search"].input_schema
        assert search["required"] == ["query"], search
        assert {"query", "sourceIds", "limit"} <= set(search["properties"]), search
        assert "description" in search["properties"]["sourceIds"]
        assert {"question", "sourceIds", "conversationId"} <= set(tools["ask"].input_schema["properties"])
    async with Session(c["url"], c["read"]) as s:
        await s.initialize()
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == ALL_TOOLS - {"upload_document"}, names


async def reading(c):
    a, b, doc_a, doc_b = c["sourceA"], c["sourceB"], c["documentA"], c["documentB"]
    async with Session(c["url"], c["readWrite"]) as s:
        await s.initialize()
        sources = data(await s.call_tool("list_sources", {}))["sources"]
        assert [x["id"] for x in sources] == [a], sources

        documents = data(await s.call_tool("list_documents", {"sourceId": a}))["documents"]
        assert [d["id"] for d in documents] == [doc_a], documents
        assert documents[0]["status"] == "ready"
        assert documents[0]["uri"] == f"quire://sources/{a}/documents/{doc_a}"
        refused(await s.call_tool("list_documents", {"sourceId": b}), "not_found")

        results = data(await s.call_tool("search", {"query": "zeppelin hangar", "limit": 5}))["results"]
        assert results, "nothing found"
        top = results[0]
        assert top["document"] == {"id": doc_a, "name": "airships.md", "metadata": {}}, top
        assert top["dataSource"]["id"] == a
        assert top["metadata"]["page"] == 1 and "section" in top["metadata"]
        assert top["score"] > 0 and "zeppelin" in top["content"].lower()
        # The other source's document is never a result, even asked for by name.
        msg = refused(await s.call_tool("search", {"query": "zeppelin", "sourceIds": [b]}), "not_found")
        assert b in msg, msg

        page = data(await s.call_tool("get_document", {"sourceId": a, "documentId": doc_a}))
        assert page["document"]["name"] == "airships.md"
        assert page["pages"][0]["page"] == 1 and "hangar" in page["pages"][0]["text"], page
        assert page["nextPage"] is None
        refused(await s.call_tool("get_document", {"sourceId": b, "documentId": doc_b}), "not_found")
        refused(await s.call_tool("get_document", {"sourceId": a, "documentId": doc_b}), "not_found")

        uri = f"quire://sources/{a}/documents/{doc_a}"
        listed = [str(r.uri) for r in (await s.list_resources()).resources]
        assert listed == [uri], listed
        templates = (await s.list_resource_templates()).resource_templates
        assert templates[0].uri_template == "quire://sources/{sourceId}/documents/{documentId}"
        text = (await s.read_resource(uri)).contents[0].text
        assert "hangar" in text, text
        await expect_rpc_error(s.read_resource(f"quire://sources/{b}/documents/{doc_b}"), "not found")


async def asking(c):
    a, doc_a = c["sourceA"], c["documentA"]
    async with Session(c["url"], c["readWrite"]) as s:
        await s.initialize()
        progress = []

        async def on_progress(value, total, message):
            progress.append((value, message))

        answer = data(
            await s.call_tool("ask", {"question": "Where is the zeppelin kept?"}, progress_callback=on_progress)
        )
        assert answer["answer"].strip(), answer
        assert answer["citations"], answer
        assert {x["documentId"] for x in answer["citations"]} == {doc_a}, answer["citations"]
        # The answer's text arrived as progress while it was written.
        assert progress, "no progress notification"
        values = [v for v, _ in progress]
        assert values == sorted(values) and len(set(values)) == len(values), values
        streamed = "".join(m for _, m in progress if m and not m.startswith("waiting"))
        assert streamed == answer["answer"], (streamed, answer["answer"])
        follow_up = data(
            await s.call_tool("ask", {"question": "And the hangar?", "conversationId": answer["conversationId"]})
        )
        assert follow_up["conversationId"] == answer["conversationId"]
        msg = refused(await s.call_tool("ask", {"question": "x", "conversationId": "nope"}), "bad_request")
        assert "conversationId" in msg
        refused(await s.call_tool("ask", {"question": "zeppelin", "sourceIds": [c["sourceB"]]}), "not_found")
        assert a


async def writing(c):
    a = c["sourceA"]
    async with Session(c["url"], c["readWrite"]) as s:
        await s.initialize()
        text = "# Balloons\n\nA hot-air balloon rises because warm air is lighter.\n"
        first = data(await s.call_tool("upload_document", {"sourceId": a, "name": "balloons.md", "text": text}))
        assert first["status"] == "accepted" and first["document"]["name"] == "balloons.md", first
        encoded = base64.b64encode(text.encode()).decode()
        again = data(
            await s.call_tool("upload_document", {"sourceId": a, "name": "copy.md", "contentBase64": encoded})
        )
        assert again["status"] == "duplicate" and again["document"]["id"] == first["document"]["id"], again
        too_large = base64.b64encode(b"x" * (c["maxUploadBytes"] + 1)).decode()
        msg = refused(
            await s.call_tool("upload_document", {"sourceId": a, "name": "big.txt", "contentBase64": too_large}),
            "payload_too_large",
        )
        assert str(c["maxUploadBytes"]) in msg, msg
        msg = refused(
            await s.call_tool("upload_document", {"sourceId": a, "name": "x.txt", "contentBase64": "%%%"}),
            "bad_request",
        )
        assert "base64" in msg
        refused(
            await s.call_tool("upload_document", {"sourceId": a, "name": "x.txt", "text": "a", "contentBase64": "YQ=="}),
            "bad_request",
        )
        refused(
            await s.call_tool("upload_document", {"sourceId": c["sourceB"], "name": "x.txt", "text": "intruder"}),
            "not_found",
        )
        c["uploaded"] = first["document"]["id"]

        # An external id makes a second upload a new version of the same document.
        v1 = data(await s.call_tool("upload_document", {
            "sourceId": a, "name": "rules.md", "text": "# Rules\n\nVersion one.\n",
            "externalId": "wiki/rules", "metadata": {"team": "ops"}}))
        assert v1["status"] == "accepted" and v1["document"]["externalId"] == "wiki/rules", v1
        assert v1["document"]["version"] == 1, v1
        v2 = data(await s.call_tool("upload_document", {
            "sourceId": a, "name": "rules.md", "text": "# Rules\n\nVersion two.\n",
            "externalId": "wiki/rules"}))
        assert v2["status"] == "new_version" and v2["document"]["id"] == v1["document"]["id"], v2
        assert v2["document"]["metadata"] == {"team": "ops"}, v2
        found = data(await s.call_tool("list_documents", {"sourceId": a, "externalId": "wiki/rules"}))
        assert [d["id"] for d in found["documents"]] == [v1["document"]["id"]], found
        refused(await s.call_tool("upload_document", {
            "sourceId": a, "name": "x.md", "text": "x", "externalId": ""}), "bad_request")

        # Pages of documents: one at a time, following nextCursor to the end.
        seen, cursor = [], None
        while True:
            args = {"sourceId": a, "limit": 1}
            if cursor:
                args["cursor"] = cursor
            page = data(await s.call_tool("list_documents", args))
            assert len(page["documents"]) <= 1, page
            seen += [d["id"] for d in page["documents"]]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        everything = data(await s.call_tool("list_documents", {"sourceId": a}))["documents"]
        assert seen == [d["id"] for d in everything] and len(seen) == 3, (seen, everything)
        refused(await s.call_tool("list_documents", {"sourceId": a, "cursor": "d1.x"}), "bad_request")
    async with Session(c["url"], c["read"]) as s:
        await s.initialize()
        msg = refused(
            await s.call_tool("upload_document", {"sourceId": a, "name": "x.txt", "text": "a"}), "forbidden"
        )
        assert "read-write" in msg, msg


async def bad_input(c):
    async with Session(c["url"], c["readWrite"]) as s:
        await s.initialize()
        for arguments, needle in [
            ({}, "query"),
            ({"query": 5}, "string"),
            ({"query": "x", "limt": 3}, "limt"),
            ({"query": "x", "limit": "ten"}, "ten"),
        ]:
            result = await s.call_tool("search", arguments)
            assert result.is_error, (arguments, result)
            assert needle in result.content[0].text, (needle, result.content[0].text)
        msg = refused(await s.call_tool("search", {"query": "x", "limit": 1000}), "bad_request")
        assert "limit" in msg
        msg = refused(await s.call_tool("search", {"query": "x", "sourceIds": ["not-a-uuid"]}), "bad_request")
        assert "sourceIds[0]" in msg
        refused(await s.call_tool("get_document", {"sourceId": c["sourceA"], "documentId": c["documentA"], "pages": 0}), "bad_request")
        await expect_rpc_error(s.call_tool("no_such_tool", {}), "not found")
        # The session still works after all of that.
        assert data(await s.call_tool("list_sources", {}))["sources"]


async def rate_limits(c):
    async with Session(c["url"], c["limited"]) as s:
        await s.initialize()
        for _ in range(c["limitedPerMinute"]):
            data(await s.call_tool("search", {"query": "zeppelin"}))
        msg = refused(await s.call_tool("search", {"query": "zeppelin"}), "rate_limited")
        assert "try again in" in msg, msg


async def keys(c):
    for key, needle in [(None, "Authorization"), ("qk_" + "0" * 48, "invalid API key"), ("nonsense", "malformed")]:
        async with Session(c["url"], key) as s:
            await expect_rpc_error(s.initialize(), needle)
    async with Session(c["url"], c["revoked"]) as s:
        await s.initialize()
        data(await s.call_tool("list_sources", {}))
        print("revoke", flush=True)
        assert sys.stdin.readline().strip() == "revoked"
        await expect_rpc_error(s.call_tool("list_sources", {}), "revoked")
        await expect_rpc_error(s.list_tools(), "revoked")


async def main():
    c = json.loads(sys.argv[1])
    for step in [tools_and_schemas, reading, asking, writing, bad_input, rate_limits, keys]:
        await step(c)
        print(f"ok {step.__name__}", file=sys.stderr, flush=True)
    print(json.dumps({"uploaded": c["uploaded"]}), flush=True)


asyncio.run(main())
