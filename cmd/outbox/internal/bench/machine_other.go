//go:build !linux

package bench

import "time"

// machineSample is not taken on this platform.
type machineSample struct{}

func sampleMachine() *machineSample { return nil }

func cpuSince(*machineSample) *machineCPU { return nil }

func processCPU(int) (time.Duration, bool) { return 0, false }
