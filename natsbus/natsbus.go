// Package natsbus is the NATS JetStream backend of inbox.Bus: the same
// operations as package spool, for agents on many machines, on a stream
// whose sequence is the event id and whose per-subject compare-and-set is
// every change's commit point. docs/JETSTREAM.md is the design.
package natsbus

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/inbox-dev/inbox"
)

// IsURL reports whether db names a NATS store rather than a directory.
func IsURL(db string) bool {
	return strings.HasPrefix(db, "nats://") || strings.HasPrefix(db, "tls://")
}

// Options tune Open.
type Options struct {
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
	// Source is what events record as their source ("cli", "daemon").
	Source string
	// Create makes the stream if the store does not exist yet (init);
	// otherwise a missing store is inbox.ErrNotInitialized.
	Create bool
	// FirstSeq, with Create, is the first event id of a new store (a
	// migrated log's first).
	FirstSeq uint64
}

// Bus is a store on a JetStream server.
type Bus struct {
	// Steps gives Update, Done, Fail and the team changes (holderMessage,
	// changeTeam).
	inbox.Steps
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	kv       jetstream.KeyValue
	kvStream jetstream.Stream // the bucket's own stream, for listing keys
	// archiveStream holds archived threads (archive.go), once opened.
	archiveStream jetstream.Stream
	name          string
	server        string // the servers the URL names
	shown         string // the store URL as errors show it, without its secret
	prefix        string // "inbox.NAME.ev."
	replicas      int
	now           func() time.Time
	source        string
	created       bool
}

var _ inbox.Bus = (*Bus)(nil)

var storeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// config is what a store URL says.
type config struct {
	server   string // the URLs nats.Connect gets, without credentials
	shown    string // the store URL as errors show it (inbox.ShowNATSURL)
	name     string
	replicas int
	opts     []nats.Option
	// credentials is whether opts give the server any: a password, a
	// token, a .creds or an nkey file.
	credentials bool
}

// parseURL reads a store URL. Its credentials (inbox.SplitNATSURL: a user
// and password, or a token, from the URL or the environment's
// inbox.EnvNATSPassword or inbox.EnvNATSPasswordFile) become connection
// options, never part of a URL that could be shown.
func parseURL(db string) (*config, error) {
	secret, err := inbox.NATSSecret(os.Getenv)
	if err != nil {
		return nil, err
	}
	shown := inbox.ShowNATSURL(db, secret)
	public, cred := inbox.SplitNATSURL(db, secret)
	u, err := url.Parse(public)
	if err != nil || u.Host == "" {
		return nil, inbox.Invalid("db", "%q is not a NATS store URL: write nats://HOST:PORT/NAME", shown)
	}
	name := strings.Trim(u.Path, "/")
	if !storeName.MatchString(name) {
		return nil, inbox.Invalid("db", "%q names no store: write nats://HOST:PORT/NAME, NAME of letters, digits, _ and - (at most 64)", shown)
	}
	c := &config{name: name, replicas: 1, shown: shown}
	switch {
	case cred.User != "":
		c.opts = append(c.opts, nats.UserInfo(cred.User, cred.Password))
	case cred.Token != "":
		c.opts = append(c.opts, nats.Token(cred.Token))
	}
	q := u.Query()
	if r := q.Get("replicas"); r != "" {
		n, err := strconv.Atoi(r)
		if err != nil || n < 1 || n > 5 {
			return nil, inbox.Invalid("db", "replicas=%q must be 1 to 5", r)
		}
		c.replicas = n
	}
	creds := q.Get("creds")
	if creds == "" {
		creds = os.Getenv("NATS_CREDS")
	}
	if creds != "" {
		c.opts = append(c.opts, nats.UserCredentials(creds))
	}
	nkey := q.Get("nkey")
	if nkey == "" {
		nkey = os.Getenv("NATS_NKEY")
	}
	if nkey != "" {
		o, err := nats.NkeyOptionFromSeed(nkey)
		if err != nil {
			return nil, inbox.Invalid("db", "nkey %s: %v", nkey, err)
		}
		c.opts = append(c.opts, o)
	}
	// Several servers (nats://h1:4222,h2:4222/NAME) are tried in turn,
	// and the connection moves between them when one fails.
	var servers []string
	for _, h := range strings.Split(u.Host, ",") {
		srv := *u
		srv.User, srv.Host, srv.Path, srv.RawQuery = nil, h, "", ""
		servers = append(servers, srv.String())
	}
	c.server = strings.Join(servers, ",")
	c.credentials = cred.Secret() != "" || creds != "" || nkey != ""
	return c, nil
}

