// Package testnats runs a NATS JetStream cluster of a test's own: n
// nats-server processes of a current release (scripts/nats-cluster.sh
// builds it; Debian's 2.9 package can lose acknowledged messages when a
// stream's leader is killed) routed to each other, each with its own
// store directory and ports of the tests' range (internal/testserver).
// They are killed at cleanup.
package testnats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// Cluster is a running JetStream cluster.
type Cluster struct {
	Nodes []*Node
}

// Node is one nats-server of a cluster.
type Node struct {
	// Name is the server name, as JetStream reports a stream's leader.
	Name        string
	Port, Route int

	bin, conf string
	proc      *testserver.Process
}

// Start runs an n-node cluster and waits until JetStream answers
// through it and places a stream on all n nodes.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := clusterServer(t)
	dir, _ := testserver.Dir(t, "outbox-nats-", "", "NATS")
	c := &Cluster{}
	for i := range n {
		c.Nodes = append(c.Nodes, &Node{Name: fmt.Sprintf("n%d", i+1), Port: testserver.FreePort(t), Route: testserver.FreePort(t)})
	}
	for _, nd := range c.Nodes {
		var routes []string
		for _, o := range c.Nodes {
			if o != nd {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.Route))
			}
		}
		nd.conf = filepath.Join(dir, nd.Name+".conf")
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream { store_dir: %q }
cluster {
  name: outbox-test
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, nd.Name, nd.Port, filepath.Join(dir, nd.Name), nd.Route, strings.Join(routes, ", "))
		if err := os.WriteFile(nd.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		nd.bin = bin
		nd.start(t)
		t.Cleanup(nd.Kill)
	}
	c.waitReady(t)
	return c
}

// clusterServer is the nats-server the clusters run: the one
// OUTBOX_NATS_CLUSTER_SERVER names (make test sets it), or the one
// scripts/nats-cluster.sh builds or finds.
func clusterServer(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("OUTBOX_NATS_CLUSTER_SERVER"); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		script := filepath.Join(dir, "scripts", "nats-cluster.sh")
		if _, err := os.Stat(script); err == nil {
			out, err := exec.Command(script).Output()
			if err != nil {
				testdb.Unavailable(t, "a current nats-server (scripts/nats-cluster.sh builds it)", fmt.Errorf("%v: %s", err, bytes.TrimSpace(errOutput(err))))
			}
			return strings.TrimSpace(string(out))
		}
		up := filepath.Dir(dir)
		if up == dir {
			testdb.Unavailable(t, "a current nats-server (set OUTBOX_NATS_CLUSTER_SERVER)", errors.New("scripts/nats-cluster.sh not found above the working directory"))
			return ""
		}
		dir = up
	}
}

// errOutput is what a failed command wrote to its standard error.
func errOutput(err error) []byte {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Stderr
	}
	return nil
}

func (nd *Node) start(t testing.TB) {
	t.Helper()
	nd.proc = testserver.Start(t, exec.Command(nd.bin, "-c", nd.conf), "nats-server")
}

// waitReady waits up to a minute until JetStream answers account info
// and places a stream on every node: a meta leader is elected before all
// the peers have joined it, and until they have, a stream of as many
// replicas as nodes finds "no suitable peers for placement".
func (c *Cluster) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		if last = c.placeProbe(); last == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the NATS cluster's JetStream is not ready after a minute: %v", last)
}

// placeProbe creates and deletes a stream with a replica on every node.
func (c *Cluster) placeProbe() error {
	nc, err := nats.Connect(c.URLs(), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		return err
	}
	const probe = "outbox_ready_probe"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: probe, Subjects: []string{"outbox.ready.probe"}, Storage: jetstream.MemoryStorage, Replicas: len(c.Nodes)}); err != nil {
		return err
	}
	return js.DeleteStream(ctx, probe)
}

// URLs are every node's client address, comma-separated, as nats.Connect
// takes them.
func (c *Cluster) URLs() string {
	var us []string
	for _, nd := range c.Nodes {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", nd.Port))
	}
	return strings.Join(us, ",")
}

// Hosts are every node's host:port, comma-separated, as a nats:// URL of
// the outbox takes them (nats://h1,h2,h3).
func (c *Cluster) Hosts() string {
	var hs []string
	for _, nd := range c.Nodes {
		hs = append(hs, fmt.Sprintf("127.0.0.1:%d", nd.Port))
	}
	return strings.Join(hs, ",")
}

// Node is the node named name, nil if none.
func (c *Cluster) Node(name string) *Node {
	for _, nd := range c.Nodes {
		if nd.Name == name {
			return nd
		}
	}
	return nil
}

// Kill SIGKILLs the node and waits for it.
func (nd *Node) Kill() { nd.proc.Kill() }

// Restart starts the node again on its ports and store after Kill.
func (nd *Node) Restart(t testing.TB) {
	t.Helper()
	nd.start(t)
}
