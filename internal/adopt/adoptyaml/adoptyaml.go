// Package adoptyaml reads the mapping of an adopted table from YAML
// (docs/adopt.md), so that only the programs that read such files
// compile a YAML parser: the relay and the store take an adopt.Profile.
package adoptyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/txoutbox/outbox/internal/adopt"
)

// Load returns the built-in profile named spec, or the mapping in the
// YAML file spec (a name ending in .yaml or .yml, or holding a slash).
func Load(spec string) (*adopt.Profile, error) {
	if p := adopt.BuiltinProfile(spec); p != nil {
		return p, nil
	}
	if !strings.HasSuffix(spec, ".yaml") && !strings.HasSuffix(spec, ".yml") && !strings.Contains(spec, "/") {
		return nil, fmt.Errorf("adopt: unknown profile %q (built-in: %s; or a FILE.yaml mapping)", spec, strings.Join(adopt.Builtin, ", "))
	}
	b, err := os.ReadFile(spec)
	if err != nil {
		return nil, fmt.Errorf("adopt: %v", err)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("adopt: %s: %v", spec, err)
	}
	p.Name = spec
	return p, nil
}

// file is the YAML mapping's shape.
type file struct {
	Table   string `yaml:"table"`
	Columns struct {
		ID          string            `yaml:"id"`
		MessageID   string            `yaml:"message_id"`
		Topic       string            `yaml:"topic"`
		Key         string            `yaml:"key"`
		Payload     string            `yaml:"payload"`
		Headers     string            `yaml:"headers"`
		HeaderCols  map[string]string `yaml:"header_columns"`
		Status      string            `yaml:"status"`
		Attempts    string            `yaml:"attempts"`
		MaxAttempts string            `yaml:"max_attempts"`
		NextAttempt string            `yaml:"next_attempt"`
		Error       string            `yaml:"error"`
		CreatedAt   string            `yaml:"created_at"`
		UpdatedAt   string            `yaml:"updated_at"`
	} `yaml:"columns"`
	Status struct {
		Pending  yaml.Node `yaml:"pending"`
		Sent     yaml.Node `yaml:"sent"`
		Failed   yaml.Node `yaml:"failed"`
		Dead     yaml.Node `yaml:"dead"`
		Consumed yaml.Node `yaml:"consumed"`
	} `yaml:"status"`
	Topic       string `yaml:"topic"`
	MaxAttempts *int   `yaml:"max_attempts"`
}

// Parse reads a YAML mapping and checks it.
func Parse(b []byte) (*adopt.Profile, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty mapping: it needs table, columns and status")
		}
		return nil, errors.New(oneLine(err.Error()))
	}
	c := f.Columns
	p := &adopt.Profile{
		Table: f.Table, ID: c.ID, MessageID: c.MessageID, Topic: c.Topic, Key: c.Key, Payload: c.Payload,
		Headers: c.Headers, HeaderCol: c.HeaderCols, Status: c.Status, Attempts: c.Attempts,
		MaxAttempts: c.MaxAttempts, NextAttempt: c.NextAttempt, Error: c.Error,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, FixedTopic: f.Topic,
	}
	var err error
	for _, v := range []struct {
		name string
		node *yaml.Node
		dst  *string
	}{
		{"pending", &f.Status.Pending, &p.Pending}, {"sent", &f.Status.Sent, &p.Sent},
		{"failed", &f.Status.Failed, &p.Failed}, {"dead", &f.Status.Dead, &p.Dead},
		{"consumed", &f.Status.Consumed, &p.Consumed},
	} {
		if *v.dst, err = scalar("status."+v.name, v.node); err != nil {
			return nil, err
		}
	}
	if p.Dead == "" {
		p.Dead = p.Failed
	}
	if f.MaxAttempts != nil {
		p.FixedMaxAttempts = *f.MaxAttempts
		if p.FixedMaxAttempts < 1 {
			return nil, errors.New("max_attempts must be at least 1")
		}
	} else if p.MaxAttempts == "" {
		p.FixedMaxAttempts = adopt.DefaultMaxAttempts
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// scalar is a status value: a string or an integer.
func scalar(field string, n *yaml.Node) (string, error) {
	if n.Kind == 0 {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
		return "", fmt.Errorf("%s: want a string or an integer (line %d)", field, n.Line)
	}
	if n.Value == "" {
		return "", fmt.Errorf("%s: must not be empty (line %d)", field, n.Line)
	}
	return n.Value, nil
}

// oneLine keeps a YAML error on one line, without its prefix.
func oneLine(s string) string {
	s = strings.TrimPrefix(s, "yaml: ")
	return strings.Join(strings.Fields(s), " ")
}
