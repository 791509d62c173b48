package spool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"

	"github.com/inbox-dev/inbox/internal/jsonrec/jsonrectest"
	"github.com/inbox-dev/inbox/internal/testproc"
)

// The generated codecs of the store's own records agree with
// encoding/json, encoding byte for byte (the format of every file already
// written) and decoding value for value, errors included.
func TestRecordsAgreeWithEncodingJSON(t *testing.T) {
	jsonrectest.Check(t, (*logEvent).appendJSON, (*logEvent).decodeJSON)
	jsonrectest.Check(t, (*leaseRecord).appendJSON, (*leaseRecord).decodeJSON)
	jsonrectest.Check(t, (*header).appendJSON, (*header).decodeJSON)
	jsonrectest.Check(t, (*msgFile).appendJSON, (*msgFile).decodeJSON)
	jsonrectest.Check(t, (*idemRecord).appendJSON, (*idemRecord).decodeJSON)
	jsonrectest.Check(t, (*formatInfo).appendJSON, (*formatInfo).decodeJSON)
	jsonrectest.Check(t, (*formatFields).appendJSON, (*formatFields).decodeJSON)
	jsonrectest.Check(t, (*formatProbe).appendJSON, (*formatProbe).decodeJSON)
	jsonrectest.Check(t, (*blobMeta).appendJSON, (*blobMeta).decodeJSON)
}

func FuzzRecordDecode(f *testing.F) {
	for _, s := range jsonrectest.Corpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		jsonrectest.Decode(t, data, (*logEvent).decodeJSON)
		jsonrectest.Decode(t, data, (*header).decodeJSON)
		jsonrectest.Decode(t, data, (*msgFile).decodeJSON)
		jsonrectest.Decode(t, data, (*leaseRecord).decodeJSON)
	})
}

// sampleLogEvent is a reply's log line as a store writes it: the event,
// the thread's header after it, the idempotency record and the message.
func sampleLogEvent() *logEvent {
	released := "2026-11-23T05:00:00.000000Z"
	lease := inbox.Lease{ThreadID: "t-0001", AgentID: "worker", LeaseToken: 7, ClaimedAt: "2026-11-23T04:00:00.000000Z", ExpiresAt: "2026-11-23T05:00:00.000000Z", ReleasedAt: &released}
	ev := inbox.Event{EventID: 1234, RunID: "run-1", TaskID: "task-1", ThreadID: "t-0001", Source: "cli", EventType: "message_appended",
		MessageID: "m-0002", Summary: "done: the build is \"green\"", PayloadJSON: json.RawMessage(`{"seq":2}`), CreatedAt: "2026-11-23T04:30:00.000000Z",
		Agent: "worker", Kind: "reply", Status: "done"}
	h := &header{
		Thread: inbox.Thread{ThreadID: "t-0001", RunID: "run-1", TaskID: "task-1", Subject: "build the thing", CreatedBy: "lead", AssignedTo: "worker",
			Recipients: []string{"worker", "reviewer"}, Status: "done", Priority: "normal", LatestMessageID: "m-0002",
			CreatedAt: "2026-11-23T04:00:00.000000Z", UpdatedAt: "2026-11-23T04:30:00.000000Z", MessageCount: 2, LastEventID: 1234},
		Lease: &lease, LeaseRev: 3, LastFrom: map[string]int{"lead": 1, "worker": 2}, LogPos: Pos{Segment: 1, Offset: 99999},
		LastEvent: &ev, Origin: &inbox.Origin{Descriptor: "d.json", SHA256: strings.Repeat("ab", 32)},
	}
	msg := &msgFile{Message: inbox.Message{MessageID: "m-0002", ThreadID: "t-0001", Seq: 2, FromAgent: "worker", ToAgent: "lead",
		Kind: "reply", Type: "result", Summary: "done", Body: strings.Repeat("The build passed.\n\tAll \"tests\" ran — ok. ", 24),
		PayloadJSON: json.RawMessage(`{"ok":true,"n":[1,2,3]}`), CreatedAt: "2026-11-23T04:30:00.000000Z", EventID: 1234,
		Artifacts: []inbox.Artifact{{ArtifactID: "a-1", MessageID: "m-0002", Path: "out/log.txt", Kind: "file", MetadataJSON: json.RawMessage(`{}`), CreatedAt: "2026-11-23T04:30:00.000000Z"}},
		RequestID: "r-1"}}
	return &logEvent{Event: ev, State: h, Idem: &idemRecord{Key: "k-1", Command: "reply", ThreadID: "t-0001", MessageID: "m-0002", Seq: 2, CreatedAt: "2026-11-23T04:30:00.000000Z"}, Message: msg}
}

func BenchmarkLogEventEncode(b *testing.B) {
	testproc.BenchEncode(b, sampleLogEvent(), (*logEvent).appendJSON)
}

func BenchmarkLogEventDecode(b *testing.B) {
	testproc.BenchDecode(b, sampleLogEvent().appendJSON(nil), (*logEvent).decodeJSON)
}

func BenchmarkLogHeadDecode(b *testing.B) {
	testproc.BenchDecode(b, sampleLogEvent().appendJSON(nil), (*logHead).decodeJSON)
}

func BenchmarkHeaderEncode(b *testing.B) {
	testproc.BenchEncode(b, sampleLogEvent().State, (*header).appendJSON)
}

func BenchmarkHeaderDecode(b *testing.B) {
	testproc.BenchDecode(b, sampleLogEvent().State.appendJSON(nil), (*header).decodeJSON)
}
