package fairlock

// A kind is what differs between the mutex, the semaphore and the
// read-write lock; the queue engine is the same.
type kind struct {
	lock    LockKind   // LockMutex, LockSemaphore or LockRWMutex
	space   string     // the key space of its locks (keys.go)
	scripts *scriptSet // its holder store's scripts
	fast    bool       // it takes a free lock without a script (fastpath.go)
}

var (
	mutexKind     = &kind{lock: LockMutex, space: spaceMutex, scripts: mutexScripts, fast: true}
	semaphoreKind = &kind{lock: LockSemaphore, space: spaceSemaphore, scripts: countedScripts}
	rwKind        = &kind{lock: LockRWMutex, space: spaceRW, scripts: countedScripts}
)

// kindOf returns the kind of the locks of lk, or nil.
func kindOf(lk LockKind) *kind {
	switch lk {
	case LockMutex:
		return mutexKind
	case LockSemaphore:
		return semaphoreKind
	case LockRWMutex:
		return rwKind
	}
	return nil
}
