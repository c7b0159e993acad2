package relay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/failpoint"
	"github.com/txoutbox/outbox/internal/msgcheck"
	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// item is one message through a round.
type item struct {
	row   *store.Row
	env   *publisher.Envelope
	route *routeState
	out   store.Outcome
	// decided: out holds the outcome. Undecided items after the round are
	// left untouched (held back, or cut off by shutdown).
	decided bool
	// confirmed is when the destination (or the Checker) confirmed a sent
	// item, by the local clock.
	confirmed time.Time
	// charged: this attempt was recorded before the publish (a suspect
	// published alone, see charge); the settle must not count it again.
	charged bool
	// checked: the route's Checker said the message has not arrived, so
	// no earlier attempt can have reached the destination.
	checked bool
	// tooOld: the message is older than its route's max age; it is not
	// published, and expireOld moves it to expired (see tooOld), after
	// which it is gone: expired is set and nothing is settled for it.
	tooOld, expired bool
}

// uncertain reports whether an earlier attempt may have reached the
// destination: the row says so and no Checker has said otherwise. It
// stays so whatever this attempt's failure, until the message is sent or
// checked, so that the Checker is asked before every send.
func (it *item) uncertain() bool { return it.row.UnknownOutcome && !it.checked }

// attempt is the number of the attempt being made.
func (it *item) attempt() int {
	if it.charged {
		return it.row.Attempts
	}
	return it.row.Attempts + 1
}

