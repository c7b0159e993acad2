package brokertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// JetStream connects to the NATS server at url (with a 5 s connect
// timeout, then opts) and checks that it runs JetStream. A server that
// cannot be reached fails the test in CI and skips it elsewhere; the
// connection closes when the test ends.
func JetStream(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(5 * time.Second)}, opts...)...)
	if err != nil {
		testdb.Unavailable(t, "NATS at "+url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		testdb.Unavailable(t, "JetStream at "+url, err)
	}
	return nc, js
}

// NATSServer is the path of the nats-server binary, for a server of the
// test's own; where there is none the test fails in CI and is skipped
// elsewhere.
func NATSServer(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err == nil {
		return bin
	}
	if _, serr := os.Stat("/usr/sbin/nats-server"); serr != nil {
		testdb.Unavailable(t, "the nats-server binary", err)
	}
	return "/usr/sbin/nats-server"
}
