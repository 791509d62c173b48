package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/intake"
)

// catchUpOutcomes finds processed descriptors without an .outcome: those
// whose thread is already terminal get one now, the rest are tracked.
func (d *daemon) catchUpOutcomes(ctx context.Context) error {
	entries, err := os.ReadDir(d.cfg.Intake)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, intake.Suffix+SuffixProcessed) {
			continue
		}
		name := strings.TrimSuffix(n, SuffixProcessed)
		p := filepath.Join(d.cfg.Intake, name)
		if _, err := os.Stat(p + SuffixOutcome); err == nil {
			continue
		}
		data, err := os.ReadFile(p + SuffixResult)
		if err != nil {
			continue
		}
		var r struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(data, &r) != nil || r.ThreadID == "" {
			continue
		}
		d.track(r.ThreadID, name)
		th, err := d.s.Thread(ctx, r.ThreadID)
		if err == nil && inbox.IsTerminal(th.Status) {
			d.outcome(ctx, r.ThreadID)
		}
	}
	return nil
}

// track records that descriptor name awaits thread tid's outcome. A name
// dropped again serves only its newest thread: an older thread that
// finishes later must not overwrite the newer drop's .outcome.
func (d *daemon) track(tid, name string) {
	if old, ok := d.byName[name]; ok && old != tid {
		d.tracked[old] = slices.DeleteFunc(d.tracked[old], func(n string) bool { return n == name })
		if len(d.tracked[old]) == 0 {
			delete(d.tracked, old)
		}
	}
	d.byName[name] = tid
	if !slices.Contains(d.tracked[tid], name) {
		d.tracked[tid] = append(d.tracked[tid], name)
	}
}

// outcome writes NAME.outcome for every descriptor of a terminal thread.
func (d *daemon) outcome(ctx context.Context, tid string) {
	names, ok := d.tracked[tid]
	if !ok {
		return
	}
	th, m, err := d.s.LastMessage(ctx, tid)
	if err != nil {
		d.log.Error("cannot read thread for outcome", "thread", tid, "error", err)
		return
	}
	if !inbox.IsTerminal(th.Status) {
		return
	}
	out := &Outcome{OK: th.Status == inbox.StatusDone, Status: th.Status, ThreadID: tid, Result: m,
		FinishedAt: th.UpdatedAt}
	if m != nil {
		out.Summary = m.Summary
	}
	if err := d.writeOutcomes(names, out); err != nil {
		d.log.Error("cannot write outcome", "files", names, "error", err)
		return // tracked still: retried on the next event or start
	}
	for _, name := range names {
		delete(d.byName, name)
		d.log.Info("outcome written", "file", name, "thread", tid, "status", th.Status)
	}
	delete(d.tracked, tid)
}
