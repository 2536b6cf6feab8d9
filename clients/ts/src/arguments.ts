/**
 * Tool arguments as JSON text (CallToolRequest.arguments_json), exact for integers of any size: a bigint is
 * written as its digits, which JSON.stringify refuses and a google.protobuf.Struct would round to a double.
 */

/** A JSON value a tool takes as an argument; bigint for integers beyond Number.MAX_SAFE_INTEGER. */
export type ArgumentValue =
  | string
  | number
  | bigint
  | boolean
  | null
  | readonly ArgumentValue[]
  | { readonly [key: string]: ArgumentValue | undefined };

/** The arguments object of a call: parameter names to values. */
export type Arguments = { readonly [name: string]: ArgumentValue | undefined };

/** `args` as JSON object text; TypeError for values JSON cannot hold (NaN, Infinity, functions, cycles). */
export function argumentsJson(args: Arguments | undefined): string {
  if (args === undefined) {
    return "{}";
  }
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    throw new TypeError("arguments must be an object of parameter names to values");
  }
  return encode(args, "", new Set());
}

function encode(value: unknown, path: string, seen: Set<object>): string {
  switch (typeof value) {
    case "bigint":
      return value.toString();
    case "number":
      if (!Number.isFinite(value)) {
        throw new TypeError(`argument ${path || "/"} is ${value}, which JSON cannot hold`);
      }
      return JSON.stringify(value);
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "object": {
      if (value === null) {
        return "null";
      }
      const withJson = value as { toJSON?: (key: string) => unknown };
      if (typeof withJson.toJSON === "function") {
        return encode(withJson.toJSON(path), path, seen);
      }
      if (seen.has(value)) {
        throw new TypeError(`argument ${path || "/"} refers to itself`);
      }
      seen.add(value);
      try {
        if (Array.isArray(value)) {
          const items = value.map((item, index) => encode(item === undefined ? null : item, `${path}/${index}`, seen));
          return `[${items.join(",")}]`;
        }
        const members = Object.entries(value)
          .filter(([, item]) => item !== undefined)
          .map(([key, item]) => `${JSON.stringify(key)}:${encode(item, `${path}/${pointerToken(key)}`, seen)}`);
        return `{${members.join(",")}}`;
      } finally {
        seen.delete(value);
      }
    }
    default:
      throw new TypeError(`argument ${path || "/"} is a ${typeof value}, which JSON cannot hold`);
  }
}

function pointerToken(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}
