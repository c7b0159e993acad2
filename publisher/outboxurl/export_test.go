package outboxurl

// MQTTDialConfig lets the external tests read what an mqtt URL asks for.
var MQTTDialConfig = mqttDialConfig
