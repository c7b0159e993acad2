package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/testenv"
)

const (
	rulesFile     = "prometheus/outbox-rules.yml"
	rulesTestFile = "prometheus/outbox-rules.test.yml"
	dashboardFile = "grafana/outbox-relay.json"
	unitFile      = "systemd/outbox-relay.service"
)

func promtool(t *testing.T) string {
	return testenv.Command(t, "promtool", "PROMTOOL", "scripts/promtool.sh installs it")
}

// runTool runs a tool in dir and fails the test unless it succeeds.
func runTool(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// rules is the part of a Prometheus rule file the tests read.
type rules struct {
	Groups []struct {
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestAlertRules runs Prometheus's own checker and rule unit tests on the
// alert rules, and checks that every alert is tested both with series it
// must fire on and with series it must not.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	if out := runTool(t, "prometheus", bin, "check", "rules", filepath.Base(rulesFile)); !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules:\n%s", out)
	}
	if out := runTool(t, "prometheus", bin, "test", "rules", filepath.Base(rulesTestFile)); !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}

	var rs rules
	readYAML(t, rulesFile, &rs)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, rulesTestFile, &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range rs.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: tested firing %v, tested quiet %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	for _, want := range []string{"OutboxBacklogOld", "OutboxNotDelivering", "OutboxDeadLetters", "OutboxRouteDown", "OutboxRelaysDown"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s in %s", want, rulesFile)
		}
	}
}

// dashboardExprs returns every query of the Grafana dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("dashboard panel %q has an empty query", p.Title)
			}
			out = append(out, tg.Expr)
		}
	}
	if len(out) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}

var (
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	braces    = regexp.MustCompile(`\{[^}]*\}`)
	brackets  = regexp.MustCompile(`\[[^\]]*\]`)
	grouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	ident     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	operators = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// metricNames lists the metric names a PromQL expression reads: the
// identifiers left once strings, label matchers, ranges and grouping
// lists are removed, except functions, aggregations (followed by "(")
// and operators.
func metricNames(expr string) []string {
	s := quoted.ReplaceAllString(expr, `""`)
	s = braces.ReplaceAllString(s, " ")
	s = brackets.ReplaceAllString(s, " ")
	s = grouping.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range ident.FindAllStringIndex(s, -1) {
		word := s[loc[0]:loc[1]]
		if loc[0] > 0 && (s[loc[0]-1] == '.' || s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9') {
			continue // part of a number (1e3, 0.5)
		}
		if rest := strings.TrimSpace(s[loc[1]:]); strings.HasPrefix(rest, "(") || slices.Contains(operators, strings.ToLower(word)) {
			continue
		}
		names = append(names, word)
	}
	return names
}

func TestMetricNamesParser(t *testing.T) {
	for expr, want := range map[string][]string{
		`max(outbox_oldest_due_age_seconds) > 300`: {"outbox_oldest_due_age_seconds"},
		`histogram_quantile(0.99, sum by (le, route) (rate(outbox_publish_duration_seconds_bucket{job=~"$job"}[5m])))`: {"outbox_publish_duration_seconds_bucket"},
		`a and (sum(rate(b{result="sent"}[10m])) or vector(0)) == 0`:                                                   {"a", "b"},
		`absent(up{job="outbox-relay"} == 1)`:                                                                          {"up"},
		`sum(x offset 5m) / on (instance) group_left y`:                                                                {"x", "y"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// TestQueriesNameExportedMetrics: every metric the dashboard's queries and
// the alert rules read is one the relay registers (built by the relay's
// own metrics constructor), or Prometheus's up.
func TestQueriesNameExportedMetrics(t *testing.T) {
	exported, err := relay.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(exported, "outbox_oldest_due_age_seconds") || !slices.Contains(exported, "outbox_delivery_latency_seconds_bucket") {
		t.Fatalf("relay.MetricNames() = %v, missing names the relay exports", exported)
	}
	known := append(exported, "up")
	check := func(where, expr string) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q reads no metric", where, expr)
		}
		for _, n := range names {
			if !slices.Contains(known, n) {
				t.Errorf("%s: %q reads %q, which the relay does not export", where, expr, n)
			}
		}
	}
	for _, e := range dashboardExprs(t) {
		check(dashboardFile, e)
	}
	var rs rules
	readYAML(t, rulesFile, &rs)
	for _, g := range rs.Groups {
		for _, r := range g.Rules {
			check(rulesFile+" "+r.Alert+r.Record, r.Expr)
		}
	}
}

// TestDashboardQueriesParse has promtool parse every dashboard query, with
// Grafana's variables given values, as a recording rule.
func TestDashboardQueriesParse(t *testing.T) {
	bin := promtool(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rs []rule
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$job", "outbox-relay")
	for i, e := range dashboardExprs(t) {
		rs = append(rs, rule{Record: "dashboard:query_" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Expr: vars.Replace(e)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rs}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runTool(t, dir, bin, "check", "rules", "dashboard.yml"); !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules on the dashboard's queries:\n%s", out)
	}
}

// TestSystemdUnit: the unit carries the options a careful operator sets
// and systemd-analyze verify accepts it (with ExecStart pointing at an
// executable that exists here); its exposure score stays low.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"ExecStart=/usr/local/bin/outbox relay ", "EnvironmentFile=/etc/outbox/relay.env",
		"Restart=on-failure", "RestartPreventExitStatus=2", "Environment=GOTRACEBACK=crash", "KillSignal=SIGTERM",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes", "DynamicUser=yes", "CapabilityBoundingSet=\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("%s lacks %q", unitFile, strings.TrimSpace(want))
		}
	}
	bin := testenv.Command(t, "systemd-analyze", "SYSTEMD_ANALYZE", "Debian package systemd")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(unitFile))
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/outbox", self)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runTool(t, ".", bin, "verify", path); strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify complains:\n%s", out)
	}
	// Exposure is scored 0 (locked down) to 10 (unprotected); the
	// threshold is in tenths.
	out := runTool(t, ".", bin, "security", "--offline=true", "--threshold=20", path)
	t.Logf("%s", out[strings.LastIndex(out, "Overall"):])
}