// connectError is why a connection to c's servers failed (ErrStorage):
// one the server refused for its credentials says where they go, and
// never what they are.
func connectError(err error, c *config) error {
	if !errors.Is(err, nats.ErrAuthorization) {
		return inbox.Storage(err, "connect to %s", c.server)
	}
	const where = "the file that holds the store's secret (inbox-nats server's is inbox-nats-server.secret in its --store-dir; its log names it)"
	rule := fmt.Sprintf("connect to %s: the server refused a connection that gave no credentials (%v): set %s to %s, or give the secret in %s",
		c.server, err, inbox.EnvNATSPasswordFile, where, inbox.EnvNATSPassword)
	if c.credentials {
		rule = fmt.Sprintf("connect to %s: the server refused the credentials given (%v): check that %s names %s, and that neither %s nor a password in the store's URL, which win over it, holds another",
			c.server, err, inbox.EnvNATSPasswordFile, where, inbox.EnvNATSPassword)
	}
	return &inbox.Error{Code: "storage_error", Rule: rule, Err: inbox.ErrStorage, Cause: err}
}

// Open connects to the store db names (nats://HOST:PORT/NAME).
func Open(ctx context.Context, db string, opts Options) (*Bus, error) {
	c, err := parseURL(db)
	if err != nil {
		return nil, err
	}
	nopts := append([]nats.Option{nats.Name("inbox"), nats.Timeout(5 * time.Second), nats.MaxReconnects(-1)}, c.opts...)
	nc, err := nats.Connect(c.server, nopts...)
	if err != nil {
		return nil, connectError(err, c)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, inbox.Storage(err, "use JetStream at %s", c.server)
	}
	b := &Bus{nc: nc, js: js, name: c.name, server: c.server, shown: c.shown, prefix: "inbox." + c.name + ".ev.", replicas: c.replicas,
		now: opts.Now, source: opts.Source}
	b.Steps = inbox.Steps{Holder: b.holderMessage, Team: b.changeTeam, Append: b.reply}
	if b.now == nil {
		b.now = time.Now
	}
	if b.source == "" {
		b.source = "cli"
	}
	notFound := false
	err = b.retry(ctx, func(ctx context.Context) (err error) {
		b.stream, err = js.Stream(ctx, b.streamName())
		if errors.Is(err, jetstream.ErrStreamNotFound) && opts.Create {
			b.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
				Name:        b.streamName(),
				Description: "inbox store " + c.name + ": the event log (docs/JETSTREAM.md)",
				Subjects:    []string{b.prefix + ">"},
				Storage:     jetstream.FileStorage,
				Replicas:    c.replicas,
				// Direct gets may be answered by a replica that has not
				// applied the newest change: a holder would be refused on
				// the state before its own claim. Reads go to the leader.
				AllowDirect: false,
				DenyDelete:  true,
				Discard:     jetstream.DiscardNew,
				FirstSeq:    opts.FirstSeq,
			})
			b.created = err == nil
		}
		notFound = errors.Is(err, jetstream.ErrStreamNotFound)
		return err
	})
	if notFound {
		nc.Close()
		return nil, inbox.Errorf(inbox.ErrNotInitialized, "not_initialized", "db",
			"there is no inbox store %q on %s: run inbox init --db %s", c.name, c.server, c.shown)
	}
	if err != nil {
		nc.Close()
		return nil, inbox.Storage(err, "open the store's stream %s", b.streamName())
	}
	err = b.retry(ctx, func(ctx context.Context) (err error) {
		b.kv, err = js.KeyValue(ctx, b.streamName())
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			b.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:      b.streamName(),
				Description: "inbox store " + c.name + ": what is not an event (docs/JETSTREAM.md)",
				Storage:     jetstream.FileStorage,
				Replicas:    c.replicas,
				// Removed keys leave no marker for long: the fetch index
				// would otherwise grow with every thread an agent finished.
				LimitMarkerTTL: time.Minute,
			})
		}
		return err
	})
	if err != nil {
		nc.Close()
		return nil, inbox.Storage(err, "open the store's bucket %s", b.streamName())
	}
	return b, nil
}

