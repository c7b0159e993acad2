// Package testhttp holds HTTP helpers for tests.
package testhttp

import (
	"io"
	"net/http"
	"testing"
)

// StatusWithHost GETs url with the request's Host header set to host and
// returns the answer's status code; a failed request fails t.
func StatusWithHost(t testing.TB, url, host string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode
}
