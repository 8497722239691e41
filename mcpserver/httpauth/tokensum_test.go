package httpauth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
)

// TestStaticTokenSHA256: a Guard that holds only the token's SHA-256 admits the token
// (either header) and refuses anything else, the digest itself included; a digest of
// the wrong length is an error, not an open door.
func TestStaticTokenSHA256(t *testing.T) {
	const token = "s3cret-token-0123456789"
	sum := sha256.Sum256([]byte(token))
	g, err := New(t.Context(), Options{TokenSHA256: sum[:]})
	if err != nil || g == nil {
		t.Fatalf("New: %v, %v", g, err)
	}
	h := g.Wrap(ok)
	for _, c := range []struct {
		name, header, value string
		want                int
	}{
		{"X-MCP-AUTH", "X-MCP-AUTH", token, 200},
		{"Bearer", "Authorization", "Bearer " + token, 200},
		{"wrong", "X-MCP-AUTH", "x" + token, 401},
		{"the digest", "X-MCP-AUTH", hex.EncodeToString(sum[:]), 401},
		{"the digest as Bearer", "Authorization", "Bearer " + hex.EncodeToString(sum[:]), 401},
	} {
		if got := send(t, h, func(hd http.Header) { hd.Set(c.header, c.value) }).status; got != c.want {
			t.Errorf("%s: HTTP %d, want %d", c.name, got, c.want)
		}
	}
	if got := send(t, h, nil).status; got != 401 {
		t.Errorf("no credential: HTTP %d, want 401", got)
	}
	if g, err := New(t.Context(), Options{TokenSHA256: sum[:16]}); err == nil || g != nil {
		t.Errorf("New with a 16-byte digest: %v, %v; want an error", g, err)
	}
}
