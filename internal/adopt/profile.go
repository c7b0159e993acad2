// Package adopt describes local message tables an application already
// writes, so that the relay can deliver from them: the built-in profiles
// of the common hand-made tables, or any other table's mapping (read from
// YAML by package adoptyaml). A Profile names the table's columns and
// status values; package adoptstore turns it into SQL.
package adopt

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Profile maps a local message table onto what the relay reads and
// writes. Column fields hold column names; "" means the table has no
// such column.
type Profile struct {
	// Name is the built-in profile's name or the YAML file's path.
	Name  string
	Table string

	ID        string // row id: an integer primary key, increasing
	MessageID string // "": derived from the table and the row id
	Topic     string // "": every row has FixedTopic
	Key       string // "": no per-key order
	Payload   string
	Headers   string            // a JSON object of strings
	HeaderCol map[string]string // header name → column, e.g. "tag" → tag

	Status string
	// The status values; Dead may equal Failed, then a failed row whose
	// attempts are used up is dead. Pending may equal Failed. Consumed
	// is optional.
	Pending, Sent, Failed, Dead, Consumed string

	Attempts    string
	MaxAttempts string // "": every row has FixedMaxAttempts
	NextAttempt string // "": rows are due at once
	Error       string // "": reasons are not recorded
	CreatedAt   string // "": latency figures count from the read
	UpdatedAt   string // set to the time of every write back

	FixedTopic       string
	FixedMaxAttempts int
}

// DeadIsFailed reports whether the table's dead state is its failed
// status with the attempts used up (no status value of its own).
func (p *Profile) DeadIsFailed() bool { return p.Dead == p.Failed }

// Builtin names the built-in profiles.
var Builtin = []string{"laravel", "spring", "codes"}

// BuiltinProfile returns the built-in profile name, nil when there is
// none.
func BuiltinProfile(name string) *Profile {
	switch name {
	case "laravel":
		// local_messages of the Laravel guide: no message id (derived),
		// no key, retries while retry_times < max_retry_times; a failed
		// row whose retries are used up is dead.
		return &Profile{
			Name: name, Table: "local_messages",
			ID: "id", Topic: "topic", Payload: "payload",
			Status: "status", Pending: "pending", Sent: "sent", Failed: "failed", Dead: "failed",
			Attempts: "retry_times", MaxAttempts: "max_retry_times", NextAttempt: "next_retry_at",
			CreatedAt: "created_at", UpdatedAt: "updated_at",
		}
	case "spring":
		// t_local_message of the Spring/RocketMQ write-up: ordered by
		// business_key, tag travels as a header.
		return &Profile{
			Name: name, Table: "t_local_message",
			ID: "id", MessageID: "message_id", Topic: "topic", Key: "business_key", Payload: "payload",
			HeaderCol: map[string]string{"tag": "tag"},
			Status:    "status", Pending: "PENDING", Sent: "SENT", Failed: "FAILED", Dead: "FAILED", Consumed: "CONSUMED",
			Attempts: "retry_count", MaxAttempts: "max_retry", NextAttempt: "next_retry_time", Error: "error_msg",
			CreatedAt: "create_time", UpdatedAt: "update_time",
		}
	case "codes":
		// local_message of the design note: status codes 0 pending,
		// 1 sent, 2 failed, 3 consumed; no max-retry column.
		return &Profile{
			Name: name, Table: "local_message",
			ID: "id", MessageID: "msg_id", Topic: "topic", Payload: "msg_content",
			Status: "status", Pending: "0", Sent: "1", Failed: "2", Dead: "2", Consumed: "3",
			Attempts: "retry_count", NextAttempt: "next_retry_time",
			CreatedAt: "create_time", UpdatedAt: "update_time",
			FixedMaxAttempts: DefaultMaxAttempts,
		}
	}
	return nil
}

// DefaultMaxAttempts is the attempts a row of a table without a
// max-attempts column gets.
const DefaultMaxAttempts = 10

var (
	identRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	valueRE  = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	headerRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
)

