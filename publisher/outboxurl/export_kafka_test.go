package outboxurl

// UnregisterKafkaSASL undoes RegisterKafkaSASL for name, so that a test
// leaves the table as it found it.
func UnregisterKafkaSASL(name string) {
	kafkaSASLMu.Lock()
	defer kafkaSASLMu.Unlock()
	delete(kafkaSASLs, name)
}
