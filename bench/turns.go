package main

import "context"

// serverTally adds up Redis's command counts over a row's turns.
type serverTally struct {
	cmds     int64
	cmdstats map[string]int64
	usec     map[string]float64 // µs in all, per command
}

// add counts one turn's delta.
func (t *serverTally) add(sd serverDelta) {
	if t.cmdstats == nil {
		t.cmdstats, t.usec = map[string]int64{}, map[string]float64{}
	}
	t.cmds += sd.Commands
	for k, v := range sd.Cmdstats {
		t.cmdstats[k] += v
		t.usec[k] += sd.UsecPer[k] * float64(v)
	}
}

// perCycle is each command's calls per cycle over n cycles, and Redis's
// µs per call of each.
func (t *serverTally) perCycle(n float64) (calls, usecPer map[string]float64) {
	calls, usecPer = map[string]float64{}, map[string]float64{}
	for k, v := range t.cmdstats {
		calls[k] = float64(v) / n
		usecPer[k] = t.usec[k] / float64(v)
	}
	return calls, usecPer
}

// inTurns calls turn(i) for each of n rows in order, rounds times over:
// rows that take turns share the drift of the machine's load alike.
func inTurns(rounds, n int, turn func(i int)) {
	for range max(rounds, 1) {
		for i := range n {
			turn(i)
		}
	}
}

// lockCycle is one acquire and release of name on w, each call under a
// fresh context.WithTimeout(callTimeout) cancelled when it returns, or
// under context.Background() (background). A fresh deadline per call is
// how a caller writes it: some peers take a different path for a context
// that can end (redislock derives one from the TTL otherwise), and making
// and stopping its timer is part of every call's cost.
func lockCycle(w worker, name string, background bool) error {
	ctx, cancel := callContext(background)
	u, err := w.Lock(ctx, name)
	cancel()
	if err != nil {
		return err
	}
	ctx, cancel = callContext(background)
	err = u(ctx)
	cancel()
	return err
}

// callContext is the context of one call of lockCycle.
func callContext(background bool) (context.Context, context.CancelFunc) {
	if background {
		return context.Background(), func() {}
	}
	return context.WithTimeout(context.Background(), callTimeout)
}
