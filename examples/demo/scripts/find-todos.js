// A3S AgentDir script tool (QuickJS), run by toolcage in a sandboxed child:
// it can only call the tools in its allowed_tools, through ctx.tool.
async function run(ctx, inputs) {
  const pattern = inputs.pattern ?? "TODO";
  const hits = await ctx.tool("search_notes", { pattern, ignore_case: true });
  return { pattern, hits: hits.trim().split("\n") };
}
