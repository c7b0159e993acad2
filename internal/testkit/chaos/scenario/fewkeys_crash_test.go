package scenario_test

import (
	"fmt"
	"testing"
)

// TestCrashRedeliversNeverLosesFewKeys is TestCrashRedeliversNeverLoses
// with one key and with four: a batch is many waves of a few keys.
func TestCrashRedeliversNeverLosesFewKeys(t *testing.T) {
	for _, c := range chaosDrivers {
		for _, keys := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/%d-keys", c.Name, keys), func(t *testing.T) { crashDrain(t, c, 2000, keys, 6) })
		}
	}
}

// TestSeveralRelaysShareFewKeys is TestSeveralRelaysShareWithoutDuplicates
// with fewer keys than relays: three relay processes, two keys, a
// destination refusing 20% of deliveries, one relay killed midway.
func TestSeveralRelaysShareFewKeys(t *testing.T) { severalRelays(t, 4000, 2) }

// TestRelaysNoDuplicatesOneKey is TestRelaysNoDuplicatesWithoutCrash with
// a single key: three in-process relays, random failures, no crash →
// every message exactly once, in order.
func TestRelaysNoDuplicatesOneKey(t *testing.T) { relaysNoDuplicates(t, 1, 500, 300) }