// Created reports whether Open created the store.
func (b *Bus) Created() bool { return b.created }

// Close ends the connection.
func (b *Bus) Close() error {
	b.nc.Close()
	return nil
}

func (b *Bus) streamName() string { return "INBOX_" + b.name }

// A thread's events are published on inbox.NAME.ev.t.<thread>.<to>.<by>:
// <to> is the agent whose mailbox the event's message goes to ("_m" for
// several, "_" for none) and <by> the agent who caused it ("_" for none),
// so that a mailbox and an agent's activity are subject filters. The
// thread's compare-and-set is on inbox.NAME.ev.t.<thread>.*.*.

func (b *Bus) threadFilter(tid string) string { return b.prefix + "t." + tid + ".*.*" }

func (b *Bus) eventSubject(r *record) string {
	by := actor(r)
	if r.Event.EventType == inbox.EventLeaseExpired {
		by = ""
	}
	return b.prefix + "t." + r.Thread.ThreadID + "." + mailToken(r) + "." + token(by)
}

// mailToken is the <to> token of a record's subject.
func mailToken(r *record) string {
	m := r.Message
	if m == nil || r.Prompt {
		return "_"
	}
	to := inbox.RecipientsOf(m)
	switch {
	case len(to) == 0:
		return "_"
	case len(to) == 1 && len(m.Recipients) == 0:
		return token(to[0])
	}
	return "_m"
}

// token is an agent or team name as a subject token: "." is the only
// character of a name a token cannot hold (names have no "%").
func token(name string) string {
	if name == "" {
		return "_"
	}
	return strings.ReplaceAll(name, ".", "%2E")
}

// key is a name as a KV key token (letters, digits, "-", "_", "=").
func key(name string) string { return hex.EncodeToString([]byte(name)) }

// ctx bounds one request to the server.
func (b *Bus) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Second)
}

// record is one message of the stream: an event, the message it adds
// (if any) and the thread's whole state after it. The fields the stream
// position determines (event ids) are filled in when it is read.
type record struct {
	Event   inbox.Event             `json:"event"`
	Thread  inbox.Thread            `json:"thread"`
	Lease   *inbox.Lease            `json:"lease,omitempty"`
	Message *inbox.Message          `json:"message,omitempty"`
	Origin  *inbox.Origin           `json:"origin,omitempty"`
	From    map[string]int          `json:"last_from,omitempty"`
	Cursors map[string]inbox.Cursor `json:"cursors,omitempty"`
	// Prompt marks a task's first message: it reaches the task on stdin,
	// not in its mailbox.
	Prompt bool `json:"prompt,omitempty"`
	// Idem maps the hash of each idempotency key used in the thread to
	// the call it recorded.
	Idem map[string]idemRecord `json:"idem,omitempty"`
	// Owed lists, per agent, the messages of the thread that asked it
	// for an acknowledgment it has not given.
	Owed map[string][]owedAck `json:"owed,omitempty"`
	// Team is the whole team, on a team event.
	Team *inbox.Team `json:"team,omitempty"`
	// By, when set, is the agent the event shows acting, when that is not
	// Event.Agent (a task pushed by its owner for its parent).
	By string `json:"by,omitempty"`
	// Change identifies the change across retries of its publish.
	Change string `json:"change,omitempty"`
}

