package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/store"
)

// Search limits.
const (
	defaultSearchLimit = 50
	maxSearchLimit     = 500
	defaultAuditLimit  = 100
	maxAuditLimit      = 1000
	// maxBulkIDs bounds the ids of one bulk request.
	maxBulkIDs = 1000
	// maxTextLen is the longest topic or key (the columns' width).
	maxTextLen = 255
)

// apiFunc handles an authorized /api/v1 request; actor is the token's
// name ("" for an anonymous read).
type apiFunc func(w http.ResponseWriter, r *http.Request, actor string)

// api wraps fn with authentication and the query parameter check: params
// lists the parameters fn accepts; any other is a 400.
func (s *Server) api(mutation bool, params []string, fn apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		actor, ok := s.authorize(w, r, mutation)
		if !ok {
			return
		}
		q := r.URL.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.Contains(params, k) {
				msg := fmt.Sprintf("unknown query parameter %q", k)
				if len(params) > 0 {
					msg += " (want " + strings.Join(params, ", ") + ")"
				} else {
					msg += "; this endpoint takes none"
				}
				writeError(w, http.StatusBadRequest, msg)
				return
			}
			if len(q[k]) > 1 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter %q is given %d times", k, len(q[k])))
				return
			}
			if v := q[k][0]; !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter %q is not UTF-8 text", k))
				return
			}
		}
		fn(w, r, actor)
	}
}

// writeJSON writes v as the JSON answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes {"error": msg} with msg on one line.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": strings.Join(strings.Fields(msg), " ")})
}

func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

// failed answers a database error with 500 and logs it.
func (s *Server) failed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	s.log.Error("outbox admin: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "database: "+err.Error())
}

// readBody reads the whole request body, answering 413 when it is over
// MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d KiB", MaxBodyBytes>>10))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return nil, false
	}
	return b, true
}

// ---- stats and history ------------------------------------------------

// sampledStats is the answer of GET /api/v1/stats.
type sampledStats struct {
	*store.StatsJSON
	SampledAt time.Time `json:"sampled_at"`
	// Table describes the adopted table the server shows; absent on
	// outbox_messages.
	Table *tableJSON `json:"table,omitempty"`
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request, _ string) {
	st, err := s.view().st.Stats(r.Context())
	if err != nil {
		s.failed(w, r, err)
		return
	}
	views, err := s.view().st.RouteHealth(r.Context())
	if err != nil {
		s.failed(w, r, err)
		return
	}
	now := time.Now().UTC()
	table, err := s.tableStats(r.Context())
	if err != nil {
		s.failed(w, r, err)
		return
	}
	var lister interface {
		Relays(ctx context.Context) ([]store.Relay, error)
	}
	switch {
	case s.view().full != nil:
		lister = s.view().full
	case s.adopted != nil:
		lister = s.adopted
	}
	var live []store.Relay
	if lister != nil {
		relays, err := lister.Relays(r.Context())
		if err != nil {
			s.failed(w, r, err)
			return
		}
		live, _ = store.LiveRelays(relays)
	}
	writeJSON(w, http.StatusOK, sampledStats{
		StatsJSON: store.NewStatsJSON(st, store.SummarizeRoutes(views), live, now, time.Millisecond),
		SampledAt: now, Table: table,
	})
}

func (s *Server) history(w http.ResponseWriter, _ *http.Request, _ string) {
	writeJSON(w, http.StatusOK, s.hist.snapshot())
}

// ---- messages ---------------------------------------------------------

