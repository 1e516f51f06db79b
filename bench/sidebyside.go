package main

import (
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
)

// SideBySideResult is what BenchmarkSideBySide (../fairlock/sidebyside_test.go)
// reported: the plain loop of a user, naive and fairlock taking turns in
// one process on a redis-server of its own, run by the bench right after
// its uncontended row so that both meet the machine in the same state.
type SideBySideResult struct {
	Command              string  `json:"command"`
	Ratio                float64 `json:"fairlock_over_naive"`
	NaiveCyclesPerSec    float64 `json:"naive_cycles_per_s"`
	FairlockCyclesPerSec float64 `json:"fairlock_cycles_per_s"`
	NaiveAllocs          float64 `json:"naive_allocs_per_cycle"`
	FairlockAllocs       float64 `json:"fairlock_allocs_per_cycle"`
	NaiveBytes           float64 `json:"naive_bytes_per_cycle"`
	FairlockBytes        float64 `json:"fairlock_bytes_per_cycle"`
	NaiveRedisus         float64 `json:"naive_redis_us_per_cycle"`
	FairlockRedisus      float64 `json:"fairlock_redis_us_per_cycle"`
	NaiveP10us           float64 `json:"naive_p10_us"`
	FairlockP10us        float64 `json:"fairlock_p10_us"`
	NaiveP50us           float64 `json:"naive_p50_us"`
	FairlockP50us        float64 `json:"fairlock_p50_us"`
	P10Ratio             float64 `json:"p10_ratio"` // naive's p10 cycle over fairlock's
	Slices               int     `json:"slices"`
	SliceRatioMin        float64 `json:"slice_ratio_min"`
	SliceRatioMedian     float64 `json:"slice_ratio_median"`
	SliceRatioMax        float64 `json:"slice_ratio_max"`
	SliceRatioSD         float64 `json:"slice_ratio_sd"`
	// The median slice ratio in naive's faster and slower half of slices:
	// the VM's two round-trip regimes, apart.
	FastHalfRatio float64 `json:"fast_half_ratio"`
	SlowHalfRatio float64 `json:"slow_half_ratio"`
	// The floor peer: fairlock's commands from a plain loop, with none of
	// its Go code.
	FloorOverNaive    float64 `json:"floor_over_naive"`
	FairlockOverFloor float64 `json:"fairlock_over_floor"`
	FloorRedisus      float64 `json:"floor_redis_us_per_cycle"`
	Line              string  `json:"line,omitempty"`
	Note              string  `json:"note,omitempty"`
}

// runSideBySide runs the test binary bin (go test -c ./fairlock/) for
// BenchmarkSideBySide alone, for benchtime, and parses its line.
func runSideBySide(bin, benchtime string) SideBySideResult {
	var r SideBySideResult
	r.Command, r.Line, r.Note = runTestBench(bin, "BenchmarkSideBySide", benchtime, nil, func(line string) error {
		return parseSideBySide(&r, line)
	})
	return r
}

// runTestBench runs the test binary bin for the benchmark name alone, for
// benchtime, and hands its result line to parse: one runner for every
// benchmark of ../fairlock that the bench sets beside a row of its own.
// note says why there is no line, or what parse said of it.
func runTestBench(bin, name, benchtime string, extra []string, parse func(line string) error) (command, line, note string) {
	args := append([]string{"-test.run", "^$", "-test.bench", "^" + name + "$", "-test.benchtime", benchtime}, extra...)
	command = bin + " " + strings.Join(args, " ")
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	for _, l := range strings.Split(out.String(), "\n") {
		// Its name, with "-GOMAXPROCS" unless that is 1: not a longer
		// benchmark's name that starts with it.
		if f := strings.Fields(l); len(f) > 0 && (f[0] == name || strings.HasPrefix(f[0], name+"-")) {
			line = strings.Join(f, " ")
		}
	}
	if line == "" {
		return command, "", fmt.Sprintf("no benchmark line (%v): %s", err, strings.TrimSpace(lastLines(out.String()+errb.String(), 3)))
	}
	if err := parse(line); err != nil {
		note = err.Error()
	}
	return command, line, note
}

// benchMetrics reads the metrics of a benchmark line: its name, b.N, then
// value-unit pairs, keyed by unit. Each unit of need must be there.
func benchMetrics(line string, need ...string) (map[string]float64, error) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return nil, fmt.Errorf("short benchmark line %q", line)
	}
	m := map[string]float64{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, fmt.Errorf("benchmark line %q: %v", line, err)
		}
		m[f[i+1]] = v
	}
	for _, u := range need {
		if m[u] == 0 {
			return nil, fmt.Errorf("no %s in %q", u, line)
		}
	}
	return m, nil
}

// parseSideBySide reads BenchmarkSideBySide's metrics from its line.
func parseSideBySide(r *SideBySideResult, line string) error {
	m, err := benchMetrics(line, "fairlock/naive")
	if err != nil {
		return err
	}
	r.Ratio = m["fairlock/naive"]
	r.NaiveCyclesPerSec, r.FairlockCyclesPerSec = m["naive-cycles/s"], m["fairlock-cycles/s"]
	r.NaiveAllocs, r.FairlockAllocs = m["naive-allocs/cycle"], m["fairlock-allocs/cycle"]
	r.NaiveBytes, r.FairlockBytes = m["naive-B/cycle"], m["fairlock-B/cycle"]
	r.NaiveRedisus, r.FairlockRedisus = m["naive-redis-µs/cycle"], m["fairlock-redis-µs/cycle"]
	r.NaiveP10us, r.FairlockP10us = m["naive-p10-µs"], m["fairlock-p10-µs"]
	r.NaiveP50us, r.FairlockP50us = m["naive-p50-µs"], m["fairlock-p50-µs"]
	r.P10Ratio = m["p10-ratio"]
	r.Slices = int(m["slices"])
	r.SliceRatioMin, r.SliceRatioMedian, r.SliceRatioMax, r.SliceRatioSD = m["slice-ratio-min"], m["slice-ratio-median"], m["slice-ratio-max"], m["slice-ratio-sd"]
	r.FastHalfRatio, r.SlowHalfRatio = m["fast-half-ratio"], m["slow-half-ratio"]
	r.FloorOverNaive, r.FairlockOverFloor, r.FloorRedisus = m["floor/naive"], m["fairlock/floor"], m["floor-redis-µs/cycle"]
	return nil
}

// lastLines is the last n lines of s, joined by " | ": the tail of a
// failed run's output, for its note.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// pairedRatio is the ratio of a's turns to b's, turn by turn, with its
// standard error: the noise of a/b over the turns.
func pairedRatio(a, b []float64) (mean, se float64, n int) {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			rs = append(rs, a[i]/b[i])
		}
	}
	n = len(rs)
	if n == 0 {
		return 0, 0, 0
	}
	for _, r := range rs {
		mean += r / float64(n)
	}
	if n > 1 {
		var ss float64
		for _, r := range rs {
			ss += (r - mean) * (r - mean)
		}
		se = math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	}
	return mean, se, n
}
