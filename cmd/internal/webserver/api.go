package webserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
)

// statusOf is the HTTP status of a command's exit code (SPEC §15): 0 and
// 10 (nothing matched) are 200, 20 is 409, 30 is 400, 40 is 404, anything
// else 500.
func statusOf(code int) int {
	switch code {
	case 0, 10:
		return http.StatusOK
	case 20:
		return http.StatusConflict
	case 30:
		return http.StatusBadRequest
	case 40:
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// invoke runs the CLI command (words of cmd, then args) against the
// store and writes its JSON with the status of its exit code.
func (s *server) invoke(w http.ResponseWriter, r *http.Request, cmd string, args []string) {
	st, b := s.runCLI(r.Context(), cmd, args)
	writeJSON(w, st, b)
}

// read runs a read-only CLI command through the cache: every page open
// on the dashboard fetches the same views after an event, and they share
// one computation per event.
func (s *server) read(w http.ResponseWriter, r *http.Request, cmd string, args []string) {
	st, b := s.cachedRun(r.Context(), cmd, args)
	writeJSON(w, st, b)
}

// cachedRun is runCLI through the cache, keyed by the command line in
// its canonical form, which is also what runs: one answer per request,
// however its query was written.
func (s *server) cachedRun(ctx context.Context, cmd string, args []string) (int, []byte) {
	args = canonicalArgs(cmd, args)
	key := cmd + "\x00" + strings.Join(args, "\x00")
	return s.cache.get(ctx, key, func(ctx context.Context) (int, []byte) { return s.runCLI(ctx, cmd, args) })
}

// canonicalArgs is args (flags, then "--" and the arguments) as the
// command's own flags parse them: every flag whose value is not its
// default, in name order, written as --name=value in the flag's own
// form (limit=050 is --limit=50, mail=1 is --mail=true); a list's
// elements sorted and each once (status=done&status=blocked is
// status=blocked,done). Arguments that do not parse are left as they are:
// the command says what is wrong with them.
func canonicalArgs(cmd string, args []string) []string {
	words := strings.Fields(cmd)
	if len(args) == 0 || len(words) != 1 {
		return args
	}
	fs := cli.CommandFlags(words[0])
	if fs == nil {
		return args
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return args
	}
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			elems := slices.Compact(slices.Sorted(slices.Values(sv.GetSlice())))
			if "["+strings.Join(elems, ",")+"]" == f.DefValue {
				return
			}
			v = strings.Join(elems, ",")
		} else if v == f.DefValue {
			return
		}
		out = append(out, "--"+f.Name+"="+v)
	})
	if rest := fs.Args(); len(rest) > 0 {
		out = append(append(out, "--"), rest...)
	}
	return out
}

// runCLI runs the CLI command (words of cmd, then args) and returns the
// HTTP status of its exit code and its JSON.
func (s *server) runCLI(ctx context.Context, cmd string, args []string) (int, []byte) {
	words := strings.Fields(cmd)
	out, code := cli.Invoke(ctx, s.cfg.Bus, s.getenv, words[0], append(words[1:], args...))
	return statusOf(code), out
}

// getenv is the environment the API's commands see: the server's own,
// but for INBOX_AGENT, which would quietly narrow what a person sees
// (list --agent) to whoever started the server.
func (s *server) getenv(k string) string {
	if k == "INBOX_AGENT" || s.cfg.Getenv == nil {
		return ""
	}
	return s.cfg.Getenv(k)
}

// command serves GET of a read command: the query parameters named in
// params are its flags (snake_case or kebab-case, repeatable); any other
// parameter is refused (400), so a typo never quietly widens a filter.
func (s *server) command(cmd string, params ...string) http.HandlerFunc {
	name := strings.Fields(cmd)[0]
	return func(w http.ResponseWriter, r *http.Request) {
		args, err := flagsOf(r, name, params...)
		if err != nil {
			writeErr(w, name, err)
			return
		}
		s.read(w, r, cmd, args)
	}
}

