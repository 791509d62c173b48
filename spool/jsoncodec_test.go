package spool

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The hand-written codec (jsonenc.go, jsondec.go) must agree with
// encoding/json: encoding byte for byte (the format of every file already
// written), decoding value for value, and on which inputs are errors.

// stdMarshal is encoding/json with HTML escaping off, as the store wrote
// before the codec existed.
func stdMarshal(tb testing.TB, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		tb.Fatalf("encoding/json: %v", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// gen makes random records whose strings exercise every escaping rule.
type gen struct{ r *rand.Rand }

var genPieces = []string{"", "a", "thread", " ", "\"", "\\", "/", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
	"<", ">", "&", "é", "日本", "\u2028", "\u2029", "\U0001F600", "\xff", "\xe2\x80", "\xed\xa0\x80", "\\u0041", "null"}

func (g gen) str() string {
	if g.r.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for range g.r.IntN(6) {
		b.WriteString(genPieces[g.r.IntN(len(genPieces))])
	}
	return b.String()
}

func (g gen) int() int64 {
	switch g.r.IntN(4) {
	case 0:
		return 0
	case 1:
		return -g.r.Int64()
	}
	return g.r.Int64N(1 << (g.r.IntN(62) + 1))
}

var genRaws = []string{`{}`, `[]`, `null`, `1`, `-0.5e+3`, `"s"`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`,
	`{ "spaced" : [ 1 , 2 ] }`, `true`, `[{"x":"\u2028"}]`}

func (g gen) raw() json.RawMessage {
	if g.r.IntN(5) == 0 {
		return nil
	}
	return json.RawMessage(genRaws[g.r.IntN(len(genRaws))])
}

func (g gen) thread() Thread {
	return Thread{ThreadID: g.str(), RunID: g.str(), TaskID: g.str(), Subject: g.str(), CreatedBy: g.str(),
		AssignedTo: g.str(), Status: g.str(), Priority: g.str(), LatestMessageID: g.str(), CreatedAt: g.str(),
		UpdatedAt: g.str(), MessageCount: int(g.int()), LastEventID: g.int()}
}

func (g gen) lease() *Lease {
	if g.r.IntN(3) == 0 {
		return nil
	}
	return &Lease{ThreadID: g.str(), AgentID: g.str(), LeaseToken: g.int(), ClaimedAt: g.str(), ExpiresAt: g.str(),
		ReleasedAt: g.str(), Rev: g.int()}
}

func (g gen) message() Message {
	m := Message{MessageID: g.str(), ThreadID: g.str(), Seq: int(g.int()), FromAgent: g.str(), ToAgent: g.str(),
		Kind: g.str(), Summary: g.str(), Body: g.str(), PayloadJSON: g.raw(), CreatedAt: g.str(), EventID: g.int(),
		Status: g.str()}
	for range g.r.IntN(3) {
		m.Artifacts = append(m.Artifacts, Artifact{ArtifactID: g.str(), MessageID: g.str(), Path: g.str(),
			Kind: g.str(), MetadataJSON: g.raw(), CreatedAt: g.str()})
	}
	return m
}

func (g gen) event(depth int) *Event {
	ev := &Event{EventID: g.int(), RunID: g.str(), TaskID: g.str(), ThreadID: g.str(), Source: g.str(),
		EventType: g.str(), MessageID: g.str(), Summary: g.str(), PayloadJSON: g.raw(), CreatedAt: g.str(),
		Agent: g.str(), Kind: g.str(), Status: g.str()}
	if depth > 0 && g.r.IntN(2) == 0 {
		ev.State = g.header(depth - 1)
	}
	return ev
}

func (g gen) header(depth int) *header {
	h := &header{Thread: g.thread(), Lease: g.lease(), LeaseRev: g.int(), LogPos: Pos{Segment: g.int(), Offset: g.int()}}
	for range g.r.IntN(4) {
		if h.LastFrom == nil {
			h.LastFrom = map[string]int{}
		}
		h.LastFrom[g.str()] = int(g.int())
	}
	if depth > 0 && g.r.IntN(2) == 0 {
		h.LastEvent = g.event(depth - 1)
	}
	if g.r.IntN(3) == 0 {
		h.Origin = &Origin{Descriptor: g.str(), SHA256: g.str()}
	}
	return h
}

func TestCodecEncodesAsEncodingJSON(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(7, 11))}
	check := func(what string, got []byte, v any) {
		t.Helper()
		if want := stdMarshal(t, v); !bytes.Equal(got, want) {
			t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
		}
	}
	for range 3000 {
		th := g.thread()
		check("thread", th.AppendJSON(nil), th)
		m := g.message()
		check("message", m.AppendJSON(nil), m)
		if l := g.lease(); l != nil {
			check("lease", l.AppendJSON(nil), l)
		}
		ev := g.event(2)
		check("event", ev.AppendJSON(nil), ev)
		h := g.header(3)
		check("header", h.appendJSON(nil), h)
		mf := msgFile{Message: g.message(), IdempotencyKey: g.str(), IdempotencyCommand: g.str()}
		if g.r.IntN(2) == 0 {
			mf.InitialHeader = g.header(1)
		}
		check("msgFile", mf.appendJSON(nil), mf)
		c := Cursor{ThreadID: g.str(), AgentID: g.str(), LastReadMessageID: g.str(), LastReadSeq: int(g.int()), ReadAt: g.str()}
		check("cursor", c.AppendJSON(nil), c)
		r := idemRecord{Key: g.str(), Command: g.str(), ThreadID: g.str(), MessageID: g.str(), Seq: int(g.int()), CreatedAt: g.str()}
		check("idem", r.appendJSON(nil), r)
		to, token, from := g.str(), g.int(), g.str()
		p := jsonFields{}.str("to", to).num("lease_token", token).str("from", from)
		check("payload", p.raw(), map[string]any{"to": to, "lease_token": token, "from": from})
	}
}

// decodeBoth decodes data with the codec and with json.Unmarshal into
// fresh values of each record type and reports any disagreement.
func decodeBoth(t *testing.T, data []byte) {
	t.Helper()
	agree(t, "header", data, unmarshalHeader)
	agree(t, "msgFile", data, unmarshalMsgFile)
	agree(t, "message", data, unmarshalMessage)
	agree(t, "lease", data, unmarshalLease)
	agree(t, "event", data, unmarshalEvent)
	agree(t, "cursor", data, unmarshalCursor)
	agree(t, "idem", data, unmarshalIdemRecord)
	agree(t, "format", data, formatFieldsRecord.unmarshal)
}

func agree[T any](t *testing.T, name string, data []byte, mine func([]byte, *T) error) {
	t.Helper()
	var got, want T
	merr, serr := mine(data, &got), json.Unmarshal(data, &want)
	if (merr == nil) != (serr == nil) {
		t.Fatalf("%s: %q: codec error %v, encoding/json error %v", name, data, merr, serr)
	}
	if merr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: %q:\n codec %#v\n  json %#v", name, data, got, want)
	}
}

func TestCodecDecodesAsEncodingJSON(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(3, 5))}
	for range 2000 {
		decodeBoth(t, g.header(3).appendJSON(nil))
		mf := msgFile{Message: g.message(), InitialHeader: g.header(1), IdempotencyKey: g.str()}
		decodeBoth(t, mf.appendJSON(nil))
		decodeBoth(t, g.event(2).AppendJSON(nil))
	}
	for _, s := range codecCorpus {
		decodeBoth(t, []byte(s))
	}
}

// codecCorpus holds inputs where encoding/json's rules are easy to get
// wrong; it also seeds FuzzCodecDecode.
var codecCorpus = []string{
	``, ` `, `null`, ` null `, `{}`, `[]`, `"x"`, `1`, `{"thread_id":"a"}x`, `{"thread_id":"a",}`, `{,}`,
	`{"thread_id":null}`, `{"message_count":null}`, `{"message_count":1.0}`, `{"message_count":1e2}`,
	`{"message_count":-0}`, `{"message_count":01}`, `{"message_count":9223372036854775808}`,
	`{"message_count":-9223372036854775808}`, `{"message_count":"1"}`, `{"subject":1}`, `{"subject":true}`,
	`{"THREAD_ID":"a","thread_id":"b"}`, `{"thread_id":"b","Thread_Id":"a"}`, `{"ſubject":"long s"}`,
	`{"last_event_\u0069d":7}`, `{"subject":"\ud83d\ude00 \ud83d x \udc00\u0041 \"\\\/\b\f\n\r\t"}`,
	`{"subject":"\'"}`, `{"subject":"` + "\x01" + `"}`, `{"subject":"` + "\xff\xfe" + `"}`, "{\"s\xffbject\":1}",
	`{"lease":null}`, `{"lease":{"agent_id":"a"},"lease":{"lease_token":3}}`, `{"lease":[]}`, `{"lease":"x"}`,
	`{"last_from":{"a":1,"b":null}}`, `{"last_from":{"a":1},"last_from":{"b":2}}`, `{"last_from":null}`,
	`{"last_from":{"a":"x"}}`, `{"log_pos":{"segment":1},"log_pos":{"offset":2}}`, `{"log_pos":null}`,
	`{"last_event":{"state":{"last_event":{"event_id":3}}}}`, `{"payload_json":null}`, `{"payload_json": { "a" : 1 } }`,
	`{"artifacts":[]}`, `{"artifacts":null}`, `{"artifacts":[null,{"path":"p"}]}`, `{"artifacts":{}}`,
	`{"artifacts":[{"path":"a"},{"path":"b"},{"path":"c"}],"artifacts":[{"kind":"k"}],"artifacts":[{},{}]}`,
	`{"unknown":[1,{"x":[true,false,null]}],"subject":"s"}`, `{"unknown":tru}`, `{"unknown":-}`, `{"unknown":1.}`,
	`{"unknown":.5}`, `{"unknown":1e}`, `{"unknown":"\u12G4"}`, `{"format":"inbox-store","version":1}`,
	`{"format":"inbox-store","version":null,"shared":true}`, `{"shared":"yes"}`, `{"shared":null}`,
	`{"released_at":null,"rev":2}`, "\t{\"subject\" :\r\n\"x\"}\n", `{"a":1}{"b":2}`, `{"subject":"x"`,
	strings.Repeat(`{"u":`, 10001) + `1` + strings.Repeat(`}`, 10001),
	strings.Repeat(`{"u":`, 10000) + `1` + strings.Repeat(`}`, 10000),
	strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001),
}

func FuzzCodecDecode(f *testing.F) {
	g := gen{rand.New(rand.NewPCG(1, 1))}
	for _, s := range codecCorpus {
		f.Add([]byte(s))
	}
	for range 20 {
		f.Add(g.header(2).appendJSON(nil))
		f.Add(g.event(2).AppendJSON(nil))
		m := msgFile{Message: g.message(), InitialHeader: g.header(1)}
		f.Add(m.appendJSON(nil))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeBoth(t, data)
	})
}

func FuzzCodecString(f *testing.F) {
	for _, s := range genPieces {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := stdMarshal(t, s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
		var back string
		if err := decodeJSON(want, func(d *decoder) { d.str(&back) }); err != nil {
			t.Fatalf("decode %s: %v", want, err)
		}
		var stdBack string
		json.Unmarshal(want, &stdBack)
		if back != stdBack {
			t.Fatalf("decode %s = %q, encoding/json says %q", want, back, stdBack)
		}
	})
}

func TestJSONFieldsSorted(t *testing.T) {
	got := string(jsonFields{}.num("lease_token", 3).str("expires_at", "2026-11-23T05:00:00.000000Z").raw())
	if want := `{"expires_at":"2026-11-23T05:00:00.000000Z","lease_token":3}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestRecordsPromoteEmbedded: the header lists Thread's members first and
// the message file Message's, in the same order, as encoding/json promotes
// an embedded struct's fields (the tables spell them out twice so that
// they stay static; this keeps the copies in step).
func TestRecordsPromoteEmbedded(t *testing.T) {
	check := func(what string, outer, inner []string) {
		t.Helper()
		if len(outer) < len(inner) || !slices.Equal(outer[:len(inner)], inner) {
			t.Errorf("%s members %v do not start with %v", what, outer, inner)
		}
	}
	check("header", recordNames(headerRecord), recordNames(threadRecord))
	check("message file", recordNames(msgFileRecord), recordNames(messageRecord))
}

func recordNames[T any](r record[T]) []string {
	var names []string
	for _, f := range r {
		names = append(names, f.name)
	}
	return names
}
