package fairlock

import (
	"context"
	"errors"
)

var errNotBuilt = errors.New("fairlock: not built yet")

func (l *Locker) acquireKind(ctx context.Context, kind LockKind, name string, capacity, n int, wait bool, opts []AcquireOption) (*Lease, error) {
	return nil, errNotBuilt
}

type censusReply struct {
	capacity, inUse, holders, waiters int
	fence                             int64
}

func (l *Locker) census(ctx context.Context, kind LockKind, name string) (censusReply, error) {
	return censusReply{}, errNotBuilt
}
