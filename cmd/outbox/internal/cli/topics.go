package cli

import (
	"context"
	"slices"
	"strings"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
)

// topicAbout is what the bulk commands' help says of --topic.
const topicAbout = `--topic takes a topic or a route pattern, matched as routes match:
'order.*' is one segment after "order.", 'order.>' one or more, '*' every
topic.`

// isTopicPattern reports whether a --topic value is a route pattern: "*"
// alone, or a value with a "*" or ">" segment. Anything else is one topic,
// compared exactly (a topic written by plain SQL may be any text).
func isTopicPattern(v string) bool {
	return slices.ContainsFunc(strings.Split(v, "."), func(s string) bool { return s == "*" || s == ">" })
}

// checkTopicFlag refuses a --topic value that looks like a route pattern
// but is not a well-formed one ('order.>.x').
func checkTopicFlag(full, v string) error {
	if isTopicPattern(v) {
		if err := outbox.ValidatePattern(v); err != nil {
			return usagef("%s: --topic: %v", full, err)
		}
	}
	return nil
}

// matchTopics resolves a --topic pattern for the bulk action a with f:
// the topics of the messages it would change that the pattern matches,
// as routes match them. The database narrows the candidates with a LIKE
// bound as a parameter; the route matcher decides. None is an empty,
// non-nil list (which selects nothing).
func matchTopics(ctx context.Context, full string, st *store.Store, a store.BulkAction, f store.BulkFilter, pattern string) ([]string, error) {
	candidates, err := st.TopicsLike(ctx, a, f, store.TopicLike(pattern))
	if err != nil {
		return nil, err
	}
	topics := []string{}
	for _, t := range candidates {
		if outbox.MatchTopic(pattern, t) {
			topics = append(topics, t)
		}
	}
	if len(topics) > store.MaxTopics {
		return nil, usagef("%s: --topic %q matches %d topics, more than %d; narrow the pattern", full, pattern, len(topics), store.MaxTopics)
	}
	return topics, nil
}

// noPatternWithAdopt refuses a --topic pattern on an adopted table: its
// commands take one topic.
func noPatternWithAdopt(full, topic string) error {
	if isTopicPattern(topic) {
		return usagef("%s: --adopt takes one topic, not the pattern %q", full, topic)
	}
	return nil
}
