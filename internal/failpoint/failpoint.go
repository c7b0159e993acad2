// Package failpoint injects faults at named points of the relay so that
// fault-injection tests can crash it exactly where a crash is hardest to
// survive: after a batch is read, between publishing it and recording the
// outcome, between waves, while one particular message is published.
//
// Failpoints exist only in builds with the tag outbox_failpoints (the
// fault-injection tests set it). In every other build — the shipped binary,
// an application embedding the relay — Compiled is false, FromEnv ignores
// the environment, Set refuses, and every point is a constant no-op the
// compiler removes: nobody can make a production process kill itself
// through its environment.
//
// With the tag, points are inert unless the environment variable
// OUTBOX_FAILPOINTS is set (read by FromEnv, which outbox.NewRelay calls)
// or Set is called; while inert, a point costs one atomic load.
//
// # Syntax
//
// OUTBOX_FAILPOINTS holds entries separated by ';':
//
//	POINT=ACTION[:ARG][:MESSAGE_ID][@N]
//
// ACTION is kill (SIGKILL the own process: no deferred function runs, no
// buffer is flushed), panic, error (the point fails the way a failed
// publish or settle does) or sleep:DURATION (e.g. sleep:2s). @N fires the
// entry on its Nth hit only; without it the entry fires on every hit.
// The per-message points publish and prepare take a message id filter:
// the entry then counts and fires only for that message. Examples:
//
//	after_publish_before_settle=kill@3
//	mid_batch=error;before_settle=sleep:500ms
//	publish=panic:0b9d6c1e-3f7a-4b7e-9a51-2d1f3c4e5a6b
package failpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Env is the environment variable FromEnv reads.
const Env = "OUTBOX_FAILPOINTS"

// The relay's points.
const (
	// AfterReadBeforePublish: a batch has been read, nothing published.
	AfterReadBeforePublish = "after_read_before_publish"
	// AfterPublishBeforeSettle: every wave of the batch has been
	// published, no outcome recorded.
	AfterPublishBeforeSettle = "after_publish_before_settle"
	// MidBatch: between two waves of one batch — some messages published,
	// later ones of their keys not yet.
	MidBatch = "mid_batch"
	// Publish: one message is about to be published (per message: takes a
	// message id filter).
	Publish = "publish"
	// BeforeSettle: the outcomes of a batch are about to be written.
	BeforeSettle = "before_settle"
	// Prepare: one message read is about to be checked and decoded (per
	// message: takes a message id filter).
	Prepare = "prepare"
)

var points = []string{AfterReadBeforePublish, AfterPublishBeforeSettle, MidBatch, Publish, BeforeSettle, Prepare}

// perMessage are the points that take a message id filter.
var perMessage = map[string]bool{Publish: true, Prepare: true}

// ErrInjected is wrapped by every error an "error" action returns.
var ErrInjected = errors.New("injected fault")

// ErrNotCompiled is Set's error in a build without failpoints.
var ErrNotCompiled = errors.New("failpoints are not compiled in (build with -tags outbox_failpoints)")

// Actions.
const (
	actKill  = "kill"
	actPanic = "panic"
	actError = "error"
	actSleep = "sleep"
)

type rule struct {
	point  string
	action string
	sleep  time.Duration
	id     string // per-message filter; "" matches every message
	nth    int64  // fire on this hit only; 0: on every hit
	hits   atomic.Int64
}

var (
	enabled atomic.Bool
	mu      sync.Mutex
	spec    string
	rules   map[string][]*rule
)

// FromEnv installs the entries of OUTBOX_FAILPOINTS when it is set, and
// leaves the points as they are when it is not. The same value installed
// twice keeps its hit counts. A malformed value is an error naming the
// bad entry, on one line.
func FromEnv() error {
	if !Compiled {
		return nil
	}
	v, ok := os.LookupEnv(Env)
	if !ok {
		return nil
	}
	mu.Lock()
	same := v == spec && rules != nil
	mu.Unlock()
	if same {
		return nil
	}
	if err := Set(v); err != nil {
		return fmt.Errorf("outbox: %s: %w", Env, err)
	}
	return nil
}

// Set replaces every entry with those of s (in the OUTBOX_FAILPOINTS
// syntax); an empty s makes every point inert again. On error nothing
// changes. Without the outbox_failpoints build tag it always fails.
func Set(s string) error {
	if !Compiled {
		return ErrNotCompiled
	}
	parsed, err := parse(s)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	spec = s
	rules = map[string][]*rule{}
	for _, r := range parsed {
		rules[r.point] = append(rules[r.point], r)
	}
	enabled.Store(len(parsed) > 0)
	return nil
}

