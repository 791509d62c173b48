package spool_test

// Fuzz targets for the store (go test -fuzz; seeds in testdata/fuzz/<Name>,
// replayed by plain go test). Each target checks a property that can fail,
// not only that nothing panics:
//
//   FuzzEventLogRepair  repair(valid log + garbage tail) = longest valid prefix
//   FuzzCheckedLine     the checksummed-line codec of docs/FORMAT.md
//   FuzzNames           untrusted names never become paths outside their directory
//   FuzzPayloadJSON     --payload-json / --artifact-metadata-json: refused with the
//                       right field and nothing written, or stored and read back equal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsontext"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// sameEvent is the part of an event the repair property compares.
type sameEvent struct {
	ID                         int64
	Type, Thread, Message, Sum string
}

func eventKey(ev *inbox.Event) sameEvent {
	return sameEvent{ev.EventID, ev.EventType, ev.ThreadID, ev.MessageID, ev.Summary}
}

// FuzzEventLogRepair: a real store gets n (0–3) events through the public
// API (with n&0x80, in a log that starts a new segment for every event),
// then fuzzer-chosen garbage is appended to the newest segment, as a crash
// mid-append or a scribbled disk would leave it. Properties:
//   - before any repair, LastEventID is n and Events(0) returns exactly the
//     n events the API acknowledged, in order, ids 1..n (garbage never
//     passes as an event), and reading changes nothing on disk;
//   - a further Send succeeds and gets id n+1;
//   - the segment is then exactly the old valid bytes plus one valid line,
//     or, when full, its valid bytes with the line starting a new segment
//     (the garbage was cut, and kept verbatim in a .bad file), Events(0)
//     returns the n+1 events and fsck finds nothing wrong.
//
// Garbage that itself holds a complete line with a valid checksum is not
// garbage (it is a valid line by the format's definition) and is skipped.
func FuzzEventLogRepair(f *testing.F) {
	f.Add([]byte(`{"event_id":4,"run_id":"","task_id":"","thread_id":"thr_x","sou`), uint8(3), false)
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00"), uint8(2), true)
	f.Add([]byte(`{"event_id":2,"crc":"00000000"}`+"\n"), uint8(1), false)
	f.Fuzz(func(t *testing.T, garbage []byte, n uint8, reply bool) {
		if len(garbage) > 1<<16 {
			return // keep each iteration small
		}
		// Skip "garbage" that holds a checksum-valid complete line.
		for rest := garbage; ; {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			if _, ok := spool.CheckLineForFuzz(rest[:i]); ok {
				t.Skip("garbage holds a checksum-valid line")
			}
			rest = rest[i+1:]
		}
		nEvents := int(n % 4)
		var opts spool.Options
		if n&0x80 != 0 {
			opts.SegmentBytes = 1 // every event starts a new segment
		}
		s, db := storetest.New(t, opts)
		var want []sameEvent
		var lastThread string
		for i := 0; i < nEvents; i++ {
			in := inbox.SendInput{From: "boss", To: "worker", Subject: fmt.Sprintf("job %d", i),
				Content: inbox.Content{Summary: fmt.Sprintf("step %d", i)}}
			typ := inbox.EventThreadCreated
			if i%2 == 1 {
				in.Subject, in.ThreadID, typ = "", lastThread, inbox.EventMessageAdded
			}
			r, err := s.Send(t.Context(), in)
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			lastThread = r.Thread.ThreadID
			want = append(want, sameEvent{int64(i + 1), typ, r.Thread.ThreadID, r.Message.MessageID, r.Message.Summary})
		}
		seg := newestSegment(t, db)
		valid, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		fh, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.Write(garbage); err != nil {
			t.Fatal(err)
		}
		fh.Close()

		// Readers see exactly the valid prefix and change nothing.
		if id, err := s.LastEventID(t.Context()); err != nil || id != int64(nEvents) {
			t.Fatalf("LastEventID with garbage tail %q: %d, %v; want %d", garbage, id, err, nEvents)
		}
		got := allEvents(t, s, 0)
		var gotKeys []sameEvent
		for _, ev := range got {
			gotKeys = append(gotKeys, eventKey(ev))
		}
		if !reflect.DeepEqual(gotKeys, want) {
			t.Fatalf("Events(0) with garbage tail %q:\n got %+v\nwant %+v", garbage, gotKeys, want)
		}
		if data, _ := os.ReadFile(seg); !bytes.Equal(data, append(slices.Clip(valid), garbage...)) {
			t.Fatalf("reading the log changed the segment")
		}

		// The next writer cuts the garbage and appends event n+1.
		in := inbox.SendInput{From: "boss", To: "worker", Subject: "after", Content: inbox.Content{Summary: "after the crash"}}
		typ := inbox.EventThreadCreated
		if reply && lastThread != "" {
			in.Subject, in.ThreadID, typ = "", lastThread, inbox.EventMessageAdded
		}
		r, err := s.Send(t.Context(), in)
		if err != nil {
			t.Fatalf("send after garbage tail %q: %v", garbage, err)
		}
		if r.Message.EventID != int64(nEvents+1) {
			t.Fatalf("send after garbage tail %q got event %d, want %d", garbage, r.Message.EventID, nEvents+1)
		}
		want = append(want, sameEvent{int64(nEvents + 1), typ, r.Thread.ThreadID, r.Message.MessageID, r.Message.Summary})

		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, valid) {
			t.Fatalf("repair changed the valid prefix of the log (garbage %q)", garbage)
		}
		line := data[len(valid):]
		if next := newestSegment(t, db); next != seg {
			// The segment was full: the torn one is now exactly its valid
			// prefix and the new event starts the next segment.
			if len(line) != 0 {
				t.Fatalf("segment rotated but the old one is not its valid prefix: extra %q", line)
			}
			if filepath.Base(next) != fmt.Sprintf("%020d.jsonl", nEvents+1) {
				t.Fatalf("new segment %s, want one named by event %d", next, nEvents+1)
			}
			if line, err = os.ReadFile(next); err != nil {
				t.Fatal(err)
			}
		}
		if len(line) == 0 || bytes.IndexByte(line, '\n') != len(line)-1 {
			t.Fatalf("after repair the log holds more than one new line past the valid prefix: %q (garbage %q)", line, garbage)
		}
		if _, ok := spool.CheckLineForFuzz(line[:len(line)-1]); !ok {
			t.Fatalf("the appended line is not valid: %q", line)
		}
		first := strings.TrimSuffix(filepath.Base(seg), ".jsonl")
		bad := filepath.Join(db, "events", fmt.Sprintf("%s.torn-%d.bad", first, len(valid)))
		if kept, err := os.ReadFile(bad); len(garbage) > 0 && (err != nil || !bytes.Equal(kept, garbage)) {
			t.Fatalf("torn tail not kept verbatim in %s: %q, %v; want %q", bad, kept, err, garbage)
		} else if len(garbage) == 0 && err == nil {
			t.Fatalf("a .bad file was written for a log without garbage")
		}

		got = allEvents(t, s, 0)
		gotKeys = gotKeys[:0]
		for _, ev := range got {
			gotKeys = append(gotKeys, eventKey(ev))
		}
		if !reflect.DeepEqual(gotKeys, want) {
			t.Fatalf("Events(0) after repair (garbage %q):\n got %+v\nwant %+v", garbage, gotKeys, want)
		}
		rep, err := s.Fsck(t.Context(), false)
		if err != nil {
			t.Fatalf("fsck: %v", err)
		}
		if len(rep.Findings) > 0 {
			t.Fatalf("fsck after repair (garbage %q) finds %+v", garbage, rep.Findings)
		}
	})
}