// idemRecord is a call made with an idempotency key.
type idemRecord struct {
	Key       string `json:"key"`
	Command   string `json:"command"`
	MessageID string `json:"message_id"`
	Seq       int    `json:"seq"`
	// Args is what the call was given (inbox.IdemArgs); a record of a
	// version before them has none.
	Args string `json:"args,omitempty"`
}

// decode reads a stream message as a record at its sequence.
func decode(data []byte, seq uint64) (*record, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, inbox.Corrupt(err, "event %d of the stream is not an inbox record", seq)
	}
	id := int64(seq)
	r.Event.EventID = id
	if r.Event.ThreadID != "" {
		r.Thread.LastEventID = id
	}
	if r.Message != nil {
		r.Message.EventID = id
	}
	return &r, nil
}

// view is the thread as a reader sees it at now (LeaseExpired worked out).
func (r *record) view(now time.Time) *inbox.Thread {
	t := r.Thread
	l := r.Lease
	t.LeaseExpired = l != nil && l.AgentID != "" && !l.Released() && !inbox.IsTerminal(t.Status) && !l.Live(now)
	return &t
}

func (r *record) offeredTo(agent string) bool {
	return r.Thread.AssignedTo == agent || r.Thread.AssignedTo == "" && contains(r.Thread.Recipients, agent)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// state reads a thread's current record and its sequence.
func (b *Bus) state(ctx context.Context, tid string) (*record, uint64, error) {
	var m *jetstream.RawStreamMsg
	err := b.retry(ctx, func(ctx context.Context) (err error) {
		m, err = b.stream.GetLastMsgForSubject(ctx, b.threadFilter(tid))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, inbox.NotFound("thread %s not found", tid)
	}
	if err != nil {
		return nil, 0, inbox.Storage(err, "read thread %s", tid)
	}
	r, err := decode(m.Data, m.Sequence)
	return r, m.Sequence, err
}

// errRetry is a lost compare-and-set: the thread changed after it was read.
var errRetry = errors.New("the thread changed; read it again")

// publish appends r on the thread's subject if the subject's last
// sequence is still last (0: the thread must not exist): the commit point.
func (b *Bus) publish(ctx context.Context, r *record, last uint64) (uint64, error) {
	r.Change = nuid.Next()
	data, err := json.Marshal(r)
	if err != nil {
		return 0, inbox.Internal(err)
	}
	tid := r.Thread.ThreadID
	maybe := false // an earlier attempt may have been stored
	var ack *jetstream.PubAck
	err = b.retry(ctx, func(ctx context.Context) (err error) {
		ack, err = b.js.Publish(ctx, b.eventSubject(r), data, jetstream.WithMsgID(r.Change),
			jetstream.WithExpectLastSequenceForSubject(last, b.threadFilter(tid)))
		if transient(err) {
			maybe = true
		}
		return err
	})
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		if maybe {
			// The attempt whose answer was lost may be what moved the
			// thread on: then it is done, and must not be done again.
			if seq := b.findChange(ctx, tid, r.Change, last); seq > 0 {
				return seq, nil
			}
		}
		return 0, errRetry
	}
	if err != nil {
		return 0, inbox.Storage(err, "append to thread %s", tid)
	}
	return ack.Sequence, nil
}

// findChange returns the sequence of the record of thread tid after
// sequence after that carries change id, 0 if there is none.
func (b *Bus) findChange(ctx context.Context, tid, id string, after uint64) uint64 {
	var found uint64
	b.records(ctx, b.threadFilter(tid), after+1, false, func(r *record, seq uint64) bool {
		if r.Change == id {
			found = seq
			return false
		}
		return true
	})
	return found
}

// change is one decided change of a thread, ready to publish.
type change struct {
	b   *Bus
	now time.Time
	r   *record // the new state, edited in place
	// idem, when set, is recorded with the message the change adds.
	idem *idemRecord
	// old is the state the change was decided from (nil: a new thread).
	old *inbox.Thread
}

func (c *change) addMessage(m *inbox.Message) {
	t := &c.r.Thread
	t.MessageCount++
	m.Seq = t.MessageCount
	m.ThreadID = t.ThreadID
	t.LatestMessageID = m.MessageID
	if c.r.From == nil {
		c.r.From = map[string]int{}
	}
	c.r.From[m.FromAgent] = m.Seq
	c.r.Message = m
	c.r.Event.MessageID, c.r.Event.Kind, c.r.Event.Type = m.MessageID, m.Kind, m.Type
	c.settleAcks(m)
	if c.idem != nil {
		c.idem.MessageID, c.idem.Seq = m.MessageID, m.Seq
		if c.r.Idem == nil {
			c.r.Idem = map[string]idemRecord{}
		}
		c.r.Idem[idemHash(c.idem.Key)] = *c.idem
	}
}

// mutateResult is mutate for a change that answers with the thread, its
// new message and its lease; a retry that replays an earlier result
// (idempotency) answers with that result.
func (b *Bus) mutateResult(ctx context.Context, tid string, decide func(c *change) error) (*inbox.Result, error) {
	r, err := b.mutate(ctx, tid, decide)
	var rp *replay
	if errors.As(err, &rp) {
		return rp.res, nil
	}
	if err != nil {
		return nil, err
	}
	return &inbox.Result{Thread: &r.Thread, Message: r.Message, Lease: r.Lease}, nil
}

// mutate applies decide to the current state of tid and publishes the
// result, deciding again from the new state whenever another change got
// in first. decide returns nil to publish nothing (a result it made).
func (b *Bus) mutate(ctx context.Context, tid string, decide func(c *change) error) (*record, error) {
	if err := inbox.ValidateID("thread", tid); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, seq, err := b.state(ctx, tid)
		if errors.Is(err, inbox.ErrNotFound) {
			return nil, b.decideArchived(ctx, tid, decide, err)
		}
		if err != nil {
			return nil, err
		}
		c := b.changeOf(cur)
		if err := decide(c); err != nil {
			return nil, err
		}
		got, err := b.commit(ctx, c, seq)
		if errors.Is(err, errRetry) && attempt < 100 {
			continue
		}
		return got, err
	}
}

