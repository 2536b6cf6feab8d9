// The README's example: list, describe, call and stream tools of a running toolhost, and read its logs.
//   npm run build && node examples/quickstart.mjs        (TOOLHOST_TARGET picks the server; default 127.0.0.1:50051)
import { createClient, InvalidArgumentError } from "toolhost-client";

const client = createClient(process.env.TOOLHOST_TARGET ?? "127.0.0.1:50051", { timeoutMs: 30_000 });
try {
  for await (const tool of client.listTools()) {           // every page, fetched as the loop reaches it
    console.log(`${tool.name.padEnd(16)} ${tool.category.padEnd(10)} ${tool.description.slice(0, 50)}`);
  }

  const hello = await client.callTool("echo", { text: "hello" });
  console.log(hello.output);                                // hello

  const greet = await client.getTool("greet");              // the full view: parameters and schemas
  for (const parameter of greet.parameters) {
    console.log(parameter.name, parameter.type, parameter.default);  // name string undefined, excited boolean false
  }

  const greeting = await client.callTool("greet", { name: "Ada", excited: true });
  console.log(greeting.output, `(${greeting.durationMs.toFixed(1)} ms, call ${greeting.callId})`);

  try {
    await client.callTool("echo", {});                      // `text` is required
  } catch (error) {
    if (!(error instanceof InvalidArgumentError)) throw error;
    console.log(error.reason);                              // INVALID_ARGUMENTS
    for (const violation of error.fieldViolations) {
      console.log(violation.field, violation.description);  // /text required argument is missing
    }
  }

  for await (const event of client.streamCallTool("disk_free", { path: "/" })) {
    if (event.case === "output") process.stdout.write(event.value.data);
    if (event.case === "result") console.log("exit code", event.value.exitCode);
  }

  // A tool with structured output: plain JSON, here the server's newest log record about the greet call.
  const inspected = await client.callTool("log_inspector", { text: "call tool=greet", limit: 1 });
  console.log(inspected.structuredOutput.records[0].fields.audit.outcome);  // OK

  // The server's logs, newest first (the admin role's, when the server authenticates callers).
  const page = await client.queryLogsPage({ text: "call tool=echo", pageSize: 2 });
  for (const entry of page.records) {
    console.log(entry.time.toISOString(), entry.level, entry.message);
  }
  console.log(page.summary.levelCounts);                    // { INFO: 2 }
} finally {
  client.close();
}
