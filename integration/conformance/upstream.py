"""The upstream server the conformance suite judges through the gateway
(integration/run.sh, `conformance_gateway`): the tools, resources, prompts
and completion the suite's server scenarios ask for, under the names it
calls, served over stdio to `toolcage serve` (which offers them with
`prefix = false`). Written with the Python `mcp` SDK (1.x FastMCP or 2.x
MCPServer)."""

import asyncio
import base64

try:  # mcp 2.x renamed FastMCP to MCPServer
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as FastMCP
    from mcp.server.mcpserver.prompts.base import UserMessage
except ImportError:
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.server.fastmcp.prompts.base import UserMessage
from mcp import types

# A 1x1 red PNG and a minimal (empty) 8 kHz mono WAV.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
        "0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
    )
).decode()
WAV = base64.b64encode(
    b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
    + (16000).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
    + b"data" + (0).to_bytes(4, "little")
).decode()

server = FastMCP("conformance-upstream")


def image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mimeType="image/png")


@server.tool(description="Returns simple text")
def test_simple_text() -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text="This is a simple text response for testing.")]


@server.tool(description="Returns an image")
def test_image_content() -> list[types.ContentBlock]:
    return [image()]


@server.tool(description="Returns audio")
def test_audio_content() -> list[types.ContentBlock]:
    return [types.AudioContent(type="audio", data=WAV, mimeType="audio/wav")]


@server.tool(description="Returns an embedded resource")
def test_embedded_resource() -> list[types.ContentBlock]:
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://embedded-resource",
                mimeType="text/plain",
                text="This is an embedded resource content.",
            ),
        )
    ]


@server.tool(description="Returns text, an image and an embedded resource")
def test_multiple_content_types() -> list[types.ContentBlock]:
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        image(),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://mixed-content-resource",
                mimeType="application/json",
                text='{"test":"data","value":123}',
            ),
        ),
    ]


@server.tool(description="Sends three log messages while it runs")
async def test_tool_with_logging(ctx: Context) -> str:
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool(description="Reports progress 0, 50 and 100 of 100")
async def test_tool_with_progress(ctx: Context) -> str:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100)
        if step < 100:
            await asyncio.sleep(0.05)
    return "Tool with progress executed successfully"


@server.tool(description="Always fails")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool(description="Asks the client's LLM for a completion")
async def test_sampling(prompt: str, ctx: Context) -> str:
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
    )
    text = getattr(result.content, "text", str(result.content))
    return f"LLM response: {text}"


async def elicit(ctx: Context, message: str, schema: dict) -> str:
    result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return f"Elicitation completed: action={result.action}, content={result.content}"


@server.tool(description="Asks the user for a username and an email")
async def test_elicitation(message: str, ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return await elicit(ctx, message, schema)


@server.tool(description="Asks the user with a default for every primitive type")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    return await elicit(ctx, "Please review your details", schema)


@server.tool(description="Asks the user with each of the five enum shapes")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    titled = [{"const": f"value{i}", "title": t} for i, t in ((1, "First Choice"), (2, "Second Choice"), (3, "Third Choice"))]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": titled}},
        },
    }
    return await elicit(ctx, "Please choose", schema)


@server.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", description="A static binary resource", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to", mime_type="text/plain")
def watched() -> str:
    return "Watched resource content"


@server.resource("test://template/{id}/data", name="template", description="A resource template", mime_type="application/json")
def template(id: str) -> str:
    return '{"id":"%s","templateTest":true,"data":"Data for ID: %s"}' % (id, id)


@server.prompt(description="A prompt without arguments")
def test_simple_prompt() -> list[UserMessage]:
    return [UserMessage("This is a simple prompt for testing.")]


@server.prompt(description="A prompt with two arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@server.prompt(description="A prompt that embeds a resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    return [
        UserMessage(
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri=resourceUri, mimeType="text/plain", text="Embedded resource content for testing."),
            )
        ),
        UserMessage("Please process the embedded resource above."),
    ]


@server.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[UserMessage]:
    return [UserMessage(image()), UserMessage("Please analyze the image above.")]


@server.completion()
async def complete(ref, argument, context):
    values = [v for v in ("paris", "park", "party", "test", "testValue") if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), hasMore=False)


subscribed: set[str] = set()


async def subscribe(_ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(_ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscribed.discard(str(params.uri))
    return types.EmptyResult()


low = getattr(server, "_lowlevel_server", None) or server._mcp_server
if hasattr(low, "add_request_handler"):  # mcp 2.x
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
else:  # mcp 1.x
    low.subscribe_resource()(lambda uri: subscribed.add(str(uri)))
    low.unsubscribe_resource()(lambda uri: subscribed.discard(str(uri)))

server.run()
