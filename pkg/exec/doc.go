// Package exec will own running probe commands through CRI ExecSync:
// deadline arithmetic, output capped at 10 KiB, timeout classification and a
// concurrency limit against exec-probe CPU storms.
//
// Not implemented yet: see issue 3. It imports only cri.
package exec
