package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/cliflag"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/internal/store"
)

// Exit statuses, as the outbox command defines them.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// Workload names.
const (
	wProduce = "produce"
	wDrain   = "drain"
	wSteady  = "steady"
	wSustain = "sustain"
	wCeiling = "ceiling"
	wPublish = "publish"
)

var workloads = []struct{ name, summary string }{
	{wProduce, "producer transactions per second: business row alone, + outbox message, + wake-ups"},
	{wDrain, "pre-fill N messages, then time the relays delivering all of them"},
	{wSteady, "open-loop producers at a fixed rate; latency from intended send time to confirm"},
	{wSustain, "the highest producer rate the relay keeps up with: steady trials, each in a fresh database, doubling then bisecting"},
	{wCeiling, "read and settle pre-filled rows without publishing: the database's upper bound"},
	{wPublish, "publish straight to the destination as the relay's workers do, no database: its upper bound"},
	{wWake, "sporadic writes that send no signal (plain SQL, an adopted table) to an idle relay in its own process: commit → publish latency, idle CPU"},
	{wFleet, "many databases (SQLite idle, PostgreSQL active) served by relay processes: idle cost, p99, connections, takeover"},
}

// Summary is the one line 'outbox help' shows for the command.
const Summary = "measure producer throughput, relay drain rate and end-to-end latency"

// options are the parsed command line.
type options struct {
	workload     string
	dbURL        string
	to           string
	sink         bool
	json         bool
	payloadBytes int
	keys         int
	batchSize    int
	workers      int
	relays       int
	clients      string // produce: a list; steady: one number
	variants     string // produce: the variants to run besides business
	claimThresh  int    // produce: outbox+claim's threshold; 0: below the payload
	clientList   []int
	duration     time.Duration
	warmup       time.Duration
	messages     int
	sentRows     int
	rate         float64
	start        float64       // sustain: the first trial's rate
	maxRate      float64       // sustain: the highest rate tried
	precision    float64       // sustain: the search's end, a fraction of the rate
	window       time.Duration // sustain: each trial's measured time
	cpuprofile   string
	plot         string
	consume      bool
	stall        time.Duration
	analyze      bool
	readPath     string // drain: table or snapshot
}

// errHelp ends a run that printed its usage.
var errHelp = errors.New("help")

// usageError marks bad usage: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// Main runs `outbox bench` with the arguments after "bench" and returns
// the exit status: 0 success, 1 failure at run time, 2 bad usage. The
// report goes to stdout (to stderr when the destination is stdout://, which
// takes stdout for the messages), progress and the one-line error to
// stderr. It handles SIGINT and SIGTERM itself so that an interrupted run
// still removes what it created.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal the run cleans up; a second one kills.
		<-ctx.Done()
		stop()
	}()
	var secrets []string
	err := run(ctx, args, stdout, stderr, os.Getenv, &secrets)
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	}
	line := cliflag.ErrorLine(err)
	for _, s := range secrets {
		if len(s) >= 3 {
			line = strings.ReplaceAll(line, s, "xxxxx")
		}
	}
	fmt.Fprintf(stderr, "outbox: bench: %s\n", line)
	var u *usageError
	if errors.As(err, &u) || errors.Is(err, dburl.ErrBadURL) {
		return exitUsage
	}
	return exitFailure
}

func isHelp(s string) bool {
	switch s {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// run parses args, runs the workload and prints the report.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, secrets *[]string) error {
	if len(args) == 0 {
		return usagef("name a workload (%s); run 'outbox bench --help'", workloadNames())
	}
	if isHelp(args[0]) {
		printUsage(stdout)
		return errHelp
	}
	o := &options{workload: args[0]}
	if !knownWorkload(o.workload) {
		if strings.HasPrefix(o.workload, "-") {
			return usagef("name the workload before the flags: outbox bench WORKLOAD [flags] (workloads: %s)", workloadNames())
		}
		return usagef("unknown workload %q (want %s); run 'outbox bench --help'", o.workload, workloadNames())
	}
	if o.workload == wFleet {
		return runFleet(ctx, args[1:], stdout, stderr, getenv, secrets)
	}
	if o.workload == wWake {
		return runWake(ctx, args[1:], stdout, stderr, getenv, secrets)
	}
	if err := o.parse(args[1:], stdout, getenv, secrets); err != nil {
		return err
	}

	secret := getenv("OUTBOX_WEBHOOK_SECRET")
	*secrets = append(*secrets, secret)
	report := stdout
	var dest *destination
	if o.workload != wProduce && o.workload != wCeiling {
		var err error
		dest, err = openDestination(o, secret, stdout)
		if err != nil {
			return err
		}
		defer dest.close()
		if dest.takesStdout {
			report = stderr
		}
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	res, err := runWorkload(ctx, o, dest, stderr)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(report, res)
	}
	writeTable(report, res)
	return nil
}

// parse reads the workload's flags (args), takes --db from
// OUTBOX_DATABASE_URL when not given, checks them, and adds the
// database's password to the secrets the output must never show.
func (o *options) parse(args []string, stdout io.Writer, getenv func(string) string, secrets *[]string) error {
	fs := flagSet(o)
	if err := parseWorkload(o.workload, fs, args, stdout); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.dbURL == "" && o.workload != wPublish {
		o.dbURL = getenv("OUTBOX_DATABASE_URL")
	}
	if err := o.validate(set); err != nil {
		return err
	}
	if u, err := url.Parse(o.dbURL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			*secrets = append(*secrets, p)
		}
	}
	if o.workload != wPublish {
		d, _, err := dburl.Parse(o.dbURL)
		if err != nil {
			return err
		}
		if o.readPath == readPathSnapshot && d != store.Postgres {
			return usagef("%s: --read-path %s needs PostgreSQL (transaction snapshots), not %s", o.workload, readPathSnapshot, d)
		}
	}
	return nil
}