// changeOf starts a change from the state cur.
func (b *Bus) changeOf(cur *record) *change {
	next := *cur
	next.Message = nil
	next.Event = inbox.Event{}
	if cur.Lease != nil {
		l := *cur.Lease
		next.Lease = &l
	}
	next.From = cloneMap(cur.From)
	next.Cursors = cloneMap(cur.Cursors)
	next.Idem = maps.Clone(cur.Idem)
	next.Owed = maps.Clone(cur.Owed)
	next.Prompt, next.By = false, ""
	return &change{b: b, now: b.now(), r: &next, old: &cur.Thread}
}

// decideArchived runs decide against an archived thread, read-only: a
// retry with an idempotency key the thread recorded gets its original
// result; any other change is refused. A thread that is not archived
// either is notFound.
func (b *Bus) decideArchived(ctx context.Context, tid string, decide func(c *change) error, notFound error) error {
	old, err := b.archived(ctx, tid)
	if err != nil || len(old) == 0 {
		return notFound
	}
	var rp *replay
	if err := decide(b.changeOf(old[len(old)-1])); errors.As(err, &rp) {
		return err
	}
	return inbox.InvalidState("thread %s is archived: it can be shown but not changed", tid)
}

// commit fills in what every event carries and publishes the change.
func (b *Bus) commit(ctx context.Context, c *change, last uint64) (*record, error) {
	r := c.r
	ts := inbox.FormatTime(c.now)
	r.Thread.UpdatedAt = ts
	r.Thread.LastEventID = 0
	ev := &r.Event
	ev.RunID, ev.TaskID, ev.ThreadID = r.Thread.RunID, r.Thread.TaskID, r.Thread.ThreadID
	ev.Source, ev.CreatedAt, ev.Status = b.source, ts, r.Thread.Status
	if len(ev.PayloadJSON) == 0 {
		ev.PayloadJSON = json.RawMessage("{}")
	}
	var before []string
	if c.old != nil {
		before = owners(c.old)
	}
	after := owners(&r.Thread)
	// The fetch index is a superset of the truth: an entry is added
	// before the commit and removed after it, and readers check each one
	// against the thread.
	for _, o := range after {
		if !slices.Contains(before, o) {
			if err := b.index(ctx, o, r.Thread.ThreadID, true); err != nil {
				return nil, err
			}
		}
	}
	seq, err := b.publish(ctx, r, last)
	if err != nil {
		return nil, err
	}
	for _, o := range before {
		if !slices.Contains(after, o) {
			b.index(ctx, o, r.Thread.ThreadID, false) // a leftover only costs a reader a look
		}
	}
	id := int64(seq)
	r.Event.EventID, r.Thread.LastEventID = id, id
	if r.Message != nil {
		r.Message.EventID = id
	}
	return r, nil
}

