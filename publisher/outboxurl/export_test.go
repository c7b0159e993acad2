package outboxurl

// MQTTDialConfig lets the external tests read what an mqtt URL asks for.
var MQTTDialConfig = mqttDialConfig

// Unregister undoes Register for name, so that a test leaves Supported as
// it found it.
func Unregister(name string) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	delete(registered, name)
	for i, s := range Supported {
		if s == name {
			Supported = append(Supported[:i:i], Supported[i+1:]...)
			break
		}
	}
}