// FuzzCheckedLine checks the line codec (docs/FORMAT.md "Checksummed lines"):
//   - checking any bytes never panics; a line it accepts is canonical: the
//     body re-encodes to the same line (up to the case of the hex digits,
//     which the reader tolerates), so a check cannot accept something the
//     writer would not have written;
//   - for any JSON object with at least one member, encode-then-check gives
//     back the body; the encoded line is one line of valid JSON whose last
//     member "crc" is the CRC-32 (IEEE) of the body in lowercase hex;
//   - changing any single byte of an encoded line (the fuzzer picks the XOR
//     mask; every position is tried for lines up to 512 bytes) makes the
//     check fail, or it still yields the identical body.
func FuzzCheckedLine(f *testing.F) {
	f.Add([]byte(`{"a":1}`), uint8(1))
	f.Add([]byte(`{"event_id":1,"thread_id":"thr_x","crc":"deadbeef"}`), uint8(0x20))
	f.Fuzz(func(t *testing.T, data []byte, mask uint8) {
		// Any bytes, checked as a line.
		if body, ok := spool.CheckLineForFuzz(data); ok {
			if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
				t.Fatalf("accepted %q with body %q, not braced", data, body)
			}
			enc := spool.EncodeLineForFuzz(body)
			n := len(data)
			canon := append(bytes.Clone(data[:n-10]), bytes.ToLower(data[n-10:n-2])...)
			canon = append(canon, data[n-2:]...)
			if !bytes.Equal(enc, append(canon, '\n')) {
				t.Fatalf("accepted line %q re-encodes to %q", data, enc)
			}
		}

		// A JSON object, encoded then checked.
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil || obj == nil {
			return
		}
		var cb bytes.Buffer
		if err := json.Compact(&cb, data); err != nil {
			return
		}
		body := cb.Bytes()
		if len(obj) == 0 {
			// encodeLine({}) would give `{,"crc":…}`: no writer encodes an
			// empty object (every line is a struct with members), so this is
			// outside the codec's domain.
			return
		}
		line := spool.EncodeLineForFuzz(body)
		if len(line) == 0 || line[len(line)-1] != '\n' || bytes.IndexByte(line, '\n') != len(line)-1 {
			t.Fatalf("encoding %q is not one newline-terminated line: %q", body, line)
		}
		raw := line[:len(line)-1]
		got, ok := spool.CheckLineForFuzz(raw)
		if !ok || !bytes.Equal(got, body) {
			t.Fatalf("encode-then-check of %q: %q, %v", body, got, ok)
		}
		if !json.Valid(raw) {
			t.Fatalf("encoded line is not JSON: %q", raw)
		}
		wantSuffix := fmt.Sprintf(`,"crc":"%08x"}`, crc32.ChecksumIEEE(body))
		if !bytes.HasSuffix(raw, []byte(wantSuffix)) {
			t.Fatalf("encoded line %q does not end in %s", raw, wantSuffix)
		}

		if mask == 0 {
			mask = 1
		}
		try := func(i int) {
			mut := bytes.Clone(raw)
			mut[i] ^= mask
			if b, ok := spool.CheckLineForFuzz(mut); ok && !bytes.Equal(b, body) {
				t.Fatalf("line %q with byte %d changed (^%#x) still checks, as a different body %q", raw, i, mask, b)
			}
		}
		if len(raw) <= 512 {
			for i := range raw {
				try(i)
			}
		} else {
			try(int(mask) * 7919 % len(raw))
		}
	})
}

