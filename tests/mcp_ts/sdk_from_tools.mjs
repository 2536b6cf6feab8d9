// Preloaded with `node --import ./sdk_from_tools.mjs`: makes `@modelcontextprotocol/sdk/...` resolve from
// tools/node_modules, where `make tools` installs the version pinned in tools/package-lock.json. The scripts
// here then import the SDK by its documented names; ESM imports ignore NODE_PATH, and the tests directory has
// no node_modules of its own.
import { register } from "node:module";

register("./sdk_resolve_hook.mjs", import.meta.url);
