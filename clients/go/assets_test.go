package toolhost_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	toolhost "github.com/toolhost/toolhost/clients/go"
	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// The tests share one server: every asset they make starts with "go-" and is removed when the test ends.

func createAsset(t *testing.T, client *toolhost.Client, asset *toolhostv1.Asset) *toolhostv1.Asset {
	t.Helper()
	created, err := client.CreateAsset(context10s(t), asset)
	if err != nil {
		t.Fatalf("create %s: %v", asset.GetName(), err)
	}
	t.Cleanup(func() { _, _ = client.DeleteAsset(context10s(t), asset.GetName()) })
	return created
}

func assetNames(t *testing.T, assets func(func(*toolhostv1.Asset, error) bool)) []string {
	t.Helper()
	names := []string{}
	for asset, err := range assets {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, asset.GetName())
	}
	return names
}

func TestAnAssetFromCreationToDeletion(t *testing.T) {
	client, ctx := dial(t), context10s(t)
	created := createAsset(t, client, &toolhostv1.Asset{Name: "go-ws-042", Hostname: "ws-042.corp.example.com",
		Addresses: []string{"192.0.2.42"}, Os: "Microsoft Windows 10 Pro", Platform: "windows", Site: "berlin",
		Tags: []string{"finance"}, Winrm: &toolhostv1.WinrmProfile{Ssl: true, Credential: "winrmberlin",
			Authentication: toolhostv1.WinrmAuthentication_WINRM_AUTHENTICATION_BASIC}})
	if created.GetCreateTime() == nil || created.GetWinrm().GetCredential() != "winrmberlin" {
		t.Fatalf("created: %v", created)
	}
	_, err := client.CreateAsset(ctx, &toolhostv1.Asset{Name: "GO-WS-042"})
	wantCode(t, err, codes.AlreadyExists, "ALREADY_EXISTS")

	got, err := client.GetAsset(ctx, "Go-Ws-042")
	if err != nil || got.GetHostname() != "ws-042.corp.example.com" || !slices.Equal(got.GetTags(), []string{"finance"}) {
		t.Fatalf("get: %v %v", got, err)
	}
	updated, err := client.UpdateAsset(ctx, &toolhostv1.Asset{Name: "go-ws-042", Site: "not in the mask",
		Winrm: &toolhostv1.WinrmProfile{Port: 5987}}, "winrm.port")
	if err != nil || updated.GetWinrm().GetPort() != 5987 || !updated.GetWinrm().GetSsl() ||
		updated.GetSite() != "berlin" {
		t.Fatalf("update of winrm.port: %v %v", updated, err)
	}
	// No paths: the fields the message populates, and only those.
	updated, err = client.UpdateAsset(ctx, &toolhostv1.Asset{Name: "go-ws-042", Os: "Microsoft Windows 11 Pro"})
	if err != nil || updated.GetOs() != "Microsoft Windows 11 Pro" || updated.GetSite() != "berlin" ||
		updated.GetWinrm().GetPort() != 5987 {
		t.Fatalf("update without paths: %v %v", updated, err)
	}
	// A field is cleared only by naming it.
	updated, err = client.UpdateAsset(ctx, &toolhostv1.Asset{Name: "go-ws-042"}, "tags")
	if err != nil || len(updated.GetTags()) != 0 {
		t.Fatalf("clearing tags: %v %v", updated, err)
	}
	_, err = client.UpdateAsset(ctx, &toolhostv1.Asset{Name: "go-nowhere", Os: "x"})
	wantCode(t, err, codes.NotFound, "RESOURCE_NOT_FOUND")

	deleted, err := client.DeleteAsset(ctx, "go-ws-042")
	if err != nil || deleted.GetOs() != "Microsoft Windows 11 Pro" {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	_, err = client.GetAsset(ctx, "go-ws-042")
	wantCode(t, err, codes.NotFound, "RESOURCE_NOT_FOUND")
	_, err = client.DeleteAsset(ctx, "go-ws-042")
	wantCode(t, err, codes.NotFound, "RESOURCE_NOT_FOUND")
}

func TestAnUnsafeProfileIsInvalidNamingTheField(t *testing.T) {
	client, ctx := dial(t), context10s(t)
	// Basic authentication over plain HTTP would send the password in clear.
	_, err := client.CreateAsset(ctx, &toolhostv1.Asset{Name: "go-clear", Winrm: &toolhostv1.WinrmProfile{
		Authentication: toolhostv1.WinrmAuthentication_WINRM_AUTHENTICATION_BASIC}})
	toolErr := wantCode(t, err, codes.InvalidArgument, "INVALID_REQUEST")
	if len(toolErr.FieldViolations) == 0 || !strings.Contains(toolErr.FieldViolations[0].Field, "winrm") {
		t.Errorf("violations: %+v", toolErr.FieldViolations)
	}
	if _, err := client.GetAsset(ctx, "go-clear"); err == nil {
		t.Error("the refused asset was stored")
	}
}

func TestListAssetsFiltersAndFollowsEveryPage(t *testing.T) {
	client, ctx := dial(t), context10s(t)
	for _, asset := range []*toolhostv1.Asset{
		{Name: "go-list-c", Os: "Microsoft Windows 10 Pro", Platform: "windows", Site: "berlin", Tags: []string{"Kiosk"}},
		{Name: "go-list-a", Os: "Microsoft Windows 10 Enterprise", Platform: "windows", Site: "paris"},
		{Name: "go-list-b", Os: "Microsoft Windows 10 Pro", Platform: "windows", Site: "berlin"},
		{Name: "go-list-d", Os: "Ubuntu 24.04", Platform: "linux", Site: "berlin", Tags: []string{"kiosk"}},
	} {
		createAsset(t, client, asset)
	}
	cases := []struct {
		filter toolhost.AssetFilter
		want   []string
	}{
		{toolhost.AssetFilter{Name: "go-list-*", PageSize: 1}, []string{"go-list-a", "go-list-b", "go-list-c", "go-list-d"}},
		{toolhost.AssetFilter{Name: "go-list-*", OS: "WINDOWS 10", PageSize: 2},
			[]string{"go-list-a", "go-list-b", "go-list-c"}},
		{toolhost.AssetFilter{Name: "GO-LIST-?", Site: "Berlin", Platform: "windows"}, []string{"go-list-b", "go-list-c"}},
		{toolhost.AssetFilter{Name: "go-list-*", Tag: "KIOSK"}, []string{"go-list-c", "go-list-d"}},
		{toolhost.AssetFilter{Name: "go-list-*", Site: "tokyo"}, []string{}},
	}
	for _, c := range cases {
		if got := assetNames(t, client.ListAssets(ctx, c.filter)); !slices.Equal(got, c.want) {
			t.Errorf("%+v: got %v, want %v", c.filter, got, c.want)
		}
	}
	filter := toolhost.AssetFilter{Name: "go-list-*", Site: "berlin", PageSize: 2}
	first, err := client.ListAssetsPage(ctx, filter, "")
	if err != nil || len(first.GetAssets()) != 2 || first.GetTotalSize() != 3 || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	last, err := client.ListAssetsPage(ctx, filter, first.GetNextPageToken())
	if err != nil || len(last.GetAssets()) != 1 || last.GetAssets()[0].GetName() != "go-list-d" ||
		last.GetNextPageToken() != "" {
		t.Fatalf("last page: %v %v", last, err)
	}
	// A token continues the list it came from, not a list with other filters.
	filter.Site = "paris"
	_, err = client.ListAssetsPage(ctx, filter, first.GetNextPageToken())
	if toolErr, ok := toolhost.AsError(err); !ok || toolErr.Code != codes.InvalidArgument {
		t.Errorf("a token with other filters: %v", err)
	}
	// An error ends the iteration, yielded once.
	errors := 0
	for asset, err := range client.ListAssets(ctx, toolhost.AssetFilter{PageSize: -1}) {
		if err == nil || asset != nil {
			t.Fatalf("yielded %v %v", asset, err)
		}
		errors++
	}
	if errors != 1 {
		t.Errorf("%d errors yielded", errors)
	}
}

func TestImportIsAllOrNothingAndValidationStoresNothing(t *testing.T) {
	client, ctx := dial(t), context10s(t)
	csvFormat := toolhostv1.AssetImportFormat_ASSET_IMPORT_FORMAT_CSV
	createAsset(t, client, &toolhostv1.Asset{Name: "go-imp-old", Site: "before"})
	t.Cleanup(func() { _, _ = client.DeleteAsset(context10s(t), "go-imp-new") })
	document := "name,os,site,tags,winrm_port\n" +
		"go-imp-new,Microsoft Windows 10 Pro,berlin,a;b,5986\n" +
		"GO-IMP-OLD,Ubuntu 24.04,after,,\n"

	checked, err := client.ValidateAssetImport(ctx, csvFormat, document)
	if err != nil || checked.GetCreated() != 1 || checked.GetReplaced() != 1 {
		t.Fatalf("validate: %v %v", checked, err)
	}
	if _, err := client.GetAsset(ctx, "go-imp-new"); err == nil {
		t.Fatal("validation stored an asset")
	}

	bad := document + "go imp bad,x,y,,\n" + "go-imp-port,x,y,,70000\n"
	_, err = client.ImportAssets(ctx, csvFormat, bad)
	toolErr := wantCode(t, err, codes.InvalidArgument, "INVALID_REQUEST")
	var lines []string
	for _, violation := range toolErr.FieldViolations {
		lines = append(lines, violation.Field+" "+violation.Description)
	}
	if text := strings.Join(lines, "\n"); len(lines) != 2 || !strings.Contains(text, "4") || !strings.Contains(text, "5") {
		t.Errorf("want one problem for line 4 and one for line 5, got:\n%s", text)
	}
	if old, err := client.GetAsset(ctx, "go-imp-old"); err != nil || old.GetSite() != "before" {
		t.Fatalf("a refused import changed the inventory: %v %v", old, err)
	}

	imported, err := client.ImportAssets(ctx, csvFormat, document)
	if err != nil || imported.GetCreated() != 1 || imported.GetReplaced() != 1 {
		t.Fatalf("import: %v %v", imported, err)
	}
	fresh, err := client.GetAsset(ctx, "go-imp-new")
	if err != nil || fresh.GetWinrm().GetPort() != 5986 || !slices.Equal(fresh.GetTags(), []string{"a", "b"}) {
		t.Fatalf("imported: %v %v", fresh, err)
	}
	if old, _ := client.GetAsset(ctx, "go-imp-old"); old.GetSite() != "after" {
		t.Errorf("not replaced: %v", old)
	}
	_, err = client.ImportAssets(ctx, toolhostv1.AssetImportFormat_ASSET_IMPORT_FORMAT_UNSPECIFIED, document)
	if toolErr, ok := toolhost.AsError(err); !ok || toolErr.Code != codes.InvalidArgument {
		t.Errorf("no format: %v", err)
	}
}
