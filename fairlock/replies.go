package fairlock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Readers of the scripts' replies and messages, each as the script's
// header describes it.

func badReply(what string, reply any) error {
	return fmt.Errorf("fairlock: unexpected %s reply %v", what, reply)
}

// parseInts reads a reply that is an array of n integers (any number if n
// is 0).
func parseInts(reply any, n int) ([]int64, error) {
	arr, ok := reply.([]any)
	if !ok || (n > 0 && len(arr) != n) {
		return nil, badReply("script", reply)
	}
	out := make([]int64, len(arr))
	for i, v := range arr {
		if out[i], ok = v.(int64); !ok {
			return nil, badReply("script", reply)
		}
	}
	return out, nil
}

// parseGrants reads a grant notification, "token fence token fence ...",
// and calls fn for each grant, in order. It stops at the first malformed
// pair and reports whether there was none.
func parseGrants(payload string, fn func(token string, fence int64)) bool {
	for payload != "" {
		token, rest, ok := strings.Cut(payload, " ")
		if !ok || token == "" {
			return false
		}
		f, next, _ := strings.Cut(rest, " ")
		fence, err := strconv.ParseInt(f, 10, 64)
		if err != nil || fence <= 0 {
			return false
		}
		fn(token, fence)
		payload = next
	}
	return true
}

// records reads an array reply of records of width fields each, calling
// fn with every record's fields.
func records(reply any, width int, fn func(f []any) bool) bool {
	arr, ok := reply.([]any)
	if !ok || len(arr)%width != 0 {
		return false
	}
	for i := 0; i < len(arr); i += width {
		if !fn(arr[i : i+width]) {
			return false
		}
	}
	return true
}

// strs reads string fields; ok is false if one is not a string.
func strs(f ...any) ([]string, bool) {
	out := make([]string, len(f))
	for i, v := range f {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// millis reads a field in ms as a Duration; ok is false if it is not an
// integer, or one a Duration cannot hold.
func millis(v any) (time.Duration, bool) {
	ms, ok := v.(int64)
	if !ok || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