// flagsOf turns r's query into --flag=value arguments, allowing only
// params.
func flagsOf(r *http.Request, cmd string, params ...string) ([]string, error) {
	var args []string
	for k, vs := range r.URL.Query() {
		flag := strings.ReplaceAll(k, "_", "-")
		ok := false
		for _, p := range params {
			ok = ok || p == flag
		}
		if !ok {
			return nil, &apiError{status: http.StatusBadRequest, code: "invalid_input", field: k,
				msg: fmt.Sprintf("unknown query parameter %q for %s: use %s", k, r.URL.Path, strings.Join(params, ", "))}
		}
		for _, v := range vs {
			args = append(args, "--"+flag+"="+v)
		}
	}
	return args, nil
}

// thread serves one thread's transcript: inbox show --json.
func (s *server) thread(w http.ResponseWriter, r *http.Request) {
	args, err := flagsOf(r, "show", "max-body-bytes")
	if err != nil {
		writeErr(w, "show", err)
		return
	}
	s.read(w, r, "show", append([]string{"--thread", r.PathValue("id")}, args...))
}

// threadEvents serves one thread's events: inbox events --thread --json.
func (s *server) threadEvents(w http.ResponseWriter, r *http.Request) {
	args, err := flagsOf(r, "events", "after-event", "limit")
	if err != nil {
		writeErr(w, "events", err)
		return
	}
	s.read(w, r, "events", append([]string{"--thread", r.PathValue("id")}, args...))
}

// search serves inbox search: q is the query, the rest its flags.
func (s *server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := q.Get("q")
	q.Del("q")
	r.URL.RawQuery = q.Encode()
	args, err := flagsOf(r, "search", "from", "to", "thread", "kind", "type", "since", "limit")
	if err != nil {
		writeErr(w, "search", err)
		return
	}
	// After --, a query that starts with a dash is not taken for a flag.
	s.read(w, r, "search", append(args, "--", query))
}

// info is what the page needs to know about the server.
func (s *server) info(w http.ResponseWriter, r *http.Request) {
	last, err := s.cfg.Bus.LastEventID(r.Context())
	if err != nil {
		writeErr(w, "web", err)
		return
	}
	writeValue(w, http.StatusOK, map[string]any{"ok": true, "command": "web", "as": s.cfg.As, "store": s.cfg.DB,
		"version": s.cfg.Version, "last_event_id": last})
}

// answer answers a blocked question: reply --kind answer, from the
// body's from (default the server's --as).
func (s *server) answer(w http.ResponseWriter, r *http.Request) {
	var in struct {
		From    string `json:"from"`
		Summary string `json:"summary"`
		Body    string `json:"body"`
	}
	if err := readBody(r, &in); err != nil {
		writeErr(w, "reply", err)
		return
	}
	if in.From == "" {
		in.From = s.cfg.As
	}
	if in.Summary == "" && in.Body == "" {
		writeErr(w, "reply", &apiError{status: http.StatusBadRequest, code: "invalid_input", field: "summary",
			msg: "an answer needs a summary or a body"})
		return
	}
	args := []string{"--kind", "answer", "--thread", r.PathValue("id"), "--from", in.From}
	if in.Summary != "" {
		args = append(args, "--summary", in.Summary)
	}
	if in.Body != "" {
		args = append(args, "--body", in.Body)
	}
	s.invoke(w, r, "reply", args)
}

// cancel cancels a thread, as the body's agent (default --as).
func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Agent  string `json:"agent"`
		Reason string `json:"reason"`
	}
	if err := readBody(r, &in); err != nil {
		writeErr(w, "cancel", err)
		return
	}
	if in.Agent == "" {
		in.Agent = s.cfg.As
	}
	args := []string{"--thread", r.PathValue("id"), "--agent", in.Agent}
	if in.Reason != "" {
		args = append(args, "--reason", in.Reason)
	}
	s.invoke(w, r, "cancel", args)
}

// maxBody bounds an action's request body.
const maxBody = 1 << 20

// readBody decodes r's JSON body into v, refusing unknown fields and
// anything after the object.
func readBody(r *http.Request, v any) error {
	d := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil && d.More() {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		return &apiError{status: http.StatusBadRequest, code: "invalid_input", field: "body",
			msg: "the request body must be one JSON object with the fields documented: " + err.Error()}
	}
	return nil
}

