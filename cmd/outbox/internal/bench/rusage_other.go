//go:build !unix

package bench

import "time"

// cpuTime is not measured on this platform.
func cpuTime() time.Duration { return 0 }

// peakRSS is not measured on this platform.
func peakRSS() int64 { return 0 }
