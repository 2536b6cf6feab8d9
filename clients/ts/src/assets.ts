/**
 * What the AssetService methods of ToolhostClient take: an asset to create, the changes of an update, the filters
 * of a listing and an import document. They return the generated messages (Asset, ListAssetsResponse,
 * ImportAssetsResponse); `totalSize` is a bigint, as every int64. An asset holds no secret: its WinRM profile
 * names a credential the server keeps.
 *
 *     await client.createAsset({ name: "ws-042", hostname: "ws-042.corp.example.com",
 *       os: "Microsoft Windows 10 Pro", platform: "windows", site: "berlin", tags: ["finance"],
 *       winrm: { ssl: true, credential: "winrmberlin", authentication: WinrmAuthentication.BASIC } });
 *     for await (const asset of client.listAssets({ os: "windows 10", site: "berlin" })) console.log(asset.name);
 *     await client.updateAsset({ name: "ws-042", winrm: { port: 5987 } }, ["winrm.port"]);
 *     const { created, replaced } = await client.importAssets("csv", readFileSync("assets.csv", "utf8"));
 *
 * A refused import throws InvalidArgumentError whose fieldViolations name each problem with its line.
 */

import { create, type MessageInitShape } from "@bufbuild/protobuf";

import type { CallOptions } from "./client.js";
import {
  AssetImportFormat,
  ImportAssetsRequestSchema,
  ListAssetsRequestSchema,
  UpdateAssetRequestSchema,
  type AssetSchema,
  type ImportAssetsRequest,
  type ListAssetsRequest,
  type UpdateAssetRequest,
} from "./gen/toolhost/v1/asset_service_pb.js";

/** An asset to create or the changes of an update: `name` is required, the times are ignored. */
export type AssetInit = MessageInitShape<typeof AssetSchema> & { name: string };

/**
 * The fields UpdateAsset may change: a field of the asset, the whole WinRM profile, or one field of it. An empty
 * list changes those the asset sets to other than their default (AIP-134), so a field is cleared only by naming
 * it; "*" names every one. The name never changes.
 */
export type AssetField =
  | "hostname" | "addresses" | "os" | "platform" | "site" | "tags" | "winrm"
  | "winrm.port" | "winrm.ssl" | "winrm.domain" | "winrm.credential" | "winrm.authentication" | "*";

/**
 * Which assets to list: every field given must match, regardless of case. `os` matches a part of the asset's os
 * ("windows 10" matches "Microsoft Windows 10 Pro"); `platform`, `site` and `tag` match whole values; `name` is
 * a glob (`*` any characters, `?` one).
 */
export interface AssetFilter {
  os?: string;
  platform?: string;
  site?: string;
  tag?: string;
  name?: string;
}

/** Options of listAssets: the filter, the page size and the call's options. */
export interface ListAssetsOptions extends AssetFilter, CallOptions {
  /** Assets per page: 0 or unset means the server's 100, the maximum is 1000. */
  pageSize?: number;
}

/** Options of listAssetsPage: listAssets' and the page to fetch. */
export interface ListAssetsPageOptions extends ListAssetsOptions {
  /** The nextPageToken of the previous page, fetched with the same filter; empty or unset for the first. */
  pageToken?: string;
}

/** The format of an import document. */
export type AssetImportFormatName = "yaml" | "csv";

/** Options of importAssets. */
export interface ImportAssetsOptions extends CallOptions {
  /** Check the document and store nothing: the answer says what an import would create and replace. */
  validateOnly?: boolean;
}

/** The ListAssets request of one page. */
export function listAssetsRequest(options: ListAssetsPageOptions): ListAssetsRequest {
  const filter = {
    os: options.os ?? "", platform: options.platform ?? "", site: options.site ?? "", tag: options.tag ?? "",
    name: options.name ?? "",
  };
  for (const [key, value] of Object.entries(filter)) {
    if (typeof value !== "string") {
      throw new TypeError(`the ${key} filter must be a string, not ${typeof value}`);
    }
  }
  return create(ListAssetsRequestSchema, {
    filter, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "",
  });
}

/** The UpdateAsset request changing `fields` of the asset `asset.name` to the values `asset` has. */
export function updateAssetRequest(asset: AssetInit, fields: readonly AssetField[]): UpdateAssetRequest {
  if (typeof fields === "string") {
    throw new TypeError("fields must be an array of field names, not one string");
  }
  return create(UpdateAssetRequestSchema, { asset, updateMask: { paths: [...fields] } });
}

/** The ImportAssets request of a document. */
export function importAssetsRequest(
  format: AssetImportFormatName, content: string, validateOnly: boolean,
): ImportAssetsRequest {
  const formats: Record<AssetImportFormatName, AssetImportFormat> = {
    yaml: AssetImportFormat.YAML, csv: AssetImportFormat.CSV,
  };
  const value = Object.hasOwn(formats, format) ? formats[format] : undefined;
  if (value === undefined) {
    throw new TypeError(`format must be "yaml" or "csv", not ${JSON.stringify(format)}`);
  }
  if (typeof content !== "string") {
    throw new TypeError(`content must be the document's text, not ${typeof content}`);
  }
  return create(ImportAssetsRequestSchema, { format: value, content, validateOnly });
}
