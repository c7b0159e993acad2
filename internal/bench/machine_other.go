//go:build !linux

package bench

// machineSample is not taken on this platform.
type machineSample struct{}

func sampleMachine() *machineSample { return nil }

func cpuSince(*machineSample) *machineCPU { return nil }
