// The resolve hook sdk_from_tools.mjs registers: SDK imports are resolved as if tools/package.json imported
// them (through the package's "exports", with the "import" condition), every other import as usual.
const TOOLS_PACKAGE = new URL("../../tools/package.json", import.meta.url).href;
const SDK = "@modelcontextprotocol/sdk";

export async function resolve(specifier, context, nextResolve) {
  if (specifier === SDK || specifier.startsWith(`${SDK}/`)) {
    return nextResolve(specifier, { ...context, parentURL: TOOLS_PACKAGE });
  }
  return nextResolve(specifier, context);
}