// messageJSON is a message in answers; Payload and Headers only in the
// answer for one message.
type messageJSON struct {
	ID             int64           `json:"id"`
	MessageID      string          `json:"message_id"`
	Topic          string          `json:"topic"`
	BusinessKey    *string         `json:"business_key"`
	Status         string          `json:"status"`
	TableStatus    string          `json:"table_status,omitempty"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"max_attempts"`
	CreatedAt      time.Time       `json:"created_at"`
	AvailableAt    time.Time       `json:"available_at"`
	SentAt         *time.Time      `json:"sent_at"`
	ConsumedAt     *time.Time      `json:"consumed_at"`
	LastError      *string         `json:"last_error"`
	PayloadPreview string          `json:"payload_preview"`
	Payload        *string         `json:"payload,omitempty"`
	Headers        json.RawMessage `json:"headers,omitempty"`
	// DiedAt is when a dead message of outbox_messages died: the time of
	// death the relay records in available_at (schema version 17; for
	// one that died before, when its last attempt fell due).
	DiedAt *time.Time `json:"died_at,omitempty"`
	// Sealed describes a sealed payload (package seal), whose plain text
	// payload shows only to a token with PermReadPayloads.
	Sealed *sealedJSON `json:"sealed,omitempty"`
	// ClaimCheck describes a payload kept in a blob store (package
	// claimcheck); Payload then describes it instead of the row's empty
	// payload.
	ClaimCheck *claimCheckJSON `json:"claim_check,omitempty"`
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func toJSON(r store.Record, full bool) messageJSON {
	m := messageJSON{
		ID: r.ID, MessageID: r.MessageID, Topic: r.Topic, BusinessKey: r.Key, Status: r.Status, TableStatus: r.TableStatus,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
		CreatedAt: r.CreatedAt.UTC(), AvailableAt: r.AvailableAt.UTC(),
		SentAt: utcPtr(r.SentAt), ConsumedAt: utcPtr(r.ConsumedAt), LastError: r.LastError,
		PayloadPreview: preview(r.Payload),
	}
	if (r.Status == store.StatusDead || r.Status == store.StatusExpired) && r.TableStatus == "" {
		died := r.AvailableAt.UTC()
		if r.CreatedAt.After(r.AvailableAt) {
			died = r.CreatedAt.UTC()
		}
		m.DiedAt = &died
	}
	if full {
		p := r.Payload
		m.Payload = &p
		m.Headers = headersJSON(r.Headers)
	}
	return m
}

// preview is the first store.PreviewChars characters of payload.
func preview(payload string) string {
	if utf8.RuneCountInString(payload) <= store.PreviewChars {
		return payload
	}
	return string([]rune(payload)[:store.PreviewChars])
}

// headersJSON is the stored headers as a JSON object, or, when the text is
// not a JSON object (a foreign producer's mistake), that text as a string.
func headersJSON(h string) json.RawMessage { return store.HeadersJSON(h) }

var searchParams = []string{"status", "topic", "key", "id", "since", "until", "limit", "before"}

var statuses = []string{store.StatusPending, store.StatusSent, store.StatusConsumed, store.StatusDead, store.StatusExpired}

func parseStatus(v string) (string, error) {
	if slices.Contains(statuses, v) {
		return v, nil
	}
	return "", fmt.Errorf("unknown status %q (want pending, sent, consumed, dead or expired)", v)
}

func parseTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %q is not an RFC 3339 time (e.g. 2026-11-29T16:00:00Z)", name, v)
	}
	return t, nil
}

func parseText(name, v string) (string, error) {
	if utf8.RuneCountInString(v) > maxTextLen {
		return "", fmt.Errorf("%s is longer than %d characters", name, maxTextLen)
	}
	return v, nil
}

// parseMessageID checks that v is a UUID and returns it in lower case.
func parseMessageID(v string) (string, error) {
	u, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		return "", fmt.Errorf("message id %q is not a UUID (like 0190a6e4-5b1c-7d2e-8f3a-4b5c6d7e8f90)", v)
	}
	return u.String(), nil
}

func parseLimit(v string, def, most int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("limit must be a whole number from 1 to %d, not %q", most, v)
	}
	return n, nil
}

// parseSearch reads the search parameters; parseID checks the id.
func parseSearch(q url.Values, parseID func(string) (string, error)) (store.Search, error) {
	var s store.Search
	var err error
	if v := q.Get("status"); v != "" {
		if s.Status, err = parseStatus(v); err != nil {
			return s, err
		}
	}
	if s.Topic, err = parseText("topic", q.Get("topic")); err != nil {
		return s, err
	}
	if s.Key, err = parseText("key", q.Get("key")); err != nil {
		return s, err
	}
	if v := q.Get("id"); v != "" {
		if s.MessageID, err = parseID(v); err != nil {
			return s, err
		}
	}
	if v := q.Get("since"); v != "" {
		if s.Since, err = parseTime("since", v); err != nil {
			return s, err
		}
	}
	if v := q.Get("until"); v != "" {
		if s.Until, err = parseTime("until", v); err != nil {
			return s, err
		}
	}
	if !s.Since.IsZero() && !s.Until.IsZero() && !s.Since.Before(s.Until) {
		return s, errors.New("since must be before until")
	}
	if s.Limit, err = parseLimit(q.Get("limit"), defaultSearchLimit, maxSearchLimit); err != nil {
		return s, err
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return s, fmt.Errorf("before must be a positive row id (next_before of the previous page), not %q", v)
		}
		s.Before = n
	}
	return s, nil
}