// deliver publishes a batch of prepared items and returns the decided
// ones, whose outcomes are to be recorded.
func (r *Relay) deliver(ctx context.Context, items []*item, rep *BatchReport) []*item {

	// The publish outlives a cancelled ctx by up to ShutdownTimeout.
	pubCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	defer cancel()
	var aborted atomic.Bool
	rd := &delivery{aborted: &aborted, ok: map[*routeState]*atomic.Bool{}}
	for _, it := range items {
		if it.route != nil && rd.ok[it.route] == nil {
			rd.ok[it.route] = &atomic.Bool{}
		}
	}
	// Once ctx ends, the publish has ShutdownTimeout left. Nothing runs
	// for it before then: a round of one message starts no goroutine to
	// watch ctx.
	var grace atomic.Pointer[time.Timer]
	stopWatch := context.AfterFunc(ctx, func() {
		grace.Store(time.AfterFunc(r.cfg.ShutdownTimeout, func() {
			aborted.Store(true)
			cancel()
		}))
	})
	defer func() {
		if !stopWatch() {
			if t := grace.Load(); t != nil {
				t.Stop()
			}
		}
	}()

	// Messages of one key go out one per wave, in id order; a key whose
	// message failed sits out the rest of the round. With more than one
	// wave, the keys are split into groups whose waves go on each at its
	// own pace (see lanes).
	ls := lanes(items)
	start := 0
	if len(ls) > 1 {
		// The lanes' first waves go out together, as one wave: a batch
		// meeting an outage fails as one call of every key's first
		// message, which route health does not charge to the messages (a
		// call of one or two would be).
		var first []*item
		for _, lane := range ls {
			if len(lane) > 0 {
				first = append(first, lane[0]...)
			}
		}
		if !rd.aborted.Load() && r.own.valid() {
			r.check(pubCtx, first)
			r.publishWave(pubCtx, first, rd)
		}
		start = 1
	}
	// The last lane runs here: one lane (the usual case) hands over to
	// no goroutine, whose stack would grow anew every round.
	// A panic in a lane is raised again here once every lane is done, for
	// round to recover.
	var lanePanic panicBox
	for _, lane := range ls[:len(ls)-1] {
		rd.wg.Add(1)
		go func() {
			defer rd.wg.Done()
			lanePanic.run(func() { r.runLane(pubCtx, lane, start, rd) })
		}()
	}
	lanePanic.run(func() { r.runLane(pubCtx, ls[len(ls)-1], start, rd) })
	rd.wg.Wait()
	lanePanic.raise()

	decided := items[:0]
	for _, it := range items {
		if it.expired {
			continue
		}
		if !it.decided {
			rep.Skipped++
			continue
		}
		switch {
		case it.out.Status == store.StatusSent:
			rep.Sent++
		case it.out.Status == store.StatusDead:
			rep.Dead++
		case it.out.CountAttempt:
			rep.Retried++
		default:
			rep.Deferred++
		}
		decided = append(decided, it)
	}
	return decided
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// prepare routes and decodes a row; rows that can never be delivered are
// decided dead here. It trusts nothing the schema may or may not have
// checked: rows written with plain SQL (and adopted tables, which have no
// checks at all) reach it as they are, and each odd value is either
// normalized or a dead letter with a one-line reason (docs/design.md,
// "Rows written by plain SQL").
func (r *Relay) prepare(row *store.Row) *item { return r.prepareIn(row, nil) }

// prepareIn is prepare within a round whose claim-checked payloads are
// bounded by budget (nil: no bound).
func (r *Relay) prepareIn(row *store.Row, budget *blobBudget) *item {
	it := &item{row: row}
	normalizeCounts(row)
	if why := r.rowError(row); why != "" {
		return it.dead(why)
	}
	it.route = r.router.lookup(row.Topic)
	if it.route == nil {
		return r.unrouted(it)
	}
	if r.tooOld(it) {
		return it
	}
	headers, why := decodeHeaders(row.Headers)
	if why != "" {
		return it.dead(why)
	}
	payload, ok := r.openPayload(it, headers, budget)
	if !ok {
		return it
	}
	if len(payload) > r.cfg.MaxPayloadBytes {
		return it.dead(tooLarge(int64(len(payload)), r.cfg.MaxPayloadBytes))
	}
	r.envelope(it, headers, payload)
	return it
}

// dead decides it dead for the reason msg, the attempt counted, and
// returns it.
func (it *item) dead(msg string) *item {
	it.decided = true
	it.out = store.Outcome{ID: it.row.ID, Status: store.StatusDead, Error: msg, CountAttempt: true}
	return it
}

// rowError says why a row can never be delivered whatever its route ("":
// nothing known yet): a topic, business key or message id that cannot
// travel, or a payload the read found too large.
func (r *Relay) rowError(row *store.Row) string {
	if err := failpoint.InjectID(failpoint.Prepare, row.MessageID); err != nil {
		return err.Error()
	}
	if why := msgcheck.TopicError(row.Topic); why != "" {
		return why
	}
	if why := msgcheck.KeyError(row.Key); why != "" {
		return "invalid business key: " + why
	}
	if why := messageIDError(row.MessageID); why != "" {
		return "invalid message id: " + why
	}
	if row.Oversize {
		return tooLarge(row.PayloadBytes, r.cfg.MaxPayloadBytes)
	}
	return ""
}

// openPayload returns the payload to publish for a routed item and
// leaves in headers those that travel with it: the row's payload, or the
// claim-checked blob's (fetched, or its reference left for the consumer
// as the route says), unsealed when it is sealed, decoded when it is
// base64; the headers that said so are removed. false when it decided
// the item instead: dead, or pending uncharged when a blob or a key
// cannot be had now (see fetchBlob and unseal).
func (r *Relay) openPayload(it *item, headers map[string]string, budget *blobBudget) ([]byte, bool) {
	row := it.row
	ref, claimed, err := claimcheck.ParseHeaders(headers)
	if err != nil {
		it.dead("claim check: " + oneLine(err.Error()))
		return nil, false
	}
	if claimed {
		// The blob holds the payload's bytes as delivered (or the sealed
		// text): the row's payload and transfer encoding are not used.
		claimcheck.RemoveHeaders(headers)
		delete(headers, publisher.HeaderTransferEncode)
	}
	si, sealed := sealHeaders(headers)
	if why := headerError(headers); why != "" {
		it.dead(why)
		return nil, false
	}
	payload := []byte(row.Payload)
	switch {
	case claimed && it.route.ClaimCheck == ClaimReference:
		// The relay never reads the blob: the reference travels, with
		// the seal headers of a sealed blob whatever the route's Sealed,
		// for the consumer to fetch (and open).
		ref.SetHeaders(headers)
		if sealed {
			si.restore(headers)
		}
		sealed, payload = false, nil
	case claimed:
		blob, out := r.fetchBlob(it, ref, budget)
		if out != nil {
			it.decided, it.out = true, *out
			return nil, false
		}
		row.Payload, payload = string(blob), blob
	}
	if sealed {
		// The sealed text is the whole payload, binary or not.
		delete(headers, publisher.HeaderTransferEncode)
		p, out := r.unseal(it, headers, si)
		if out != nil {
			it.decided, it.out = true, *out
			return nil, false
		}
		payload = p
	} else if headers[publisher.HeaderTransferEncode] == "base64" && !claimed {
		b, err := base64.StdEncoding.DecodeString(row.Payload)
		if err != nil {
			it.dead("payload is not valid base64: " + oneLine(err.Error()))
			return nil, false
		}
		payload = b
		delete(headers, publisher.HeaderTransferEncode)
	}
	return payload, true
}

// envelope gives a prepared item the envelope its publisher gets: the
// payload, the headers with the topic, business key and (sniffed when the
// row names none) content type added, the route's destination or the
// topic, and a plausible creation time.
func (r *Relay) envelope(it *item, headers map[string]string, payload []byte) {
	row := it.row
	headers[publisher.HeaderTopic] = row.Topic
	if row.HasKey {
		headers[publisher.HeaderBusinessKey] = row.Key
	}
	if headers[publisher.HeaderContentType] == "" {
		headers[publisher.HeaderContentType] = sniffContentType(payload)
	}
	dest := it.route.Destination
	if dest == "" {
		dest = row.Topic
	}
	row.CreatedAt = r.plausibleCreatedAt(row.CreatedAt)
	it.env = &publisher.Envelope{
		ID:          row.MessageID,
		Topic:       row.Topic,
		Key:         row.Key,
		Destination: dest,
		Payload:     payload,
		Headers:     headers,
		Attempt:     row.Attempts + 1,
		CreatedAt:   row.CreatedAt,
	}
}

// normalizeCounts makes a row's counters usable: a negative attempts is
// 0, a max_attempts of 0 or less is 1 — one attempt, no retry, as the
// relay always gave such a row and as schema version 17 rewrites one on
// MySQL and SQLite. It may run twice on a row.
func normalizeCounts(row *store.Row) {
	row.Attempts = max(row.Attempts, 0)
	row.MaxAttempts = max(row.MaxAttempts, 1)
}

// tooLarge is the reason a payload of n bytes is dead under limit.
func tooLarge(n int64, limit int) string {
	return "payload too large: " + strconv.FormatInt(n, 10) + " bytes, limit " + strconv.Itoa(limit)
}

// messageIDError says why a message id cannot travel ("" when it can):
// the id goes on the wire as a header or property of every destination,
// so it is 1-255 bytes of UTF-8 text without control characters. Ids
// the relay's tables generate are UUIDs; adopted tables may use any text.
func messageIDError(id string) string {
	switch {
	case id == "":
		return "empty"
	case len(id) > msgcheck.MaxFieldLen:
		return "longer than 255 bytes"
	case !utf8.ValidString(id):
		return "not UTF-8 text"
	}
	for _, c := range id {
		if c < ' ' || c == 0x7f {
			return "has a control character"
		}
	}
	return ""
}

// decodeHeaders decodes a row's headers column, or says in one line why
// it cannot ("" when it can). Rows written by the relay's producers hold
// a JSON object of strings; plain SQL may write anything:
//
//   - NULL (read as ""), an empty or blank string and JSON null are no
//     headers;
//   - a JSON number or boolean value is its JSON text ("42", "true"), a
//     null value leaves its header out;
//   - anything else that is not a JSON object of strings, and text that is
//     not UTF-8, is a reason for the row to be dead.
func decodeHeaders(raw string) (map[string]string, string) {
	headers := map[string]string{}
	if raw == "" || raw == "{}" {
		return headers, ""
	}
	if !utf8.ValidString(raw) {
		return nil, "headers are not UTF-8 text"
	}
	// A null value decodes as "" into a map of strings: a row whose text
	// holds null anywhere takes the path below, which leaves it out.
	if err := json.Unmarshal([]byte(raw), &headers); err == nil && !strings.Contains(raw, "null") {
		return headers, ""
	}
	// Off the common path: blank text, JSON null, null values, or values
	// that are not strings.
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" || trimmed == "null" {
		return map[string]string{}, ""
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trimmed), &values); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return nil, "headers are not a JSON object of strings: a JSON " + ute.Value
		}
		return nil, "headers are not a JSON object of strings: " + oneLine(err.Error())
	}
	headers = make(map[string]string, len(values))
	for k, v := range values {
		switch {
		case len(v) == 0:
		case v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, "headers are not a JSON object of strings: " + oneLine(err.Error())
			}
			headers[k] = s
		case string(v) == "null":
		case v[0] == '{':
			return nil, "headers are not a JSON object of strings: the value of " + msgcheck.Quote(k) + " is a JSON object"
		case v[0] == '[':
			return nil, "headers are not a JSON object of strings: the value of " + msgcheck.Quote(k) + " is a JSON array"
		default: // a number, true or false: its JSON text
			headers[k] = string(v)
		}
	}
	return headers, ""
}

