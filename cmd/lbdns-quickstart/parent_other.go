//go:build !linux

package main

// dieWithParent does nothing outside Linux.
func dieWithParent() {}
