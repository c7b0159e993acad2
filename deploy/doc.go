// Package deploy holds what runs the outbox relay as infrastructure, as
// files rather than code: a systemd unit (systemd/), Prometheus alert
// rules with their promtool unit tests (prometheus/) and a Grafana
// dashboard (grafana/). Its tests check them against the tools that load
// them and against the metrics the relay registers; see docs/deploy.md.
package deploy
