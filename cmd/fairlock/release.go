package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fairlock/fairlock/fairlock"
)

// release -force: Locker.ForceRelease, after showing what it will end and
// asking. It names the token it ends unless -all, so that a holder that
// came between the reading and the release is not ended unseen.

func releaseFlags(fs *flag.FlagSet) func(context.Context, *session, string) error {
	force := fs.Bool("force", false, "required: end a lease that another process holds")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	only := defineKind(fs, "the kind of lock to release; needed when several kinds of NAME are held")
	token := fs.String("token", "", "end the holder called `T` only (inspect shows the tokens)")
	all := fs.Bool("all", false, "end every holder")
	return func(ctx context.Context, s *session, name string) error {
		if !*force {
			return fmt.Errorf("%w: release ends a lease another process holds, which then keeps running until its next heartbeat; pass -force to do it", errUsage)
		}
		if *token != "" && *all {
			return fmt.Errorf("%w: -token and -all: give one", errUsage)
		}
		states, err := s.states(ctx, name, fairlock.LockKind(*only))
		if err != nil {
			return err
		}
		st, ending, err := choose(s.stdout, states, name, fairlock.LockKind(*only), *token, *all)
		if err != nil {
			return err
		}
		target := "" // every holder, with -all
		if !*all {
			target = ending[0].Token
		}

		plan(s.stdout, st, ending)
		if !*yes {
			if err := confirm(s, len(ending)); err != nil {
				return err
			}
		}

		l, err := s.locker(ctx)
		if err != nil {
			return err
		}
		res, err := l.ForceRelease(ctx, st.Lock, name, target)
		if err != nil && !errors.Is(err, fairlock.ErrNotHeld) {
			return err
		}
		return report(s.stdout, st, target, res, err)
	}
}

// confirm asks whether to end n leases, and returns an error unless the
// answer is yes.
func confirm(s *session, n int) error {
	if n == 1 {
		fmt.Fprintf(s.stdout, "The holder is not stopped: it believes it holds the lock until its next heartbeat,\n"+
			"and only storage that checks fences is protected. End this lease? [y/N] ")
	} else {
		fmt.Fprintf(s.stdout, "The holders are not stopped: they believe they hold the lock until their next heartbeat,\n"+
			"and only storage that checks fences is protected. End these %d leases? [y/N] ", n)
	}
	answer, err := s.stdin.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if !s.stdinTTY {
		fmt.Fprintln(s.stdout) // a terminal echoes the answer's newline
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errors.New("not confirmed: nothing changed")
	}
	return nil
}

// report prints what ForceRelease of target ("" for every holder) on the
// lock st did, res, and returns an error if it found nothing to end
// (err, ErrNotHeld).
func report(w io.Writer, st fairlock.State, target string, res fairlock.ForceReleaseResult, err error) error {
	fences := make(map[string]int64, len(st.Holders))
	for _, h := range st.Holders {
		fences[h.Token] = h.Fence
	}
	for _, t := range res.Ended {
		if f, ok := fences[t]; ok {
			fmt.Fprintf(w, "ended    %s (%s)\n", display(t), fenceOf(st.Lock, f))
		} else {
			fmt.Fprintf(w, "ended    %s\n", display(t))
		}
	}
	for _, g := range res.Granted {
		fmt.Fprintf(w, "granted  %s (fence %d)\n", display(g.Token), g.Fence)
	}
	if err != nil { // ErrNotHeld: nothing ended
		if target != "" {
			return fmt.Errorf("%s no longer holds the %s %s (released, expired or ended meanwhile): nothing changed", display(target), st.Lock, display(st.Name))
		}
		return fmt.Errorf("the %s %s is no longer held (released, expired or ended meanwhile): nothing changed", st.Lock, display(st.Name))
	}
	if len(res.Granted) == 0 {
		switch {
		case st.Queued == 0 && len(st.Waiters) == 0:
			fmt.Fprintln(w, "granted  nobody: nobody waits")
		default:
			fmt.Fprintln(w, "granted  nobody: no waiter fits yet")
		}
	}
	return nil
}

