// Command examples runs fairlock's examples. Each is a function in a file
// of its own (quickstart.go, tenants.go, ...), and its test beside it.
//
//	go run ./examples              # the quickstart
//	go run ./examples tenants      # one by name
//	go run ./examples list         # their names and what they show
//
// They run on an embedded miniredis; set REDIS_URL to use a real server:
//
//	REDIS_URL=redis://localhost:6379/0 go run ./examples quickstart
package main

import (
	"fmt"
	"os"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
)

// examples are the examples by name, in the order examples/README.md
// tells them.
var examples = []struct {
	name, about string
	run         exampleredis.Run
}{
	{"quickstart", "Acquire and Release, Do, TryAcquire", quickstart},
	{"orderedjobs", "a customer's jobs in arrival order, against a spin lock", orderedjobs},
	{"customerlimit", "at most two jobs per customer at once, against a spinning semaphore", customerlimit},
	{"readmostly", "a read-write lock whose writer is not starved", readmostly},
	{"redpacket", "the seed article's red packet, drawn in order and fenced", redpacket},
	{"fencing", "a paused holder's late write refused by its fence", fencing},
	{"tenants", "fair share between tenants on one semaphore", tenants},
	{"priorities", "interactive work before batch work, with aging", priorities},
	{"transfer", "transfers that lock two accounts at once", transfer},
	{"singleton", "a job on one replica at a time: leader election", singleton},
}

func main() {
	name := "quickstart"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	for _, e := range examples {
		if e.name == name {
			exampleredis.Main(e.run)
			return
		}
	}
	out := os.Stdout
	if name != "list" {
		out = os.Stderr
		fmt.Fprintf(out, "no example %q; the examples:\n", name)
	}
	for _, e := range examples {
		fmt.Fprintf(out, "  %-14s %s\n", e.name, e.about)
	}
	if name != "list" {
		os.Exit(2)
	}
}