// runWorkload runs the workload o names and removes what it made; an
// interrupted run says what was removed.
func runWorkload(ctx context.Context, o *options, dest *destination, stderr io.Writer) (*result, error) {
	var res *result
	var runErr, cleanErr error
	switch {
	case o.workload == wSustain:
		res, runErr, cleanErr = sustain(ctx, o, dest, stderr)
	case o.readPath == readPathSnapshot:
		res, runErr, cleanErr = snapshotRun(ctx, o, dest, stderr)
	default:
		b, err := open(ctx, o, dest, stderr)
		if err != nil {
			return nil, err
		}
		res, runErr = b.run(ctx)
		cleanErr = b.close()
	}
	if runErr != nil {
		if ctx.Err() != nil {
			switch {
			case cleanErr != nil:
				return nil, fmt.Errorf("interrupted; %w", cleanErr)
			case o.workload == wPublish:
				return nil, errors.New("interrupted; what the run created on the destination was removed")
			case o.workload == wSustain:
				return nil, errors.New("interrupted; the trial's database was removed")
			case o.readPath == readPathSnapshot:
				return nil, errors.New("interrupted; the run's database was removed")
			}
			return nil, errors.New("interrupted; the run's rows were removed")
		}
		return nil, errors.Join(runErr, cleanErr)
	}
	return res, cleanErr
}

func knownWorkload(w string) bool {
	for _, x := range workloads {
		if x.name == w {
			return true
		}
	}
	return false
}

func workloadNames() string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return strings.Join(names, ", ")
}

