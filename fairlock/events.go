package fairlock

import (
	"context"
	"log/slog"
	"time"
)

// EventKind says what an Event reports.
type EventKind int

// The kinds of Event.
const (
	EventEnqueued        EventKind = iota + 1 // a waiter joined the queue; Position
	EventGranted                              // a lease was granted; Fence, Wait
	EventReleased                             // a lease was released
	EventLost                                 // a lease was lost; Err
	EventRenewed                              // a lease was extended by the heartbeat
	EventHeartbeatFailed                      // a heartbeat call failed; Err
	EventCancelled                            // a waiter gave up; Err says why
)

var eventNames = [...]string{"", "enqueued", "granted", "released", "lost", "renewed", "heartbeat-failed", "cancelled"}

// String is the kind's name as log lines show it: "enqueued", "granted",
// "released", "lost", "renewed", "heartbeat-failed", "cancelled", or
// "unknown" for a value that is none of the kinds.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// An Event is one step in the life of a waiter or lease, as seen by this
// Locker. Observers get them through WithObserver.
type Event struct {
	Kind     EventKind     // what happened
	Name     string        // lock name
	Token    string        // the waiter's or lease's token
	Position int           // EventEnqueued: 1 is next in line
	Fence    int64         // EventGranted
	Wait     time.Duration // EventGranted: from the Acquire call to the grant
	Err      error         // EventLost, EventHeartbeatFailed, EventCancelled
}

func (l *Locker) observe(e Event) {
	if l.cfg.observer != nil {
		l.cfg.observer(e)
	}
	if l.cfg.logger == nil {
		return
	}
	level := slog.LevelDebug
	if e.Kind == EventLost || e.Kind == EventHeartbeatFailed {
		level = slog.LevelWarn
	}
	l.cfg.logger.LogAttrs(context.Background(), level, "fairlock "+e.Kind.String(),
		slog.String("name", logName(e.Name)), slog.String("token", e.Token),
		slog.Int("position", e.Position), slog.Int64("fence", e.Fence),
		slog.Duration("wait", e.Wait), slog.Any("err", e.Err))
}

// logName is a lock name as log lines show it: as it is if short, else
// quoted, cut, and with its length (see quoteName).
func logName(name string) string {
	if len(name) <= quotedNameLen {
		return name
	}
	return quoteName(name)
}