// parse checks s and returns its entries.
func parse(s string) ([]*rule, error) {
	var out []*rule
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		r, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseEntry(entry string) (*rule, error) {
	point, action, ok := strings.Cut(entry, "=")
	if !ok {
		return nil, errors.New("want POINT=ACTION")
	}
	r := &rule{point: strings.TrimSpace(point)}
	if !slices.Contains(points, r.point) {
		return nil, fmt.Errorf("unknown point %q (known: %s)", r.point, strings.Join(points, ", "))
	}
	if at := strings.LastIndexByte(action, '@'); at >= 0 {
		n, err := strconv.ParseInt(action[at+1:], 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("hit count %q is not a positive integer", action[at+1:])
		}
		r.nth, action = n, action[:at]
	}
	parts := strings.Split(action, ":")
	r.action, parts = parts[0], parts[1:]
	switch r.action {
	case actKill, actPanic, actError:
	case actSleep:
		if len(parts) == 0 {
			return nil, errors.New("sleep needs a duration, e.g. sleep:2s")
		}
		d, err := time.ParseDuration(parts[0])
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("sleep duration %q is not a positive duration", parts[0])
		}
		r.sleep, parts = d, parts[1:]
	default:
		return nil, fmt.Errorf("unknown action %q (want kill, panic, error or sleep:DURATION)", r.action)
	}
	switch {
	case len(parts) > 1:
		return nil, errors.New("too many ':' parts")
	case len(parts) == 1 && !perMessage[r.point]:
		return nil, fmt.Errorf("point %s takes no message id", r.point)
	case len(parts) == 1 && parts[0] == "":
		return nil, errors.New("empty message id")
	case len(parts) == 1:
		r.id = parts[0]
	}
	return r, nil
}

// Inject evaluates point: it returns nil, or an error wrapping
// ErrInjected, or sleeps, panics or kills the process, as the entries
// for point say.
func Inject(point string) error {
	if !Compiled || !enabled.Load() {
		return nil
	}
	return fire(point, "")
}

// InjectID evaluates a per-message point for message id.
func InjectID(point, id string) error {
	if !Compiled || !enabled.Load() {
		return nil
	}
	return fire(point, id)
}

func fire(point, id string) error {
	mu.Lock()
	rs := rules[point]
	mu.Unlock()
	for _, r := range rs {
		if r.id != "" && r.id != id {
			continue
		}
		if n := r.hits.Add(1); r.nth != 0 && n != r.nth {
			continue
		}
		where := point
		if id != "" {
			where += " (message " + id + ")"
		}
		switch r.action {
		case actSleep:
			time.Sleep(r.sleep)
		case actError:
			return fmt.Errorf("failpoint %s: %w", where, ErrInjected)
		case actPanic:
			panic("failpoint " + where + ": panic")
		case actKill:
			kill(where)
		}
	}
	return nil
}

// kill ends the process at once with SIGKILL.
func kill(where string) {
	fmt.Fprintf(os.Stderr, "failpoint %s: kill\n", where)
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Signal(os.Kill)
	}
	select {} // the signal is on its way
}

// PublishBatch calls publish with batch after evaluating the per-message
// point Publish for each element (id gives its message id): elements
// whose point returns an error are left out of the call and get that
// error as their result, and so do the later elements of the same key
// (key gives it, "" for none; key may be nil), as a destination that
// publishes a key's run in one go fails the rest of the run. While the
// points are inert it is a plain call.
func PublishBatch[E any](ctx context.Context, batch []E, id, key func(E) string, publish func(context.Context, []E) []error) []error {
	if !Compiled || !enabled.Load() {
		return publish(ctx, batch)
	}
	errs := make([]error, len(batch))
	pass := make([]E, 0, len(batch))
	idx := make([]int, 0, len(batch))
	failed := map[string]error{}
	for i, e := range batch {
		k := ""
		if key != nil {
			k = key(e)
		}
		if err := failed[k]; k != "" && err != nil {
			errs[i] = err
			continue
		}
		if err := fire(Publish, id(e)); err != nil {
			errs[i] = err
			if k != "" {
				failed[k] = err
			}
			continue
		}
		pass = append(pass, e)
		idx = append(idx, i)
	}
	if len(pass) == len(batch) {
		return publish(ctx, batch)
	}
	if len(pass) == 0 {
		return errs
	}
	res := publish(ctx, pass)
	for j, i := range idx {
		if j < len(res) && len(res) == len(pass) {
			errs[i] = res[j]
		} else {
			errs[i] = fmt.Errorf("publisher returned %d results for %d messages", len(res), len(pass))
		}
	}
	return errs
}