type searchJSON struct {
	Messages   []messageJSON `json:"messages"`
	NextBefore *int64        `json:"next_before"`
}

func (s *Server) search(w http.ResponseWriter, r *http.Request, _ string) {
	q, err := parseSearch(r.URL.Query(), s.parseID)
	if err == nil {
		err = s.adoptedSearch(q)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit := q.Limit
	q.Limit++ // one more tells whether there is a next page
	recs, err := s.view().st.Search(r.Context(), q)
	if err != nil {
		s.failed(w, r, err)
		return
	}
	out := searchJSON{Messages: make([]messageJSON, 0, min(len(recs), limit))}
	if len(recs) > limit {
		recs = recs[:limit]
		next := recs[limit-1].ID
		out.NextBefore = &next
	}
	for _, rec := range recs {
		m := toJSON(rec, false)
		listView(&m, rec.Headers)
		out.Messages = append(out.Messages, m)
	}
	writeJSON(w, http.StatusOK, out)
}

// messageID reads and checks the {message_id} path segment.
func (s *Server) messageID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, err := s.parseID(r.PathValue("message_id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return id, true
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, token string) {
	id, ok := s.messageID(w, r)
	if !ok {
		return
	}
	rec, err := s.view().st.Get(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "no message with id "+id)
	case err != nil:
		s.failed(w, r, err)
	default:
		m := toJSON(rec, true)
		if h := rowHeaders(rec.Headers); h != nil {
			claimCheckView(&m, h)
			s.sealedView(r.Context(), &m, h, token)
		}
		writeJSON(w, http.StatusOK, m)
	}
}

// ---- changes ----------------------------------------------------------

// changeJSON answers a change of one message.
type changeJSON struct {
	MessageID string `json:"message_id"`
	// Status is the message's status afterwards ("" once discarded).
	Status  string `json:"status,omitempty"`
	Changed bool   `json:"changed"`
}

// one runs a change of one message and answers it: 404 for an unknown
// message, 409 when its status does not allow the change.
func (s *Server) one(w http.ResponseWriter, r *http.Request, actor string, action store.BulkAction, after string, change func(ctx context.Context, id string) (bool, error)) {
	if _, ok := readBody(w, r); !ok {
		return
	}
	id, ok := s.messageID(w, r)
	if !ok {
		return
	}
	changed, err := change(r.Context(), id)
	var se *store.StatusError
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "no message with id "+id)
		return
	case errors.As(err, &se):
		writeError(w, http.StatusConflict, s.conflict(action, id, se.Status))
		return
	case err != nil:
		s.failed(w, r, err)
		return
	}
	if changed {
		if action == store.ActionRequeue {
			s.wake(r.Context())
		}
		if !s.audited(w, r, actor, action, id, 1) {
			return
		}
	}
	writeJSON(w, http.StatusOK, changeJSON{MessageID: id, Status: after, Changed: changed})
}

func (s *Server) conflict(action store.BulkAction, id, status string) string {
	switch {
	case s.adopted != nil:
		return fmt.Sprintf("message %s is %s; only dead rows of an adopted table can be requeued", id, status)
	case action == store.ActionRequeue:
		return fmt.Sprintf("message %s is %s; only dead, expired or pending messages can be requeued", id, status)
	case action == store.ActionDiscard:
		return fmt.Sprintf("message %s is %s; only dead or expired messages can be discarded", id, status)
	default:
		return fmt.Sprintf("message %s is %s; only sent messages can be marked consumed", id, status)
	}
}