// flagSet declares the flags of o.workload.
func flagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("outbox bench "+o.workload, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if o.workload != wPublish {
		fs.StringVar(&o.dbURL, "db", "", "database URL: postgres://…, mysql://…, sqlite:///path.db (default $OUTBOX_DATABASE_URL)")
	}
	fs.BoolVar(&o.json, "json", false, "print one JSON object with every figure instead of the table")
	fs.IntVar(&o.payloadBytes, "payload-bytes", 500, "size of each message's JSON payload in bytes")
	fs.IntVar(&o.keys, "keys", 1000, "distinct business keys, used round robin (0: no key)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE` (go tool pprof)")
	relayFlags := func() {
		fs.IntVar(&o.batchSize, "batch-size", 0, fmt.Sprintf("relay's largest batch (default %d, the library's)", outbox.DefaultBatchSize))
		fs.IntVar(&o.workers, "workers", 0, fmt.Sprintf("relay's concurrent rounds (default %d, the library's)", outbox.DefaultWorkers))
		fs.IntVar(&o.relays, "relays", 1, "relays in this process, each with its own id")
	}
	readPathFlag := func() {
		fs.StringVar(&o.readPath, "read-path", readPathTable, "table (the relays' read and settle) or snapshot: relays with the snapshot read, which write nothing for a delivered message (PostgreSQL; in a database of its own on --db's server; docs/snapshot-read.md)")
	}
	destFlags := func() {
		fs.StringVar(&o.to, "to", "null://", "destination: null:// (confirms at once, in process), kfake:// (an in-process Kafka) or any relay URL; for nats://, amqp:// and redis:// the run creates and then removes a stream, queue or streams for its messages")
		fs.BoolVar(&o.sink, "sink", false, "start an in-process HTTP sink answering 200 and publish to it as a webhook")
	}
	switch o.workload {
	case wProduce:
		fs.StringVar(&o.clients, "clients", "1,16,64", "comma-separated client counts; each is run in turn")
		fs.DurationVar(&o.duration, "duration", 5*time.Second, "time per client count and variant")
		fs.StringVar(&o.variants, "variants", "", "comma-separated variants to run (business, outbox, outbox+notify, outbox+row-notify, outbox-batch; default: all the database has; outbox+seal and outbox+claim run when named); the ratios need business first. One per run gives its database CPU alone")
		fs.IntVar(&o.claimThresh, "claim-threshold", 0, "outbox+claim: payloads of more `BYTES` than this go to the claim-check directory (default one byte below --payload-bytes: every payload)")
	case wDrain:
		destFlags()
		relayFlags()
		fs.IntVar(&o.messages, "messages", 100000, "messages to pre-fill and drain")
		fs.IntVar(&o.sentRows, "sent-rows", 0, "already-sent rows to load first, to show the cost of a big table")
		fs.DurationVar(&o.stall, "stall-timeout", time.Minute, "give up when nothing was delivered for this long")
		fs.BoolVar(&o.analyze, "analyze", true, "on PostgreSQL, ANALYZE outbox_messages after the pre-fill, as autovacuum soon would (false: drain with cold statistics)")
		readPathFlag()
	case wSteady:
		destFlags()
		relayFlags()
		fs.Float64Var(&o.rate, "rate", 500, "messages per second the producers aim for")
		fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured time")
		fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "time before the measured time, excluded from the figures")
		fs.StringVar(&o.clients, "clients", "16", "producer goroutines taking the scheduled sends")
		fs.StringVar(&o.plot, "plot", "", "draw the latency percentile curves and the backlog over time into `FILE.svg`")
		readPathFlag()
		fs.BoolVar(&o.consume, "consume", false, "attach a consumer to the destination (nats://) and measure latency to its receipt too")
	case wSustain:
		destFlags()
		relayFlags()
		fs.Float64Var(&o.start, "start", 500, "messages per second of the first trial")
		fs.Float64Var(&o.maxRate, "max-rate", 100000, "the highest rate to try, in messages per second")
		o.precision = 0.1
		fs.Var(percentFlag{&o.precision}, "precision", "stop bisecting when the gap between the highest sustained rate and the lowest failed one is under this `PERCENT` of the former")
		fs.DurationVar(&o.window, "window", 30*time.Second, "each trial's measured time, over which the backlog may grow by at most 100 msg/s")
		fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "each trial's time before the window, excluded from the figures")
		fs.StringVar(&o.clients, "clients", "16", "producer goroutines taking the scheduled sends")
	case wCeiling:
		relayFlags()
		fs.IntVar(&o.messages, "messages", 100000, "messages to pre-fill and settle")
		fs.IntVar(&o.sentRows, "sent-rows", 0, "already-sent rows to load first, to show the cost of a big table")
		fs.BoolVar(&o.analyze, "analyze", true, "on PostgreSQL, ANALYZE outbox_messages after the pre-fill, as autovacuum soon would")
	case wPublish:
		destFlags()
		fs.IntVar(&o.messages, "messages", 100000, "messages to publish")
		fs.IntVar(&o.workers, "workers", 0, fmt.Sprintf("concurrent publishers, as the relay's workers (default %d, the relay's)", outbox.DefaultWorkers))
		fs.IntVar(&o.batchSize, "batch-size", 0, fmt.Sprintf("messages per round, as a relay worker reads them (default %d, the relay's largest batch)", outbox.DefaultBatchSize))
	}
	return fs
}

