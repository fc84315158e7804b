//go:build !linux

package main

import "syscall"

// dieWithParent does nothing outside Linux.
func dieWithParent() {}

// dieWithParentSignal does nothing outside Linux.
func dieWithParentSignal(syscall.Signal) {}
