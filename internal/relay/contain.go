package relay

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/internal/store"
)

// Panics on one message.
//
// What a row holds is up to whoever wrote it, with plain SQL in any
// language or through an adopted table without checks; the code it
// reaches (decoding, a route's Checker, a publisher) may have a bug that
// only an odd row finds. A panic while one message is prepared, checked
// or published is that message's failure, never the process's: an
// embedded relay would take its application down with it, and every relay
// that read the message next would die the same way.
//
//   - prepare: the message is dead, "preparing the message panicked: …";
//   - a Checker: an attempt of unknown outcome, retried until
//     max_attempts;
//   - a publisher: the same (see publishContained).
//
// Each panic is logged at Error in one record, with its stack the first
// time the process sees a panic raised at that place.
//
// Any other panic in a round (in the relay's own code, or in a store
// statement's handling of what it read) fails the round, as a failed
// statement does: it is logged, its messages stay as they were, to be read
// again, and the relay goes on — it does not end the process, which would
// end the application embedding it, or make `outbox relay` exit with the
// status a bad configuration has (2, Go's status for a panic).

// panicSites are the places panics were raised at whose stack was logged.
var panicSites struct {
	mu   sync.Mutex
	seen map[string]bool
}

// maxPanicSites bounds panicSites; past it no more stacks are logged.
const maxPanicSites = 64

// recovered describes a recovered panic: its value as one line and, when
// its place is new, its stack. Call it from the deferred function that
// recovered p.
func recovered(p any) (text string, stack string) {
	text = panicText(p)
	site := panicSite()
	panicSites.mu.Lock()
	defer panicSites.mu.Unlock()
	if panicSites.seen == nil {
		panicSites.seen = map[string]bool{}
	}
	if panicSites.seen[site] || len(panicSites.seen) >= maxPanicSites {
		return text, ""
	}
	panicSites.seen[site] = true
	return text, redact.Text(string(debug.Stack()))
}

// panicSite is where the panic being recovered was raised, "file:line":
// the first frame of the panicking goroutine outside the runtime.
func panicSite() string {
	pcs := make([]uintptr, 32)
	// Skip runtime.Callers, panicSite, recovered and the deferred function.
	n := runtime.Callers(4, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			return f.File + ":" + strconv.Itoa(f.Line)
		}
		if !more {
			return ""
		}
	}
}

// panicText is a panic's value as one line fit for logs and last_error;
// a value whose Error or String method panics too is described by its
// type.
func panicText(p any) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("a panic of type %T", p)
		}
	}()
	return redact.Text(oneLine(fmt.Sprint(p)))
}

// logPanic logs a recovered panic in one record at Error.
func (r *Relay) logPanic(msg, text, stack string, attrs ...any) {
	attrs = append([]any{"relay", r.id}, attrs...)
	attrs = append(attrs, "panic", text)
	if stack != "" {
		attrs = append(attrs, "stack", stack)
	}
	r.log.Error(msg, attrs...)
}

// prepareContained is prepare, with a panic turned into the row's dead
// letter.
func (r *Relay) prepareContained(row *store.Row, budget *blobBudget) (it *item) {
	defer func() {
		if p := recover(); p != nil {
			text, stack := recovered(p)
			r.logPanic("outbox relay: preparing a message panicked; it is dead", text, stack, "message_id", row.MessageID)
			it = &item{row: row, decided: true,
				out: store.Outcome{ID: row.ID, Status: store.StatusDead, Error: "preparing the message panicked: " + text, CountAttempt: true}}
		}
	}()
	return r.prepareIn(row, budget)
}

// roundPanic is a panic recovered on a goroutine of a round, raised again
// on the round's own goroutine.
type roundPanic struct{ text, stack string }

// panicBox keeps the first panic of the goroutines of a round.
type panicBox struct{ p atomic.Pointer[roundPanic] }

// run calls fn, keeping a panic of it.
func (b *panicBox) run(fn func()) {
	defer func() {
		if p := recover(); p != nil {
			if rp, ok := p.(*roundPanic); ok {
				b.p.CompareAndSwap(nil, rp)
				return
			}
			text, stack := recovered(p)
			b.p.CompareAndSwap(nil, &roundPanic{text: text, stack: stack})
		}
	}()
	fn()
}

// raise panics again with the panic kept, if any.
func (b *panicBox) raise() {
	if rp := b.p.Load(); rp != nil {
		panic(rp)
	}
}

// containRound turns a panic of a round into its error; call it deferred
// at the round's start.
func (r *Relay) containRound(n *int, err *error) {
	p := recover()
	if p == nil {
		return
	}
	rp, ok := p.(*roundPanic)
	if !ok {
		text, stack := recovered(p)
		rp = &roundPanic{text: text, stack: stack}
	}
	r.logPanic("outbox relay: a round panicked; its messages will be read again", rp.text, rp.stack)
	*n, *err = 0, errors.New("round panicked: "+rp.text)
}