// Validate checks p: names are identifiers, the required columns and
// status values are there and the values tell the states apart. Its
// errors are one line each.
func (p *Profile) Validate() error {
	if p.Table == "" {
		return errors.New("table: missing")
	}
	if !identRE.MatchString(p.Table) {
		return fmt.Errorf("table: %q is not a plain identifier (letters, digits, _)", p.Table)
	}
	cols := []struct{ name, col string }{
		{"id", p.ID}, {"message_id", p.MessageID}, {"topic", p.Topic}, {"key", p.Key}, {"payload", p.Payload},
		{"headers", p.Headers}, {"status", p.Status}, {"attempts", p.Attempts}, {"max_attempts", p.MaxAttempts},
		{"next_attempt", p.NextAttempt}, {"error", p.Error}, {"created_at", p.CreatedAt}, {"updated_at", p.UpdatedAt},
	}
	seen := map[string]string{}
	for _, c := range cols {
		switch {
		case c.col == "" && (c.name == "id" || c.name == "payload" || c.name == "status" || c.name == "attempts"):
			return fmt.Errorf("columns.%s: missing", c.name)
		case c.col == "":
			continue
		case !identRE.MatchString(c.col):
			return fmt.Errorf("columns.%s: %q is not a plain identifier (letters, digits, _)", c.name, c.col)
		}
		if prev, ok := seen[strings.ToLower(c.col)]; ok {
			return fmt.Errorf("columns.%s: column %q is already columns.%s", c.name, c.col, prev)
		}
		seen[strings.ToLower(c.col)] = c.name
	}
	for _, h := range p.headerNames() {
		col := p.HeaderCol[h]
		if !identRE.MatchString(col) {
			return fmt.Errorf("columns.header_columns.%s: %q is not a plain identifier (letters, digits, _)", h, col)
		}
		if !headerRE.MatchString(h) {
			return fmt.Errorf("columns.header_columns: header name %q must be lower case letters, digits, '.', '-', '_'", h)
		}
	}
	if p.Topic == "" && p.FixedTopic == "" {
		return errors.New("topic: the table has no topic column (columns.topic), so the mapping needs a fixed topic")
	}
	if p.Topic != "" && p.FixedTopic != "" {
		return errors.New("topic: give either columns.topic or a fixed topic, not both")
	}
	if p.MaxAttempts != "" && p.FixedMaxAttempts != 0 {
		return errors.New("max_attempts: give either columns.max_attempts or a fixed max_attempts, not both")
	}
	vals := []struct{ name, v string }{
		{"pending", p.Pending}, {"sent", p.Sent}, {"failed", p.Failed}, {"dead", p.Dead}, {"consumed", p.Consumed},
	}
	for _, v := range vals {
		switch {
		case v.v == "" && v.name != "consumed":
			return fmt.Errorf("status.%s: missing", v.name)
		case v.v == "":
			continue
		case !valueRE.MatchString(v.v):
			return fmt.Errorf("status.%s: %q may hold only letters, digits and _ . : -", v.name, v.v)
		}
	}
	if p.Sent == p.Pending || p.Sent == p.Failed || p.Sent == p.Dead {
		return fmt.Errorf("status.sent: %q must differ from pending, failed and dead", p.Sent)
	}
	if p.Dead == p.Pending && p.Dead != p.Failed {
		return fmt.Errorf("status.dead: %q must differ from pending", p.Dead)
	}
	if p.Dead == p.Pending && p.Pending == p.Failed {
		return errors.New("status: pending, failed and dead cannot all be the same value")
	}
	if p.Consumed != "" && (p.Consumed == p.Pending || p.Consumed == p.Sent || p.Consumed == p.Failed || p.Consumed == p.Dead) {
		return fmt.Errorf("status.consumed: %q must differ from the other values", p.Consumed)
	}
	if p.NextAttempt == "" {
		return errors.New("columns.next_attempt: missing (the relay spaces retries through it)")
	}
	return nil
}

// headerNames are the header columns' names, sorted.
func (p *Profile) headerNames() []string {
	names := make([]string, 0, len(p.HeaderCol))
	for h := range p.HeaderCol {
		names = append(names, h)
	}
	sort.Strings(names)
	return names
}

// HeaderNames are the names of the headers read from columns, sorted.
func (p *Profile) HeaderNames() []string { return p.headerNames() }

// MaxAttemptsLiteral is the fixed max-attempts as SQL, for a table
// without the column.
func (p *Profile) MaxAttemptsLiteral() string { return strconv.Itoa(p.FixedMaxAttempts) }
