package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// An idempotency key stands for one call (SPEC §4): repeated with the same
// arguments it returns the original result; repeated with different ones
// it is refused (CheckIdemArgs), since a retry is the same call, never a
// new one in disguise. What a key remembers of its call is its IdemArgs:
// for each argument the call was given, in a fixed order, its name and
// the first 64 bits of its SHA-256 in hex, "name:digest", separated by
// spaces; an argument not given (empty) is left out. The name is the
// argument's field ("subject", "payload_json"), as errors name it. The
// arguments are the caller's, after the defaults every call gets (kind,
// priority), never what the store makes of them (ids, times), so a retry
// gives the same IdemArgs. The lease token is not one: it says who may
// act, not what the call does.

// idemArgs builds an IdemArgs.
type idemArgs struct{ b []byte }

func (a *idemArgs) add(name, value string) {
	if value == "" {
		return
	}
	sum := sha256.Sum256([]byte(value))
	a.addDigest(name, hex.EncodeToString(sum[:8]))
}

// addDigest adds an argument by its digest (a blob's SHA-256 in hex:
// what add would give its content).
func (a *idemArgs) addDigest(name, digest string) {
	if len(a.b) > 0 {
		a.b = append(a.b, ' ')
	}
	a.b = append(append(append(a.b, name...), ':'), digest[:min(16, len(digest))]...)
}

func (a *idemArgs) flag(name string, v bool) {
	if v {
		a.add(name, "true")
	}
}

// content adds the arguments of content c; summaryName is what its
// summary is called ("summary"; cancel's is its "reason").
func (a *idemArgs) content(c Content, summaryName string) {
	a.add(summaryName, c.Summary)
	// A body or payload given inline and the same given as a blob are
	// the same argument: a blob's SHA-256 is its content's.
	bodyBlob, payloadBlob := "", ""
	var others []*Blob
	for _, b := range c.Blobs {
		switch {
		case b.Field == "body" && bodyBlob == "":
			bodyBlob = b.SHA256
		case b.Field == "payload_json" && payloadBlob == "":
			payloadBlob = b.SHA256
		default:
			others = append(others, b)
		}
	}
	if bodyBlob != "" {
		a.addDigest("body", bodyBlob)
	} else {
		a.add("body", c.Body)
	}
	if payloadBlob != "" {
		a.addDigest("payload_json", payloadBlob)
	} else {
		a.add("payload_json", c.PayloadJSON)
	}
	if len(c.Artifacts) > 0 {
		var s strings.Builder
		for _, art := range c.Artifacts {
			s.WriteString(art.Path + "\x00" + art.Kind + "\x00" + art.MetadataJSON + "\x00")
		}
		a.add("artifact", s.String())
	}
	if len(others) > 0 {
		var s strings.Builder
		for _, b := range others {
			s.WriteString(b.Field + "\x00" + b.SHA256 + "\x00")
		}
		a.add("blob", s.String())
	}
	a.add("type", c.Type)
	a.add("request_id", c.RequestID)
	a.flag("request", c.Request)
	a.flag("ack_required", c.AckRequired)
	a.add("ack_id", c.AckID)
	a.add("timestamp", c.Timestamp)
	a.add("extra", string(c.Extra))
}

func (a *idemArgs) String() string { return string(a.b) }

// NewThreadArgs is the IdemArgs of a send that creates a thread, in as
// PrepareSend and PrepareNewThread left it.
func NewThreadArgs(in SendInput) string {
	if in.IdempotencyKey == "" {
		return ""
	}
	var a idemArgs
	a.add("from", in.From)
	a.add("to", in.To)
	a.add("subject", in.Subject)
	a.add("run", in.RunID)
	a.add("task", in.TaskID)
	a.add("kind", in.Kind)
	a.add("priority", in.Priority)
	a.content(in.Content, "summary")
	return a.String()
}

// MessageArgs is the IdemArgs of a call that appends a message of kind
// from from to to (send --thread, reply).
func MessageArgs(from, to, kind string, c Content) string {
	if c.IdempotencyKey == "" {
		return ""
	}
	var a idemArgs
	a.add("from", from)
	a.add("to", to)
	a.add("kind", kind)
	a.content(c, "summary")
	return a.String()
}

// HolderArgs is the IdemArgs of a holder's update (status), done or fail
// by agent.
func HolderArgs(agent, status string, c Content) string {
	if c.IdempotencyKey == "" {
		return ""
	}
	var a idemArgs
	a.add("agent", agent)
	a.add("status", status)
	a.content(c, "summary")
	return a.String()
}

// CancelArgs is the IdemArgs of a cancel by agent, its content c (the
// summary is the reason).
func CancelArgs(agent string, c Content) string {
	if c.IdempotencyKey == "" {
		return ""
	}
	var a idemArgs
	a.add("agent", agent)
	a.content(c, "reason")
	return a.String()
}

// CancelTaskArgs is the IdemArgs of a task's cancel by agent: who and why
// (c's summary), not the output the task had written by then, which the
// call gathers itself and a retry finds longer.
func CancelTaskArgs(agent string, c Content) string {
	if c.IdempotencyKey == "" {
		return ""
	}
	var a idemArgs
	a.add("agent", agent)
	a.add("reason", c.Summary)
	return a.String()
}

// CheckIdemArgs checks that a call with key and IdemArgs given repeats
// the call the key was first used for, recorded with IdemArgs recorded.
// It returns an *Error with code idempotency_conflict (ErrIdempotencyMismatch,
// exit 30), naming the key and the arguments that differ, when they do.
// A key recorded without IdemArgs (by a version before them) repeats any
// call, as it did then.
func CheckIdemArgs(key, recorded, given string) error {
	if recorded == "" || recorded == given {
		return nil
	}
	was, now := parseIdemArgs(recorded), parseIdemArgs(given)
	var differ []string
	seen := map[string]bool{}
	for _, list := range [][][2]string{was, now} {
		for _, kv := range list {
			name := kv[0]
			if seen[name] {
				continue
			}
			seen[name] = true
			if lookupIdemArg(was, name) != lookupIdemArg(now, name) {
				differ = append(differ, "{"+name+"}")
			}
		}
	}
	what := "arguments"
	switch n := len(differ); {
	case n == 1:
		what = differ[0]
	case n > 1:
		what = strings.Join(differ[:n-1], ", ") + " and " + differ[n-1]
	}
	return Errorf(ErrIdempotencyMismatch, "idempotency_conflict", "idempotency_key",
		"%q was first used with another %s: a retry must repeat its call exactly; give a new key for a new call", key, what)
}

func parseIdemArgs(s string) [][2]string {
	var out [][2]string
	for f := range strings.FieldsSeq(s) {
		name, digest, _ := strings.Cut(f, ":")
		out = append(out, [2]string{name, digest})
	}
	return out
}

func lookupIdemArg(list [][2]string, name string) string {
	for _, kv := range list {
		if kv[0] == name {
			return kv[1]
		}
	}
	return ""
}
