package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

// ui is the operator web page: index.html and the files it loads, by
// paths relative to the page so that it works under any mount prefix.
//
//go:embed ui
var ui embed.FS

// staticPattern serves the page and its files.
const staticPattern = "GET /"

// pagePolicy allows the page its own files and API only.
const pagePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) static() http.Handler {
	sub, err := fs.Sub(ui, "ui")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", pagePolicy)
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// metrics serves Config.Gatherer, or 404 without one.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.promHandler == nil {
		writeError(w, http.StatusNotFound, "metrics are not configured on this server")
		return
	}
	s.promHandler.ServeHTTP(w, r)
}
