package main

import (
	"sort"
	"time"
	_ "unsafe" // go:linkname

	"golang.org/x/sys/unix"
)

// nanotime is the Go runtime's clock: on Linux a vDSO read of
// CLOCK_MONOTONIC in nanoseconds, not offset by the process start (time.Now's
// monotonic reading is, and cannot be exported).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// useRuntimeClock is set at start-up if runtime.nanotime agrees with
// clock_gettime(CLOCK_MONOTONIC) to within 1 ms.
var useRuntimeClock = func() bool {
	a := clockGettime()
	b := nanotime()
	c := clockGettime()
	return b >= a-int64(time.Millisecond) && b <= c+int64(time.Millisecond)
}()

// mono returns CLOCK_MONOTONIC in nanoseconds. On Linux this clock is
// system-wide: every process on the machine reads the same counter (it is not
// per-process like CLOCK_PROCESS_CPUTIME_ID), so raw readings taken in
// different worker processes of the 4 × 4 scenario can be compared directly.
// It is read through the runtime's vDSO call (tens of nanoseconds) when that
// is checked to be the same clock, else with the clock_gettime system call.
func mono() int64 {
	if useRuntimeClock {
		return nanotime()
	}
	return clockGettime()
}

func clockGettime() int64 {
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
