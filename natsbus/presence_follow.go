package natsbus

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/inbox-dev/inbox"
)

// Following presence (SPEC §15). A wait's start and its release are a put
// and a delete of its key wait.<agent>.<id>, which a watch of the bucket
// sees. A waiter that dies leaves its key behind; what ends is its
// connection, and with it its responders on the agent's presence subject
// and on the wait's own one. No client is told when another's
// subscription goes, but JetStream watches one kind of interest: a push
// consumer notices when its deliver subject loses its last subscriber
// and, past its inactive threshold, deletes itself with an advisory that
// any client may subscribe to. So the follower gives each live presence
// subject a probe: a push consumer delivering to that subject, filtered
// on a subject nothing is ever published on (the waiter receives
// nothing), in memory, deleted by the server once its subject has no
// responder for probeGrace. Its deletion advisory is the waiter's death.
// The waiter does nothing and pays nothing for it.

// probeGrace is how long a presence subject is without a responder before
// its probe is deleted: the delay between a waiter's death and the call.
const probeGrace = 250 * time.Millisecond

// presenceFollower is the state of one FollowPresence; its goroutine owns
// the maps.
type presenceFollower struct {
	b      *Bus
	probes map[string]string // consumer name → presence subject it probes
	probed map[string]string // presence subject → its probe's name
	keys   map[string]int    // agent → how many of its keys the watch saw
	ownOf  map[string]string // a WaitingOn key → its own presence subject

	mu      sync.Mutex
	deleted []string // consumers whose deletion was advised
	advised chan struct{}
}

// FollowPresence calls fn after every wait that starts or ends, and every
// waiter that dies, until ctx ends (see inbox.Bus). A death is seen
// probeGrace after the server noticed the waiter's connection closed: at
// once for a killed process, after the server's ping interval for a
// machine that vanished.
func (b *Bus) FollowPresence(ctx context.Context, opt inbox.WaitOptions, fn func()) error {
	p := &presenceFollower{b: b, probes: map[string]string{}, probed: map[string]string{}, keys: map[string]int{},
		ownOf: map[string]string{}, advised: make(chan struct{}, 1)}
	sub, err := b.nc.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED."+b.streamName()+".*", func(m *nats.Msg) {
		name := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		p.mu.Lock()
		p.deleted = append(p.deleted, name)
		p.mu.Unlock()
		select {
		case p.advised <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return inbox.Storage(err, "follow presence")
	}
	defer sub.Unsubscribe()
	if err := b.nc.Flush(); err != nil {
		return inbox.Storage(err, "follow presence")
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := b.kv.Watch(wctx, "wait.>")
	if err != nil {
		return inbox.Storage(err, "watch the waits")
	}
	defer w.Stop()
	defer p.dropProbes(ctx)

	// The keys there are now: probes for the waits still in progress.
	for initial := true; initial; {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return inbox.Storage(errors.New("the watch ended"), "watch the waits")
			}
			if e == nil {
				initial = false
				break
			}
			if e.Operation() == jetstream.KeyValuePut {
				p.put(ctx, e, true)
			}
		}
	}
	fn()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				// The watch ended (its connection closed): nothing is
				// followed any more.
				return nil
			}
			if e == nil {
				continue
			}
			if e.Operation() == jetstream.KeyValuePut {
				p.put(ctx, e, false)
			} else {
				p.gone(e.Key())
			}
			fn()
		case <-p.advised:
			if p.died(ctx) {
				fn()
			}
		}
	}
}

// put takes in a wait's key: its agent's subject and, for a wait on
// someone (WaitingOn), its own get a probe. A key found when the follower
// starts may be a dead waiter's: only live subjects are probed.
func (p *presenceFollower) put(ctx context.Context, e jetstream.KeyValueEntry, initial bool) {
	agent, id, ok := agentKey(e.Key())
	if !ok {
		return
	}
	if _, seen := p.ownOf[e.Key()]; !seen {
		p.keys[agent]++
	}
	subject := p.b.presenceSubject(agent)
	subjects := []string{subject}
	if v := e.Value(); len(v) > 0 && v[0] == '{' {
		p.ownOf[e.Key()] = subject + "." + id
		subjects = append(subjects, subject+"."+id)
	} else {
		p.ownOf[e.Key()] = ""
	}
	for _, s := range subjects {
		if _, ok := p.probed[s]; ok || initial && !p.answers(ctx, s) {
			continue
		}
		p.probe(ctx, s)
	}
}

// gone takes in the end of a wait (its key deleted): its probes are no
// longer the follower's business once nothing of theirs is left, so their
// deletion, which follows, is not taken for a death.
func (p *presenceFollower) gone(key string) {
	agent, _, ok := agentKey(key)
	if !ok {
		return
	}
	own, seen := p.ownOf[key]
	if !seen {
		return
	}
	delete(p.ownOf, key)
	p.forget(own)
	if p.keys[agent]--; p.keys[agent] <= 0 {
		delete(p.keys, agent)
		p.forget(p.b.presenceSubject(agent))
	}
}

func (p *presenceFollower) forget(subject string) {
	if name, ok := p.probed[subject]; ok {
		delete(p.probed, subject)
		delete(p.probes, name)
	}
}

// died takes in the advised deletions: true when one was a probe's, whose
// subject lost its responder. A subject that answers again (its waiter
// reconnected) gets a new probe.
func (p *presenceFollower) died(ctx context.Context) bool {
	p.mu.Lock()
	names := p.deleted
	p.deleted = nil
	p.mu.Unlock()
	any := false
	for _, name := range names {
		subject, ok := p.probes[name]
		if !ok {
			continue
		}
		any = true
		p.forget(subject)
		if p.answers(ctx, subject) {
			p.probe(ctx, subject)
		}
	}
	return any
}

// answers reports whether a process responds on a presence subject.
func (p *presenceFollower) answers(ctx context.Context, subject string) bool {
	rctx, cancel := p.b.ctx(ctx)
	defer cancel()
	_, err := p.b.nc.RequestWithContext(rctx, subject, nil)
	return err == nil
}

// probe makes the push consumer that the server deletes once subject has
// no responder for probeGrace. A probe that cannot be made leaves that
// waiter's death unseen, as before there were probes.
func (p *presenceFollower) probe(ctx context.Context, subject string) {
	name := "presence_" + nuid.Next()
	rctx, cancel := p.b.ctx(ctx)
	defer cancel()
	_, err := p.b.stream.CreatePushConsumer(rctx, jetstream.ConsumerConfig{Name: name, DeliverSubject: subject,
		FilterSubject: p.b.prefix + "presence", DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: probeGrace, MemoryStorage: true, Replicas: 1})
	if err != nil {
		return
	}
	p.probes[name] = subject
	p.probed[subject] = name
}

// dropProbes deletes the follower's probes when it ends; one that stays
// goes by itself when its waiter does.
func (p *presenceFollower) dropProbes(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for name := range p.probes {
		p.b.stream.DeleteConsumer(rctx, name)
	}
}
