package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// machineCPU is where the machine's CPU went while a workload was timed.
type machineCPU struct {
	Cores int `json:"cores"`
	// Seconds is the wall time the figures are averaged over.
	Seconds float64 `json:"seconds"`
	// BusyCores is the average number of cores busy (not idle, not
	// waiting for I/O), counting every process on the machine.
	BusyCores float64 `json:"busy_cores"`
	// Bench is this process's share in cores: the relays or the
	// producers, and the bench's own bookkeeping.
	Bench float64 `json:"bench_cores"`
	// Servers is each local database or broker process's share in
	// cores, by process name (every process of that name summed).
	Servers map[string]float64 `json:"server_cores,omitempty"`
}

// String is one line: busy cores of all, then this process and each
// server by its share, largest first (shares under 0.01 left out).
func (m *machineCPU) String() string {
	if m == nil {
		return "not measured on this platform"
	}
	shares := map[string]float64{"bench": m.Bench}
	for n, c := range m.Servers {
		shares[n] = c
	}
	names := make([]string, 0, len(shares))
	for n, c := range shares {
		if c >= 0.005 {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(shares[b], shares[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, shares[n])
	}
	return fmt.Sprintf("%.2f of %d cores busy: %s", m.BusyCores, m.Cores, strings.Join(parts, ", "))
}
