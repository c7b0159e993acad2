package bench

import (
	"runtime"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func TestParseProcStat(t *testing.T) {
	line := []byte("4242 (nats-server) S 1 4242 4242 0 -1 4194560 9000 0 0 0 1234 567 0 0 20 0 12 0 100 0 0")
	name, cpu, ok := parseProcStat(line)
	if !ok || name != "nats-server" || cpu != (1234+567)*clockTick {
		t.Errorf("got %q %v %v", name, cpu, ok)
	}
	// A name with spaces and parentheses is read up to the last ')'.
	if _, _, ok := parseProcStat([]byte("7 (my (odd) tool) S 1 7 7 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 1 0 0")); ok {
		t.Error("a process that is no server was counted")
	}
	for _, bad := range []string{"", "12 postgres S", "12 (postgres) S 1 2", "12 (postgres) S 1 2 3 4 5 6 7 8 9 10 x 11"} {
		if _, _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestMachineCPU: the CPU time of this process and of the database
// server is counted while both do a known amount of work.
func TestMachineCPU(t *testing.T) {
	db := testdb.New(t, store.Postgres)
	m0 := sampleMachine()
	if m0 == nil {
		t.Fatal("no sample from /proc")
	}
	done := make(chan error, 1)
	go func() {
		// Five million rows: well over 0.1 s of the server's CPU.
		_, err := db.SQL.Exec("SELECT count(*) FROM generate_series(1, 5000000)")
		done <- err
	}()
	for spin := cpuTime(); cpuTime()-spin < 300*time.Millisecond; {
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m := cpuSince(m0)
	if m == nil {
		t.Fatal("no machine figures")
	}
	if m.Cores != runtime.NumCPU() {
		t.Errorf("cores %d, want %d", m.Cores, runtime.NumCPU())
	}
	if self := m.Bench * m.Seconds; self < 0.29 {
		t.Errorf("this process used %.2f s of CPU by these figures, at least 0.3 s by its own: %s", self, m)
	}
	if pg := m.Servers["postgres"] * m.Seconds; pg < 0.1 {
		t.Errorf("postgres used %.2f s of CPU by these figures: %s", pg, m)
	}
	if m.BusyCores > float64(m.Cores)+0.05 || m.BusyCores*m.Seconds < 0.29 {
		t.Errorf("busy cores out of range: %s", m)
	}
}