// plausibleCreatedAt is t, or the zero time (unknown) when t cannot be
// when the row was written: before 1970, past year 9999 or more than a
// day ahead of the database's clock. Latencies are measured only from a
// known created_at, and publishers leave an unknown one out.
func (r *Relay) plausibleCreatedAt(t time.Time) time.Time {
	if t.Before(time.Unix(0, 0)) || t.Year() > 9999 || t.After(r.clock.at(time.Now()).Add(24*time.Hour)) {
		return time.Time{}
	}
	return t
}

// sniffContentType is the content type of a row that names none, as
// plain SQL writes them: JSON when the payload is JSON, else text (the
// payload column holds text; binary bodies are base64 with their own
// headers). Rows from Producer always name theirs.
func sniffContentType(payload []byte) string {
	if json.Valid(payload) {
		return publisher.DefaultContentType
	}
	return TextContentType
}

// headerError says why a row's headers cannot be published ("" when they
// can): the producer's rules, applied again to rows written with plain SQL.
func headerError(headers map[string]string) string {
	for k := range headers {
		lk := strings.ToLower(k)
		switch {
		case !msgcheck.HeaderName(lk):
			return "invalid header name " + msgcheck.Quote(k)
		case msgcheck.Reserved(lk):
			return "header " + msgcheck.Quote(k) + " is reserved: names starting with " + strconv.Quote(msgcheck.ReservedPrefix) + " are set by the relay"
		}
	}
	return ""
}