// cloneMap copies m (never nil: a change adds to it).
func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

func jsonDecode(data []byte, v any) error { return json.Unmarshal(data, v) }

// The fetch index: the key idx.<agent>.<thread> of the store's bucket for
// every unfinished thread the agent's fetch could show (owners). Fetch
// lists the agent's keys and reads those threads, instead of every
// thread of the store.

// owners are the agents whose fetch a thread can show in: its assignee,
// or while it is offered to several and assigned to none, all of them;
// none once it has finished, or for mail.
func owners(t *inbox.Thread) []string {
	if inbox.IsTerminal(t.Status) || t.Mail {
		return nil
	}
	if t.AssignedTo != "" {
		return []string{t.AssignedTo}
	}
	return t.Recipients
}

func indexKey(agent, tid string) string { return "idx." + key(agent) + "." + tid }

// index adds (or removes) agent's entry for thread tid. A removal leaves
// no marker behind for long (the bucket's marker TTL).
func (b *Bus) index(ctx context.Context, agent, tid string, add bool) error {
	err := b.retry(ctx, func(ctx context.Context) (err error) {
		if add {
			_, err = b.kv.Put(ctx, indexKey(agent, tid), nil)
			return err
		}
		err = b.kv.Purge(ctx, indexKey(agent, tid), jetstream.PurgeTTL(time.Minute))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = nil
		}
		return err
	})
	return inbox.Storage(err, "update the fetch index of %s", agent)
}

// indexed lists the threads of agent's fetch index.
func (b *Bus) indexed(ctx context.Context, agent string) ([]string, error) {
	// One request: the bucket's stream lists the subjects (keys) under
	// the agent's prefix, with no consumer to make and remove. A key
	// removed less than a minute ago still has its marker there: readers
	// check every entry against its thread anyway.
	prefix := "$KV." + b.streamName() + ".idx." + key(agent) + "."
	var out []string
	err := b.retry(ctx, func(ctx context.Context) error {
		out = nil
		if b.kvStream == nil {
			s, err := b.js.Stream(ctx, "KV_"+b.streamName())
			if err != nil {
				return err
			}
			b.kvStream = s
		}
		info, err := b.kvStream.Info(ctx, jetstream.WithSubjectFilter(prefix+"*"))
		if err != nil {
			return err
		}
		for subj := range info.State.Subjects {
			out = append(out, strings.TrimPrefix(subj, prefix))
		}
		return nil
	})
	return out, inbox.Storage(err, "read the fetch index of %s", agent)
}