// FuzzNames checks inbox.ValidateAgent and inbox.ValidateID (SPEC §8:
// untrusted strings never become paths). A name is accepted only if it
// cannot name a path outside its directory: non-empty, no '/', '\\', NUL,
// control character or "..", not "." or "..", at most 64 (agents) / 100
// (ids) bytes, and filepath.Join(base, name) — and the file names the store
// derives from it — stay directly inside base. A refusal is inbox.ErrInvalidInput
// naming the field.
func FuzzNames(f *testing.F) {
	f.Add("thr_01abc")
	f.Fuzz(func(t *testing.T, name string) {
		base := filepath.Join(string(filepath.Separator)+"store", "threads")
		check := func(what string, err error, limit int, field string, derived ...string) {
			t.Helper()
			if err != nil {
				var se *inbox.Error
				if !errors.Is(err, inbox.ErrInvalidInput) || !errors.As(err, &se) || se.Field != field {
					t.Fatalf("%s(%q) refused with %v (%T), want inbox.ErrInvalidInput for field %q", what, name, err, err, field)
				}
				return
			}
			switch {
			case name == "" || name == "." || name == "..":
				t.Fatalf("%s accepted %q", what, name)
			case len(name) > limit:
				t.Fatalf("%s accepted a %d-byte name (limit %d)", what, len(name), limit)
			case strings.ContainsAny(name, "/\\\x00"), strings.Contains(name, ".."):
				t.Fatalf("%s accepted %q", what, name)
			case !utf8.ValidString(name):
				t.Fatalf("%s accepted invalid UTF-8 %q", what, name)
			case filepath.IsAbs(name):
				t.Fatalf("%s accepted absolute %q", what, name)
			}
			for _, r := range name {
				if r < 0x20 || r == 0x7f {
					t.Fatalf("%s accepted %q with a control character", what, name)
				}
			}
			for _, file := range append([]string{name}, derived...) {
				p := filepath.Join(base, file)
				if filepath.Dir(p) != base || filepath.Base(p) != file {
					t.Fatalf("%s accepted %q: %s is not directly inside %s", what, name, p, base)
				}
			}
		}
		check("ValidateAgent", inbox.ValidateAgent("agent", name), inbox.MaxNameLen, "agent",
			"cursor-"+name+".log")
		check("ValidateID", inbox.ValidateID("thread", name), inbox.MaxIDLen, "thread")
	})
}