func (s *Server) requeueOne(w http.ResponseWriter, r *http.Request, actor string) {
	s.one(w, r, actor, store.ActionRequeue, store.StatusPending, func(ctx context.Context, id string) (bool, error) {
		return true, s.view().st.RequeueOne(ctx, id)
	})
}

func (s *Server) discardOne(w http.ResponseWriter, r *http.Request, actor string) {
	if s.refuse(w, "discarding") {
		return
	}
	s.one(w, r, actor, store.ActionDiscard, "", func(ctx context.Context, id string) (bool, error) {
		return true, s.view().full.DiscardOne(ctx, id)
	})
}

func (s *Server) consumeOne(w http.ResponseWriter, r *http.Request, actor string) {
	if s.refuse(w, "marking consumed") {
		return
	}
	s.one(w, r, actor, store.ActionConsumed, store.StatusConsumed, s.view().full.ConsumeOne)
}

// wake tells relays that requeued messages are ready. Relays poll anyway;
// this only shortens the wait.
func (s *Server) wake(ctx context.Context) {
	s.backend.Local.Wake()
	if s.backend.Notify != nil {
		if err := s.backend.Notify(context.WithoutCancel(ctx)); err != nil {
			s.log.Debug("outbox admin: notifying relays failed; they find the messages at their next poll", "err", err)
		}
	}
}

// audited records a change in outbox_audit and logs it; when the row
// cannot be written it answers 500 and returns false.
func (s *Server) audited(w http.ResponseWriter, r *http.Request, actor string, action store.BulkAction, target string, count int64) bool {
	s.log.Info("outbox admin: "+string(action), "actor", actor, "target", target, "count", count)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	err := s.view().st.InsertAudit(ctx, store.AuditEntry{Actor: actor, Action: string(action), Target: target, Count: count})
	if err != nil {
		s.log.Error("outbox admin: writing the audit row failed", "actor", actor, "action", action, "target", target, "count", count, "err", err)
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s changed %d %s, but the audit row could not be written (has 'outbox migrate' been run?): %v",
			action, count, plural(count), err))
		return false
	}
	return true
}

func plural(n int64) string {
	if n == 1 {
		return "message"
	}
	return "messages"
}

// bulkRequest is the body of a bulk change.
type bulkRequest struct {
	Filter *bulkFilterJSON `json:"filter"`
	All    bool            `json:"all"`
	DryRun bool            `json:"dry_run"`
	// Archive and Yes are replay's: also the archive table, and more
	// than store.DefaultReplayMax messages.
	Archive bool `json:"archive"`
	Yes     bool `json:"yes"`
}

type bulkFilterJSON struct {
	Status string   `json:"status,omitempty"`
	Topic  string   `json:"topic,omitempty"`
	Key    string   `json:"key,omitempty"`
	IDs    []string `json:"ids,omitempty"`
	Since  string   `json:"since,omitempty"`
	Until  string   `json:"until,omitempty"`
}

// auditTarget is the filter of a bulk change as recorded in the audit log.
type auditTarget struct {
	bulkFilterJSON
	All     bool `json:"all,omitempty"`
	Archive bool `json:"archive,omitempty"`
}

type bulkJSON struct {
	Matched int64 `json:"matched"`
	Changed int64 `json:"changed"`
	DryRun  bool  `json:"dry_run"`
}

