// Package testkit is a module of its own that holds the outbox's tests
// which need what no user of the library should have to resolve: a
// browser driver, fake brokers, every database and broker client at once.
// Its directories mirror the packages they test (internal/testkit/admin
// tests package admin); the packages themselves stay in the modules a user
// imports, whose go.mod then lists only what they need to build.
package testkit
