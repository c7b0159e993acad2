package outboxurl

import (
	"strings"
	"testing"
	"time"
)

func TestSplitRouteOptions(t *testing.T) {
	cases := []struct {
		in, out string
		want    RouteOptions
		err     string
	}{
		{in: "https://h/p", out: "https://h/p"},
		{in: "https://h/p?a=1&max_in_flight=16&rate=200/s&b=%20x", out: "https://h/p?a=1&b=%20x",
			want: RouteOptions{MaxInFlight: 16, Rate: 200}},
		{in: "nats://h:4222?probe_min=2s&probe_max=1m", out: "nats://h:4222", want: RouteOptions{ProbeMin: 2 * time.Second, ProbeMax: time.Minute}},
		{in: "amqp://u:pw@h/?exchange=x&rate=600/m#f", out: "amqp://u:pw@h/?exchange=x#f", want: RouteOptions{Rate: 10}},
		{in: "redis://h?rate=5", out: "redis://h", want: RouteOptions{Rate: 5}},
		{in: "https://u:secret@h?rate=fast", err: "rate=\"fast\": want messages per second"},
		{in: "https://h?max_in_flight=0", err: "max_in_flight=\"0\": want a whole number"},
		{in: "https://h?probe_min=5s&probe_max=1s", err: "probe_min 5s is more than probe_max 1s"},
		{in: "https://h?probe_max=-1s", err: "want a positive duration"},
		{in: "https://h/p?max_retry_after=10m&a=1", out: "https://h/p?a=1", want: RouteOptions{MaxRetryAfter: 10 * time.Minute}},
		{in: "https://h?max_retry_after=0s", err: "want a positive duration"},
		{in: "https://h/p?a=1&max_retry_age=6h", out: "https://h/p?a=1", want: RouteOptions{MaxRetryAge: 6 * time.Hour}},
		{in: "https://h?max_retry_age=-1s", err: "want a positive duration"},
		{in: "kafka://h:9092?claim=reference&acks=all", out: "kafka://h:9092?acks=all", want: RouteOptions{ClaimCheck: "reference"}},
		{in: "https://h?claim=inline", out: "https://h", want: RouteOptions{ClaimCheck: "inline"}},
		{in: "https://h?claim=fetch", err: "claim=\"fetch\": want inline"},
	}
	for _, c := range cases {
		out, o, err := SplitRouteOptions(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "secret") {
				t.Errorf("%s: error %v, want one with %q and no secret", c.in, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.in, err)
		case out != c.out || o != c.want:
			t.Errorf("%s: %q %+v, want %q %+v", c.in, out, o, c.out, c.want)
		}
	}
}

func FuzzSplitRouteOptions(f *testing.F) {
	f.Add("https://h/p?a=1&max_in_flight=16&rate=200/s")
	f.Add("nats://h?probe_min=1s#x")
	f.Fuzz(func(t *testing.T, in string) {
		out, _, err := SplitRouteOptions(in)
		if err != nil {
			return
		}
		for _, n := range routeOptionNames {
			if strings.Contains(out, "?"+n+"=") || strings.Contains(out, "&"+n+"=") {
				if !strings.Contains(in, "#") {
					t.Fatalf("%q kept %s: %q", in, n, out)
				}
			}
		}
	})
}