// parseBulk decodes and checks a bulk request body.
func parseBulk(action store.BulkAction, body []byte) (store.BulkFilter, auditTarget, bulkRequest, error) {
	var req bulkRequest
	var f store.BulkFilter
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return f, auditTarget{}, req, errors.New(`request body: want a JSON object like {"filter": {"topic": "order.created"}, "dry_run": true}`)
		}
		return f, auditTarget{}, req, fmt.Errorf("request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return f, auditTarget{}, req, errors.New("request body: unexpected data after the JSON object")
	}
	if req.Filter == nil {
		req.Filter = &bulkFilterJSON{}
	}
	in := *req.Filter
	var err error
	if in.Status != "" {
		if f.Status, err = parseStatus(in.Status); err != nil {
			return f, auditTarget{}, req, fmt.Errorf("filter.status: %w", err)
		}
	}
	if f.Topic, err = parseText("filter.topic", in.Topic); err != nil {
		return f, auditTarget{}, req, err
	}
	if f.Key, err = parseText("filter.key", in.Key); err != nil {
		return f, auditTarget{}, req, err
	}
	if len(in.IDs) > maxBulkIDs {
		return f, auditTarget{}, req, fmt.Errorf("filter.ids has %d ids; at most %d per request", len(in.IDs), maxBulkIDs)
	}
	for i, v := range in.IDs {
		id, err := parseMessageID(v)
		if err != nil {
			return f, auditTarget{}, req, fmt.Errorf("filter.ids[%d]: %w", i, err)
		}
		in.IDs[i] = id
		f.MessageIDs = append(f.MessageIDs, id)
	}
	if in.Since != "" {
		if f.Since, err = parseTime("filter.since", in.Since); err != nil {
			return f, auditTarget{}, req, err
		}
	}
	if in.Until != "" {
		if f.Until, err = parseTime("filter.until", in.Until); err != nil {
			return f, auditTarget{}, req, err
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, auditTarget{}, req, errors.New("filter.since must be before filter.until")
	}
	if req.Yes && action != store.ActionReplay {
		return f, auditTarget{}, req, errors.New(`"yes" applies to replay only`)
	}
	if req.Archive && action != store.ActionReplay {
		return f, auditTarget{}, req, errors.New(`"archive" applies to replay only`)
	}
	f.Archive = req.Archive
	if err := store.CheckBulk(action, &f); err != nil {
		return f, auditTarget{}, req, fmt.Errorf("filter.status: %w", err)
	}
	in.Status = f.Status
	scoped := f.Topic != "" || f.Key != "" || len(f.MessageIDs) > 0 || !f.Since.IsZero() || !f.Until.IsZero()
	if !scoped && !req.All {
		return f, auditTarget{}, req, errors.New(`a bulk change needs a filter (topic, key, ids, since or until) or "all": true`)
	}
	return f, auditTarget{bulkFilterJSON: in, All: req.All, Archive: req.Archive}, req, nil
}

func (s *Server) bulk(action store.BulkAction) apiFunc {
	return func(w http.ResponseWriter, r *http.Request, actor string) {
		if s.refuse(w, "bulk "+string(action)) {
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		f, target, req, err := parseBulk(action, body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		matched, err := s.view().full.CountBulk(r.Context(), action, f)
		if err != nil {
			s.failed(w, r, err)
			return
		}
		if req.DryRun {
			writeJSON(w, http.StatusOK, bulkJSON{Matched: matched, DryRun: true})
			return
		}
		if action == store.ActionReplay && !req.Yes && matched > store.DefaultReplayMax {
			writeError(w, http.StatusConflict, fmt.Sprintf(`replay would change %d messages, more than %d; send "yes": true to replay them all`, matched, store.DefaultReplayMax))
			return
		}
		changed, err := s.view().full.Bulk(r.Context(), action, f, store.BulkOptions{})
		if changed > 0 && (action == store.ActionRequeue || action == store.ActionReplay) {
			s.wake(r.Context())
		}
		tb, _ := json.Marshal(target)
		if !s.audited(w, r, actor, action, string(tb), changed) {
			return
		}
		if err != nil {
			s.failed(w, r, fmt.Errorf("%s stopped after changing %d %s: %w", action, changed, plural(changed), err))
			return
		}
		writeJSON(w, http.StatusOK, bulkJSON{Matched: matched, Changed: changed})
	}
}

// ---- audit ------------------------------------------------------------

type auditJSON struct {
	Entries []auditEntryJSON `json:"entries"`
}

type auditEntryJSON struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Count  int64     `json:"count"`
}

func (s *Server) audit(w http.ResponseWriter, r *http.Request, _ string) {
	limit, err := parseLimit(r.URL.Query().Get("limit"), defaultAuditLimit, maxAuditLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	es, err := s.view().st.Audit(r.Context(), limit)
	if err != nil {
		s.failed(w, r, err)
		return
	}
	out := auditJSON{Entries: make([]auditEntryJSON, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, auditEntryJSON{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Target: e.Target, Count: e.Count})
	}
	writeJSON(w, http.StatusOK, out)
}
