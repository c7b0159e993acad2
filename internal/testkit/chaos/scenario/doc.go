// Package scenario is the outbox's fault-injection suite (docs/chaos.md)
// and holds nothing but its tests: relays in processes of their own that
// are killed, frozen and signalled, destinations and databases that go
// down, hang or restart under them, and producers committing throughout.
// Every scenario drains the outbox and judges the run with the checker in
// internal/chaos.
//
// The scenarios that inject faults through failpoints build only with the
// tag outbox_failpoints:
//
//	go test -race -count=1 -tags outbox_failpoints ./internal/testkit/chaos/scenario
//
// OUTBOX_CHAOS_SCALE multiplies their size (default 1: seconds each);
// OUTBOX_CHAOS_SEED replays a run's random choices.
package scenario
