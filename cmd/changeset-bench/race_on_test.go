//go:build race

package main

// raceDetector is true when the tests run under the race detector, which
// makes SQLite (compiled Go) many times slower: the scale tests build
// smaller ledgers then.
const raceDetector = true