// check asks the route's Checker about messages whose last attempt may
// have reached the destination; those it confirms are decided sent.
func (r *Relay) check(ctx context.Context, todo []*item) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, it := range todo {
		suspect := it.row.UnknownOutcome || it.row.ID <= r.own.suspectUpTo(it.row.Partition)
		if !suspect || it.route.Checker == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			defer func() {
				if p := recover(); p != nil {
					// A Checker that panics on a message: an attempt of
					// unknown outcome, so that one it panics on every
					// time goes dead after max_attempts.
					text, stack := recovered(p)
					r.logPanic("outbox relay: checking whether a message was delivered panicked", text, stack,
						"route", it.route.name, "message_id", it.row.MessageID)
					it.decided = true
					it.out = r.failure(it.route, it, unknownErr(errors.New("checking delivery panicked: "+text)))
				}
			}()
			ok, err := it.route.Checker.Delivered(ctx, it.env)
			if err != nil {
				if ctx.Err() != nil {
					return // shutting down: the message stays as it was
				}
				// The destination could not say: ask again later rather
				// than risk a second effect, charging nothing (it is not
				// the message's fault) and keeping the outcome unknown.
				r.log.Debug("outbox relay: could not check whether a message was delivered; asking again later", "message_id", it.row.MessageID, "err", redact.Text(err.Error()))
				it.decided = true
				it.out = store.Outcome{ID: it.row.ID, Status: store.StatusPending, Delay: checkAgainAfter(int(it.route.checkFails.Add(1))),
					Error: "checking delivery: " + redact.Text(oneLine(err.Error())), Unknown: true}
				return
			}
			it.route.checkFails.Store(0)
			if ok {
				it.decided = true
				it.out = store.Outcome{ID: it.row.ID, Status: store.StatusSent, CountAttempt: true}
				it.confirmed = time.Now()
			} else {
				it.checked = true
			}
		}()
	}
	wg.Wait()
}

// checkAgainAfter is how long a message waits when its route's Checker
// could not say whether it was delivered, after fails such failures in a
// row: 1 s doubling, at most a minute.
func checkAgainAfter(fails int) time.Duration {
	return min(time.Second<<min(max(fails-1, 0), 6), time.Minute)
}

