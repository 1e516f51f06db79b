package main

import (
	"math"
	"testing"
)

func TestParseSideBySide(t *testing.T) {
	line := "BenchmarkSideBySide-2   	  103828	     74602 ns/op	      2739 fairlock-B/cycle	        39.01 fairlock-allocs/cycle	     23758 fairlock-cycles/s	        15.25 fairlock-redis-µs/cycle	         0.7713 fairlock/naive	      1424 naive-B/cycle	        31.00 naive-allocs/cycle	     30803 naive-cycles/s	        11.26 naive-redis-µs/cycle	         1.143 slice-ratio-max	         0.77 slice-ratio-median	         0.3925 slice-ratio-min	         0.1 slice-ratio-sd	        10 slices	19.25 naive-p10-µs	26.65 fairlock-p10-µs	0.7223 p10-ratio"
	var r SideBySideResult
	if err := parseSideBySide(&r, line); err != nil {
		t.Fatal(err)
	}
	if r.Ratio != 0.7713 || r.NaiveCyclesPerSec != 30803 || r.FairlockAllocs != 39.01 || r.FairlockRedisus != 15.25 || r.Slices != 10 || r.SliceRatioSD != 0.1 || r.P10Ratio != 0.7223 || r.FairlockP10us != 26.65 {
		t.Fatalf("%+v", r)
	}
	if err := parseSideBySide(&r, "BenchmarkSideBySide-2 1 2 ns/op"); err == nil {
		t.Fatal("a line without the ratio parsed")
	}
}

func TestPairedRatio(t *testing.T) {
	mean, se, n := pairedRatio([]float64{8, 9, 10}, []float64{10, 10, 10, 10})
	if n != 3 || math.Abs(mean-0.9) > 1e-9 || math.Abs(se-0.1/math.Sqrt(3)) > 1e-9 {
		t.Fatalf("mean %v se %v n %d", mean, se, n)
	}
}

func TestTenantNames(t *testing.T) {
	if got := tenantNames(4); got[0] != "A" || got[3] != "D" {
		t.Fatalf("%q", got)
	}
}
