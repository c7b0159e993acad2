package bench

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// serverProcesses are the process names of the databases and brokers a
// run may talk to on this machine, as /proc/PID/comm spells them.
var serverProcesses = []string{
	"postgres", "mariadbd", "mysqld", "nats-server", "redis-server", "beam.smp", "mosquitto",
}

// clockTick is the unit of the CPU times in /proc: USER_HZ, 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// machineSample is the machine's CPU time, busy and in all, and that of
// this process and of the local servers, at one moment.
type machineSample struct {
	at          time.Time
	busy, total time.Duration
	self        time.Duration
	servers     map[string]time.Duration
}

// sampleMachine reads /proc; nil when it cannot.
func sampleMachine() *machineSample {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 5 || fields[0] != "cpu" {
		return nil
	}
	s := &machineSample{at: time.Now(), self: cpuTime(), servers: map[string]time.Duration{}}
	for i, f := range fields[1:] {
		if i >= 8 { // guest time is already counted in user time
			break
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil
		}
		d := time.Duration(n) * clockTick
		s.total += d
		if i != 3 && i != 4 { // idle, iowait
			s.busy += d
		}
	}
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range dir {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		name, cpu, ok := procCPU(e.Name())
		if ok {
			s.servers[name] += cpu
		}
	}
	return s
}

// processCPU is the user plus system time of server process pid.
func processCPU(pid int) (time.Duration, bool) {
	_, cpu, ok := procCPU(strconv.Itoa(pid))
	return cpu, ok
}

// procCPU is the user plus system time of a server process.
func procCPU(pid string) (string, time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0, false // gone since the listing
	}
	return parseProcStat(b)
}

// parseProcStat reads a server process's name and CPU time from its
// /proc/PID/stat line; ok is false for other processes.
func parseProcStat(b []byte) (name string, cpu time.Duration, ok bool) {
	// pid (comm) state ppid …: comm may hold spaces and parentheses.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	name = string(b[open+1 : end])
	known := false
	for _, s := range serverProcesses {
		if name == s {
			known = true
			break
		}
	}
	if !known {
		return "", 0, false
	}
	rest := strings.Fields(string(b[end+1:]))
	// rest[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(rest) < 13 {
		return "", 0, false
	}
	ut, err1 := strconv.ParseInt(rest[11], 10, 64)
	st, err2 := strconv.ParseInt(rest[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return name, time.Duration(ut+st) * clockTick, true
}

// cpuSince is what the machine spent from a to now; nil when either
// sample is missing.
func cpuSince(a *machineSample) *machineCPU {
	b := sampleMachine()
	if a == nil || b == nil {
		return nil
	}
	wall := b.at.Sub(a.at)
	if wall <= 0 || b.total <= a.total {
		return nil
	}
	cores := runtime.NumCPU()
	m := &machineCPU{
		Cores:     cores,
		Seconds:   wall.Seconds(),
		BusyCores: float64(b.busy-a.busy) / float64(b.total-a.total) * float64(cores),
		Bench:     (b.self - a.self).Seconds() / wall.Seconds(),
		Servers:   map[string]float64{},
	}
	for name, t := range b.servers {
		if d := t - a.servers[name]; d > 0 {
			m.Servers[name] = d.Seconds() / wall.Seconds()
		}
	}
	return m
}