// choose picks the lock and the holders to end, from the states read: the
// holder called token, wherever it is; every holder with all; else the
// only holder. It refuses, with a usage error, a choice the flags leave
// open (several kinds held, several holders) and says what to add.
func choose(w io.Writer, states []fairlock.State, name string, only fairlock.LockKind, token string, all bool) (fairlock.State, []fairlock.Holder, error) {
	if token != "" {
		for _, st := range states {
			for _, h := range st.Holders {
				if h.Token == token {
					return st, []fairlock.Holder{h}, nil
				}
			}
		}
		for _, st := range states {
			for _, wt := range st.Waiters {
				if wt.Token == token {
					return fairlock.State{}, nil, fmt.Errorf("%s waits for the %s %s but does not hold it: nothing to release", display(token), st.Lock, display(name))
				}
			}
		}
		return fairlock.State{}, nil, fmt.Errorf("%s holds no %s called %s: nothing to release", display(token), what(only), display(name))
	}
	var held []fairlock.State
	for _, st := range states {
		if st.Held() {
			held = append(held, st)
		}
	}
	switch len(held) {
	case 0:
		if only != 0 {
			return fairlock.State{}, nil, fmt.Errorf("the %s %s is not held: nothing to release", only, display(name))
		}
		return fairlock.State{}, nil, fmt.Errorf("no lock called %s is held: nothing to release", display(name))
	case 1:
	default:
		var ks []string
		for _, st := range held {
			ks = append(ks, st.Lock.String())
		}
		return fairlock.State{}, nil, fmt.Errorf("%w: %s is held as a %s, independent locks: pass -kind %s to say which",
			errUsage, display(name), strings.Join(ks, " and as a "), strings.Join(ks, " or -kind "))
	}
	st := held[0]
	if all || len(st.Holders) == 1 {
		return st, st.Holders, nil
	}
	fmt.Fprintf(w, "%s %s: %d holders\n", st.Lock, display(st.Name), len(st.Holders))
	holderTable(w, columnsOf(st), st.Holders, "  ")
	return fairlock.State{}, nil, fmt.Errorf("%w: the %s %s has %d holders: pass -token T to end one of them, or -all to end every one",
		errUsage, st.Lock, display(name), len(st.Holders))
}

// what names a kind, or any kind.
func what(k fairlock.LockKind) string {
	if k == 0 {
		return "lock"
	}
	return k.String()
}

// plan shows what a release will end, and who may get the lock next.
func plan(w io.Writer, st fairlock.State, ending []fairlock.Holder) {
	switch {
	case len(st.Holders) == 1:
		fmt.Fprintf(w, "ending   the %s %s's holder\n", st.Lock, display(st.Name))
	case len(ending) == len(st.Holders):
		fmt.Fprintf(w, "ending   all %d holders of the %s %s\n", len(ending), st.Lock, display(st.Name))
	default:
		fmt.Fprintf(w, "ending   %d of the %d holders of the %s %s\n", len(ending), len(st.Holders), st.Lock, display(st.Name))
	}
	holderTable(w, columnsOf(st), ending, "  ")
	if len(st.Waiters) == 0 {
		if len(ending) == len(st.Holders) {
			fmt.Fprintln(w, "nobody waits: the lock will be free")
		} else {
			fmt.Fprintln(w, "nobody waits")
		}
		return
	}
	first := st.Waiters[0]
	if kindOf(st.Lock).Capacity == 1 {
		fmt.Fprintf(w, "the lock passes to %s%s\n", display(first.Token), quoteMeta(first.Metadata))
		return
	}
	fmt.Fprintf(w, "then the waiters that fit are granted, in queue order; %d waiting, first %s%s%s%s\n",
		max(st.Queued, len(st.Waiters)), display(first.Token), request(st.Lock, first.Shared, first.Permits), group(first.Group, first.Weight), quoteMeta(first.Metadata))
}
