package main

import (
	"strings"
	"testing"
)

// namesLine is a BenchmarkSideBySideManyNames line in go test's layout.
const namesLine = "BenchmarkSideBySideManyNames-2   \t  240000\t     51234 ns/op\t         0.9612 client-ratio\t         1.034 fairlock-client-µs/cycle\t         3.00 fairlock-cmds/cycle\t     19123 fairlock-cycles/s\t        22.10 fairlock-redis-µs/cycle\t         0.9876 fairlock/naive\t         1.076 naive-client-µs/cycle\t         2.00 naive-cmds/cycle\t     19363 naive-cycles/s\t        18.35 naive-redis-µs/cycle\t         1.204 redis-ratio\t        20.00 slices\t         0.05000 slice-ratio-sd"

func TestParseNamesSideBySide(t *testing.T) {
	var r NamesSideBySideResult
	if err := parseNamesSideBySide(&r, namesLine); err != nil {
		t.Fatal(err)
	}
	want := NamesSideBySideResult{Ratio: 0.9876, RedisRatio: 1.204, ClientRatio: 0.9612, Slices: 20, SliceRatioSD: 0.05,
		Naive:    NamesSide{CyclesPerSec: 19363, RedisCPUus: 18.35, ClientCPUus: 1.076, RedisCmds: 2},
		Fairlock: NamesSide{CyclesPerSec: 19123, RedisCPUus: 22.10, ClientCPUus: 1.034, RedisCmds: 3}}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	// BenchmarkSideBySide's line has no redis-ratio: not this benchmark's.
	if err := parseNamesSideBySide(&r, "BenchmarkSideBySide-2 10 5 ns/op 0.9 fairlock/naive"); err == nil || !strings.Contains(err.Error(), "redis-ratio") {
		t.Fatalf("a line without redis-ratio: %v", err)
	}
}

// TestNamesTargets checks the targets of both harnesses and the agreement
// rule on made-up rows: met, missed, and not compared at another number
// of workers.
func TestNamesTargets(t *testing.T) {
	res := &Results{Names: []NamesResult{
		{Peer: "naive", Workers: 16, Cycles: 100, NamesSide: NamesSide{CyclesPerSec: 1000, RedisCPUus: 10, ClientCPUus: 20, RedisCmds: 2}, TurnRates: []float64{1000, 1000}},
		{Peer: "fairlock", Workers: 16, Cycles: 100, NamesSide: NamesSide{CyclesPerSec: 960, RedisCPUus: 13, ClientCPUus: 24, RedisCmds: 3}, TurnRates: []float64{900, 1020}},
	}}
	res.NamesSideBySide = &NamesSideBySideResult{}
	if err := parseNamesSideBySide(res.NamesSideBySide, namesLine); err != nil {
		t.Fatal(err)
	}
	met := func() map[string]bool {
		m := map[string]bool{}
		for _, tg := range namesTargets(res) {
			m[tg.Target] = tg.Met && !tg.NA
		}
		return m
	}
	got := met()
	agree := "bench and go test fairlock/naive cycles/s agree within noise (they differ by ≤ 2σ of the difference, σ from their turn pairs)"
	for target, want := range map[string]bool{
		"cycles/s ≥ 0.95× naive (bench)":              true,  // 0.96
		"Redis CPU per cycle ≤ 1.25× naive (bench)":   false, // 1.3
		"client CPU per cycle ≤ 1.25× naive (bench)":  true,  // 1.2
		"Redis CPU per cycle ≤ 1.25× naive (go test)": true,  // 1.204
		agree: true, // 0.96 vs 0.9876, 2σ 0.13
	} {
		if v, ok := got[target]; !ok || v != want {
			t.Errorf("%s: met %v (present %v), want %v", target, v, ok, want)
		}
	}
	res.Names[1].NamesSide.CyclesPerSec = 800 // 0.80 vs 0.9876
	if met()[agree] {
		t.Error("0.80 and 0.99 agree")
	}
	res.Names[1].Workers = 8
	for _, tg := range namesAgreement(res) {
		if !tg.NA {
			t.Errorf("compared at 8 workers: %+v", tg)
		}
	}
}

// TestNamesTables checks that the names section renders the bench's rows
// and, beside them, the go test's, and leaves the latter out when it did
// not run.
func TestNamesTables(t *testing.T) {
	res := &Results{Names: []NamesResult{
		{Peer: "naive", Workers: 16, Cycles: 100, NamesSide: NamesSide{CyclesPerSec: 1000, RedisCPUus: 10, ClientCPUus: 20, RedisCmds: 4}},
		{Peer: "fairlock", Workers: 16, Cycles: 100, NamesSide: NamesSide{CyclesPerSec: 900, RedisCPUus: 15, ClientCPUus: 30, RedisCmds: 8}},
	}}
	var b strings.Builder
	namesTables(&b, res)
	if s := b.String(); !strings.Contains(s, "## 1b. Many names: 16 workers") || !strings.Contains(s, "| naive | 1000 | 0.90 |") || strings.Contains(s, "go test") {
		t.Fatalf("without the go test:\n%s", s)
	}
	res.NamesSideBySide = &NamesSideBySideResult{}
	if err := parseNamesSideBySide(res.NamesSideBySide, namesLine); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	namesTables(&b, res)
	for _, want := range []string{"| bench | 0.900 | 1.500 | 1.500 |", "| go test | 0.988 | 1.204 | 0.961 |", "| go test | fairlock | 19123 | 22.10 µs | 1.03 µs | 3.00 |", "0.900 vs 0.988: Δ 0.088"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}
