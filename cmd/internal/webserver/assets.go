package webserver

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
)

// assets is the page: HTML, CSS and JavaScript written by hand, no build
// step, nothing loaded from elsewhere.
//
//go:embed assets
var assets embed.FS

// assetHandler serves /assets/NAME from the embedded files.
func assetHandler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	return http.StripPrefix("/assets/", http.FileServerFS(sub))
}

// page serves the dashboard's single page, its shell (no session's
// secret: the page's script has it already).
func (s *server) page(w http.ResponseWriter, r *http.Request) { s.servePage(w, "") }

// servePage serves the page; with secret, the one answer that made a
// session, it carries the session's secret in a meta tag the page's
// script reads (the policy allows no inline script). Never stored.
func (s *server) servePage(w http.ResponseWriter, secret string) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, "the dashboard's page is missing from this build", http.StatusInternalServerError)
		return
	}
	if secret != "" {
		// The secret is hex: nothing to escape.
		b = bytes.Replace(b, []byte("<meta charset=\"utf-8\">"),
			[]byte("<meta charset=\"utf-8\">\n<meta name=\"inbox-session\" content=\""+secret+"\">"), 1)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}
