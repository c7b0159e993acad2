package outboxmqtt_test

import (
	"net"
	"sync"
	"testing"

	"github.com/eclipse/paho.golang/packets"
)

// fakeBroker is a scripted MQTT 5 server for what a real broker cannot be
// made to do on demand: answer PUBACK with a chosen reason code, drop the
// connection right after a PUBLISH arrived, never answer, or announce a
// small Receive Maximum. Every behaviour a real broker can show is tested
// against Mosquitto instead.
type fakeBroker struct {
	ln      net.Listener
	recvMax uint16
	// onPublish decides the answer to a PUBLISH: a PUBACK reason code, or
	// -1 to drop the connection, or -2 to never answer. It runs on the
	// connection's reader goroutine; ack sends the PUBACK later.
	onPublish func(p *packets.Publish, ack func(code byte)) int

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newFakeBroker(t *testing.T, recvMax uint16, onPublish func(p *packets.Publish, ack func(code byte)) int) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBroker{ln: ln, recvMax: recvMax, onPublish: onPublish, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeBroker) addr() string { return f.ln.Addr().String() }

func (f *fakeBroker) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeBroker) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = true
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer func() { _ = c.Close() }()
			f.serve(c)
		}()
	}
}

func (f *fakeBroker) serve(c net.Conn) {
	var wmu sync.Mutex
	write := func(cp *packets.ControlPacket) {
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = cp.WriteTo(c)
	}
	if cp, err := packets.ReadPacket(c); err != nil || cp.Type != packets.CONNECT {
		return
	}
	ca := packets.NewControlPacket(packets.CONNACK)
	recvMax := f.recvMax
	ca.Content.(*packets.Connack).Properties.ReceiveMaximum = &recvMax
	write(ca)
	for {
		cp, err := packets.ReadPacket(c)
		if err != nil {
			return
		}
		switch p := cp.Content.(type) {
		case *packets.Pingreq:
			write(packets.NewControlPacket(packets.PINGRESP))
		case *packets.Disconnect:
			return
		case *packets.Publish:
			ack := func(code byte) {
				pa := packets.NewControlPacket(packets.PUBACK)
				pa.Content.(*packets.Puback).PacketID = p.PacketID
				pa.Content.(*packets.Puback).ReasonCode = code
				pa.Content.(*packets.Puback).Properties.ReasonString = "scripted answer"
				write(pa)
			}
			switch code := f.onPublish(p, ack); {
			case code == -1:
				return
			case code >= 0:
				ack(byte(code))
			}
		}
	}
}