// jsonValue decodes one JSON value keeping numbers as written.
func jsonValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// FuzzPayloadJSON sends a message with a fuzzer-chosen --payload-json and
// --artifact-metadata-json, as a new thread or (reply) into an existing one.
// Either it is refused with inbox.ErrInvalidInput naming the first bad field
// ("payload_json", then "artifact_metadata_json"; bad means not one JSON
// value, not UTF-8, or holding a lone surrogate escape) and nothing is written
// (no event, no thread, no message, no temp file), or it is accepted and
// Show returns the message with payload_json / metadata_json that are
// valid JSON (UTF-8, RFC 8259) semantically equal to the input (an empty or
// blank input stands for {}), and exactly one event was added; the same
// payload padded with white space is stored compacted.
func FuzzPayloadJSON(f *testing.F) {
	f.Add(`{"a":1}`, `{"lines":3}`, false)
	f.Add(`[1,2`, `{}`, true)
	f.Add(`{"a":"\ud800"}`, `{}`, false)
	f.Add(`{"a":"\ud83d\ude00"}`, `{"b":"\udc00"}`, true)
	f.Fuzz(func(t *testing.T, payload, meta string, reply bool) {
		if len(payload)+len(meta) > 1<<16 {
			return
		}
		s, db := storetest.New(t, spool.Options{})
		var tid string
		var before int
		if reply {
			r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "worker", Subject: "job", Content: inbox.Content{Body: "go"}})
			if err != nil {
				t.Fatal(err)
			}
			tid, before = r.Thread.ThreadID, 1
		}
		lastBefore, err := s.LastEventID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		in := inbox.SendInput{From: "boss", To: "worker", Subject: "job", ThreadID: tid, Content: inbox.Content{
			Summary: "with payload", PayloadJSON: payload,
			Artifacts: []inbox.ArtifactInput{{Path: "/tmp/report.txt", MetadataJSON: meta}},
		}}
		if reply {
			in.Subject = ""
		}
		r, err := s.Send(t.Context(), in)

		// What the rules say should happen.
		// (JSON text is UTF-8, RFC 8259 §8.1: json.Valid alone does not check.)
		okJSON := func(s string) bool {
			return blank(s) ||
				json.Valid([]byte(s)) && utf8.ValidString(s) && jsontext.Check([]byte(s)) == nil
		}
		wantField := ""
		switch {
		case !okJSON(payload):
			wantField = "payload_json"
		case !okJSON(meta):
			wantField = "artifact_metadata_json"
		}

		if err != nil {
			var se *inbox.Error
			if !errors.Is(err, inbox.ErrInvalidInput) || !errors.As(err, &se) {
				t.Fatalf("send with payload %q metadata %q: %v, want inbox.ErrInvalidInput or success", payload, meta, err)
			}
			if se.Field != wantField {
				t.Fatalf("send with payload %q metadata %q refused for field %q (%v), want %q", payload, meta, se.Field, err, wantField)
			}
			// Nothing written.
			if id, err := s.LastEventID(t.Context()); err != nil || id != lastBefore {
				t.Fatalf("refused send wrote an event: last id %d (was %d), %v", id, lastBefore, err)
			}
			threads, _ := os.ReadDir(filepath.Join(db, "threads"))
			if len(threads) != before {
				t.Fatalf("refused send left %d thread directories, want %d", len(threads), before)
			}
			if tmp, _ := os.ReadDir(filepath.Join(db, "tmp")); len(tmp) > 0 {
				t.Fatalf("refused send left temp files: %v", tmp)
			}
			if reply {
				v, err := s.Show(t.Context(), tid)
				if err != nil || len(v.Messages) != 1 {
					t.Fatalf("refused send changed the thread: %v messages, %v", len(v.Messages), err)
				}
			}
			return
		}
		if wantField != "" {
			t.Fatalf("send with payload %q metadata %q accepted, want a refusal for %s", payload, meta, wantField)
		}
		if id, err := s.LastEventID(t.Context()); err != nil || id != lastBefore+1 {
			t.Fatalf("accepted send: last event %d, %v; want %d", id, err, lastBefore+1)
		}
		v, err := s.Show(t.Context(), r.Thread.ThreadID)
		if err != nil {
			t.Fatalf("show: %v", err)
		}
		var m *inbox.Message
		for _, x := range v.Messages {
			if x.MessageID == r.Message.MessageID {
				m = x
			}
		}
		if m == nil || len(m.Artifacts) != 1 {
			t.Fatalf("show does not return the sent message with its artifact: %+v", v.Messages)
		}
		same := func(field, in string, stored json.RawMessage) {
			t.Helper()
			if blank(in) {
				in = "{}"
			}
			if !json.Valid(stored) || !utf8.Valid(stored) {
				t.Fatalf("%s %q stored as %q: not valid (UTF-8) JSON", field, in, stored)
			}
			want, err1 := jsonValue([]byte(in))
			got, err2 := jsonValue(stored)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(want, got) {
				t.Fatalf("%s %q read back as %q (%v, %v)", field, in, stored, err1, err2)
			}
		}
		same("payload-json", payload, m.PayloadJSON)
		same("artifact-metadata-json", meta, m.Artifacts[0].MetadataJSON)

		// Insignificant white space is not kept: the same payload padded
		// with it is stored compacted, as the same value.
		if !blank(payload) {
			in.ThreadID, in.Subject = r.Thread.ThreadID, ""
			in.PayloadJSON = payload + strings.Repeat(" ", 4096)
			r2, err := s.Send(t.Context(), in)
			if err != nil {
				t.Fatalf("payload %q padded with white space: %v", payload, err)
			}
			if string(r2.Message.PayloadJSON) != string(m.PayloadJSON) {
				t.Fatalf("payload %q padded with white space stored as %q, want %q", payload, r2.Message.PayloadJSON, m.PayloadJSON)
			}
		}
	})
}

// blank reports whether s is empty or JSON whitespace only (space, tab,
// CR, LF): a flag given so is absent. Other white space (\v, \f, NBSP)
// is not JSON and is refused.
func blank(s string) bool { return strings.Trim(s, " \t\r\n") == "" }
