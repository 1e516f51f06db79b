package main

import "strconv"

// NamesSideBySideResult is what BenchmarkSideBySideManyNames
// (../fairlock/sidebyside_names_test.go) reported: the many-names shape
// as a plain benchmark, naive and fairlock taking turns in one process on
// a redis-server of its own, run by the bench right after its names row
// so that both meet the machine in the same state.
type NamesSideBySideResult struct {
	Command string `json:"command"`
	// Ratio is fairlock's cycles/s over naive's; RedisRatio and
	// ClientRatio its Redis and client CPU per cycle over naive's, as the
	// benchmark reported them.
	Ratio       float64 `json:"fairlock_over_naive"`
	RedisRatio  float64 `json:"redis_ratio"`
	ClientRatio float64 `json:"client_ratio"`
	// Slices and SliceRatioSD are the spread of Ratio over the pairs of
	// slices: its noise.
	Slices       int       `json:"slices"`
	SliceRatioSD float64   `json:"slice_ratio_sd"`
	Naive        NamesSide `json:"naive"`
	Fairlock     NamesSide `json:"fairlock"`
	Line         string    `json:"line,omitempty"`
	Note         string    `json:"note,omitempty"`
}

// runNamesSideBySide runs the test binary bin (go test -c ./fairlock/)
// for BenchmarkSideBySideManyNames alone, for benchtime, with the names
// row's workers, and parses its line.
func runNamesSideBySide(bin, benchtime string, workers int) NamesSideBySideResult {
	var r NamesSideBySideResult
	extra := []string{"-sidebyside.workers", strconv.Itoa(workers)}
	r.Command, r.Line, r.Note = runTestBench(bin, "BenchmarkSideBySideManyNames", benchtime, extra, func(line string) error {
		return parseNamesSideBySide(&r, line)
	})
	return r
}

// parseNamesSideBySide reads BenchmarkSideBySideManyNames's metrics from
// its line.
func parseNamesSideBySide(r *NamesSideBySideResult, line string) error {
	m, err := benchMetrics(line, "fairlock/naive", "redis-ratio", "client-ratio")
	if err != nil {
		return err
	}
	r.Ratio, r.RedisRatio, r.ClientRatio = m["fairlock/naive"], m["redis-ratio"], m["client-ratio"]
	r.Slices, r.SliceRatioSD = int(m["slices"]), m["slice-ratio-sd"]
	r.Naive, r.Fairlock = namesSideOf(m, "naive"), namesSideOf(m, "fairlock")
	return nil
}

// namesSideOf is one peer's figures among a benchmark line's metrics,
// named "<peer>-cycles/s" and so on.
func namesSideOf(m map[string]float64, peer string) NamesSide {
	return NamesSide{
		CyclesPerSec: m[peer+"-cycles/s"],
		RedisCPUus:   m[peer+"-redis-µs/cycle"],
		ClientCPUus:  m[peer+"-client-µs/cycle"],
		RedisCmds:    m[peer+"-cmds/cycle"],
	}
}
