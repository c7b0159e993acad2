//go:build outbox_failpoints

package failpoint

// Compiled reports whether this build has failpoints (the outbox_failpoints
// build tag).
const Compiled = true