func (o *options) validate(set map[string]bool) error {
	w := o.workload
	switch {
	case o.dbURL == "" && w != wPublish:
		return usagef("%s: no database: give --db URL or set OUTBOX_DATABASE_URL", w)
	case o.payloadBytes < 2 || o.payloadBytes > outbox.DefaultMaxPayloadBytes:
		return usagef("%s: --payload-bytes must be between 2 and %d", w, outbox.DefaultMaxPayloadBytes)
	case o.keys < 0:
		return usagef("%s: --keys must not be negative", w)
	case o.workers < 0:
		return usagef("%s: --workers must not be negative", w)
	case o.batchSize < 0:
		return usagef("%s: --batch-size must not be negative", w)
	case (w != wProduce && w != wPublish) && o.relays < 1:
		return usagef("%s: --relays must be at least 1", w)
	case (w == wDrain || w == wCeiling || w == wPublish) && o.messages < 1:
		return usagef("%s: --messages must be at least 1", w)
	case o.readPath != "" && o.readPath != readPathTable && o.readPath != readPathSnapshot:
		return usagef("%s: --read-path must be %s or %s, not %q", w, readPathTable, readPathSnapshot, o.readPath)
	case o.claimThresh < 0:
		return usagef("%s: --claim-threshold must not be negative", w)
	case o.sentRows < 0:
		return usagef("%s: --sent-rows must not be negative", w)
	case (w == wProduce || w == wSteady) && o.duration <= 0:
		return usagef("%s: --duration must be positive", w)
	case w == wSustain && o.window <= 0:
		return usagef("%s: --window must be positive", w)
	case w == wSustain && !(o.start >= o.minRate() && o.start <= o.maxRate && o.maxRate <= 1e6):
		return usagef("%s: want %s <= --start <= --max-rate <= 1000000 messages per second (--start: at least 10 messages in the window)", w, fmtFloat(o.minRate()))
	case w == wSustain && !(o.precision > 0 && o.precision < 1):
		return usagef("%s: --precision must be above 0 and under 100%%", w)
	case w == wSustain && o.maxRate*(o.warmup+o.window).Seconds() > maxSlots:
		return usagef("%s: --max-rate × (--warmup + --window) schedules more than %s messages", w, commas(maxSlots))
	case o.warmup < 0:
		return usagef("%s: --warmup must not be negative", w)
	case w == wDrain && o.stall <= 0:
		return usagef("%s: --stall-timeout must be positive", w)
	case w == wSteady && !(o.rate > 0 && o.rate <= 1e6):
		return usagef("%s: --rate must be above 0 and at most 1000000 messages per second", w)
	}
	if o.sink && set["to"] && o.to != "http://" {
		return usagef("%s: --sink publishes to its own address: leave out --to (or write --to http://)", w)
	}
	if w == wProduce || w == wSteady || w == wSustain {
		for _, s := range strings.Split(o.clients, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 1000 {
				return usagef("%s: --clients: %q is not a number from 1 to 1000", w, s)
			}
			o.clientList = append(o.clientList, n)
		}
		if w != wProduce && len(o.clientList) != 1 {
			return usagef("%s: --clients takes one number", w)
		}
	}
	return nil
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, `Usage: outbox bench WORKLOAD [flags]

%s.

Workloads:
`, strings.ToUpper(Summary[:1])+Summary[1:])
	for _, x := range workloads {
		fmt.Fprintf(w, "  %-8s %s\n", x.name, x.summary)
	}
	fmt.Fprint(w, `
The bench works in the database given by --db (or OUTBOX_DATABASE_URL): it
migrates the schema, tags its rows with a topic prefix unique to the run and
deletes them when it ends. It refuses to start relays while another relay is
live on the database or while other messages are pending. publish needs no
database: it sends to --to directly, to compare a drain with the lesser of
the ceiling and the destination's own limit. sustain runs each of its
trials in a database of its own, made on --db's server (a new SQLite file
beside --db's) and dropped after the trial.

Progress goes to stderr once a second; the report to stdout (to stderr when
--to stdout:// takes stdout for the messages). Run 'outbox bench WORKLOAD
--help' for a workload's flags.
`)
}

// parseWorkload parses the flags of workload name: --help prints its
// usage (errHelp); a bad flag or an argument is a usage error.
func parseWorkload(name string, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printWorkloadUsage(stdout, name, fs)
			return errHelp
		}
		return usagef("%s: %s; run 'outbox bench %s --help'", name, cliflag.Error(err), name)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q; run 'outbox bench %s --help'", name, fs.Arg(0), name)
	}
	return nil
}

// databaseURL is the --db of a workload that makes its own databases,
// else OUTBOX_DATABASE_URL; its password joins the secrets the output
// must never show.
func databaseURL(flagVal string, getenv func(string) string, secrets *[]string) string {
	if flagVal == "" {
		flagVal = getenv("OUTBOX_DATABASE_URL")
	}
	*secrets = append(*secrets, redact.Password(flagVal))
	return flagVal
}

func printWorkloadUsage(w io.Writer, name string, fs *flag.FlagSet) {
	for _, x := range workloads {
		if x.name == name {
			fmt.Fprintf(w, "Usage: outbox bench %s [flags]\n\n%s.\n\nFlags:\n", name, strings.ToUpper(x.summary[:1])+x.summary[1:])
		}
	}
	cliflag.Print(w, fs)
}

// percentFlag is a fraction given as a percentage ("10%") or as the
// fraction itself ("0.1").
type percentFlag struct{ v *float64 }

func (f percentFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatFloat(*f.v*100, 'f', -1, 64) + "%"
}

func (f percentFlag) Set(s string) error {
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil {
		return errors.New("want a percentage such as 10% or a fraction such as 0.1")
	}
	if pct {
		v /= 100
	}
	*f.v = v
	return nil
}