// delivery is what the waves of one batch share.
type delivery struct {
	wg sync.WaitGroup
	// aborted: shutdown cut the publish short.
	aborted *atomic.Bool
	// ok: a message of the route was confirmed in this batch (a failure
	// in a later wave is then the message's); one entry per route of the
	// batch, set before the waves.
	ok map[*routeState]*atomic.Bool
}

// publishWave publishes undecided items, grouped by route, concurrently.
func (r *Relay) publishWave(ctx context.Context, todo []*item, rd *delivery) {
	groups := map[*routeState][]*item{}
	for _, it := range todo {
		if !it.decided {
			groups[it.route] = append(groups[it.route], it)
		}
	}
	if len(groups) == 1 {
		// One route (the usual case): no goroutine to hand over to, which
		// a wave of a few keys, one round trip each, would pay every time.
		for rs, group := range groups {
			r.publishRoute(ctx, rs, group, rd)
		}
		return
	}
	var wg sync.WaitGroup
	var routePanic panicBox
	for rs, group := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			routePanic.run(func() { r.publishRoute(ctx, rs, group, rd) })
		}()
	}
	wg.Wait()
	routePanic.raise()
}

// publishRoute publishes one route's items as its health and limits
// allow: nothing while it is down or held but the probe, then calls of at
// most the free in-flight slots and the rate's burst each. Items the
// limits leave no time for stay undecided, for the next round.
func (r *Relay) publishRoute(ctx context.Context, rs *routeState, group []*item, rd *delivery) {
	h := rs.health
	var blocked map[string]bool // runs: keys whose message failed in an earlier call
	for len(group) > 0 && !rd.aborted.Load() {
		if len(blocked) > 0 {
			// A key's run split over calls: what follows a failure stays
			// undecided, for a later round.
			group = slices.DeleteFunc(group, func(it *item) bool { return it.row.HasKey && blocked[it.row.Key] })
			if len(group) == 0 {
				return
			}
		}
		mode, wait, why := h.admit(time.Now())
		if mode == admitWait {
			deferItems(rs, group, wait, why)
			return
		}
		n := len(group)
		if mode == admitProbe {
			n = 1
		}
		if b := h.burst(); b > 0 {
			n = min(n, b)
		}
		if n = h.acquire(ctx, n); n == 0 {
			h.unprobe(mode == admitProbe)
			return
		}
		if err := h.paceN(ctx, n); err != nil {
			h.release(n)
			h.unprobe(mode == admitProbe)
			return
		}
		r.publishGroup(ctx, rs, group[:n], rd, mode == admitProbe)
		h.release(n)
		if rs.Runs && n < len(group) {
			for _, it := range group[:n] {
				if it.row.HasKey && (!it.decided || it.out.Status == store.StatusPending) {
					if blocked == nil {
						blocked = map[string]bool{}
					}
					blocked[it.row.Key] = true
				}
			}
		}
		group = group[n:]
	}
}

// deferItems puts items back, uncharged, for wait.
func deferItems(rs *routeState, items []*item, wait time.Duration, why string) {
	for _, it := range items {
		it.decided = true
		it.out = store.Outcome{ID: it.row.ID, Status: store.StatusPending, Delay: wait, Error: "route " + rs.name + ": " + why, Unknown: it.uncertain()}
	}
}

