package webserver

import (
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

// page serves the dashboard's single page.
func (s *server) page(w http.ResponseWriter, r *http.Request) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, "the dashboard's page is missing from this build", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}
