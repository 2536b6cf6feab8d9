package toolhost

import (
	"context"
	"iter"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// Assets: the inventory of machines that asset_count, asset_search and windows_list_directory answer about
// (AssetService). Every method needs the admin role or a role with `manage_assets` when the server
// authenticates (codes.PermissionDenied otherwise). An asset holds no secret: its WinRM profile names a
// credential the server keeps.
//
//	asset, err := client.CreateAsset(ctx, &toolhostv1.Asset{Name: "ws-042", Hostname: "ws-042.corp.example.com",
//		Os: "Microsoft Windows 10 Pro", Platform: "windows", Site: "berlin", Tags: []string{"finance"},
//		Winrm: &toolhostv1.WinrmProfile{Ssl: true, Credential: "winrmberlin"}})
//	for asset, err := range client.ListAssets(ctx, toolhost.AssetFilter{OS: "windows 10", Site: "berlin"}) { ... }
//	asset, err = client.UpdateAsset(ctx, &toolhostv1.Asset{Name: "ws-042", Winrm: &toolhostv1.WinrmProfile{Port: 5987}},
//		"winrm.port")
//	summary, err := client.ImportAssets(ctx, toolhostv1.AssetImportFormat_ASSET_IMPORT_FORMAT_CSV, csvText)
//
// A bad asset or import is an *Error with codes.InvalidArgument whose FieldViolations name each problem (an
// import's carry their line); a name that is taken is codes.AlreadyExists; an unknown one codes.NotFound; a
// database the server cannot use now codes.Unavailable with Reason "STORE_UNAVAILABLE" (retry later).

// AssetFilter selects assets for ListAssets and ListAssetsPage; every field that is set must match, regardless
// of case. OS matches a part of the asset's os ("windows 10" matches "Microsoft Windows 10 Pro"); Platform,
// Site and Tag match whole values; Name is a glob (`*` any characters, `?` one). PageSize 0 lets the server
// choose (100, at most 1000).
type AssetFilter struct {
	OS       string
	Platform string
	Site     string
	Tag      string
	Name     string
	PageSize int32
}

func (f AssetFilter) request(pageToken string) *toolhostv1.ListAssetsRequest {
	return &toolhostv1.ListAssetsRequest{
		Filter:   &toolhostv1.AssetFilter{Os: f.OS, Platform: f.Platform, Site: f.Site, Tag: f.Tag, Name: f.Name},
		PageSize: f.PageSize, PageToken: pageToken,
	}
}

// RawAssets returns the generated AssetService stub on the same connection, as Raw does for ToolService.
func (c *Client) RawAssets() toolhostv1.AssetServiceClient { return c.assets }

// CreateAsset stores a new asset (Name set; the server ignores the times) and returns it as stored. A name
// taken regardless of case is codes.AlreadyExists; a bad name, hostname, address or an unsafe WinRM profile
// (basic authentication without SSL) is codes.InvalidArgument naming the field.
func (c *Client) CreateAsset(ctx context.Context, asset *toolhostv1.Asset) (*toolhostv1.Asset, error) {
	response, err := c.assets.CreateAsset(ctx, &toolhostv1.CreateAssetRequest{Asset: asset})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetAsset(), nil
}

// GetAsset returns one asset by name, regardless of case; an unknown name is codes.NotFound.
func (c *Client) GetAsset(ctx context.Context, name string) (*toolhostv1.Asset, error) {
	response, err := c.assets.GetAsset(ctx, &toolhostv1.GetAssetRequest{Name: name})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetAsset(), nil
}

// ListAssetsPage returns one page of the assets that match filter, sorted by name: pageToken is the previous
// page's NextPageToken ("" for the first), and TotalSize counts the matches over every page.
func (c *Client) ListAssetsPage(ctx context.Context, filter AssetFilter, pageToken string) (*toolhostv1.ListAssetsResponse, error) {
	response, err := c.assets.ListAssets(ctx, filter.request(pageToken))
	if err != nil {
		return nil, asError(err)
	}
	return response, nil
}

// ListAssets yields every asset that matches filter, sorted by name, fetching pages as the loop needs them.
// An error ends the iteration: it is yielded once with a nil asset.
func (c *Client) ListAssets(ctx context.Context, filter AssetFilter) iter.Seq2[*toolhostv1.Asset, error] {
	return func(yield func(*toolhostv1.Asset, error) bool) {
		request := filter.request("")
		for {
			page, err := c.assets.ListAssets(ctx, request)
			if err != nil {
				yield(nil, asError(err))
				return
			}
			for _, asset := range page.GetAssets() {
				if !yield(asset, nil) {
					return
				}
			}
			if page.GetNextPageToken() == "" {
				return
			}
			request.PageToken = page.GetNextPageToken()
		}
	}
}

// UpdateAsset changes the fields that paths names (hostname, addresses, os, platform, site, tags, winrm, or a
// field of the profile such as "winrm.port") to their values in asset, found by asset.Name. No paths changes
// the fields asset sets to other than their zero value (AIP-134), so a field is cleared only by naming it; "*"
// replaces every one of them. The name never changes; an unknown one is codes.NotFound.
func (c *Client) UpdateAsset(ctx context.Context, asset *toolhostv1.Asset, paths ...string) (*toolhostv1.Asset, error) {
	request := &toolhostv1.UpdateAssetRequest{Asset: asset, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
	response, err := c.assets.UpdateAsset(ctx, request)
	if err != nil {
		return nil, asError(err)
	}
	return response.GetAsset(), nil
}

// DeleteAsset removes an asset and returns it as it was; an unknown name is codes.NotFound.
func (c *Client) DeleteAsset(ctx context.Context, name string) (*toolhostv1.Asset, error) {
	response, err := c.assets.DeleteAsset(ctx, &toolhostv1.DeleteAssetRequest{Name: name})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetAsset(), nil
}

// ImportAssets creates or replaces (by name) every asset of a YAML or CSV document, all or nothing, and says
// how many it created and replaced. One bad record stores nothing: the *Error (codes.InvalidArgument) has a
// FieldViolation per problem, at most 100, each naming its line.
func (c *Client) ImportAssets(ctx context.Context, format toolhostv1.AssetImportFormat, content string) (*toolhostv1.ImportAssetsResponse, error) {
	return c.importAssets(ctx, &toolhostv1.ImportAssetsRequest{Format: format, Content: content})
}

// ValidateAssetImport checks a document as ImportAssets would and stores nothing: the answer says what an
// import would create and replace, and the error what it would refuse.
func (c *Client) ValidateAssetImport(ctx context.Context, format toolhostv1.AssetImportFormat, content string) (*toolhostv1.ImportAssetsResponse, error) {
	return c.importAssets(ctx, &toolhostv1.ImportAssetsRequest{Format: format, Content: content, ValidateOnly: true})
}

func (c *Client) importAssets(ctx context.Context, request *toolhostv1.ImportAssetsRequest) (*toolhostv1.ImportAssetsResponse, error) {
	response, err := c.assets.ImportAssets(ctx, request)
	if err != nil {
		return nil, asError(err)
	}
	return response, nil
}
