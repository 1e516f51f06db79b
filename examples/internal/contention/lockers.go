package contention

import (
	"errors"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

// Lockers stand for processes that share locks: each Locker is on a Redis
// client of its own, as it would be in a process of its own.
type Lockers []*fairlock.Locker

// NewLockers returns n Lockers made with opts; Close closes them.
func NewLockers(rdb *exampleredis.Redis, n int, opts ...fairlock.Option) (Lockers, error) {
	ls := make(Lockers, 0, n)
	for range n {
		l, err := fairlock.New(rdb.NewClient(), opts...)
		if err != nil {
			return nil, errors.Join(err, ls.Close())
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// Close closes every Locker.
func (ls Lockers) Close() error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}
