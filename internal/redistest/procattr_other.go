//go:build !linux

package redistest

import "os/exec"

// dieWithTest is a no-op where the kernel cannot tie a child's life to its
// parent; Cleanup still stops the servers of a test that ends normally.
func dieWithTest(*exec.Cmd) {}
