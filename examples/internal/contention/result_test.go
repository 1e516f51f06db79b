package contention

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// The examples' tables were printed with Printf formats before Table; the
// README quotes them, so Table must print them to the byte.
func TestTableMatchesPrintf(t *testing.T) {
	for _, c := range []struct {
		table  Table
		cells  []any
		format string
	}{
		{Table{-12, -20}, []any{"fairlock", "15 15 15 15", 14 * time.Millisecond}, "  %-12s %-20s %v\n"},
		{Table{-10, -22, -13}, []any{"spinning", "7 45 0 1 14 53", 188 * time.Millisecond, int64(2)}, "  %-10s %-22s %-13v %d\n"},
		{Table{-10, -9, -23, -14, -13}, []any{"no queue", "0 of 3", "1.001s (never got in)", 1456, int64(8), int64(0)}, "  %-10s %-9s %-23s %-14d %-13d %d\n"},
		{Table{-8, 6, 6, 10, 11}, []any{"tenant", "jobs", "share", "mean wait", "worst wait"}, "  %-8s %6s %6s %10s %11s\n"},
		{Table{-8, 6, 6, 10, 11}, []any{"quiet-1", 25, "12%", 9200 * time.Microsecond, 37800 * time.Microsecond}, "  %-8s %6d %6s %10v %11v\n"},
	} {
		var got bytes.Buffer
		c.table.Row(&got, c.cells...)
		if want := fmt.Sprintf(c.format, c.cells...); got.String() != want {
			t.Errorf("Table%v.Row = %q, want %q", c.table, got.String(), want)
		}
	}
	if got, want := fmt.Sprintf("%6s", fmt.Sprintf("%.0f%%", 12.4)), fmt.Sprintf("%5.0f%%", 12.4); got != want {
		t.Errorf("share cell %q, want %q as tenants printed it", got, want)
	}
}
