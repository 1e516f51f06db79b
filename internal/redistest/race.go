//go:build race

package redistest

// raceEnabled: this binary was built with -race.
const raceEnabled = true
