// A3S AgentDir script tool (QuickJS). toolcage validates it; running it
// is not supported yet.
async function run(ctx, inputs) {
  const hits = await ctx.tool("grep", { pattern: "TODO", path: "." });
  return hits;
}
