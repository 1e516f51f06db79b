package fairlock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// pipeline sends cmds in one round trip per Redis server, sets each one's
// reply or error, and returns the first error, in cmds' order.
//
// On Cluster it groups cmds by the primary of their first key and sends
// each group on that primary's own client, not in a ClusterClient
// pipeline: go-redis v9.23's cluster pipeline, when a server answers the
// first command of its part TRYAGAIN and another MOVED or ASK, queues the
// other for two servers at once, and two goroutines then write the same
// command (a data race TestCluster/Resharding met under -race). A command
// Redis redirected did not run, so it is sent again, alone, through the
// ClusterClient, which follows the redirection; one refused with TRYAGAIN
// is its caller's to send again, as when it is sent alone
// (luaScript.run).
func pipeline(ctx context.Context, client redis.UniversalClient, cmds []redis.Cmder) error {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		execPipeline(ctx, client, cmds)
		return firstErr(cmds)
	}
	byPrimary := map[*redis.Client][]redis.Cmder{}
	var alone []redis.Cmder
	for _, cmd := range cmds {
		primary, err := cluster.MasterForKey(ctx, firstKey(cmd))
		if err != nil {
			alone = append(alone, cmd)
			continue
		}
		byPrimary[primary] = append(byPrimary[primary], cmd)
	}
	var wg sync.WaitGroup
	for primary, part := range byPrimary {
		wg.Go(func() { execPipeline(ctx, primary, part) })
	}
	wg.Wait()
	for _, cmd := range cmds {
		if redirected(cmd.Err()) {
			alone = append(alone, cmd)
		}
	}
	for _, cmd := range alone {
		cmd.SetErr(nil)
		cluster.Process(ctx, cmd) //nolint:errcheck // the error is cmd's
	}
	return firstErr(cmds)
}

func execPipeline(ctx context.Context, c interface{ Pipeline() redis.Pipeliner }, cmds []redis.Cmder) {
	p := c.Pipeline()
	for _, cmd := range cmds {
		p.Process(ctx, cmd) //nolint:errcheck // queued, not sent
	}
	p.Exec(ctx) //nolint:errcheck // each command has its own error
}

// deletions are DEL commands, one a key: on Cluster each key may have a
// slot of its own.
func deletions(ctx context.Context, keys ...any) []redis.Cmder {
	cmds := make([]redis.Cmder, len(keys))
	for i, key := range keys {
		cmds[i] = redis.NewIntCmd(ctx, "del", key)
	}
	return cmds
}

// firstKey is the key a command's slot is taken from: a script call's
// first key (EVALSHA, the script, the number of keys, the keys), or any
// other command's first argument.
func firstKey(cmd redis.Cmder) string {
	args, at := cmd.Args(), 1
	switch cmd.Name() {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		at = 3
	}
	if at < len(args) {
		if key, ok := args[at].(string); ok {
			return key
		}
	}
	return ""
}

func redirected(err error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask
}

func firstErr(cmds []redis.Cmder) error {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}
