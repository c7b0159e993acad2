package relay

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// testMetrics is a fresh set of metrics with one route named route.
func testMetrics(t *testing.T, route string) (*relayMetrics, *routeState) {
	t.Helper()
	m, err := newRelayMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rs := &routeState{name: route, health: newHealth(Route{})}
	m.route(rs)
	return m, rs
}

func TestMetricsTopicCap(t *testing.T) {
	m, rs := testMetrics(t, "r")
	first := m.topic(rs, "t.0")
	for i := 1; i < maxTopicSeries; i++ {
		m.topic(rs, "t."+strconv.Itoa(i))
	}
	over, over2 := m.topic(rs, "x.1"), m.topic(rs, "x.2")
	if over != over2 || over == first || m.topic(rs, "t.0") != first || m.topic(nil, "x.3") == over {
		t.Fatal("topics past the cap should share the route's (other) counters; known ones keep theirs")
	}
	over.sent.Inc()
	if v := testutil.ToFloat64(m.published.WithLabelValues("r", otherTopic, resultSent)); v != 1 {
		t.Fatalf("(other) sent = %v", v)
	}
}

// TestMetricsLabelsAreUTF8: a topic or route name that is not valid UTF-8
// gets a valid label instead of making WithLabelValues panic.
func TestMetricsLabelsAreUTF8(t *testing.T) {
	m, rs := testMetrics(t, "r\xff")
	m.topic(rs, "order.\xff\xfe").dead.Inc()
	if v := testutil.ToFloat64(m.published.WithLabelValues("r\uFFFD", invalidTopic, resultDead)); v != 1 {
		t.Fatalf("dead count of the invalid topic = %v, want 1", v)
	}
}
