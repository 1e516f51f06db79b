package main

import (
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// mono returns CLOCK_MONOTONIC in nanoseconds. On Linux this clock is
// system-wide: every process on the machine reads the same counter (it is
// not per-process like CLOCK_PROCESS_CPUTIME_ID), so raw readings taken in
// different worker processes can be compared directly. Go's time.Now()
// carries a monotonic reading too, but it is relative to a per-process
// origin and cannot be exported; hence the direct clock_gettime (vDSO, tens
// of nanoseconds).
func mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// sleepUntil sleeps until the monotonic clock reaches t.
func sleepUntil(t int64) {
	for {
		d := t - mono()
		if d <= 0 {
			return
		}
		if d > 2*int64(time.Millisecond) {
			time.Sleep(time.Duration(d) - time.Millisecond)
			continue
		}
		time.Sleep(time.Duration(d))
	}
}

// percentile of ns values (sorted copy), p in [0,100].
func percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(p / 100 * float64(len(s)-1))
	if p >= 100 {
		idx = len(s) - 1
	}
	return s[idx]
}

func maxOf(xs []int64) int64 {
	var m int64
	for _, x := range xs {
		if x > m {
			m = x
		}
	}
	return m
}

// jain computes Jain's fairness index (sum x)^2 / (n * sum x^2).
func jain(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s, s2 float64
	for _, x := range xs {
		s += float64(x)
		s2 += float64(x) * float64(x)
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

func us(ns int64) float64 { return float64(ns) / 1e3 }
