//go:build race

package dashboard_test

// raceDetector is true when the tests run under the race detector, which
// makes the server several times slower.
const raceDetector = true
