package relay

import "testing"

func TestLSN(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{{"0/0", 0}, {"16/B374D848", 0x16_B374D848}, {"FFFFFFFF/FFFFFFFF", 1<<64 - 1}, {"", 0}, {"x/1", 0}, {"1/100000000", 0}} {
		if got := lsn(c.in); got != c.want {
			t.Errorf("lsn(%q) = %x, want %x", c.in, got, c.want)
		}
	}
	if lsn("9/0") >= lsn("10/0") {
		t.Error("positions do not order by value")
	}
}