// publishGroup publishes one call's worth of a route's items and settles
// their outcomes in memory, telling the route's health how it went.
func (r *Relay) publishGroup(ctx context.Context, rs *routeState, group []*item, rd *delivery, probe bool) {
	aborted := rd.aborted
	batch := make([]*publisher.Envelope, len(group))
	spans := make([]trace.Span, len(group))
	for i, it := range group {
		batch[i] = it.env
		spans[i] = r.startSend(rs, it)
	}
	start := time.Now()
	errs := r.publishContained(ctx, rs, batch)
	confirmed := time.Now()
	if rs.publishDur != nil {
		rs.publishDur.Observe(confirmed.Sub(start).Seconds())
	}
	if len(errs) != len(batch) {
		bad := unknownErr(errors.New("publisher returned " + strconv.Itoa(len(errs)) + " results for " + strconv.Itoa(len(batch)) + " messages"))
		errs = make([]error, len(batch))
		for i := range errs {
			errs[i] = bad
		}
	}
	var held, passed []bool
	if rs.Runs {
		held, passed = r.runOrder(rs, group, errs)
	}
	results := make([]result, 0, len(group))
	for i, it := range group {
		endSend(spans[i], errs[i])
		if errs[i] != nil && aborted.Load() {
			continue // shutdown cut the publish short: leave it for the next owner
		}
		if held != nil && held[i] {
			continue // failed with an earlier message of its key: no news of the route
		}
		results = append(results, result{err: errs[i], fresh: it.row.Attempts == 0 && !it.charged, id: it.row.ID})
	}
	charge, wait, tr := rs.health.observe(confirmed, results, callInfo{start: start, slots: len(group), probe: probe, okBefore: rd.ok[rs].Load()})
	for _, res := range results {
		if res.err == nil {
			rd.ok[rs].Store(true)
			break
		}
	}
	r.transition(rs, tr)
	for i, it := range group {
		err := errs[i]
		switch {
		case err == nil:
			it.decided = true
			it.out = store.Outcome{ID: it.row.ID, Status: store.StatusSent, CountAttempt: true}
			it.confirmed = confirmed
		case aborted.Load():
		case held != nil && held[i]:
			// Not sent because an earlier message of its key failed:
			// nothing is charged, and it waits behind that message (the
			// read skips a key whose earlier message waits).
			it.decided = true
			cls, _ := classOf(err)
			it.out = store.Outcome{ID: it.row.ID, Status: store.StatusPending, Unknown: cls == publisher.ClassUnknown || it.uncertain(),
				Error: "not counted (an earlier message of its key failed in the same call): " + redact.Text(oneLine(err.Error()))}
		case passed != nil && passed[i] && class(err) == publisher.ClassPermanent:
			// A later message of its key is at the destination already:
			// only going dead keeps the key's order.
			it.decided = true
			it.out = store.Outcome{ID: it.row.ID, Status: store.StatusDead, Error: redact.Text(oneLine(err.Error())), CountAttempt: true}
		case !charge || retryAfter(err) > 0:
			it.decided = true
			cls, after := classOf(err)
			after = rs.health.holdWait(after)
			if probe {
				// A failed probe comes due a little after the messages
				// held back, so that the next probe is another message:
				// one that fails on its own cannot keep a destination
				// that is back marked down.
				after = max(after, wait+rs.health.probeMin)
			}
			it.out = store.Outcome{ID: it.row.ID, Status: store.StatusPending, Delay: max(wait, after), Unknown: cls == publisher.ClassUnknown || it.uncertain(),
				Error: "not counted (route " + rs.name + " down or holding): " + redact.Text(oneLine(err.Error()))}
		case class(err) == publisher.ClassUnavailable:
			// The route is up (others went through) but this message
			// could not reach its part of the destination: a connection
			// still coming back, a partition without a leader, a queue of
			// its own missing. Not the message's fault: it is not
			// charged, and waits longer each time it fails so.
			it.decided = true
			it.out = store.Outcome{ID: it.row.ID, Status: store.StatusPending, Delay: rs.health.unavailableWait(it.row.ID), Unknown: it.uncertain(),
				Error: "not counted (unavailable on route " + rs.name + "): " + redact.Text(oneLine(err.Error()))}
		default:
			it.decided = true
			it.out = r.failure(rs, it, err)
		}
	}
}

// runOrder reads the results of a call that held runs of keys: held[i]
// when message i failed after an earlier message of its key failed in the
// call (the publisher fails the rest of a run), passed[i] when message i
// failed and a later message of its key was confirmed anyway. That is
// allowed only when i's failure is permanent; anything else broke the
// publisher's promise, and the key's order with it, which is logged.
func (r *Relay) runOrder(rs *routeState, group []*item, errs []error) (held, passed []bool) {
	held, passed = make([]bool, len(group)), make([]bool, len(group))
	failed := map[string]int{} // key → index of its first failure
	for i, it := range group {
		if !it.row.HasKey {
			continue
		}
		first, ok := failed[it.row.Key]
		switch {
		case !ok && errs[i] != nil:
			failed[it.row.Key] = i
		case !ok:
		case errs[i] != nil:
			held[i] = true
		default:
			passed[first] = true
			if class(errs[first]) != publisher.ClassPermanent {
				r.log.Error("outbox relay: the publisher confirmed a message after an earlier message of its key failed; the key's order is broken",
					"relay", r.id, "route", rs.name, "message_id", it.row.MessageID, "failed_message_id", group[first].row.MessageID)
			}
		}
	}
	return held, passed
}

