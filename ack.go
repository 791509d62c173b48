package inbox

import (
	"encoding/json"
	"slices"
	"strings"
)

// Acknowledgments (SPEC §10): a message sent with ack_required asks each
// of its recipients for an acknowledgment message, which names its
// ack_id.

// WantsAck reports whether m asks its recipients for acknowledgment.
func WantsAck(m *Message) bool {
	return m.AckID != "" && m.Type != TypeAcknowledgment
}

// AckedID is the ack_id an acknowledgment names (its content's "ackId"),
// "" for any other message.
func AckedID(m *Message) string {
	if m.Type != TypeAcknowledgment {
		return ""
	}
	var c struct {
		AckID string `json:"ackId"`
	}
	json.Unmarshal(m.PayloadJSON, &c)
	return c.AckID
}

// PrepareAck checks an acknowledgment by agent of message messageID (a
// message id, or the ack_id the message was sent with), in thread tid
// when given.
func PrepareAck(agent, messageID, tid string) error {
	if err := ValidateAgent("agent", agent); err != nil {
		return err
	}
	if messageID == "" {
		return Invalid("message", "is required")
	}
	if err := ValidateLabel("message", messageID); err != nil {
		return err
	}
	if tid != "" {
		return ValidateID("thread", tid)
	}
	return nil
}

// AckNames reports whether id names m for an acknowledgment: it is m's
// message id, or the ack_id m asks acknowledgments to name (seed 002's
// "ackId", which the sender may have chosen).
func AckNames(m *Message, id string) bool {
	return m.MessageID == id || WantsAck(m) && m.AckID == id
}

// FindOwed returns, among the messages agent owes an acknowledgment
// (owed), the one id names (AckNames: its message id, else its ack_id);
// an acknowledgment given without its thread finds its message this way.
func FindOwed(owed []*Message, agent, id string) (*Message, error) {
	var byAck *Message
	for _, o := range owed {
		if o.MessageID == id {
			return o, nil
		}
		if byAck == nil && AckNames(o, id) {
			byAck = o
		}
	}
	if byAck == nil {
		return nil, NotFound("%s owes no acknowledgment of message %s (acknowledged already, or never asked of %s: give {thread} to look in one thread)", agent, id, agent)
	}
	return byAck, nil
}

// AckContent checks that agent may acknowledge m (m asks it for an
// acknowledgment) and returns c as the acknowledgment's content: type
// acknowledgment, content {"ackId": …}, a summary by default, and nothing
// that asks or answers anything.
func AckContent(m *Message, agent string, c Content) (Content, error) {
	if !WantsAck(m) {
		return c, InvalidState("message %s asks for no acknowledgment (send it with ack_required to ask for one)", m.MessageID)
	}
	if !slices.Contains(RecipientsOf(m), agent) {
		return c, InvalidState("message %s asks %s for acknowledgment, not %s", m.MessageID, strings.Join(RecipientsOf(m), ", "), agent)
	}
	c.Type = TypeAcknowledgment
	data, _ := json.Marshal(map[string]string{"ackId": m.AckID})
	c.PayloadJSON = string(data)
	c.AckRequired, c.AckID, c.RequestID, c.Request = false, "", "", false
	if strings.TrimSpace(c.Summary) == "" {
		c.Summary = Shorten("acknowledged: "+m.Summary, 200)
	}
	return c, nil
}