// blob serves a blob file of the store (an artifact's content).
func (s *server) blob(w http.ResponseWriter, r *http.Request) {
	rc, err := s.cfg.Bus.OpenBlob(r.Context(), "blobs/"+r.PathValue("sha"))
	if err != nil {
		writeErr(w, "blob", err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("sha")+`"`)
	io.Copy(w, rc)
}

// launch serves POST /api/launch: a new launch URL, for a second
// browser once the printed one is used. It takes the bearer token only:
// a browser's session does not make others.
func (s *server) launch(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(r) {
		s.unauthorized(w, r)
		return
	}
	if _, err := flagsOf(r, "launch"); err != nil {
		writeErr(w, "web", err)
		return
	}
	u, err := s.launchURL(false, nil)
	if err != nil {
		writeErr(w, "web", err)
		return
	}
	writeValue(w, http.StatusOK, struct {
		OK      bool   `json:"ok"`
		Command string `json:"command"`
		URL     string `json:"url"`
	}{true, "web", u}) // in the envelope's order, as every answer

}

// attention serves the needs-attention list (inbox.Attention).
func (s *server) attention(w http.ResponseWriter, r *http.Request) {
	if _, err := flagsOf(r, "attention"); err != nil {
		writeErr(w, "attention", err)
		return
	}
	rep, err := s.tracker.Attention(r.Context(), time.Now(), inbox.AttentionOptions{})
	if err != nil {
		writeErr(w, "attention", err)
		return
	}
	writeValue(w, http.StatusOK, struct {
		OK      bool   `json:"ok"`
		Command string `json:"command"`
		*inbox.AttentionReport
	}{true, "attention", rep})
}

// waits serves the wait graph (inbox.WaitGraph), from the cache while
// no event came: it reads every agent.
func (s *server) waits(w http.ResponseWriter, r *http.Request) {
	if _, err := flagsOf(r, "waits"); err != nil {
		writeErr(w, "waits", err)
		return
	}
	st, b := s.cache.get(r.Context(), "waits", s.waitsJSON)
	writeJSON(w, st, b)
}

func (s *server) waitsJSON(ctx context.Context) (int, []byte) {
	g, err := s.tracker.WaitGraph(ctx, time.Now())
	if err != nil {
		b, code := cli.Failure("waits", err)
		return statusOf(code), b
	}
	return marshal(struct {
		OK      bool   `json:"ok"`
		Command string `json:"command"`
		*inbox.WaitGraphReport
	}{true, "waits", g})
}

// apiError is a refusal of the API itself (not of a command it runs).
type apiError struct {
	status           int
	code, field, msg string
}

func (e *apiError) Error() string { return e.msg }

// writeErr writes err in the CLI's error shape, with the status of its
// exit code.
func writeErr(w http.ResponseWriter, command string, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, ae.status, command, ae.code, ae.field, ae.msg)
		return
	}
	b, code := cli.Failure(command, err)
	writeJSON(w, statusOf(code), b)
}

// writeError writes the CLI's error shape.
func writeError(w http.ResponseWriter, status int, command, code, field, msg string) {
	type shape struct {
		Code    string `json:"code"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	}
	writeValue(w, status, struct {
		OK      bool   `json:"ok"`
		Command string `json:"command"`
		Error   shape  `json:"error"`
	}{false, command, shape{code, field, msg}})
}

func writeValue(w http.ResponseWriter, status int, v any) {
	st, b := marshal(v)
	if st != http.StatusOK {
		status = st
	}
	writeJSON(w, status, b)
}

// marshal encodes an answer: 200 and its JSON, or 500 and the error shape.
func marshal(v any) (int, []byte) {
	b, err := json.Marshal(v)
	if err != nil {
		return http.StatusInternalServerError, []byte(`{"ok":false,"command":"web","error":{"code":"internal_error","message":"encode the answer: ` + strings.ReplaceAll(err.Error(), `"`, `'`) + `"}}`)
	}
	return http.StatusOK, b
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(bytes.TrimSpace(b))
	w.Write([]byte("\n"))
}
