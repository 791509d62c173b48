package inbox

import (
	"errors"
	"testing"
)

func TestFindOwed(t *testing.T) {
	chosen := &Message{MessageID: "msg_a", AckID: "msg-12345"}
	plain := &Message{MessageID: "msg_b", AckID: "msg_b"}
	// A message whose id is another's chosen ack id: the id wins.
	clash := &Message{MessageID: "msg-12345x", AckID: "msg-12345x"}
	owed := []*Message{chosen, plain, clash}
	for _, tc := range []struct {
		id   string
		want *Message
	}{
		{"msg_a", chosen},
		{"msg-12345", chosen},
		{"msg_b", plain},
		{"msg-12345x", clash},
		{"msg_nope", nil},
	} {
		t.Run(tc.id, func(t *testing.T) {
			got, err := FindOwed(owed, "tester", tc.id)
			if tc.want == nil {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("got %v, %v; want not found", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %s", got, err, tc.want.MessageID)
			}
		})
	}
}

func TestPrepareAckTakesAChosenAckID(t *testing.T) {
	if err := PrepareAck("tester", "msg.12345/a", ""); err != nil {
		t.Errorf("a chosen ack id: %v", err)
	}
	if err := PrepareAck("tester", "", ""); err == nil {
		t.Error("an empty message was taken")
	}
	if err := PrepareAck("tester", "a\nb", ""); err == nil {
		t.Error("a control character was taken")
	}
}
