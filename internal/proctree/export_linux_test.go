//go:build linux

package proctree

// StaleHolder parses a group name newGroup makes (lease-PID-RANDOM).
var StaleHolder = staleHolder
