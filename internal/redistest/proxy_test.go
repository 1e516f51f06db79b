package redistest

import "testing"

func TestCommandsWith(t *testing.T) {
	acquire := "*3\r\n$7\r\nevalsha\r\n$6\r\nacq111\r\n$1\r\nX\r\n"
	recover := "*3\r\n$7\r\nevalsha\r\n$6\r\nrec222\r\n$1\r\nX\r\n"
	markers := [][]byte{[]byte("rec222")}
	for _, c := range []struct{ in, want string }{
		{acquire + recover, recover}, // a pipeline: only the retried command
		{acquire, ""},                // none matches
		{acquire + recover[:10], acquire + recover[:10]}, // a split command: all of it
	} {
		if got := string(commandsWith([]byte(c.in), markers)); got != c.want {
			t.Errorf("commandsWith(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