func retryAfter(err error) time.Duration {
	_, d := classOf(err)
	return d
}

// publishContained calls the route's publisher and turns a panic into an
// error instead of a crash: a message that makes its publisher panic would
// otherwise take down every relay that reads it, again and again. After a
// panic in a call with several messages, each is published again on its
// own, so only the message that panics fails; it is retried like an
// attempt of unknown outcome and goes dead after its max_attempts.
func (r *Relay) publishContained(ctx context.Context, rs *routeState, batch []*publisher.Envelope) []error {
	errs, p := r.callPublisher(ctx, rs, batch)
	if p == nil {
		return errs
	}
	if len(batch) == 1 {
		r.logPanic("outbox relay: publisher panicked on a message", p.text, p.stack, "route", rs.name, "message_id", batch[0].ID)
		return []error{panicError(p.text)}
	}
	r.logPanic("outbox relay: publisher panicked; publishing its messages one by one", p.text, p.stack, "route", rs.name, "messages", len(batch))
	errs = make([]error, len(batch))
	for i := range batch {
		one, p := r.callPublisher(ctx, rs, batch[i:i+1])
		switch {
		case p != nil:
			errs[i] = panicError(p.text)
			r.logPanic("outbox relay: publisher panicked on a message", p.text, p.stack, "route", rs.name, "message_id", batch[i].ID)
		case len(one) == 1:
			errs[i] = one[0]
		default:
			errs[i] = unknownErr(errors.New("publisher returned " + strconv.Itoa(len(one)) + " results for 1 message"))
		}
	}
	return errs
}

// publisherPanic is a recovered panic of a publisher: its value as one
// line, and its stack when its place is new (see recovered).
type publisherPanic struct{ text, stack string }

// callPublisher publishes batch, recovering a panic of the publisher.
func (r *Relay) callPublisher(ctx context.Context, rs *routeState, batch []*publisher.Envelope) (errs []error, panicked *publisherPanic) {
	defer func() {
		if p := recover(); p != nil {
			text, stack := recovered(p)
			panicked = &publisherPanic{text: text, stack: stack}
		}
	}()
	return failpoint.PublishBatch(ctx, batch, func(e *publisher.Envelope) string { return e.ID }, envelopeKey, rs.Publisher.Publish), nil
}

// panicError is the failure recorded for a message whose publish panicked
// with text: the panic may have come after the message left, so the
// outcome is unknown.
func panicError(text string) error {
	return unknownErr(errors.New("publisher panicked: " + text))
}

// failure turns a publish error the message is charged for into an
// outcome: dead for a permanent class, else a retry until max_attempts or
// the route's retry budget by age (budgetSpent), whichever comes first.
func (r *Relay) failure(rs *routeState, it *item, err error) store.Outcome {
	row := it.row
	cls, after := classOf(err)
	msg := redact.Text(oneLine(err.Error()))
	attempt := it.attempt()
	switch cls {
	case publisher.ClassPermanent:
		return store.Outcome{ID: row.ID, Status: store.StatusDead, Error: msg, CountAttempt: true}
	}
	if attempt >= row.MaxAttempts {
		return store.Outcome{ID: row.ID, Status: store.StatusDead, CountAttempt: true,
			Error: "max attempts (" + strconv.Itoa(row.MaxAttempts) + ") reached: " + msg}
	}
	policy := r.cfg.Retry
	if rs.Retry != nil {
		policy = *rs.Retry
	}
	delay := max(policy.Delay(attempt), after)
	if out, ok := r.budgetSpent(rs, row, attempt, delay, msg); ok {
		return out
	}
	return store.Outcome{ID: row.ID, Status: store.StatusPending, Delay: delay, Error: msg, CountAttempt: true, Unknown: cls == publisher.ClassUnknown || it.uncertain()}
}

// class is err's class.
func class(err error) publisher.ErrorClass {
	c, _ := classOf(err)
	return c
}

func envelopeKey(e *publisher.Envelope) string { return e.Key }
