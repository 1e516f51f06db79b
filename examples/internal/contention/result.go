package contention

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Stats is what the workers of one slot saw.
type Stats struct {
	Grants int           // grants that counted
	Waited time.Duration // in all, over the grants that counted
	Worst  time.Duration // the longest wait, counting one cut off by the run's end
}

// Mean is the mean wait of the grants that counted.
func (s Stats) Mean() time.Duration { return s.Waited / time.Duration(max(s.Grants, 1)) }

// Result is what a run's workers saw.
type Result struct {
	Slots []Stats
	Most  int64 // most workers holding the lock at once
}

// Grants returns each slot's grants.
func (r Result) Grants() []int {
	g := make([]int, len(r.Slots))
	for i, s := range r.Slots {
		g[i] = s.Grants
	}
	return g
}

// Counts is Grants as the tables print it: "15 15 15 15".
func (r Result) Counts() string { return strings.Trim(fmt.Sprint(r.Grants()), "[]") }

// Total is the grants of all slots together.
func (r Result) Total() int {
	n := 0
	for _, s := range r.Slots {
		n += s.Grants
	}
	return n
}

// Worst is the longest wait of any slot.
func (r Result) Worst() time.Duration {
	var d time.Duration
	for _, s := range r.Slots {
		d = max(d, s.Worst)
	}
	return d
}

// Table prints the examples' tables: each row is indented two spaces, and
// its cells are separated by one and padded to the widths of their columns,
// as fmt's %*v pads them (a negative width aligns left). A cell past the
// last width is printed as it is.
type Table []int

// Row prints one row.
func (t Table) Row(w io.Writer, cells ...any) {
	var b strings.Builder
	b.WriteString(" ")
	for i, c := range cells {
		if i < len(t) {
			fmt.Fprintf(&b, " %*v", t[i], c)
		} else {
			fmt.Fprintf(&b, " %v", c)
		}
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}
